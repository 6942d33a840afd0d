"""A write the message log refuses stores nothing, and every reader still answers."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

import threadlog


def _echo(saver: Any) -> Any:
    """One node that answers with a fixed id: a second run's answer conflicts with the first."""
    runs = {"n": 0}

    def model(state: dict[str, Any]) -> dict[str, Any]:
        runs["n"] += 1
        return {"messages": [AIMessage(f"answer {runs['n']}", id="answer")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    g.add_edge("model", END)
    return g.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "t"}}


def test_a_refused_update_state_stores_nothing_and_the_next_update_works(backend: str) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = _echo(saver)
        graph.invoke({"messages": [("user", "hi")]}, CONFIG)
        head = saver.get_tuple(CONFIG)
        with pytest.raises(threadlog.ToolPairingError, match="nope"):
            graph.update_state(CONFIG, {"messages": [ToolMessage("x", tool_call_id="nope")]})
        after = saver.get_tuple(CONFIG)
        assert after.config == head.config
        assert after.pending_writes == head.pending_writes  # nothing of it was stored
        graph.update_state(CONFIG, {"messages": [("user", "second")]})
        graph.update_state(CONFIG, {"messages": [("user", "third")]})
        texts = [m.content for m in graph.get_state(CONFIG).values["messages"]]
    assert texts == ["hi", "answer 1", "second", "third"]


def test_get_state_answers_after_a_node_wrote_a_conflicting_id(backend: str) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = _echo(saver)
        graph.invoke({"messages": [("user", "hi")]}, CONFIG)
        with pytest.raises(threadlog.ConflictingIdError, match="'answer'"):
            graph.invoke({"messages": [("user", "again")]}, CONFIG)
        state = graph.get_state(CONFIG)  # used to raise the ConflictingIdError again
        history = list(graph.get_state_history(CONFIG))
    # The last good state: the new input is in, the refused answer is not; the failed
    # step is still pending and carries the log's error.
    assert [m.content for m in state.values["messages"]] == ["hi", "answer 1", "again"]
    assert state.next == ("model",)
    assert len(state.tasks) == 1
    assert isinstance(state.tasks[0].error, threadlog.ConflictingIdError)
    assert "'answer'" in str(state.tasks[0].error)
    assert history[0].config == state.config


def test_the_thread_continues_after_a_refused_node_write(backend: str) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = _echo(saver)
        graph.invoke({"messages": [("user", "hi")]}, CONFIG)
        with pytest.raises(threadlog.ConflictingIdError):
            graph.invoke({"messages": [("user", "again")]}, CONFIG)
        graph.update_state(CONFIG, {"messages": [AIMessage("fixed", id="fixed")]},
                           as_node="model")
        texts = [m.content for m in graph.get_state(CONFIG).values["messages"]]
    assert texts == ["hi", "answer 1", "again", "fixed"]
