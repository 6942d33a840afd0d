"""`backend_of(saver)` finds the right backend from every kind of saver threadlog meets.

Sync and async, SQLite / Postgres / memory, bare or wrapped by `threadlog.checkpointer`
(the guard's `.inner` and the mixed-in capabilities), opened read-only, seen through an
`InNamespace` view; any other saver gets the base `Backend`, which reads through the
saver's own API. The backend answers for the concrete saver, on its own connection.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

import threadlog
from tests.helpers.perf import build_loop, say
from threadlog.checkpoint.backends import (
    AsyncPostgresBackend,
    AsyncSqliteBackend,
    Backend,
    MemoryBackend,
    MemoryHeadStore,
    PostgresBackend,
    PostgresHeadStore,
    SqliteBackend,
    SqliteHeadStore,
    backend_of,
)
from threadlog.inspect.namespaces import InNamespace

CFG: Any = {"configurable": {"thread_id": "t1"}}


def _is(saver: Any, kind: type[Backend], concrete: Any) -> Backend:
    backend = backend_of(saver)
    assert type(backend) is kind
    assert backend.saver is concrete
    assert backend.outer is saver
    return backend


def _ids(backend: Backend) -> list[str]:
    return backend.checkpoint_ids("t1", "")


# -- SQLite --------------------------------------------------------------------------------


def test_a_bare_sqlite_saver_has_the_sqlite_backend(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    build_loop(saver).invoke(say("hi"), CFG)
    backend = _is(saver, SqliteBackend, saver)
    assert backend.kind == "sqlite"
    assert _ids(backend) == sorted(t.checkpoint["id"] for t in saver.list(CFG))
    conn.close()


def test_threadlogs_sqlite_checkpointer_unwraps_to_its_sqlite_saver(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        build_loop(saver).invoke(say("hi"), CFG)
        inner = saver.inner  # type: ignore[attr-defined]
        assert isinstance(inner, SqliteSaver)  # the capabilities are mixed into its class
        backend = _is(saver, SqliteBackend, inner)
        assert len(_ids(backend)) == len(list(saver.list(CFG))) > 0
        store = backend.head_store(sqlite_url[len("sqlite:///"):])
        try:
            assert isinstance(store, SqliteHeadStore)
            assert store.head("t1", "") == _ids(backend)[-1]
        finally:
            store.close()


def test_a_view_of_one_namespace_unwraps_like_its_saver(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        _is(InNamespace(saver, "sub:1"), SqliteBackend, saver.inner)  # type: ignore[attr-defined]


async def test_an_async_sqlite_saver_bare_and_wrapped_has_the_async_sqlite_backend(
    tmp_path: Path, sqlite_url: str
) -> None:
    async with aiosqlite.connect(tmp_path / "a.db") as conn:
        bare = AsyncSqliteSaver(conn)
        _is(bare, AsyncSqliteBackend, bare)
    async with threadlog.acheckpointer(sqlite_url) as saver:
        await build_loop(saver).ainvoke(say("hi"), CFG)
        inner = saver.inner  # type: ignore[attr-defined]
        assert isinstance(inner, AsyncSqliteSaver)
        backend = _is(saver, AsyncSqliteBackend, inner)
        head = await saver.aget_tuple(CFG)
        assert head is not None and head.parent_config is not None
        parent = head.parent_config["configurable"]["checkpoint_id"]
        walk = await backend.awalk("t1", "", ["messages"], head.checkpoint["id"], parent, 64)
        assert walk is not None and [w[1] for w in walk["messages"]] == ["messages"]


def test_a_read_only_sqlite_database_has_the_sqlite_backend(tmp_path: Path) -> None:
    from threadlog.inspect.readonly import open_readonly

    path = tmp_path / "t.db"
    with threadlog.checkpointer(f"sqlite:///{path}") as saver:
        build_loop(saver).invoke(say("hi"), CFG)
        expected = sorted(t.checkpoint["id"] for t in saver.list(CFG))
    with open_readonly(str(path)) as ro:
        assert _ids(_is(ro, SqliteBackend, ro)) == expected


# -- Postgres ------------------------------------------------------------------------------


def test_a_postgres_saver_bare_wrapped_and_read_only_has_the_postgres_backend(
    pg_backend: str,
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    from threadlog.inspect.readonly import open_readonly

    with threadlog.checkpointer(pg_backend) as saver:
        build_loop(saver).invoke(say("hi"), CFG)
        inner = saver.inner  # type: ignore[attr-defined]
        backend = _is(saver, PostgresBackend, inner)
        assert backend.kind == "postgres"
        expected = _ids(backend)
        assert expected == sorted(t.checkpoint["id"] for t in saver.list(CFG))
        store = backend.head_store(pg_backend)
        try:
            assert isinstance(store, PostgresHeadStore)
            assert store.head("t1", "") == expected[-1]
        finally:
            store.close()
    with PostgresSaver.from_conn_string(pg_backend) as bare:
        assert _ids(_is(bare, PostgresBackend, bare)) == expected
    with open_readonly(pg_backend) as ro:
        assert _ids(_is(ro, PostgresBackend, ro)) == expected


async def test_an_async_postgres_saver_bare_and_wrapped_has_the_async_postgres_backend(
    pg_backend: str,
) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with threadlog.acheckpointer(pg_backend) as saver:
        await build_loop(saver).ainvoke(say("hi"), CFG)
        inner = saver.inner  # type: ignore[attr-defined]
        _is(saver, AsyncPostgresBackend, inner)
    async with AsyncPostgresSaver.from_conn_string(pg_backend) as bare:
        backend = _is(bare, AsyncPostgresBackend, bare)
        head = await bare.aget_tuple(CFG)
        assert head is not None and head.parent_config is not None
        parent = head.parent_config["configurable"]["checkpoint_id"]
        walk = await backend.awalk("t1", "", ["messages"], head.checkpoint["id"], parent, 64)
        assert walk is not None and [w[1] for w in walk["messages"]] == ["messages"]


# -- memory and anything else --------------------------------------------------------------


async def test_memory_savers_sync_async_bare_and_wrapped_have_the_memory_backend() -> None:
    bare = InMemorySaver()
    assert isinstance(_is(bare, MemoryBackend, bare).head_store(""), MemoryHeadStore)
    with threadlog.checkpointer("memory://") as saver:
        build_loop(saver).invoke(say("hi"), CFG)
        backend = _is(saver, MemoryBackend, saver.inner)  # type: ignore[attr-defined]
        assert backend.kind == "memory"
        sizes = backend.stored_bytes("t1", "")
        assert sizes is not None and set(sizes) == set(_ids(backend))
    async with threadlog.acheckpointer("memory://") as asaver:
        _is(asaver, MemoryBackend, asaver.inner)  # type: ignore[attr-defined]


class _OtherSaver(BaseCheckpointSaver[Any]):
    """A saver class threadlog knows nothing about."""


def test_any_other_saver_gets_the_base_backend_reading_through_its_api() -> None:
    other = _OtherSaver()
    backend = _is(other, Backend, other)
    assert backend.kind == "saver"
    assert backend.stored_bytes("t1", "") is None
    assert backend.walk("t1", "", ["messages"], "b", "a", 64) is None
    assert backend.read("t1", "", ["messages"], "b") is None
    with pytest.raises(TypeError, match="_OtherSaver"):
        backend.head_store("")
