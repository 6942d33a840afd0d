"""A run's hold on its thread is its own: what its nodes do on the thread does not wait for
the run (docs/durability.md, "update_state waits for a running turn")."""

from __future__ import annotations

import threading
from typing import Any

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
    assert "error" not in outcome, outcome
    # The run finished its turn, and the note it made on the thread is stored.
    assert [m.id for m in outcome["out"]["messages"]] == ["h1", "ai-1"]
    assert stored == {"h1", "note-1", "ai-1"}
