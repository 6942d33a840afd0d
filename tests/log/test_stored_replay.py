"""A cold replay of stored writes (`MessageLogChannel.replay_writes`) builds the log a live
run built, without per-item work whose answer a stored write already settled: a record the
log already holds (the same object) is a replay without a conflict lookup, and only the
requests left open get the baseline that in-place changes are seen against."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot

import threadlog.log.message_log as message_log
from threadlog import MessageLogChannel
from threadlog.log.edits import edits_of


def _turn(n: int) -> list[list[BaseMessage]]:
    human = HumanMessage(f"q{n}", id=f"u{n}")
    call = {"name": "look", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}
    request = AIMessage("", tool_calls=[call], id=f"a{n}")
    result = ToolMessage(f"r{n}", tool_call_id=f"c{n}", id=f"t{n}")
    # Each write re-sends the turn so far as the same objects, as shared records are read.
    return [[human], [human, request], [result], [AIMessage(f"done {n}", id=f"d{n}")]]


def _writes(turns: int) -> list[list[BaseMessage]]:
    writes = [w for n in range(turns) for w in _turn(n)]
    open_call = {"name": "look", "args": {"n": -1}, "id": "c-open", "type": "tool_call"}
    return [*writes, [AIMessage("", tool_calls=[open_call], id="a-open")]]


def _replayed(writes: list[list[BaseMessage]]) -> MessageLogChannel:
    ch = MessageLogChannel().from_checkpoint(_DeltaSnapshot([]))
    ch.replay_writes([("task", "messages", w) for w in writes])
    return ch


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    calls: list[Any] = []
    real = getattr(message_log, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(message_log, name, counted)
    return calls


def test_a_cold_replay_of_plain_appends_does_no_edit_or_conflict_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digests = _counting(monkeypatch, "digest")
    edit_checks = _counting(monkeypatch, "resent_as_edits")
    replayed = _replayed(_writes(20))
    assert edit_checks == []  # plain appends: no write is looked at for edits or events
    assert digests == []  # no conflict lookup for a record the log holds
    live = MessageLogChannel().from_checkpoint(_DeltaSnapshot([]))
    for w in _writes(20):
        live.update([w])
    assert replayed.get() == live.get() and len(replayed.get()) == 81


def test_a_cold_replay_takes_a_baseline_only_for_requests_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshots = _counting(monkeypatch, "snapshot_fields")
    ch = _replayed(_writes(20))
    assert [args[0].id for args in snapshots] == ["a-open"]
    # The baseline is there: the open request changed in place and written again is the
    # edit it amounts to, as in the live run.
    request = ch.log.get("a-open")
    assert isinstance(request, AIMessage)
    request.tool_calls = [{**request.tool_calls[0], "args": {"n": 99}}]
    ch.update([[request]])
    edited = ch.log.get("a-open")
    assert isinstance(edited, AIMessage) and edited.tool_calls[0]["args"] == {"n": 99}
    assert len(edits_of(edited)) == 1
