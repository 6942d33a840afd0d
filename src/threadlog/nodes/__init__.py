"""LangGraph nodes over a threadlog message log: the tool step (and, from their owners,
the context and model steps)."""

from threadlog.errors import ApprovalError, ToolCallError
from threadlog.nodes.tools.node import ToolNode
from threadlog.nodes.tools.routing import send_tool_calls, tools_condition

__all__ = ["ApprovalError", "ToolCallError", "ToolNode", "send_tool_calls", "tools_condition"]
