"""Which calls the tool step answers, how to route to it, and per-call `Send` branches.

Contract:

* A step's calls are the **open** calls of the last `AIMessage` (`tool_calls` then
  `invalid_tool_calls`, minus any with a result: `pairing.open_in`), so a tool step never
  answers a call twice. A call without an id is refused (`ToolPairingError`).
* `tools_condition(state)` routes to `"tools"` when the last message is an `AIMessage`
  with `tool_calls` or `invalid_tool_calls`, to `END` otherwise.
* `send_tool_calls(state, node="tools")` returns one `Send(node, [call])` per open call
  (LangGraph's per-call payload), so each call is its own task and a failing or
  interrupted call does not re-run its finished siblings; none ends that path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.types import Send

from threadlog.log.pairing import AnyCall, open_in

__all__ = [
    "AnyCall",
    "last_request",
    "messages_of",
    "open_calls",
    "send_tool_calls",
    "tools_condition",
]


def messages_of(state: Any, messages_key: str = "messages") -> Sequence[AnyMessage]:
    """The message list of a graph state (dict, object with an attribute, or list)."""
    if isinstance(state, list):
        return state
    if isinstance(state, Mapping):
        found = state.get(messages_key)
    else:  # a pydantic or other object state
        found = getattr(state, messages_key, None)
    if found is None:
        raise ValueError(
            f"the tool step found no {messages_key!r} key in its input "
            f"({type(state).__name__}); give the graph state a "
            f"`{messages_key}: threadlog.Messages` key"
        )
    return cast(Sequence[AnyMessage], found)


def last_request(messages: Sequence[AnyMessage]) -> tuple[int, AIMessage] | None:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AIMessage):
            return i, m
    return None


def open_calls(messages: Sequence[AnyMessage]) -> list[AnyCall]:
    """The calls of the last AIMessage that have no result yet, in call order."""
    found = last_request(messages)
    if found is None:
        return []
    # From the last request on, the only calls are its own.
    return [o.call for o in open_in(messages[found[0] :])]


def tools_condition(state: Any, messages_key: str = "messages") -> Literal["tools", "__end__"]:
    """Route to `"tools"` if the last message asks for tools (valid or malformed)."""
    messages = messages_of(state, messages_key)
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
        return "tools"
    return "__end__"


def send_tool_calls(
    state: Any, node: str = "tools", *, messages_key: str = "messages"
) -> list[Send]:
    """One `Send(node, [call])` per open call of the last AIMessage (see module doc)."""
    messages = messages_of(state, messages_key)
    if not messages or not isinstance(messages[-1], AIMessage):
        return []
    return [Send(node, [dict(call)]) for call in open_calls(messages)]
