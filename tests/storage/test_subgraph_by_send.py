"""A subgraph started by `Send` (or with `Send` tool branches waiting) counts as running.

A step's `Send`s wait in the next checkpoint's `__pregel_tasks` value, not in a
`branch:to:<node>` trigger. A head holding only those used to count as "nothing left
to run", so:

* a subgraph the parent started with `Send`, stopped mid-turn (an interrupt or a failing
  tool in Shanghai's branch after Beijing's result was stored), then new input: the call
  and Beijing's stored result were dropped and the model asked again;
* the inspector listed a subgraph killed inside its `Send` tool branches as `finished`.

SQLite and Postgres (the `backend` fixture); the interrupt case async too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Send

import threadlog
import threadlog.inspect
from scripts.kill_harness import Outcome, Plan, check_after_fault, run_worker, thread_of
from tests.helpers.durability import check_thread, make_weather_tool, model_tools_graph, user
from tests.helpers.recovery import (
    CONFIG,
    INSTEAD,
    SUB_STOPS,
    Hook,
    afirst_turn,
    assert_recovered,
    first_turn,
)


def sent_to(saver: BaseCheckpointSaver[Any], effects: Path, hook: Hook) -> Any:
    """START -Send-> agent (a subgraph: model ⇄ tools, one task per call) -> END."""
    weather = make_weather_tool(effects, hook(saver))
    sub = model_tools_graph(weather)
    g = StateGraph(threadlog.AgentState)
    g.add_node("agent", sub.compile())
    g.add_conditional_edges(START, lambda s: [Send("agent", s)], ["agent"])
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("stop", list(SUB_STOPS))
def test_new_message_after_a_subgraph_started_by_send_stopped_keeps_its_stored_work(
    backend: str, tmp_path: Path, stop: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    with threadlog.checkpointer(backend) as saver:
        graph = sent_to(saver, effects, SUB_STOPS[stop][0])
        first_turn(graph, stop)
        snap = graph.get_state(CONFIG, subgraphs=True)
        assert snap.next == ("agent",) and [m.id for m in snap.values["messages"]] == ["u1"]
        (task,) = snap.tasks
        saved = {
            m.tool_call_id: m
            for t in task.state.tasks
            for m in (t.result or {}).get("messages", [])
            if isinstance(m, ToolMessage)
        }
        assert len(saved) == 1, "Beijing's result is stored in the subgraph"
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        head = check_thread(graph, CONFIG, repaired_input_ok=True, repairing_nodes=("agent",))
    assert [m.id for m in head] == [m.id for m in out["messages"]]


async def test_new_message_after_a_subgraph_started_by_send_interrupted_keeps_it_async(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    async with threadlog.acheckpointer(backend) as saver:
        graph = sent_to(saver, effects, SUB_STOPS["interrupt"][0])
        await afirst_turn(graph, "interrupt")
        (task,) = (await graph.aget_state(CONFIG, subgraphs=True)).tasks
        saved = {
            m.tool_call_id: m
            for t in task.state.tasks
            for m in (t.result or {}).get("messages", [])
            if isinstance(m, ToolMessage)
        }
        assert len(saved) == 1
        out = await graph.ainvoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)


# The kill harness's `--app subgraph` with one task per call, one city: 1-3 the parent's
# input, `__start__` writes and step checkpoint; 4-6 the subgraph's; 7 the model's call,
# 8 its checkpoint (the tool's `Send` waits in it), 9 the tool's result.
KILLED_IN_A_BRANCH = Plan(
    trial=0,  # QUESTIONS[0]: one city
    seed=15,
    prior_turns=0,
    branches=True,
    kind="write",
    slot=9,
    when="after",
    delay=0.0,
    resume="input",
    app="subgraph",
)


def test_a_subgraph_killed_in_its_send_tool_branch_is_listed_stopped_and_recovers(
    backend: str, tmp_path: Path
) -> None:
    plan = KILLED_IN_A_BRANCH
    work, out = tmp_path / "trial", Outcome(plan)
    run_worker(backend, plan, work, out)
    assert out.killed and out.unreadable == []
    (row,) = threadlog.inspect.thread(backend, thread_of(plan)).subgraphs().rows()
    assert (row["node"], row["status"]) == ("agent", "stopped")
    check_after_fault(backend, plan, work, out)
    assert (out.lost, out.duplicated, out.repeated, out.unreadable) == ([], [], [], [])
