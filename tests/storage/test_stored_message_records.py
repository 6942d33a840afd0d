"""A shared read (`threadlog.checkpoint.shared_records`) builds each stored LangChain
message without validating its fields again, and the object equals, field for field,
the one LangGraph's loader validates; a record that is not exactly a message class's
fields is read by the serializer's own rules. A cold `get_state` of a multi-agent
thread then runs no message validation at all, however long the thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

import threadlog
from tests.helpers.delta_apps import cfg
from tests.helpers.multi_agent import Scripted, SwarmState, swarm_reply
from threadlog.checkpoint.serde import strict_serializer
from threadlog.checkpoint.shared_records import SharedRecords

MESSAGES: list[BaseMessage] = [
    SystemMessage("be brief", id="s1"),
    HumanMessage([{"type": "text", "text": "look"}], id="h1", name="ann"),
    AIMessage(
        "",
        id="a1",
        tool_calls=[{"name": "find", "args": {"q": "x", "n": [1, 2]}, "id": "c1"}],
        invalid_tool_calls=[{"name": "bad", "args": "{", "id": "c2", "error": "parse"}],
        usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        response_metadata={"model": "m", "nested": {"k": [1.5, None]}},
        additional_kwargs={"refusal": None},
    ),
    ToolMessage("found", tool_call_id="c1", id="t1", artifact={"rows": [1]}, status="error"),
    ChatMessage("hey", role="critic", id="m1"),
    FunctionMessage("42", name="f", id="f1"),
]


def _fields(m: BaseMessage) -> tuple[Any, ...]:
    return (type(m), m.__dict__, m.model_fields_set, m.__pydantic_extra__, m.model_dump())


def test_stored_messages_read_by_a_shared_read_equal_validated_ones() -> None:
    serde = strict_serializer()
    blob = serde.dumps_typed(MESSAGES)
    shared = SharedRecords(serde).loads(blob)
    assert [_fields(m) for m in shared] == [_fields(m) for m in serde.loads_typed(blob)]
    assert shared == MESSAGES


def test_a_record_with_other_fields_is_read_by_the_serializers_rules() -> None:
    serde = strict_serializer()
    extra = HumanMessage("hi", id="h2", mood="calm")  # an extra field: `extra="allow"`
    blob = serde.dumps_typed([extra])
    (read,) = SharedRecords(serde).loads(blob)
    assert _fields(read) == _fields(serde.loads_typed(blob)[0])
    assert read.__pydantic_extra__ == {"mood": "calm"}


def _swarm(saver: Any) -> Any:
    from langgraph_swarm import create_handoff_tool, create_swarm

    alice = threadlog.create_agent(
        Scripted(script=swarm_reply("alice", "bob")),
        [create_handoff_tool(agent_name="bob")], name="alice",
    )
    bob = threadlog.create_agent(
        Scripted(script=swarm_reply("bob", "alice")),
        [create_handoff_tool(agent_name="alice")], name="bob",
    )
    builder = create_swarm([alice, bob], default_active_agent="alice", state_schema=SwarmState)
    return builder.compile(checkpointer=saver)


def test_a_cold_get_state_of_a_swarm_thread_validates_no_stored_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'swarm.sqlite'}"
    with threadlog.checkpointer(url) as saver:
        app = _swarm(saver)
        for i in range(6):
            app.invoke({"messages": [HumanMessage(f"turn {i}", id=f"u{i}")]}, cfg("t"))
        warm = app.get_state(cfg("t")).values["messages"]
    validated: list[str] = []
    init = BaseMessage.__init__

    def counted(self: BaseMessage, *args: Any, **kwargs: Any) -> None:
        validated.append(type(self).__name__)
        init(self, *args, **kwargs)

    with threadlog.checkpointer(url) as saver:
        app = _swarm(saver)
        monkeypatch.setattr(BaseMessage, "__init__", counted)
        cold = app.get_state(cfg("t")).values["messages"]
        monkeypatch.undo()
    assert len(cold) == len(warm) >= 24
    assert [(type(m), m.model_dump()) for m in cold] == [(type(m), m.model_dump()) for m in warm]
    assert validated == []
