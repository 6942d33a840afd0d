"""`create_agent`: a tool-calling agent graph in one call — threadlog's `create_react_agent`.

Contract:

* The graph runs over `AgentState` (the message log plus compaction events):

      START → model ─┬─ tool calls ─→ tools → model …
                     └─ no calls ───→ END

  `model` is a `ModelNode` (it also records its compaction events, in its own step);
  `tools` is a `ToolNode`. Wire `threadlog.ContextNode` by hand for a separate step.
* `per_call_branches=True` routes each tool call to its own `Send` task; otherwise one
  `tools` task runs a step's calls in parallel. Either way results are in call order.
* A turn stops after `max_model_calls` model calls (default 25) with an assistant message
  saying so; `tool_choice` applies to each turn's first model call; `profile` picks a
  server's wire rules; `requires_approval` names tools that pause for a human.
* The result is an ordinary compiled LangGraph graph; its state's types are allowed by
  the checkpointer's strict serializer (`threadlog.allow_state_types`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Send

from threadlog.checkpoint.state_types import allow_state_types
from threadlog.context.compaction import AgentState
from threadlog.context.policy import ContextPolicy
from threadlog.nodes.model import DEFAULT_MAX_MODEL_CALLS, ModelNode
from threadlog.nodes.tools.node import ToolNode
from threadlog.nodes.tools.routing import send_tool_calls, tools_condition
from threadlog.providers.profiles import Profile

__all__ = ["create_agent"]


def create_agent(
    model: BaseChatModel | Callable[..., Any],
    tools: Sequence[BaseTool | Callable[..., Any]],
    *,
    system_prompt: str | Callable[..., Any] | None = None,
    context: ContextPolicy | None = None,
    checkpointer: Checkpointer = None,
    per_call_branches: bool = False,
    requires_approval: Sequence[str] = (),
    idempotent: Sequence[str] = (),
    profile: str | Profile | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    max_model_calls: int | None = DEFAULT_MAX_MODEL_CALLS,
    name: str | None = None,
    state_schema: type[Any] | None = None,
    context_schema: type[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile a model ⇄ tools agent over `AgentState` (module doc).

    `model`, `system_prompt`, `context`, `profile`, `tool_choice` and `max_model_calls` are
    `ModelNode`'s; `requires_approval` and `idempotent` are `ToolNode`'s. `state_schema`
    extends `threadlog.AgentState` (default: it)."""
    tools = list(tools)
    builder = StateGraph(state_schema or AgentState, context_schema=context_schema)
    builder.add_node(
        "model",
        ModelNode(
            model,
            tools,
            system_prompt=system_prompt,
            context=context,
            profile=profile,
            tool_choice=tool_choice,
            max_model_calls=max_model_calls,
        ),
    )
    tool_node = ToolNode(
        tools, requires_approval=requires_approval, record_durations=True, idempotent=idempotent
    )
    builder.add_node("tools", tool_node)
    builder.add_edge(START, "model")
    builder.add_edge("tools", "model")
    route = _one_task_per_call if per_call_branches else tools_condition
    builder.add_conditional_edges("model", route, ["tools", END])
    graph = builder.compile(checkpointer=checkpointer, name=name)
    if isinstance(checkpointer, BaseCheckpointSaver):
        allow_state_types(graph)
    return graph


def _one_task_per_call(state: AgentState) -> list[Send] | str:
    return send_tool_calls(state, node="tools") or END
