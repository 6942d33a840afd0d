"""The scripted weather loop used by the history-cache tests (and shaped like the benchmark).

human -> AI with 2 tool calls -> 2 results from parallel `Send` tasks -> AI answer.
Ids are deterministic per turn text, so two runs of the same turns write the same ids.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from threadlog import MessagesState


def build_loop(checkpointer: Any, state: Any = MessagesState) -> Any:
    """The loop over `state` (a `MessagesState`-shaped TypedDict; threadlog's by default)."""

    def agent(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        n = len(state["messages"])
        if isinstance(last, HumanMessage):
            calls = [
                {"name": "get_weather", "args": {"city": city}, "id": f"call-{last.id}-{i}"}
                for i, city in enumerate(("Beijing", "Shanghai"))
            ]
            return {
                "messages": [AIMessage(f"checking ({n})", tool_calls=calls, id=f"ai-{last.id}")]
            }
        return {"messages": [AIMessage(f"sunny ({n})", id=f"answer-{last.id}")]}

    def tool(call: dict[str, Any]) -> dict[str, Any]:
        return {
            "messages": [
                ToolMessage(
                    f"{call['args']['city']}: sunny",
                    tool_call_id=call["id"],
                    name=call["name"],
                    id=f"result-{call['id']}",
                )
            ]
        }

    def route(state: Any) -> Any:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [Send("tool", c) for c in last.tool_calls]
        return END

    g = StateGraph(state)
    g.add_node("agent", agent)
    g.add_node("tool", tool)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tool", END])
    g.add_edge("tool", "agent")
    return g.compile(checkpointer=checkpointer)


def say(text: str, mid: str | None = None) -> dict[str, Any]:
    return {"messages": [HumanMessage(text, id=mid or f"h-{text}")]}


def shape(messages: list[BaseMessage]) -> list[tuple[str, str | None, Any]]:
    """What must be identical between two reads: type, id and content, in order."""
    return [(m.type, m.id, m.content) for m in messages]
