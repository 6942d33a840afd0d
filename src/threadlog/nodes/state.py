"""The one reader of a node's input state: `messages` and `compactions`, from a dict
(TypedDict states) or an object with attributes (pydantic states)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage

from threadlog.errors import InvalidMessageError

__all__ = ["read_state"]


def read_state(state: Any, node: str) -> tuple[list[BaseMessage], list[dict[str, Any]] | None]:
    """`messages` and `compactions` (None if absent) of a dict or pydantic state."""
    if isinstance(state, Mapping):
        if "messages" in state:
            events = state["compactions"] if "compactions" in state else None
            return list(state["messages"]), None if events is None else list(events)
    elif hasattr(state, "messages"):
        events = getattr(state, "compactions", None)
        has = hasattr(state, "compactions")
        return list(state.messages), (list(events or []) if has else None)
    raise InvalidMessageError(
        f"the {node} node needs a state with a 'messages' key, got {type(state).__name__}",
        fix="use threadlog.AgentState (messages + compactions) as the graph state",
    )
