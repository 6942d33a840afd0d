"""LangGraph nodes over a threadlog message log: the tool step (and, from their owners,
the context and model steps)."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from threadlog.errors import ApprovalError, ToolCallError

# Loaded on first use (PEP 562): `nodes.trace` alone does not import `langgraph.prebuilt`.
if TYPE_CHECKING:
    from threadlog.nodes.tools.node import ToolNode
    from threadlog.nodes.tools.routing import send_tool_calls, tools_condition

_LAZY = {
    "ToolNode": "threadlog.nodes.tools.node",
    "send_tool_calls": "threadlog.nodes.tools.routing",
    "tools_condition": "threadlog.nodes.tools.routing",
}

__all__ = ["ApprovalError", "ToolCallError", "ToolNode", "send_tool_calls", "tools_condition"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
