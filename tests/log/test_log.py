"""`MessageLog` and `append_messages` with Python objects (the JSON vectors cover the rules)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.types import Overwrite

from tests.helpers.core import assert_log_invariants, shape
from threadlog import (
    AppendOnlyError,
    ConflictingIdError,
    MessageLog,
    ParallelWriteError,
    ToolPairingError,
    append_messages,
)


def _ai(mid: str, *call_ids: str) -> AIMessage:
    return AIMessage(
        "", id=mid, tool_calls=[{"name": "f", "args": {"n": c}, "id": c} for c in call_ids]
    )


def _result(mid: str, call_id: str, text: str = "ok") -> ToolMessage:
    return ToolMessage(text, id=mid, tool_call_id=call_id)


def test_append_does_not_mutate_the_callers_messages_or_list() -> None:
    left = [HumanMessage("no id yet")]
    new = HumanMessage("also no id")
    out = append_messages(left, [new])
    assert left[0].id is None and new.id is None
    assert len(left) == 1 and len(out) == 2
    assert all(m.id and m.id.startswith("tl-") for m in out)


def test_append_returns_a_new_list_each_time() -> None:
    left = append_messages([], ["hi"])
    out = append_messages(left, [])
    assert out == left and out is not left


def test_stored_history_without_ids_gets_stable_ids_without_mutation() -> None:
    stored = [HumanMessage("a"), AIMessage("b")]
    one, two = MessageLog(stored), MessageLog(stored)
    assert [m.id for m in one.messages] == [m.id for m in two.messages]
    assert all(m.id is None for m in stored)


def test_extend_returns_only_the_messages_actually_added() -> None:
    log = MessageLog()
    added = log.extend([HumanMessage("hi", id="u1"), HumanMessage("hi", id="u1"), "more"])
    assert [m.id for m in added][:1] == ["u1"] and len(added) == 2
    assert log.extend([HumanMessage("hi", id="u1")]) == []


def test_open_calls_lists_unanswered_calls_in_log_order_including_invalid_ones() -> None:
    log = MessageLog()
    ai = AIMessage(
        "",
        id="a1",
        tool_calls=[{"name": "f", "args": {}, "id": "c1"}, {"name": "g", "args": {}, "id": "c2"}],
        invalid_tool_calls=[{"name": "h", "args": "{", "id": "c3", "error": "bad json"}],
    )
    log.extend([HumanMessage("q", id="u1"), ai, _result("t2", "c2")])
    assert [(m.id, c["id"]) for m, c in log.open_calls()] == [("a1", "c1"), ("a1", "c3")]
    log.extend([_result("t3", "c3"), _result("t1", "c1")])
    assert log.open_calls() == []
    assert [m.id for m in log.messages] == ["u1", "a1", "t1", "t2", "t3"]


def test_copy_is_independent_of_the_original() -> None:
    log = MessageLog()
    log.extend([_ai("a1", "c1")])
    snapshot = log.copy()
    log.extend([_result("t1", "c1")])
    assert len(snapshot) == 1 and snapshot.open_calls()
    snapshot.extend([_result("t1b", "c1")])  # the copy still sees c1 as open
    assert [m.id for m in log.messages] == ["a1", "t1"]
    assert [m.id for m in snapshot.messages] == ["a1", "t1b"]


def test_a_failed_batch_changes_no_index() -> None:
    log = MessageLog()
    log.extend([_ai("a1", "c1")])
    with pytest.raises(ToolPairingError):
        log.extend([_ai("a2", "c2"), _result("t1", "c1"), _result("t9", "nope")])
    assert [m.id for m in log.messages] == ["a1"]
    assert log.get("a2") is None and log.get("t1") is None
    assert [c["id"] for _, c in log.open_calls()] == ["c1"]
    # c2 was never issued, so reusing it is fine; c1 is still open.
    log.extend([_ai("a2", "c2"), _result("t1", "c1")])
    assert [m.id for m in log.messages] == ["a1", "t1", "a2"]


def test_conflict_error_names_the_id_role_position_and_differing_fields() -> None:
    log = MessageLog()
    log.extend([HumanMessage("q", id="u1"), AIMessage("first answer", id="a1")])
    with pytest.raises(ConflictingIdError) as info:
        log.extend([AIMessage("second answer", id="a1")])
    err = info.value
    # position: where the offending message was written; the text names the stored one.
    assert (err.message_id, err.role, err.position) == ("a1", "assistant", 2)
    assert "the assistant message at position 1, with different content" in str(err)
    assert "new id" in str(err)


def test_overwrite_objects_are_refused_and_change_nothing() -> None:
    # RemoveMessage is a removal event now (tests/log/test_removals.py).
    left = append_messages([], [HumanMessage("hi", id="u1")])
    with pytest.raises(AppendOnlyError):
        append_messages(left, Overwrite([HumanMessage("new", id="n1")]))
    assert [m.id for m in left] == ["u1"]


def test_remove_objects_leave_the_callers_list_unchanged() -> None:
    left = append_messages([], [HumanMessage("hi", id="u1")])
    assert append_messages(left, [RemoveMessage(id="u1")]) == []
    assert append_messages(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES)]) == []
    assert [m.id for m in left] == ["u1"]


def test_add_messages_would_have_replaced_what_threadlog_refuses() -> None:
    # The motivating bug: add_messages silently turns an AIMessage into a ToolMessage.
    history = [HumanMessage("q", id="u1"), _ai("a1", "c1")]
    replaced = add_messages(history, [ToolMessage("r", id="a1", tool_call_id="c1")])
    assert isinstance(replaced[1], ToolMessage)
    with pytest.raises(ConflictingIdError):
        append_messages(history, [ToolMessage("r", id="a1", tool_call_id="c1")])


def test_single_writer_flag_refuses_two_conversation_writers_and_names_both() -> None:
    log = MessageLog()
    log.extend([HumanMessage("q", id="u1")])
    with pytest.raises(ParallelWriteError) as info:
        log.extend_writes(
            [[AIMessage("one", id="b1", name="left")], [AIMessage("two", id="b2")]],
            single_writer=True,
        )
    text = str(info.value)
    assert "writer #1" in text and "'b1'" in text and "name='left'" in text
    assert "writer #2" in text and "'b2'" in text
    assert [m.id for m in log.messages] == ["u1"]
    # Without the flag (a reducer, a replay) the same writes are one batch.
    log.extend_writes([[AIMessage("one", id="b1")], [AIMessage("two", id="b2")]])
    assert [m.id for m in log.messages] == ["u1", "b1", "b2"]


def test_many_calls_results_in_any_order_end_in_call_order() -> None:
    calls = [f"c{i}" for i in range(12)]
    order = [7, 3, 11, 0, 5, 9, 1, 10, 2, 8, 4, 6]
    log = MessageLog()
    log.extend([_ai("a1", *calls)])
    for i in order:
        log.extend([_result(f"t{i}", calls[i])])
    assert [m.id for m in log.messages] == ["a1", *[f"t{i}" for i in range(12)]]
    assert_log_invariants(log.messages)
    at_once = append_messages([_ai("a1", *calls)], [_result(f"t{i}", calls[i]) for i in order])
    assert shape(at_once) == shape(log.messages)
