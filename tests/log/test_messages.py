"""Coercion, roles and the replay fingerprint (`threadlog.log.messages`), and the errors."""

from __future__ import annotations

import pickle

import pytest
from langchain_core.load import dumpd
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Overwrite

from threadlog import (
    AppendOnlyError,
    ConflictingIdError,
    InvalidMessageError,
    MessageLogError,
    ParallelWriteError,
    ToolPairingError,
)
from threadlog.log.messages import (
    calls_of,
    coerce_message,
    digest,
    fingerprint,
    is_developer,
    is_pair,
    preview,
    role_of,
)


def test_langchain_messages_pass_through_as_the_same_object() -> None:
    m = HumanMessage("hi", id="u1")
    assert coerce_message(m) is m


def test_python_tuples_and_strings_become_messages() -> None:
    assert role_of(coerce_message(("assistant", "hello"))) == "assistant"
    assert role_of(coerce_message(("human", "hi"))) == "user"
    s = coerce_message("plain")
    assert isinstance(s, HumanMessage) and s.content == "plain"


def test_developer_is_a_marked_system_message() -> None:
    m = coerce_message({"role": "developer", "content": "be brief"})
    assert isinstance(m, SystemMessage)
    assert m.additional_kwargs == {"__openai_role__": "developer"}
    assert is_developer(m) and role_of(m) == "developer"
    assert role_of(SystemMessage("plain system")) == "system"
    assert not is_developer(SystemMessage("plain system"))


def test_streaming_chunks_are_stored_as_whole_messages() -> None:
    chunk = AIMessageChunk(content="hel", id="a1") + AIMessageChunk(content="lo", id="a1")
    m = coerce_message(chunk)
    assert type(m) is AIMessage and m.content == "hello" and m.id == "a1"


@pytest.mark.parametrize(
    "value",
    [FunctionMessage("x", name="f"), ChatMessage("x", role="critic")],
    ids=["function-message", "chat-message-with-custom-role"],
)
def test_message_types_without_a_log_role_are_refused(value: object) -> None:
    with pytest.raises(InvalidMessageError, match="has no role in the message log"):
        coerce_message(value)


def test_tool_message_object_without_tool_call_id_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match="tool_call_id"):
        coerce_message(ToolMessage("r", tool_call_id="", id="t1"))


def test_ai_message_object_tool_call_without_id_is_refused() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}], id="a1")
    with pytest.raises(InvalidMessageError, match=r"tool_calls\[0\] \('f'\) has no id") as info:
        coerce_message(ai, position=7)
    assert (info.value.message_id, info.value.role, info.value.position) == ("a1", "assistant", 7)


def test_remove_message_objects_are_refused_with_the_compaction_hint() -> None:
    with pytest.raises(AppendOnlyError, match="ContextPolicy") as info:
        coerce_message(RemoveMessage(id="u1"), position=3)
    assert info.value.message_id == "u1" and info.value.position == 3
    with pytest.raises(AppendOnlyError, match="REMOVE_ALL_MESSAGES"):
        coerce_message(RemoveMessage(id=REMOVE_ALL_MESSAGES))


def test_overwrite_objects_are_refused() -> None:
    with pytest.raises(AppendOnlyError, match="Overwrite"):
        coerce_message(Overwrite([HumanMessage("x")]))


def test_model_dump_dicts_keep_every_field() -> None:
    ai = AIMessage(
        "",
        id="a1",
        tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}],
        invalid_tool_calls=[
            {"name": "g", "args": "{oops", "id": "c2", "error": "bad", "type": "invalid_tool_call"}
        ],
        usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
    )
    back = coerce_message(ai.model_dump())
    assert back == ai
    assert "invalid_tool_calls" not in back.additional_kwargs
    tool = ToolMessage("r", tool_call_id="c1", id="t1", artifact={"raw": [1, 2]}, status="error")
    assert coerce_message(tool.model_dump()) == tool


def test_langchain_serialized_envelope_is_accepted() -> None:
    m = HumanMessage("hi", id="u1")
    assert coerce_message(dumpd(m)) == m


def test_invalid_tool_calls_count_as_calls_after_tool_calls() -> None:
    ai = AIMessage(
        "",
        tool_calls=[{"name": "f", "args": {}, "id": "c1"}],
        invalid_tool_calls=[{"name": "g", "args": "{", "id": "c2", "error": None}],
    )
    assert [c["id"] for c in calls_of(ai)] == ["c1", "c2"]
    assert calls_of(HumanMessage("x")) == []


def test_is_pair_only_for_two_items_starting_with_a_role() -> None:
    assert is_pair(("user", "hi")) and is_pair(["assistant", "x"])
    assert not is_pair(["hi", "there"]) and not is_pair(["user", "a", "b"])


def test_digest_ignores_metadata_and_ids_but_not_model_visible_fields() -> None:
    base = AIMessage("hi", id="a1")
    same = AIMessage("hi", id="a2", response_metadata={"model": "x"}, additional_kwargs={"k": 1})
    assert digest(base) == digest(same)
    assert digest(base) != digest(AIMessage("hi!", id="a1"))
    assert digest(base) != digest(HumanMessage("hi", id="a1"))
    assert digest(base) != digest(AIMessage("hi", id="a1", name="bot"))
    t = ToolMessage("r", tool_call_id="c1")
    assert digest(t) != digest(ToolMessage("r", tool_call_id="c1", status="error"))
    assert digest(t) != digest(ToolMessage("r", tool_call_id="c2"))
    assert digest(t) == digest(ToolMessage("r", tool_call_id="c1", artifact={"big": "blob"}))


def test_digest_is_a_hash_not_a_copy_of_the_content() -> None:
    secret = "my card number is 4111 1111 1111 1111"
    d = digest(HumanMessage(secret))
    assert len(d) == 32 and "4111" not in d
    assert set(fingerprint(HumanMessage(secret))) == {"role", "content"}


def test_preview_is_one_short_line() -> None:
    assert preview(HumanMessage("a\n  b " + "x" * 100), width=20) == "a b " + "x" * 15 + "…"
    ai = AIMessage("", tool_calls=[{"name": "get_weather", "args": {}, "id": "c1"}])
    assert preview(ai) == "calls get_weather(c1)"
    blocks = HumanMessage([{"type": "text", "text": "look"}, {"type": "image", "url": "u"}])
    assert preview(blocks) == "look"


def test_every_error_is_a_value_error_naming_id_role_position_and_fix() -> None:
    for cls in (
        InvalidMessageError,
        ConflictingIdError,
        ToolPairingError,
        AppendOnlyError,
        ParallelWriteError,
    ):
        err = cls("bad thing", message_id="m1", role="tool", position=4, fix="do this")
        assert isinstance(err, MessageLogError) and isinstance(err, ValueError)
        assert str(err) == "bad thing [message at position 4, role=tool, id='m1']. do this"


def test_errors_survive_pickling_with_their_fields() -> None:
    err = ToolPairingError("orphan", message_id="t1", role="tool", position=2, fix="fix it")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ToolPairingError and str(back) == str(err)
    assert (back.message_id, back.role, back.position, back.fix) == ("t1", "tool", 2, "fix it")
