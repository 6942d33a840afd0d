"""Where a thread is read from when there is no graph: a stand-in graph over its saver.

`stand_in(saver, schema, shape)` owns threadlog's channels (`AgentState` unless `schema`),
every other key the head's `Shape` stores (a delta key as a `Messages` log) and a node
(never run) of each name the head knows, so LangGraph's loader rebuilds each checkpoint and
names its tasks as the original graph would.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, get_type_hints

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.constants import TASKS
from langgraph.graph import START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from threadlog._upstream import MISSING, PREGEL, DeltaSnapshot
from threadlog.inspect.records import Graph

__all__ = ["Shape", "head_shape", "quiet_stand_in", "shape_of", "stand_in"]


class _UnknownNodeFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Ignoring unknown node name")


@contextlib.contextmanager
def quiet_stand_in(active: bool) -> Iterator[None]:
    # The stand-in lacks the real nodes, and the reader runs no task: the warning is noise.
    if not active:
        yield
        return
    log, flt = logging.getLogger("langgraph"), _UnknownNodeFilter()
    log.addFilter(flt)
    try:
        yield
    finally:
        log.removeFilter(flt)


def _default_schema() -> type[Any]:
    from threadlog.context.compaction import AgentState  # the messages and compactions

    return AgentState


def _last(_: Any, new: Any) -> Any:
    return new


@dataclass(frozen=True, slots=True)
class Shape:
    """The state keys a head stores beyond the default schema (`{key: is_delta_log}`) and
    the node names it knows (those that ran, and those it would run next)."""

    keys: frozenset[tuple[str, bool]] = frozenset()
    nodes: frozenset[str] = frozenset()


def head_shape(saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> Shape:
    return shape_of(saver.get_tuple(config))


def shape_of(tup: CheckpointTuple | None) -> Shape:
    if tup is None:
        return Shape()
    checkpoint = tup.checkpoint
    stored = checkpoint.get("channel_values") or {}
    known = set(get_type_hints(_default_schema()))
    keys: dict[str, bool] = {}
    for key in checkpoint.get("channel_versions") or {}:
        if key in known or key.startswith("__") or ":" in key:
            continue
        value = stored.get(key, MISSING)
        keys[key] = value is MISSING or isinstance(value, DeltaSnapshot)
    # Nodes that ran (`versions_seen`), and those `branch:to:` triggers and `Send`s target.
    nodes = {n for n in checkpoint.get("versions_seen") or {} if not _langgraph_own(n)}
    nodes.update(k[len(PREGEL.branch_to) :] for k in stored if str(k).startswith(PREGEL.branch_to))
    waiting = (v for _, ch, v in tup.pending_writes or () if ch == TASKS)
    sends = [*(stored.get(TASKS) or []), *waiting]
    nodes.update(s.node for s in sends if isinstance(s, Send))
    return Shape(frozenset(keys.items()), frozenset(n for n in nodes if not _langgraph_own(n)))


def _langgraph_own(name: str) -> bool:
    return (name.startswith("__") and name.endswith("__")) or name == _READER


def _schema_with(keys: frozenset[tuple[str, bool]]) -> type[Any]:
    from threadlog.channel import Messages

    base = _default_schema()
    if not keys:
        return base
    fields: dict[str, Any] = dict(get_type_hints(base, include_extras=True))
    for key, delta in sorted(keys):
        fields[key] = Messages if delta else Annotated[Any, _last]
    return TypedDict("InspectedState", fields)  # type: ignore[operator, no-any-return]


_READER = "threadlog_inspect"


def stand_in(
    saver: BaseCheckpointSaver[Any], schema: type[Any] | None, shape: Shape | None = None
) -> Graph:
    from threadlog.checkpoint.state_types import allow_state_types

    given = schema is not None
    if schema is None and shape is not None:
        schema = _schema_with(shape.keys)
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(schema or _default_schema())
    builder.add_node(_READER, lambda state: None)
    builder.add_edge(START, _READER)
    for name in sorted(shape.nodes if shape is not None else ()):
        if name in builder.channels:
            continue  # a node never shares a state key's name; a stored oddity: skip it
        with contextlib.suppress(ValueError):  # a name StateGraph refuses (reserved characters)
            builder.add_node(name, lambda state: None)
    graph = builder.compile(checkpointer=saver)
    # A schema the caller passed is code: its state types are allowed; stored keys are not.
    return allow_state_types(graph) if given else graph
