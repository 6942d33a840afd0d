"""`allow_state_types`: the types of a graph's state, allowed by its saver's serializer.

Collected as LangGraph does under `LANGGRAPH_STRICT_MSGPACK` (`_upstream.schema_types`),
for the graph and every subgraph; a field typed `Any` still needs `allowed_types=[...]`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from threadlog._upstream import schema_types
from threadlog.checkpoint.serde import allow_types

__all__ = ["allow_state_types", "state_types"]

G = TypeVar("G")


def state_types(graph_or_schema: Any) -> set[tuple[str, ...]]:
    """The `(module, class)` pairs a compiled graph (and its subgraphs) or a schema stores."""
    if not isinstance(graph_or_schema, Pregel):
        return schema_types([graph_or_schema], {})
    schemas: list[Any] = []
    channels: dict[str, Any] = {}
    graphs = [graph_or_schema, *(g for _, g in graph_or_schema.get_subgraphs(recurse=True))]
    for n, graph in enumerate(graphs):
        builder = getattr(graph, "builder", None)
        if isinstance(builder, StateGraph):
            schemas += [
                builder.state_schema,
                builder.input_schema,
                builder.output_schema,
                builder.context_schema,
                *(node.input_schema for node in builder.nodes.values()),
                *(
                    branch.input_schema
                    for branches in builder.branches.values()
                    for branch in branches.values()
                ),
            ]
        own = getattr(graph, "channels", None) or {}  # a remote subgraph has none
        channels.update({f"{n}:{k}": v for k, v in own.items()})
    return schema_types(schemas, channels)


def allow_state_types(graph_or_schema: G, saver: BaseCheckpointSaver[Any] | None = None) -> G:
    """Let `saver` (default: the graph's checkpointer) rebuild the types the graph's state
    holds; returns its first argument. `graph_or_schema`: a compiled graph, or a state
    schema (then `saver` is required). ValueError when there is no saver to widen."""
    target = saver if saver is not None else getattr(graph_or_schema, "checkpointer", None)
    if not isinstance(target, BaseCheckpointSaver):
        what = (
            "a graph compiled without a checkpointer of its own"
            if isinstance(graph_or_schema, Pregel)
            else "a schema and no saver"
        )
        raise ValueError(
            f"allow_state_types was given {what}: pass the saver too, "
            "allow_state_types(graph_or_schema, saver)"
        )
    allow_types(target.serde, state_types(graph_or_schema))
    return graph_or_schema
