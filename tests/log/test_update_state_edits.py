"""Edits as events: `update_state` with a same-id message and new content (the human-edit
path — Studio, the SDK) supersedes the logged version; the audit keeps both.

Written as an app writes it: its own node code, `graph.update_state(config, {"messages":
[message]})`. SQLite and Postgres (`backend`), each read back in a fresh saver (the stored
write replayed). The same id with other content from a node's output or turn input stays
a `ConflictingIdError`: a replay that does not match is an integrity problem, not an edit.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph

import threadlog
from threadlog import MessagesState
from threadlog._upstream import update_state_hooked

seen: list[list[BaseMessage]] = []


def chatbot(state: MessagesState) -> dict[str, Any]:
    seen.append(list(state["messages"]))
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"you said {last.content}", id=f"a-{last.id}")]}


def build(saver: Any) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("chatbot", chatbot)
    g.add_edge(START, "chatbot")
    g.add_edge("chatbot", END)
    return g.compile(checkpointer=saver)


def _cfg(thread: str = "t") -> Any:
    return {"configurable": {"thread_id": thread}}


def test_update_state_is_hooked_on_the_installed_langgraph() -> None:
    assert update_state_hooked()


def test_update_state_with_a_same_id_message_supersedes_it_and_the_next_turn_sees_it(
    backend: str,
) -> None:
    seen.clear()
    with threadlog.checkpointer(backend) as saver:
        graph = build(saver)
        graph.invoke({"messages": [HumanMessage("helo", id="u1")]}, _cfg())
        graph.update_state(_cfg(), {"messages": [HumanMessage("hello", id="u1")]})
        graph.update_state(_cfg(), {"messages": [AIMessage("you said hello", id="a-u1")]})
        graph.invoke({"messages": [HumanMessage("and now?", id="u2")]}, _cfg())
    assert [m.content for m in seen[-1]] == ["hello", "you said hello", "and now?"]
    with threadlog.checkpointer(backend) as again:  # the stored writes replayed
        messages = build(again).get_state(_cfg()).values["messages"]
        history = list(build(again).get_state_history(_cfg()))
    assert [m.content for m in messages] == [
        "hello", "you said hello", "and now?", "you said and now?"]
    first, answer = messages[0], messages[1]
    assert threadlog.original_of(first).content == "helo"  # the audit keeps both versions
    assert [e["source"] for e in threadlog.edits_of(first)] == ["update_state"]
    assert threadlog.original_of(answer).content == "you said helo"
    # A checkpoint before the edit reads the original.
    assert [m.content for m in history[-2].values["messages"]][:1] == ["helo"]


def test_the_same_id_with_other_content_from_a_node_or_turn_input_stays_a_conflict(
    backend: str,
) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = build(saver)
        graph.invoke({"messages": [HumanMessage("hi", id="u1")]}, _cfg())
        with pytest.raises(threadlog.ConflictingIdError, match="'u1'"):
            graph.invoke({"messages": [HumanMessage("changed", id="u1")]}, _cfg())
        # A node re-sending an answer's id with other content.
        g = StateGraph(MessagesState)
        g.add_node("again", lambda s: {"messages": [AIMessage("other", id="a-u1")]})
        g.add_edge(START, "again")
        g.add_edge("again", END)
        with pytest.raises(threadlog.ConflictingIdError, match="'a-u1'"):
            g.compile(checkpointer=saver).invoke({"messages": [("user", "q2")]}, _cfg())
        assert [m.content for m in graph.get_state(_cfg()).values["messages"]] == [
            "hi", "you said hi", "q2"]


def test_update_state_cannot_change_a_messages_role_under_its_id() -> None:
    graph = build(InMemorySaver())
    graph.invoke({"messages": [HumanMessage("hi", id="u1")]}, _cfg())
    with pytest.raises(threadlog.ConflictingIdError, match="keeps the message's role"):
        graph.update_state(_cfg(), {"messages": [AIMessage("hi", id="u1")]})


def test_an_update_state_edit_round_trips_the_json_serializer() -> None:
    # LangGraph Server's stores and every saver's serde: the stored write is a plain dict.
    serde = JsonPlusSerializer()
    graph = build(InMemorySaver(serde=serde))
    graph.invoke({"messages": [HumanMessage("helo", id="u1")]}, _cfg())
    graph.update_state(_cfg(), {"messages": [{"role": "user", "content": "hello", "id": "u1"}]})
    saver = graph.checkpointer
    writes = [w for t in saver.list(_cfg()) for w in (t.pending_writes or [])]
    stored = [v for _, ch, v in writes if ch == "messages"]
    assert any(isinstance(v, list) and v and v[0].get("type") == "threadlog.update"
               for v in stored)
    again = build(saver).get_state(_cfg()).values["messages"]
    assert [m.content for m in again] == ["hello", "you said helo"]
