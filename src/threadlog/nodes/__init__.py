"""LangGraph nodes over a threadlog message log: the tool step (and, from their owners,
the context and model steps)."""

from threadlog.nodes.tools import ToolNode
from threadlog.nodes.tools_approval import ApprovalError
from threadlog.nodes.tools_dispatch import send_tool_calls, tools_condition
from threadlog.nodes.tools_results import ToolCallError

__all__ = ["ApprovalError", "ToolCallError", "ToolNode", "send_tool_calls", "tools_condition"]
