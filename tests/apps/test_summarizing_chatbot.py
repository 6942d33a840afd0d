"""The LangChain Academy summarizing chatbot (module 2, "chatbot-summarization"), as the
course writes it, on threadlog: the one-line port is `MessagesState` from threadlog.

Its `summarize_conversation` node returns `RemoveMessage(id=m.id)` for all but the last two
messages. On threadlog each is a removal event: what the app's nodes read no longer holds
the removed messages, the log keeps them (an earlier checkpoint, a fresh process, the
inspector's "removed" rows name the event). SQLite and Postgres (`backend`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.graph import END, START, StateGraph

import threadlog
from tests.helpers.multi_agent import Scripted
from threadlog import MessagesState, inspect


def _reply(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if "summary" in str(last.content):
        users = [str(m.content) for m in messages if isinstance(m, HumanMessage)][:-1]
        return AIMessage("summary: " + ", ".join(users))
    return AIMessage(f"reply to {last.content}")


model = Scripted(script=_reply)
seen: list[list[BaseMessage]] = []


# -- the app, as the course writes it --------------------------------------------------


class State(MessagesState):
    summary: str


def call_model(state: State) -> dict[str, Any]:
    summary = state.get("summary", "")
    if summary:
        system_message = f"Summary of conversation earlier: {summary}"
        messages = [SystemMessage(content=system_message)] + state["messages"]
    else:
        messages = state["messages"]
    seen.append(list(messages))
    response = model.invoke(messages)
    return {"messages": response}


def summarize_conversation(state: State) -> dict[str, Any]:
    summary = state.get("summary", "")
    if summary:
        summary_message = (
            f"This is summary of the conversation to date: {summary}\n\n"
            "Extend the summary by taking into account the new messages above:"
        )
    else:
        summary_message = "Create a summary of the conversation above:"
    messages = state["messages"] + [HumanMessage(content=summary_message)]
    response = model.invoke(messages)
    delete_messages = [RemoveMessage(id=m.id) for m in state["messages"][:-2]]
    return {"summary": response.content, "messages": delete_messages}


def should_continue(state: State) -> str:
    messages = state["messages"]
    if len(messages) > 6:
        return "summarize_conversation"
    return END


def build(checkpointer: Any) -> Any:
    workflow = StateGraph(State)
    workflow.add_node("conversation", call_model)
    workflow.add_node(summarize_conversation)
    workflow.add_edge(START, "conversation")
    workflow.add_conditional_edges("conversation", should_continue)
    workflow.add_edge("summarize_conversation", END)
    return workflow.compile(checkpointer=checkpointer)


# -- the tests ---------------------------------------------------------------------------


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def test_the_summarizing_chatbot_runs_ten_turns_and_its_deletions_are_events(
    backend: str,
) -> None:
    seen.clear()
    cfg = _cfg("academy")
    with threadlog.checkpointer(backend) as saver:
        graph = build(saver)
        for k in range(10):
            out = graph.invoke({"messages": [HumanMessage(f"q{k}", id=f"u{k}")]}, cfg)
            assert out["messages"][-1].content == f"reply to q{k}"
            assert len(out["messages"]) <= 6  # what the app reads: summarized
        state = graph.get_state(cfg).values
    # What the model saw: the summary, then only what the app kept.
    assert seen[-1][0].content.startswith("Summary of conversation earlier: summary:")
    assert [m.content for m in seen[-1][1:]][-1] == "q9"
    assert "q0" not in [m.content for m in seen[-1]]
    threadlog.validate(state["messages"], allow_pending_calls=False)
    # A fresh process reads the same view; the log kept every message: the checkpoints
    # before each removal still hold what it hid.
    with threadlog.checkpointer(backend) as again:
        fresh = build(again)
        assert [m.id for m in fresh.get_state(cfg).values["messages"]] == [
            m.id for m in state["messages"]
        ]
        ever = {m.id for s in fresh.get_state_history(cfg) for m in s.values.get("messages", [])}
    assert {f"u{k}" for k in range(10)} <= ever


def test_the_inspector_shows_each_removed_message_with_its_removal(backend: str) -> None:
    cfg = _cfg("academy-inspect")
    with threadlog.checkpointer(backend) as saver:
        graph = build(saver)
        for k in range(5):
            graph.invoke({"messages": [HumanMessage(f"q{k}", id=f"u{k}")]}, cfg)
        t = inspect.thread(graph, cfg)
        removed = t.removed()
        timeline = t.timeline()
        text = str(timeline)
        page = t.html()
    # Turn 4 reached 8 messages, so the summarize node removed all but the last two.
    assert [r.message.id for r in removed][:3] == ["u0", removed[1].message.id, "u1"]
    assert len(removed) == 6 and removed[0].message.content == "q0"
    assert all(r.node == "summarize_conversation" for r in removed)
    assert len({r.checkpoint_id for r in removed}) == 1  # one step's removal
    assert "removed user" in text and "(RemoveMessage by summarize_conversation)" in text
    assert page.count('class="r-removed"') == 6 and "q0 (RemoveMessage by" in page
