"""A one-node graph on `threadlog.MessagesState` that answers "echo <n>" (n = the log's
length), for the saver tests that need a real graph and nothing else."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

import threadlog


def echo_graph(saver: Any) -> Any:
    def reply(state: threadlog.MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"echo {n}", id=f"ai-{n}")]}

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)
