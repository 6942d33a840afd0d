"""Three subgraph levels: parent -> team -> subteam -> agent, all on threadlog's log.

The weather agent runs three compiled-subgraph levels down (namespace
"team:<t>|subteam:<t>|agent:<t>"); every level shares `messages`. The innermost agent
stops mid-turn:

* **SIGKILL** (the kill harness's `--app deep` worker, killed just after a given saver
  write): after the model's call is stored, after its tools' results are stored, or after
  its answer is stored — each before the step's checkpoint;
* **an interrupt or a failing tool** in Shanghai's branch once Beijing's result is stored.

Then new input arrives on the parent thread. Everything the innermost level stored is
kept, each call left without a result is answered "not completed" once, nothing is
duplicated and no stored call's tool runs again. Before that, the inspector lists the
three namespaces (each under the one above it, all stopped) and exports the innermost
one's log with what its stopped step stored.

SQLite and Postgres (the `backend` fixture).
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph

import threadlog
import threadlog.inspect
from scripts.kill_harness import (
    Outcome,
    Plan,
    build,
    check_after_fault,
    run_worker,
    thread_of,
)
from scripts.kill_harness import _read as read_jsonl
from tests.helpers.durability import check_thread, make_weather_tool, model_tools_graph, user
from tests.helpers.recovery import CONFIG, INSTEAD, SUB_STOPS, Hook, assert_recovered, first_turn
from threadlog.inspect.export import messages_at
from threadlog.nodes.model import NOT_COMPLETED, open_calls

LEVELS = ("team", "subteam", "agent")


def assert_three_stopped_levels(url: str, thread_id: str) -> list[str]:
    """The listing shows the three namespaces, each inside the one above, all stopped,
    all run from the root's head; returns them outermost first."""
    root = threadlog.inspect.thread(url, thread_id)
    rows = root.subgraphs().rows()
    assert [r["node"] for r in rows] == list(LEVELS)
    namespaces = [r["namespace"] for r in rows]
    for outer, inner in itertools.pairwise(namespaces):
        assert inner.startswith(outer + "|") and inner.count("|") == outer.count("|") + 1
    assert [r["status"] for r in rows] == ["stopped"] * 3
    assert {r["parent_checkpoint"] for r in rows} == {root.head.checkpoint_id}
    for ns in namespaces:  # each level is readable on its own
        assert threadlog.inspect.thread(url, thread_id, namespace=ns).namespace == ns
    return namespaces


# -- SIGKILL inside the innermost agent (the kill harness's worker) ---------------------

# A two-city turn of `--app deep` with one tool task for both calls makes these saver
# writes: 1-3 the parent's input checkpoint, `__start__` writes and step checkpoint;
# 4-6 team's; 7-9 subteam's; 10-12 the agent's; 13 the model's call, 14 checkpoint,
# 15-16 the tool node's "started" markers (one per call, before its tool runs), 17 both
# tools' results, 18 checkpoint, 19 the answer, 20 checkpoint; 21-26 the three subgraph
# tasks' writes and checkpoints on the way back up.
DEEP = Plan(
    trial=1,  # QUESTIONS[1]: Beijing and Shanghai
    seed=15,
    prior_turns=0,
    branches=False,
    kind="write",
    slot=13,
    when="after",
    delay=0.0,
    resume="input",  # new input, not invoke(None)
    app="deep",
)


@pytest.mark.parametrize(
    ("slot", "stored"),
    [(13, "the model's call"), (17, "the tools' results"), (19, "the answer")],
)
def test_new_input_after_a_kill_three_subgraph_levels_down_keeps_everything_stored(
    backend: str, tmp_path: Path, slot: int, stored: str
) -> None:
    plan = Plan(**{**DEEP.__dict__, "slot": slot})
    work, thread_id, out = tmp_path / "trial", thread_of(plan), Outcome(plan)
    run_worker(backend, plan, work, out)
    assert out.killed and out.unreadable == [], f"the worker was not killed after {stored}"
    journal = [mid for rec in read_jsonl(work / "stored.jsonl") for mid, _ in rec["ids"]]
    kept = list(dict.fromkeys(journal))  # every message the worker's saver stored
    assert len(kept) == {13: 2, 17: 4, 19: 5}[slot]

    *outer, inner = assert_three_stopped_levels(backend, thread_id)
    exported, _ = messages_at(backend, thread_id, namespace=inner)
    assert [m.id for m in exported] == kept  # the innermost level's log, nothing invented
    threadlog.validate(exported, allow_pending_calls=True)
    request = exported[1]
    assert isinstance(request, AIMessage) and len(request.tool_calls) == 2
    left_open = list(open_calls(exported))
    assert left_open == ([c["id"] for c in request.tool_calls] if slot == 13 else [])
    for ns in outer:  # the levels above hold only their input until the agent returns
        assert [m.id for m in messages_at(backend, thread_id, namespace=ns)[0]] == [kept[0]]

    check_after_fault(backend, plan, work, out)  # new input twice, then counts
    assert (out.lost, out.duplicated, out.repeated, out.unreadable) == ([], [], [], [])
    assert not out.shown_finished
    with threadlog.checkpointer(backend) as saver:
        graph = build(saver, work / "effects.jsonl", plan.branches, app="deep")
        state = graph.get_state({"configurable": {"thread_id": thread_id}})
    final: list[BaseMessage] = list(state.values["messages"])
    ids = [m.id for m in final]
    assert ids[: len(kept)] == kept and len(ids) == len(set(ids))
    threadlog.validate(final, allow_pending_calls=False)
    abandoned = [m for m in final if isinstance(m, ToolMessage) and m.content == NOT_COMPLETED]
    assert Counter(m.tool_call_id for m in abandoned) == Counter(left_open)
    results = Counter(m.tool_call_id for m in final if isinstance(m, ToolMessage))
    assert all(n == 1 for n in results.values()), results
    assert [m.id for m in final if isinstance(m, HumanMessage)] == [
        "t1-u0", "t1-u90", "t1-u91"]
    # The stopped levels stay listed; the new input's runs add three finished ones.
    rows = threadlog.inspect.thread(backend, thread_id).subgraphs().rows()
    assert Counter((r["node"], r["status"]) for r in rows) == Counter(
        {**{(n, "stopped"): 1 for n in LEVELS}, **{(n, "finished"): 2 for n in LEVELS}})


# -- an interrupt or a failing tool in one branch, its sibling's result stored ------------


def deep(saver: BaseCheckpointSaver[Any], effects: Path, hook: Hook) -> Any:
    """START -> team -> subteam -> agent (model ⇄ tools, one task per call) -> END."""
    weather = make_weather_tool(effects, hook(saver))
    agent = model_tools_graph(weather)
    graph: Any = agent
    for node in ("agent", "subteam", "team"):
        outer = StateGraph(threadlog.AgentState)
        outer.add_node(node, graph.compile())
        outer.add_edge(START, node)
        graph = outer
    return graph.compile(checkpointer=saver)


@pytest.mark.parametrize("stop", list(SUB_STOPS))
def test_new_message_after_a_stop_three_subgraph_levels_down_keeps_the_stored_result(
    backend: str, tmp_path: Path, stop: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    with threadlog.checkpointer(backend) as saver:
        graph = deep(saver, effects, SUB_STOPS[stop][0])
        first_turn(graph, stop)
        snap = graph.get_state(CONFIG, subgraphs=True)
        for name in LEVELS:
            (task,) = snap.tasks
            assert task.name == name and task.state is not None
            snap = task.state
        saved = {
            m.tool_call_id: m
            for t in snap.tasks
            for m in (t.result or {}).get("messages", [])
            if isinstance(m, ToolMessage)
        }
        assert len(saved) == 1, "Beijing's result is stored three levels down"
        *_, inner = assert_three_stopped_levels(backend, "t")
        assert inner == snap.config["configurable"]["checkpoint_ns"]
        exported, _ = messages_at(backend, "t", namespace=inner)
        assert [m.id for m in exported] == [m.id for m in snap.values["messages"]]
        assert [m.tool_call_id for m in exported if isinstance(m, ToolMessage)] == list(saved)
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        head = check_thread(graph, CONFIG, repaired_input_ok=True, repairing_nodes=("team",))
    assert [m.id for m in head] == [m.id for m in out["messages"]]
