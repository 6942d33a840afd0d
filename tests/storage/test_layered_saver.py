"""The saver `threadlog.checkpointer()` returns: one wrapper, its layers an ordered tuple, and
the drifts the old sync/async copies had, each pinned by a test that failed on them.

The layers are stated in `threadlog.checkpoint.saver._finish`; the contract of each is in
`threadlog.checkpoint` (its docstring). Sync and async run the same flows
(`threadlog.flows`), so a behaviour tested on one side holds on the other; the
tests below are the places where the two used to differ.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

import threadlog
from tests.helpers.echo import echo_graph as _echo_graph
from threadlog.checkpoint.cache import history_cache_of
from threadlog.checkpoint.guard import GuardedSaver
from threadlog.checkpoint.layered import LayeredSaver, layer_of
from threadlog.checkpoint.stopped_work import StoppedWorkLayer

LAYERS = ("guard", "calls", "resent", "stopped_work", "checksums", "own_writes", "history")


def test_the_checkpointer_is_one_wrapper_whose_layers_are_an_ordered_tuple(
    sqlite_url: str,
) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        assert isinstance(saver, GuardedSaver) and isinstance(saver, LayeredSaver)
        assert tuple(layer.name for layer in saver.layers) == LAYERS
        # No class swapping: the backend object is exactly LangGraph's class.
        assert type(saver.inner) is SqliteSaver
    with threadlog.checkpointer(sqlite_url, cache=False) as saver:
        # "resent" reads only: a thread stored with the cache on reads back whole.
        assert tuple(layer.name for layer in saver.layers) == (
            "guard",
            "calls",
            "resent",
            "stopped_work",
            "checksums",
        )
    with threadlog.checkpointer(sqlite_url, record_calls=False) as saver:
        without = tuple(n for n in LAYERS if n != "calls")
        assert tuple(layer.name for layer in saver.layers) == without


def test_without_the_guard_the_backend_keeps_its_class_and_gets_the_layers_in_place(
    sqlite_url: str,
) -> None:
    with threadlog.checkpointer(sqlite_url, guard=False) as saver:
        assert type(saver) is SqliteSaver
        assert layer_of(saver, StoppedWorkLayer) is not None
        graph = _echo_graph(saver)
        graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, _cfg("bare"))
        assert [m.id for m in graph.get_state(_cfg("bare")).values["messages"]] == ["h1", "ai-1"]
        cache = history_cache_of(saver)
        assert cache is not None


def _cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def test_with_history_cache_keeps_the_saver_s_class_and_serves_it() -> None:
    saver = threadlog.with_history_cache(InMemorySaver())
    assert type(saver) is InMemorySaver
    graph = _echo_graph(saver)
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(f"turn {i}", id=f"h{i}")]}, _cfg("m"))
    cache = history_cache_of(saver)
    assert cache is not None and cache.hits >= 1


def test_the_sqlite_file_of_a_guarded_saver_is_langgraph_s_own(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        _echo_graph(saver).invoke({"messages": [HumanMessage("hi", id="h1")]}, _cfg("f"))
    path = sqlite_url[len("sqlite:///") :]
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"checkpoints", "writes"} <= tables
