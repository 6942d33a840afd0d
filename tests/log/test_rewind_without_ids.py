"""`MessageLog.rewind` over messages written without ids (a chat input `(role,
content)`, a model reply the node gave no id): the log derived their ids when it took
them, and stepping back rebuilds exactly those messages — or refuses, and the reader
reads normally."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from threadlog import MessageLog


def _thread() -> tuple[MessageLog, int]:
    log = MessageLog()
    log.extend([("user", "question 0")])
    log.extend([AIMessage("reply 0")])
    before = log.version
    log.extend([("user", "question 1")])
    log.extend([AIMessage("reply 1")])
    return log, before


def test_rewind_steps_back_over_messages_written_without_ids() -> None:
    log, before = _thread()
    assert log.rewind(log.version, [("user", "question 1"), AIMessage("reply 1")]) == before
    assert log.messages_at(before) == log.messages[:2]


def test_rewind_over_a_log_read_back_from_its_messages_takes_a_stored_pair() -> None:
    log, before = _thread()
    read_back = MessageLog(log.messages)  # a snapshot's log; a pair is a list once stored
    assert read_back.rewind(read_back.version, [["user", "question 1"], AIMessage("reply 1")]) == (
        before
    )


def test_rewind_refuses_id_less_items_that_are_not_what_was_written_there() -> None:
    log, before = _thread()
    end = log.version
    assert log.rewind(end, [("user", "question 1"), AIMessage("another reply")]) is None
    assert log.rewind(end, [("user", "another question"), AIMessage("reply 1")]) is None
    assert log.rewind(end, [("assistant", "question 1"), AIMessage("reply 1")]) is None
    # The same words at another place: a derived id depends on the position.
    assert log.rewind(before, [("user", "question 1"), AIMessage("reply 1")]) is None
    assert log.rewind(end, [("user", "question 0"), AIMessage("reply 0")]) is None


def test_rewind_without_ids_mixes_with_items_that_carry_them() -> None:
    log = MessageLog()
    log.extend([HumanMessage("hi", id="h-1")])
    before = log.version
    log.extend([("user", "and then")])
    log.extend([AIMessage("ok", id="a-1")])
    assert log.rewind(log.version, [("user", "and then"), AIMessage("ok", id="a-1")]) == before
    assert log.rewind(log.version, [("user", "and then"), AIMessage("ok", id="a-2")]) is None
