"""One-node graphs for the saver tests that need a real graph and nothing else:
`echo_graph` on `threadlog.MessagesState` answers "echo <n>" (n = the log's length);
`one_node_graph` runs a given node on a given state schema."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

import threadlog


def one_node_graph(schema: Any, node: Any, saver: Any) -> Any:
    builder = StateGraph(schema)
    builder.add_node("reply", node)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def echo_graph(saver: Any) -> Any:
    def reply(state: threadlog.MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"echo {n}", id=f"ai-{n}")]}

    return one_node_graph(threadlog.MessagesState, reply, saver)
