"""The step cap a plain `langchain.agents.create_agent` needs on threadlog's checkpointer
(the README says to set one): a model that never stops calling its tool is stopped by
`ModelCallLimitMiddleware(run_limit=N)` with an answer, or by LangGraph's
`recursion_limit` with `GraphRecursionError`; either way every call the thread stored has
its result, and the thread takes its next turn."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphRecursionError

import threadlog
from tests.helpers.multi_agent import Scripted
from threadlog.examples.weather import get_weather


def always_calls_the_tool() -> Scripted:
    """A model that answers every request with another get_weather call (Shanghai: the
    fastest city of the demo's pretend weather service)."""
    ids = itertools.count()

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        call = {"name": "get_weather", "args": {"city": "Shanghai"}, "id": f"c{next(ids)}"}
        return AIMessage("", tool_calls=[call])

    return Scripted(script=script)


def calls_and_results(messages: Sequence[BaseMessage]) -> tuple[list[str], list[str]]:
    calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    return calls, results


def test_model_call_limit_middleware_ends_the_run_with_every_call_answered(
    tmp_path: Path,
) -> None:
    config: Any = {"configurable": {"thread_id": "capped"}}
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'cap.db'}") as saver:
        app = create_agent(
            always_calls_the_tool(),
            [get_weather],
            checkpointer=saver,
            middleware=[ModelCallLimitMiddleware(run_limit=3)],
        )
        out = app.invoke({"messages": [HumanMessage("weather?")]}, config)["messages"]
        again = app.invoke({"messages": [HumanMessage("and now?")]}, config)["messages"]
    calls, results = calls_and_results(out)
    assert calls == results == ["c0", "c1", "c2"]  # three model calls, each call answered
    assert isinstance(out[-1], AIMessage) and not out[-1].tool_calls
    assert "limit" in out[-1].text
    threadlog.validate(out, allow_pending_calls=False)
    assert again[: len(out)] == out and len(calls_and_results(again)[0]) == 6


def test_recursion_limit_stops_the_run_and_the_stored_thread_stays_paired(
    tmp_path: Path,
) -> None:
    config: Any = {"configurable": {"thread_id": "limited"}, "recursion_limit": 6}
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'cap.db'}") as saver:
        app = create_agent(always_calls_the_tool(), [get_weather], checkpointer=saver)
        with pytest.raises(GraphRecursionError):
            app.invoke({"messages": [HumanMessage("weather?")]}, config)
        stored = app.get_state(config).values["messages"]
        calls, results = calls_and_results(stored)
        assert calls == results == ["c0", "c1", "c2"]
        threadlog.validate(stored, allow_pending_calls=False)
        with pytest.raises(GraphRecursionError):  # the thread takes its next turn
            app.invoke({"messages": [HumanMessage("and now?")]}, config)
        later = app.get_state(config).values["messages"]
    assert later[: len(stored)] == stored
    threadlog.validate(later, allow_pending_calls=False)
