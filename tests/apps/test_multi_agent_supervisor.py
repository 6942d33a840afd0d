"""A `langgraph-supervisor` app whose state is threadlog's log: a supervisor hands each turn
to an agent made with `threadlog.create_agent` and answers after it; two turns, SQLite and
Postgres."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph_supervisor import create_supervisor

import threadlog
from tests.helpers.multi_agent import Scripted


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def supervisor_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    turn = _turn(messages)
    if isinstance(messages[-1], HumanMessage):
        call = {"name": "transfer_to_bob", "args": {}, "id": f"sup-handoff-{turn}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage(f"supervisor closes turn {turn}")


def bob_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(f"bob works on turn {_turn(messages)}")


class State(threadlog.MessagesState):
    remaining_steps: int


def test_a_supervisor_on_threadlogs_log_delegates_each_turn(backend: str) -> None:
    bob = threadlog.create_agent(Scripted(script=bob_reply), [], name="bob")
    builder = create_supervisor([bob], model=Scripted(script=supervisor_reply), state_schema=State)
    cfg: Any = {"configurable": {"thread_id": "sup"}}
    with threadlog.checkpointer(backend) as saver:
        app = builder.compile(checkpointer=saver)
        for text in ("hi", "again"):
            out = app.invoke({"messages": [HumanMessage(text, id=f"u-{text}")]}, cfg)
    texts = [m.content for m in out["messages"] if isinstance(m, AIMessage) and m.content]
    back = "Transferring back to supervisor"  # langgraph-supervisor's handoff-back message
    assert texts == [
        "bob works on turn 1",
        back,
        "supervisor closes turn 1",
        "bob works on turn 2",
        back,
        "supervisor closes turn 2",
    ]
    assert all(m.status == "success" for m in out["messages"] if isinstance(m, ToolMessage))
    threadlog.validate(out["messages"])
