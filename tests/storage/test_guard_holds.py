"""A run's hold on its thread is its own: what its nodes do on the thread does not wait for
the run (docs/durability.md, "update_state waits for a running turn")."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

import threadlog


def test_a_node_s_own_update_state_on_its_thread_does_not_wait_for_its_run(
    sqlite_url: str,
) -> None:
    cfg: Any = {"configurable": {"thread_id": "own-update"}}
    outcome: dict[str, Any] = {}

    with threadlog.checkpointer(sqlite_url) as saver:

        def note(state: threadlog.MessagesState, config: RunnableConfig) -> dict[str, Any]:
            # The run holds the thread ("enqueue"): a wait here would never end.
            graph.update_state(cfg, {"messages": [HumanMessage("note", id="note-1")]})
            return {"messages": [AIMessage("done", id="ai-1")]}

        builder = StateGraph(threadlog.MessagesState)
        builder.add_node("note", note)
        builder.add_edge(START, "note")
        builder.add_edge("note", END)
        graph = builder.compile(checkpointer=saver)

        def turn() -> None:
            try:
                outcome["out"] = graph.invoke(
                    {"messages": [HumanMessage("hi", id="h1")]}, cfg
                )
            except Exception as exc:  # named by the assertion below
                outcome["error"] = exc

        worker = threading.Thread(target=turn, daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "the node's update_state waited for its own run"
        stored = {m.id for m in graph.get_state(cfg).values["messages"]}
    # It forked the turn it is part of: the run then finishes, or its own later writes are
    # refused (docs/durability.md) — never a wait. When it finished, the note is stored.
    if "error" in outcome:
        assert isinstance(outcome["error"], threadlog.ConcurrentRunError), outcome
    else:
        assert [m.id for m in outcome["out"]["messages"]] == ["h1", "ai-1"]
        assert stored == {"h1", "note-1", "ai-1"}


def test_a_late_tool_started_marker_is_not_another_run_s_result(sqlite_url: str) -> None:
    # A timed-out sync tool's queued call may start after its run stopped and store its
    # "started" marker then (here: from another worker's saver). New input read the head
    # before it: the marker changes nothing a reader rebuilds, so the input is stored; a
    # *result* another run stored there is still refused.
    from langgraph.checkpoint.base import empty_checkpoint

    from threadlog.checkpoint.recover import STARTED_CHANNEL

    cfg: Any = {"configurable": {"thread_id": "late-marker"}}
    with threadlog.checkpointer(sqlite_url) as saver, threadlog.checkpointer(
        sqlite_url
    ) as other:
        builder = StateGraph(threadlog.MessagesState)
        builder.add_node("reply", lambda s: {"messages": [AIMessage("ok", id="ai-1")]})
        builder.add_edge(START, "reply")
        builder.add_edge("reply", END)
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, cfg)

        head = saver.get_tuple(cfg)  # what the next run reads
        assert head is not None
        marker = {"call_id": "c1", "event": "started"}
        other.put_writes(head.config, [(STARTED_CHANNEL, marker)], "threadlog-started:c1:x")
        checkpoint = empty_checkpoint()
        stored = saver.put(head.config, checkpoint, {"source": "input", "step": 9}, {})
        assert stored["configurable"]["checkpoint_id"] == checkpoint["id"]

        head = saver.get_tuple(cfg)
        assert head is not None
        other.put_writes(head.config, [("messages", [AIMessage("x", id="x")])], "other-task")
        with pytest.raises(threadlog.ConcurrentRunError, match="another run stored results"):
            saver.put(head.config, empty_checkpoint(), {"source": "input", "step": 10}, {})
