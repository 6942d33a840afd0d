"""Where a thread is read from when there is no graph: a URL's saver and a stand-in graph.

Contract: `open_saver(url)` opens LangGraph's saver for a URL read-only
(`threadlog.inspect.readonly`: no table, lock file or write) with threadlog's history
cache, so reading a thread oldest first rebuilds each log from its parent's.
`stand_in(saver, schema)` compiles a graph whose only job is to own threadlog's channels
(`threadlog.AgentState` unless `schema` is given), so LangGraph's loader rebuilds each
checkpoint exactly as the original graph would read it. `quiet_stand_in()` silences
LangGraph's warning about `Send`s addressed to nodes the stand-in does not have — while
reading, no task runs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph

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


def stand_in(saver: BaseCheckpointSaver[Any], schema: type[Any] | None) -> Graph:
    # A graph whose only job is to own the right channels: LangGraph's loader then
    # rebuilds each checkpoint exactly as the original graph would read it.
    # A schema the caller passed is code: its state types are allowed, as in the app.
    from threadlog.checkpoint.state_types import allow_state_types

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(schema or _default_schema())
    builder.add_node("threadlog_inspect", lambda state: None)
    builder.add_edge(START, "threadlog_inspect")
    return allow_state_types(builder.compile(checkpointer=saver))


@contextlib.contextmanager
def open_saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """LangGraph's saver for `url`, opened read-only (`threadlog.inspect.readonly`), with
    threadlog's history cache so a whole thread is rebuilt step by step, not once per
    checkpoint from its start."""
    from threadlog.checkpoint.cache import with_history_cache
    from threadlog.inspect.readonly import open_readonly

    with open_readonly(url) as saver:
        yield with_history_cache(saver)
