"""Where a thread is read from when there is no graph: a URL's saver and a stand-in graph.

Contract: `open_saver(url)` opens LangGraph's saver for a URL read-only
(`threadlog.inspect.readonly`: no table, lock file or write) with threadlog's history
cache, so reading a thread oldest first rebuilds each log from its parent's.
`stand_in(saver, schema, config)` compiles a graph whose only job is to own threadlog's
channels (`threadlog.AgentState` unless `schema` is given), so LangGraph's loader rebuilds
each checkpoint exactly as the original graph would read it. Given a thread's `config`
and no `schema`, the stand-in also owns every other key that thread's head checkpoint
stores (`stored_keys`): a key stored as a delta (no value in the checkpoint, or a
`DeltaSnapshot`) is a threadlog `Messages` log, any other key reads back its stored value
as is — so a graph's `supervisor_messages` or a `name` field a subgraph routes on are
read from a database without the app's code. `quiet_stand_in()` silences
LangGraph's warning about `Send`s addressed to nodes the stand-in does not have — while
reading, no task runs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Annotated, Any, get_type_hints

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from threadlog._upstream import MISSING, DeltaSnapshot
from threadlog.inspect.records import Graph

__all__ = ["open_saver", "quiet_stand_in", "stand_in"]


class _UnknownNodeFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Ignoring unknown node name")


@contextlib.contextmanager
def quiet_stand_in(active: bool) -> Iterator[None]:
    # The stand-in graph lacks the real nodes, so LangGraph warns about Sends addressed
    # to them while reading; the reader runs no task, so the warning is noise here.
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


def stored_keys(saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> dict[str, bool]:
    """`{key: is_delta_log}` for the state keys the checkpoint at `config` stores (beyond
    the default schema's); LangGraph's own channels (`__…__`, `branch:…`) are not keys."""
    tup = saver.get_tuple(config)
    if tup is None:
        return {}
    checkpoint = tup.checkpoint
    stored = checkpoint.get("channel_values") or {}
    known = set(get_type_hints(_default_schema()))
    out: dict[str, bool] = {}
    for key in checkpoint.get("channel_versions") or {}:
        if key in known or key.startswith("__") or ":" in key:
            continue
        value = stored.get(key, MISSING)
        out[key] = value is MISSING or isinstance(value, DeltaSnapshot)
    return out


def _schema_with(keys: dict[str, bool]) -> type[Any]:
    from threadlog.channel import Messages

    base = _default_schema()
    if not keys:
        return base
    fields: dict[str, Any] = dict(get_type_hints(base, include_extras=True))
    for key, delta in sorted(keys.items()):
        fields[key] = Messages if delta else Annotated[Any, _last]
    return TypedDict("InspectedState", fields)  # type: ignore[operator, no-any-return]


def stand_in(
    saver: BaseCheckpointSaver[Any],
    schema: type[Any] | None,
    config: RunnableConfig | None = None,
) -> Graph:
    # A graph whose only job is to own the right channels: LangGraph's loader then
    # rebuilds each checkpoint exactly as the original graph would read it.
    if schema is None and config is not None:
        schema = _schema_with(stored_keys(saver, config))
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(schema or _default_schema())
    builder.add_node("threadlog_inspect", lambda state: None)
    builder.add_edge(START, "threadlog_inspect")
    return builder.compile(checkpointer=saver)


@contextlib.contextmanager
def open_saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """LangGraph's saver for `url`, opened read-only (`threadlog.inspect.readonly`), with
    threadlog's history cache so a whole thread is rebuilt step by step, not once per
    checkpoint from its start."""
    from threadlog.checkpoint.cache import with_history_cache
    from threadlog.inspect.readonly import open_readonly

    with open_readonly(url) as saver:
        yield with_history_cache(saver)
