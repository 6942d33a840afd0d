"""ModelNode answers every open call, also those its context policy trimmed away
(issue 15, item 8): `[user, AI(call c1), user]` with `ContextPolicy(max_turns=1)`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import threadlog
from tests.helpers.model import Recorder, ai, get_weather, result, user
from threadlog import ContextPolicy, ModelNode, ToolPairingError, validate
from threadlog.log.pairing import OpenCalls
from threadlog.nodes.model import NOT_COMPLETED, open_calls


def _config() -> Any:
    return {"configurable": {"thread_id": "t"}}


def test_a_call_left_open_outside_the_trimmed_context_gets_its_result(tmp_path: Path) -> None:
    Recorder.seen = []
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'db.sqlite'}") as saver:
        app = threadlog.create_agent(
            Recorder(), [get_weather], context=ContextPolicy(max_turns=1), checkpointer=saver
        )
        app.invoke({"messages": [user("h1"), ai("a1", "c1"), user("h2", "Hi")]}, _config())
        log = list(app.get_state(_config()).values["messages"])
    validate(log, allow_pending_calls=False)  # the thread's own log: nothing left open
    assert [m.id for m in log[:3]] == ["h1", "a1", log[2].id]
    repaired = log[2]
    assert isinstance(repaired, ToolMessage) and repaired.tool_call_id == "c1"
    assert (repaired.status, repaired.content) == ("error", NOT_COMPLETED)
    # The model was not shown the trimmed call: its context starts at the newest turn.
    assert all(m.id not in ("a1", repaired.id) for m in Recorder.seen[-1])
    assert isinstance(log[-1], AIMessage) and not log[-1].tool_calls


def test_refuse_policy_names_a_call_open_outside_the_context() -> None:
    node = ModelNode(
        threadlog.OfflineChatModel(),
        [get_weather],
        repair="refuse",
        context=ContextPolicy(max_turns=1),
    )
    state = {"messages": [user("h1"), ai("a1", "c1"), user("h2")]}
    with pytest.raises(ToolPairingError, match=r"call 'c1' \(f\) has no result"):
        node.invoke(state)


def test_only_the_open_calls_of_a_partly_answered_request_are_repaired() -> None:
    node = ModelNode(
        threadlog.OfflineChatModel(), [get_weather], context=ContextPolicy(max_turns=1)
    )
    state = {"messages": [user("h1"), ai("a1", "c1", "c2"), result("c1"), user("h2", "Hi")]}
    update = node.invoke(state)
    repairs = [m for m in update["messages"] if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in repairs] == ["c2"]


def _grow(steps: int) -> list[list[BaseMessage]]:
    """Successive logs of one thread: appends, calls, results placed mid-log."""
    log: list[BaseMessage] = []
    out = []
    for i in range(steps):
        if i % 3 == 0:
            log.append(HumanMessage(f"q{i}", id=f"h{i}"))
        elif i % 3 == 1:
            log.append(ai(f"a{i}", f"c{i}", f"d{i}"))
        else:
            # answer one call of an earlier request, right after it (as the log places it)
            for pos, m in enumerate(log):
                if (
                    isinstance(m, AIMessage)
                    and m.tool_calls
                    and f"c{int(m.id[1:])}" in {c for c in open_calls(log)}
                ):
                    log.insert(pos + 1, result(f"c{int(m.id[1:])}"))
                    break
        out.append(list(log))
    return out


def test_incremental_open_calls_equal_a_full_scan_after_appends_and_mid_log_results() -> None:
    tracker = OpenCalls()
    for log in _grow(40):
        assert tracker.of(log, ("t", "")) == open_calls(log)
    # another branch of the same thread (a shorter, different log) is scanned afresh
    other = [user("x"), ai("y", "z")]
    assert tracker.of(other, ("t", "")) == open_calls(other)
