"""Recorded model calls of a deepagents thread, whose messages channel is deepagents' own
delta channel: each turn's messages are decoded anew, yet a call's record stores what is
new and reads back as the messages the model was sent."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

import threadlog
from tests.helpers.multi_agent import deep_agent
from threadlog.checkpoint.call_records import CALLS_CHANNEL
from threadlog.inspect.calls import recorded_calls

pytest.importorskip("deepagents")


def _main(messages: Sequence[BaseMessage]) -> AIMessage:
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    if isinstance(messages[-1], HumanMessage):
        args = {"description": f"look into {turn}", "subagent_type": "researcher"}
        return AIMessage("", tool_calls=[{"name": "task", "args": args, "id": f"task-{turn}"}])
    return AIMessage(f"main answers turn {turn}: " + "summary " * 20)


def _sub(messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(f"researched {messages[-1].content}: " + "findings " * 20)


def _agent(saver: Any) -> Any:
    return deep_agent(saver, _main, _sub)


def _calls_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE channel = ?",
            (CALLS_CHANNEL,),
        ).fetchone()
    return int(row[0])


def test_a_deepagents_threads_call_records_store_only_what_is_new_and_read_back_as_sent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "deep.db"
    cfg: Any = {"configurable": {"thread_id": "d"}}
    grew = []
    with threadlog.checkpointer(f"sqlite:///{path}") as saver:
        app = _agent(saver)
        for i in range(16):
            before = _calls_bytes(path)
            app.invoke({"messages": [HumanMessage(f"question {i}", id=f"u{i}")]}, cfg)
            grew.append(_calls_bytes(path) - before)
        state = app.get_state(cfg).values["messages"]
    # The context doubles from turn 4 to turn 16; a turn's records do not grow with it.
    assert min(grew[3:]) > 0
    assert max(grew[8:]) < 1.3 * min(grew[3:8])
    main = [c for c in recorded_calls(f"sqlite:///{path}", "d") if not c.namespace]
    assert len(main) == 32  # two calls of the main agent a turn
    for call in main:
        sent = [m for m in call.messages if m["role"] != "system"]
        assert not any(m.get("missing") for m in call.messages)
        assert [m["id"] for m in sent] == [m.id for m in state[: len(sent)]]
        assert [m["content"] for m in sent] == [m.content for m in state[: len(sent)]]
    assert len(main[-1].messages) == 1 + len(state) - 1  # system prompt, all but the answer
