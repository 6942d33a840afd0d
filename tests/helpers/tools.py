"""Test helpers for the tool node: a scripted model and the model ⇄ tools graph.

The scripted model is a graph node that answers from a fixed list of AIMessages, picked
by how many AIMessages the log already holds — so it replays identically on resume.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from threadlog import MessagesState, ToolNode, send_tool_calls, tools_condition


def call(name: str, args: dict[str, Any], cid: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": cid, "type": "tool_call"}


def bad_call(name: str, raw: str, cid: str) -> dict[str, Any]:
    return {
        "name": name,
        "args": raw,
        "id": cid,
        "error": "Expecting value: line 1 column 2",
        "type": "invalid_tool_call",
    }


def request(*calls: dict[str, Any], mid: str = "ai-1") -> AIMessage:
    valid = [c for c in calls if c["type"] == "tool_call"]
    invalid = [c for c in calls if c["type"] == "invalid_tool_call"]
    return AIMessage("", id=mid, tool_calls=valid, invalid_tool_calls=invalid)


FINAL = AIMessage("done", id="ai-final")


def scripted_graph(
    node: ToolNode,
    replies: Sequence[AIMessage],
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    per_call_branches: bool = False,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """model ⇄ tools, the model replying `replies[k]` on its k-th turn."""

    def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        k = sum(isinstance(m, AIMessage) for m in state["messages"])
        return {"messages": [replies[k] if k < len(replies) else FINAL]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", node)
    g.add_edge(START, "model")
    if per_call_branches:
        g.add_conditional_edges("model", send_tool_calls, ["tools", END])
    else:
        g.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


def start(text: str = "go") -> dict[str, list[AnyMessage]]:
    return {"messages": [HumanMessage(text, id="h-1")]}


def results(messages: Sequence[AnyMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def by_call(messages: Sequence[AnyMessage]) -> dict[str, ToolMessage]:
    out: dict[str, ToolMessage] = {}
    for m in results(messages):
        assert m.tool_call_id not in out, f"two results for call {m.tool_call_id}"
        out[m.tool_call_id] = m
    return out


class SideEffects:
    """Thread-safe counter of how often each tool body actually ran."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def hit(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1
