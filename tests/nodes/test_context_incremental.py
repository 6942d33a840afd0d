"""The model node's per-call work does not rescan the whole thread, and stays exact.

The newest summary among a thread's compaction events, and the call ids a log uses, are
found by resuming where the previous call stopped (the events are append-only and the
channel hands out the same event objects; the log only grows at its end). These tests
check the resumed answers against a fresh computation over growing, shared and forked
histories.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from tests.helpers.model import ai, ids, user
from threadlog import ContextPolicy, build_context
from threadlog.log.pairing import OpenCalls
from threadlog.nodes.turns import call_ids


def _log(turns: int) -> list[Any]:
    return [m for i in range(turns) for m in (user(f"h{i}"), ai(f"a{i}", content="ok"))]


def _trim(n: int, cut: str) -> dict[str, Any]:
    return {"id": f"cmp-{n}", "kind": "trim", "cut_to": cut, "hidden": []}


def _summary(n: int, cut: str, text: str) -> dict[str, Any]:
    return {"id": f"cmp-{n}", "kind": "summary", "cut_to": cut, "hidden": [],
            "summary": text, "summary_id": f"cmp-{n}-summary"}


def test_the_newest_summary_is_found_as_events_grow_and_when_lists_share_events() -> None:
    log = _log(12)
    policy = ContextPolicy()
    events: list[dict[str, Any]] = []
    plan = [_trim(0, "a0"), _summary(1, "a1", "first"), _trim(2, "a2"), _trim(3, "a3"),
            _summary(4, "a4", "second"), _trim(5, "a5"), _trim(6, "a6")]
    for event in plan:
        events.append(event)
        got = ids(build_context(log, list(events), policy))  # same event objects
        fresh = ids(build_context(log, copy.deepcopy(events), policy))  # new objects
        assert got == fresh
    assert ids(build_context(log, events, policy))[:1] == ["cmp-4-summary"]
    # Another thread's list holding the same trim object at another position, with no
    # summary before it, must not inherit this thread's summary.
    other = [_trim(9, "a0"), events[5]]
    assert "cmp-4-summary" not in ids(build_context(log, other, policy))
    assert "cmp-1-summary" not in ids(build_context(log, other, policy))


def test_call_ids_from_the_resumed_scan_equal_a_full_scan_across_a_fork() -> None:
    scans = OpenCalls()
    key = ("thread", "")
    log: list[Any] = []
    for i in range(6):
        log += [user(f"h{i}"), ai(f"a{i}", f"c{i}")]
        assert scans.scan(log, key)[1] == call_ids(log)
    fork = [*log[:4], user("other"), ai("b", "x")]
    assert scans.scan(fork, key)[1] == call_ids(fork)
    log += [user("h6"), ai("a6", "c6")]
    assert scans.scan(log, key)[1] == call_ids(log)


class _CountingLog(Sequence[Any]):
    """A log that counts the messages handed out, by index or inside a slice."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.read = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, key: Any) -> Any:
        got = self.items[key]
        self.read += len(got) if isinstance(key, slice) else 1
        return got


def _even_log(turns: int) -> list[Any]:
    """Turns of equal size whatever their number (ids of one width)."""
    return [
        m for i in range(turns) for m in (user(f"h{i:05d}"), ai(f"a{i:05d}", content="ok"))
    ]


def _messages_read(turns: int) -> tuple[int, list[Any]]:
    log = _CountingLog(_even_log(turns))
    policy = ContextPolicy(max_tokens=200)
    build_context(log, [], policy)
    log.read = 0
    seen = build_context(log, [], policy)
    return log.read, seen


def test_a_budgeted_context_reads_the_same_few_messages_however_long_the_log() -> None:
    short_read, short_seen = _messages_read(100)
    long_read, long_seen = _messages_read(1000)
    assert long_read == short_read < 100
    assert [m.id for m in long_seen][-4:] == [m.id for m in _even_log(1000)][-4:]
    assert len(long_seen) == len(short_seen)


def test_a_legacy_approval_edit_in_the_window_is_still_shown_with_the_args_that_ran() -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    from threadlog.nodes.tools.approval import APPROVAL_KEY

    call = {"name": "pay", "args": {"amount": 900}, "id": "c1", "type": "tool_call"}
    edited = {"action": "edit", "args": {"amount": 9}}
    log = [
        *_log(300),
        user("pay"),
        AIMessage("", id="req", tool_calls=[call]),
        ToolMessage("paid 9", tool_call_id="c1", id="res",
                    response_metadata={APPROVAL_KEY: edited}),
    ]
    seen = build_context(log, [], ContextPolicy(max_tokens=200))
    request = next(m for m in seen if m.id == "req")
    assert request.tool_calls[0]["args"] == {"amount": 9}
    assert log[-2].tool_calls[0]["args"] == {"amount": 900}  # the log keeps the original
