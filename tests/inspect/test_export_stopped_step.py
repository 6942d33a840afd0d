"""The export of a head whose step stopped keeps the results that step stored.

The weather agent runs one task per call: Beijing's call finishes and its result is
stored (a pending write of the head: the step has no checkpoint yet); Shanghai's call
then interrupts or raises. `threadlog export` of that head — the root's, or a subgraph
namespace's when the agent runs as a subgraph — gives the user's message, the request
and Beijing's stored result (same id and content), in call order after its request;
Shanghai's call stays open (no result is invented). That is what LangGraph's own
`get_state` of the head shows. `--checkpoint` gives exactly that checkpoint's log.
A root head SIGKILLed after its input or its model's call was stored, before the step's
checkpoint, exports every message the worker stored (before: none of them).

SQLite and Postgres (the `backend` fixture); a URL and a `threadlog.checkpointer` saver
export the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import threadlog
import threadlog.inspect
from tests.helpers.recovery import CONFIG, STOPS, SUB_STOPS, agent, first_turn, parent
from threadlog.cli import main
from threadlog.inspect.export import messages_at
from threadlog.nodes.model import open_calls


def stop_the_step(url: str, tmp_path: Path, stop: str, where: str) -> tuple[list[BaseMessage], str]:
    """Run the first turn until Shanghai stops it; returns what LangGraph's `get_state`
    shows at the stopped head (the subgraph's, for `where="subgraph"`) and its namespace."""
    effects = tmp_path / "effects.jsonl"
    with threadlog.checkpointer(url) as saver:
        if where == "root":
            graph = agent(saver, effects, STOPS[stop][0])
        else:
            graph = parent(saver, effects, SUB_STOPS[stop][0])
        first_turn(graph, stop)
        snap = graph.get_state(CONFIG, subgraphs=True)
    if where == "root":
        return list(snap.values["messages"]), ""
    (task,) = snap.tasks
    sub = task.state
    return list(sub.values["messages"]), str(sub.config["configurable"]["checkpoint_ns"])


def assert_stored_result_kept(exported: list[BaseMessage], shown: list[BaseMessage]) -> None:
    assert [type(m) for m in exported] == [HumanMessage, AIMessage, ToolMessage]
    request, result = exported[1], exported[2]
    assert isinstance(request, AIMessage) and isinstance(result, ToolMessage)
    beijing, shanghai = request.tool_calls
    assert (beijing["args"]["city"], shanghai["args"]["city"]) == ("Beijing", "Shanghai")
    assert (result.tool_call_id, result.content, result.status) == (
        beijing["id"], "Beijing: sunny, 21°C", "success")
    # Shanghai's call stays open: nothing is invented for it.
    threadlog.validate(exported, allow_pending_calls=True)
    assert list(open_calls(exported)) == [shanghai["id"]]
    # What LangGraph's own get_state shows at that head, message for message.
    assert [m.model_dump() for m in exported] == [m.model_dump() for m in shown]


@pytest.mark.parametrize("where", ["root", "subgraph"])
@pytest.mark.parametrize("stop", list(STOPS))
def test_export_of_a_stopped_head_keeps_the_result_its_step_stored(
    backend: str, tmp_path: Path, stop: str, where: str
) -> None:
    shown, ns = stop_the_step(backend, tmp_path, stop, where)
    exported, head = messages_at(backend, "t", namespace=ns)
    assert_stored_result_kept(exported, shown)
    with threadlog.checkpointer(backend) as saver:
        via_saver, same_head = messages_at(saver, "t", namespace=ns)
    assert (same_head, [m.model_dump() for m in via_saver]) == (
        head, [m.model_dump() for m in exported])
    # A named checkpoint is exactly that checkpoint's log: the result is not in it.
    at_head, _ = messages_at(backend, "t", head, namespace=ns)
    assert [type(m) for m in at_head] == [HumanMessage, AIMessage]
    if where == "subgraph":  # the root's own log holds the user's message only
        assert [m.id for m in messages_at(backend, "t")[0]] == ["u1"]


def test_the_cli_exports_a_stopped_subgraphs_stored_result_in_every_format(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from threadlog.inspect.export import loads

    shown, ns = stop_the_step(sqlite_url, tmp_path, "raise", "subgraph")
    base = ["export", "--db", sqlite_url, "--thread", "t", "--namespace", ns]
    assert main(base) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["role"] for d in lines] == ["user", "assistant", "tool"]
    assert lines[2]["id"] == shown[2].id
    for fmt in ("langchain", "openai"):
        assert main([*base, "--format", fmt]) == 0
        back = loads(capsys.readouterr().out)
        assert [type(m) for m in back] == [HumanMessage, AIMessage, ToolMessage]
        result = back[2]
        assert isinstance(result, ToolMessage)
        assert (result.tool_call_id, result.content) == (shown[2].tool_call_id, shown[2].content)


# A SIGKILL (the kill harness's worker, one-city turn of the root agent) just after
# write 1 (the input checkpoint: the user's message waits in `__start__`) or write 4
# (the model's call, stored before its step's checkpoint).
@pytest.mark.parametrize(("slot", "stored"), [(1, ["user"]), (4, ["user", "ai_call"])])
def test_export_of_a_killed_head_has_every_message_the_worker_stored(
    backend: str, tmp_path: Path, slot: int, stored: list[str]
) -> None:
    from scripts.kill_harness import Outcome, Plan, _read, run_worker, thread_of

    plan = Plan(
        trial=0, seed=15, prior_turns=0, branches=False, kind="write", slot=slot,
        when="after", delay=0.0, resume="input",
    )
    out = Outcome(plan)
    run_worker(backend, plan, tmp_path / "trial", out)
    assert out.killed and out.unreadable == []
    records = _read(tmp_path / "trial" / "stored.jsonl")
    journal = dict(pair for rec in records for pair in rec["ids"])
    assert list(journal.values()) == stored
    exported, _ = messages_at(backend, thread_of(plan))
    assert [m.id for m in exported] == list(journal)
    threadlog.validate(exported, allow_pending_calls=True)
