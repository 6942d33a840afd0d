"""The human-review app the edit tests pause and resume (tests/log/test_edit*.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.graph import END, START, StateGraph

import threadlog
from tests.helpers.multi_agent import Scripted
from threadlog.examples.weather import get_weather


def review_app(
    model: Any, saver: Any, state: Any = threadlog.AgentState, tools: Sequence[Any] = ()
) -> Any:
    """model ⇄ tools (`get_weather` unless `tools`), paused before the tools run:
    LangGraph's standard review point."""
    tools = list(tools) or [get_weather]
    g = StateGraph(state)
    g.add_node("model", threadlog.ModelNode(Scripted(script=model), tools))
    g.add_node("tools", threadlog.ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", threadlog.tools_condition, {"tools": "tools", END: END})
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver, interrupt_before=["tools"])
