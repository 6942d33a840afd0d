"""`threadlog export` holds every message ever written to the thread, in every format:
after a summarizing chatbot (`RemoveMessage` + summary, the LangChain Academy way) or
LangChain's `SummarizationMiddleware`, the messages they hid are exported where they
stood, marked with the event that hid them; `inspect` still shows the view."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.graph import END, START, MessagesState, StateGraph

import threadlog
from tests.helpers.multi_agent import Scripted
from tests.helpers.poisoned import plain_saver
from threadlog.cli import main
from threadlog.inspect.export import loads

TURNS = 8


def _scripted() -> Scripted:
    n = itertools.count()

    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        k = next(n)
        return AIMessage(f"reply {k} to {len(messages)} message(s)", id=f"ai-{k}")

    return Scripted(script=reply)


class State(MessagesState):
    summary: str


def summarizing_chatbot(saver: Any) -> Any:
    """The Academy's chatbot: past six messages, summarize and remove all but two."""
    model = _scripted()

    def call_model(state: State) -> dict[str, Any]:
        summary = state.get("summary", "")
        sent = state["messages"]
        if summary:
            sent = [SystemMessage(f"Summary of conversation earlier: {summary}"), *sent]
        return {"messages": [model.invoke(sent)]}

    def should_continue(state: State) -> str:
        return "summarize_conversation" if len(state["messages"]) > 6 else END

    def summarize_conversation(state: State) -> dict[str, Any]:
        asked = [*state["messages"], HumanMessage("Create a summary of the conversation above:")]
        summary = str(model.invoke(asked).content)
        delete = [RemoveMessage(id=str(m.id)) for m in state["messages"][:-2]]
        return {"summary": summary, "messages": delete}

    g = StateGraph(State)
    g.add_node("conversation", call_model)
    g.add_node("summarize_conversation", summarize_conversation)
    g.add_edge(START, "conversation")
    g.add_conditional_edges("conversation", should_continue)
    g.add_edge("summarize_conversation", END)
    return g.compile(checkpointer=saver)


def middleware_agent(saver: Any) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    summarizer = Scripted(script=lambda m: AIMessage("the gist", id=None))
    return create_agent(
        _scripted(),
        tools=[],
        middleware=[
            SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("messages", 2))
        ],
        checkpointer=saver,
    )


APPS = {"summarizing chatbot": summarizing_chatbot, "SummarizationMiddleware": middleware_agent}


@contextmanager
def _saver(kind: str, url: str) -> Iterator[Any]:
    if kind == "threadlog":
        with threadlog.checkpointer(url) as saver:
            yield saver
    else:
        with plain_saver(url) as saver:
            yield saver


def _run(app: str, kind: str, url: str) -> set[str]:
    """The app's turns on thread "t"; every message id it wrote (inputs and updates)."""
    written: set[str] = set()
    with _saver(kind, url) as saver:
        graph = APPS[app](saver)
        for turn in range(TURNS):
            question = HumanMessage(f"question {turn}", id=f"user-{turn}")
            written.add(str(question.id))
            for update in graph.stream(
                {"messages": [question]},
                {"configurable": {"thread_id": "t"}},
                stream_mode="updates",
            ):
                for values in update.values():
                    for m in (values or {}).get("messages") or []:
                        if isinstance(m, BaseMessage) and not isinstance(m, RemoveMessage):
                            written.add(str(m.id))
    return written


def _export(capsys: pytest.CaptureFixture[str], url: str, fmt: str) -> str:
    assert main(["export", "--db", url, "--thread", "t", "--format", fmt]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("kind", ["plain", "threadlog"])
@pytest.mark.parametrize("app", list(APPS))
def test_export_holds_every_message_ever_written_marking_the_removed_ones(
    backend: str, capsys: pytest.CaptureFixture[str], app: str, kind: str
) -> None:
    from threadlog.inspect.export import messages_at

    written = _run(app, kind, backend)
    exported = loads(_export(capsys, backend, "jsonl"))
    ids = [str(m.id) for m in exported]
    assert sorted(ids) == sorted(written)  # each once
    removed = [m for m in exported if "threadlog_removed" in m.response_metadata]
    view, _ = messages_at(backend, "t")  # what inspect shows: the view
    assert {str(m.id) for m in view} == set(ids) - {str(m.id) for m in removed}
    assert len(removed) >= TURNS  # most of eight turns were summarized away
    events = [m.response_metadata["threadlog_removed"] for m in removed]
    if kind == "plain":
        assert all(e["event"] == "removed" and e["checkpoint_id"] for e in events)
        if app == "summarizing chatbot":
            assert {tuple(e["by"]) for e in events} == {("summarize_conversation",)}
    for fmt in ("langchain", "openai"):
        doc = json.loads(_export(capsys, backend, fmt))
        marked = [item for item in doc if "threadlog_removed" in json.dumps(item)]
        assert len(marked) == len(removed), fmt
        if fmt == "langchain":
            assert sorted(str(i["data"]["id"]) for i in doc) == sorted(written)
