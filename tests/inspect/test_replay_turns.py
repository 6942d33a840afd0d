"""`threadlog replay` names every stored turn: a turn whose user message a summarizing
step removed later is listed as skipped, with why, not dropped; a turn whose tool failed
replays as it ran (the failure served as a failure), never as "a call the stored turn
did not make"."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph

import threadlog
from tests.helpers.multi_agent import Scripted
from tests.helpers.poisoned import plain_saver, react_agent
from threadlog import ContextPolicy, OfflineChatModel, create_agent
from threadlog.check.replay import replay
from threadlog.cli import main
from threadlog.examples import weather

TURNS = 5


def _echo(messages: Sequence[BaseMessage]) -> AIMessage:
    last = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    return AIMessage(f"echo: {last.content}")


class State(MessagesState):
    summary: str


def summarizing_chatbot(saver: Any = None) -> Any:
    """The LangChain Academy chatbot: past four messages, summarize, keep the last two."""
    model = Scripted(script=_echo)

    def conversation(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: State) -> str:
        return "summarize" if len(state["messages"]) > 4 else END

    def summarize(state: State) -> dict[str, Any]:
        return {
            "summary": str(model.invoke(state["messages"]).content),
            "messages": [RemoveMessage(id=str(m.id)) for m in state["messages"][:-2]],
        }

    g = StateGraph(State)
    g.add_node("conversation", conversation)
    g.add_node("summarize", summarize)
    g.add_edge(START, "conversation")
    g.add_conditional_edges("conversation", route)
    g.add_edge("summarize", END)
    return g.compile(checkpointer=saver)


def test_a_turn_whose_user_message_was_removed_is_named_as_skipped_with_why(
    backend: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with plain_saver(backend) as saver:
        app = summarizing_chatbot(saver)
        for n in range(TURNS):
            app.invoke(
                {"messages": [HumanMessage(f"question {n}", id=f"u{n}")]},
                {"configurable": {"thread_id": "s"}},
            )
    report = replay(summarizing_chatbot(), backend, "s", model="live")
    assert [r.turn for r in report.results] == list(range(1, TURNS + 1))  # none dropped
    kinds = [r.kind for r in report.results]
    assert kinds[-1] == "match" and "skipped" in kinds, str(report)
    for r in report.results:
        if r.kind == "skipped":
            assert "its user message was removed at step" in r.detail
    assert report.matched and report.status == 0
    skipped = kinds.count("skipped")
    assert f"{TURNS} stored turn(s), {skipped} skipped" in report.summary()[0]

    # The command imports the graph by module:attr; this module is the app here.
    monkeypatch.setitem(sys.modules, "academy_bot", sys.modules[__name__])
    graph = "academy_bot:summarizing_chatbot"
    argv = ["replay", "--db", backend, "--thread", "s", "--graph", graph]
    assert main([*argv, "--model", "live", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["thread_id"] == "s" and [t["kind"] for t in doc["turns"]] == kinds


def _failing_weather(city: str) -> str:
    """Today's weather for one city."""
    _failing_weather.runs += 1  # type: ignore[attr-defined]
    raise RuntimeError("the weather service is down")


_failing_weather.runs = 0  # type: ignore[attr-defined]
failing = StructuredTool.from_function(_failing_weather, name="get_weather")


def test_a_turn_whose_tool_failed_replays_as_it_ran(sqlite_url: str) -> None:
    def build(saver: Any = None) -> Any:
        return create_agent(
            OfflineChatModel(), [failing], system_prompt=weather.SYSTEM_PROMPT,
            context=ContextPolicy(max_turns=20), checkpointer=saver, max_model_calls=6,
        )

    with threadlog.checkpointer(sqlite_url) as saver:
        build(saver).invoke(
            {"messages": [HumanMessage("北京今天适合带伞吗？")]},
            {"configurable": {"thread_id": "f"}},
        )
    _failing_weather.runs = 0  # type: ignore[attr-defined]
    for model in ("stored", "live"):
        (r,) = replay(build(), sqlite_url, "f", model=model).results  # type: ignore[arg-type]
        assert r.kind == "match", r
    assert _failing_weather.runs == 0  # type: ignore[attr-defined]


def test_a_turn_whose_tool_raised_and_stored_no_result_is_not_a_call_it_did_not_make(
    sqlite_url: str,
) -> None:
    with plain_saver(sqlite_url) as saver, contextlib.suppress(RuntimeError):
        react_agent(saver, tools=[failing]).invoke(
            {"messages": [HumanMessage("北京今天适合带伞吗？")]},
            {"configurable": {"thread_id": "r"}},
        )
    _failing_weather.runs = 0  # type: ignore[attr-defined]
    (r,) = replay(react_agent(None, tools=[failing]), sqlite_url, "r", model="live").results
    assert "did not make" not in r.detail
    assert r.kind == "match" and "stored no result" in r.detail, r
    assert _failing_weather.runs == 0  # type: ignore[attr-defined]
