"""A backend's history walk returns exactly what the saver's own delta history implies.

For every checkpoint T of a thread with several turns, a fork and `update_state`s, and
every ancestor K of T, the walk from T back to K (the history cache's question) must be
the saver's own history at T minus its history at K — or None exactly when a stored
snapshot lies between them. Async savers get the same one-query walk as sync ones
(issue 20: the async path had none); a Postgres saver on a pool walks like one on a
connection. The cold SQLite read equals the saver's own read at every checkpoint.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from tests.helpers.perf import build_loop, say
from threadlog.checkpoint.backends import backend_of

CFG: Any = {"configurable": {"thread_id": "t1"}}
MESSAGES = ["messages"]
BOTH = ["messages", "branch:to:agent"]


# -- one thread: turns, a fork from an older checkpoint, update_state on it and the head --


def _fork_point(states: list[Any]) -> Any:
    return next(s for s in states if len(s.values.get("messages", ())) == 5)


def write_thread(saver: Any) -> None:
    graph = build_loop(saver)
    for i in range(3):
        graph.invoke(say(f"turn {i}"), CFG)
    old = _fork_point(list(graph.get_state_history(CFG)))
    graph.invoke(say("fork"), old.config)
    graph.update_state(old.config, {"messages": [HumanMessage("aside", id="aside-1")]})
    graph.update_state(CFG, {"messages": [HumanMessage("note", id="note-1")]})
    graph.invoke(say("after"), CFG)


async def awrite_thread(saver: Any) -> None:
    graph = build_loop(saver)
    for i in range(3):
        await graph.ainvoke(say(f"turn {i}"), CFG)
    old = _fork_point([s async for s in graph.aget_state_history(CFG)])
    await graph.ainvoke(say("fork"), old.config)
    await graph.aupdate_state(old.config, {"messages": [HumanMessage("aside", id="aside-1")]})
    await graph.aupdate_state(CFG, {"messages": [HumanMessage("note", id="note-1")]})
    await graph.ainvoke(say("after"), CFG)


# -- what the saver's own reads say ------------------------------------------------------


class Thread:
    """The thread's checkpoints as the saver lists them, and the pairs (T, K) to walk."""

    def __init__(self, tuples: list[Any]) -> None:
        self.config = {t.checkpoint["id"]: t.config for t in tuples}
        self.parent = {
            t.checkpoint["id"]: ((t.parent_config or {}).get("configurable") or {}).get(
                "checkpoint_id"
            )
            for t in tuples
        }
        # A delta channel has a value in a checkpoint only where a snapshot is stored.
        self.holds = {t.checkpoint["id"]: "messages" in t.checkpoint["channel_values"]
                      for t in tuples}

    def pairs(self) -> Iterator[tuple[str, str, bool]]:
        """(T, K, whether a snapshot lies strictly between them) for every ancestor K."""
        for target in self.config:
            between = False
            k = self.parent[target]
            while k is not None:
                yield target, k, between
                between = between or self.holds[k]
                k = self.parent[k]


def assert_walks_match(
    thread: Thread, history: dict[str, Any], walks: dict[tuple[str, str], Any]
) -> None:
    found = crossed = from_snapshot = 0
    for target, k, between in thread.pairs():
        walk = walks[(target, k)]
        if between:
            assert walk is None, (target, k)
            crossed += 1
            continue
        assert walk is not None, (target, k)
        theirs = history[target]["messages"]
        if thread.holds[k]:  # the history at T starts from K's own snapshot
            assert "seed" in theirs
            assert walk["messages"] == theirs["writes"]
            from_snapshot += 1
        else:
            before = history[k]["messages"]
            assert before["writes"] + walk["messages"] == theirs["writes"]
            assert before.get("seed") == theirs.get("seed")
            found += 1
    # The thread exercises every case: plain walks, walks stopped by the fork's
    # snapshot, and walks that start at one.
    assert found > 20 and crossed > 0 and from_snapshot > 0


def check_sync(saver: Any) -> None:
    backend = backend_of(saver)
    thread = Thread(list(saver.list(CFG)))
    history = {
        cid: saver.get_delta_channel_history(config=cfg, channels=MESSAGES)
        for cid, cfg in thread.config.items()
    }
    walks = {
        (t, k): backend.walk("t1", "", MESSAGES, t, k, 64) for t, k, _ in thread.pairs()
    }
    assert_walks_match(thread, history, walks)


async def acheck(saver: Any) -> None:
    backend = backend_of(saver)
    thread = Thread([t async for t in saver.alist(CFG)])
    history = {
        cid: await saver.aget_delta_channel_history(config=cfg, channels=MESSAGES)
        for cid, cfg in thread.config.items()
    }
    walks = {
        (t, k): await backend.awalk("t1", "", MESSAGES, t, k, 64) for t, k, _ in thread.pairs()
    }
    assert_walks_match(thread, history, walks)


# -- the savers --------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "threads.sqlite")


@pytest.fixture
def sqlite_saver(db: str) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    yield saver
    conn.close()


@pytest.fixture
async def async_sqlite_saver(db: str) -> AsyncIterator[AsyncSqliteSaver]:
    async with aiosqlite.connect(db) as conn:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        yield saver


def _pg_kwargs() -> dict[str, Any]:
    from psycopg.rows import dict_row

    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


async def test_the_async_sqlite_walk_equals_the_savers_own_delta_history(
    async_sqlite_saver: AsyncSqliteSaver,
) -> None:
    await awrite_thread(async_sqlite_saver)
    await acheck(async_sqlite_saver)


async def test_the_async_postgres_walk_equals_the_savers_own_delta_history(
    pg_backend: str,
) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(pg_backend) as saver:
        await saver.setup()
        await awrite_thread(saver)
        await acheck(saver)


async def test_an_async_postgres_saver_on_a_pool_walks_like_one_on_a_connection(
    pg_backend: str,
) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(pg_backend, kwargs=_pg_kwargs(), open=False) as pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        await awrite_thread(saver)
        await acheck(saver)


def test_the_sqlite_walk_equals_the_savers_own_delta_history(sqlite_saver: SqliteSaver) -> None:
    write_thread(sqlite_saver)
    check_sync(sqlite_saver)


def test_the_postgres_walk_equals_the_savers_own_delta_history(pg_backend: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_backend) as saver:
        saver.setup()
        write_thread(saver)
        check_sync(saver)


def test_a_postgres_saver_on_a_pool_walks_like_one_on_a_connection(pg_backend: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_backend, kwargs=_pg_kwargs()) as pool:
        saver = PostgresSaver(pool)  # type: ignore[arg-type]
        saver.setup()
        write_thread(saver)
        check_sync(saver)


# -- the walk's bounds ---------------------------------------------------------------------


def test_a_walk_longer_than_max_walk_is_not_taken(sqlite_saver: SqliteSaver) -> None:
    write_thread(sqlite_saver)
    backend = backend_of(sqlite_saver)
    head = sqlite_saver.get_tuple(CFG)
    assert head is not None
    thread = Thread(list(sqlite_saver.list(CFG)))
    target = head.checkpoint["id"]
    parent = thread.parent[target]
    assert parent is not None
    grandparent = thread.parent[parent]
    assert grandparent is not None
    assert backend.walk("t1", "", MESSAGES, target, grandparent, 1) is None
    assert backend.walk("t1", "", MESSAGES, target, grandparent, 2) is not None
    assert backend.walk("t1", "", MESSAGES, target, target, 1) == {"messages": []}
    assert backend.walk("t1", "", MESSAGES, "no-such-id", parent, 64) is None


# -- the cold read ---------------------------------------------------------------------------


async def test_the_async_cold_sqlite_read_returns_what_the_savers_own_read_returns(
    async_sqlite_saver: AsyncSqliteSaver,
) -> None:
    await awrite_thread(async_sqlite_saver)
    backend = backend_of(async_sqlite_saver)
    seeded = 0
    # Listed first: the saver holds its lock while `alist` iterates, as our reads do.
    for tup in [t async for t in async_sqlite_saver.alist(CFG)]:
        cid = tup.checkpoint["id"]
        ours = await backend.aread("t1", "", BOTH, cid)
        theirs = await async_sqlite_saver.aget_delta_channel_history(
            config=tup.config, channels=BOTH
        )
        assert ours == theirs
        seeded += "seed" in theirs["messages"]
    assert seeded > 0  # some reads stopped at the fork's snapshot
    assert await backend.aread("t1", "", BOTH, "no-such-id") is None


def test_a_cold_read_of_an_older_writes_table_without_task_path_matches_the_saver(
    db: str, sqlite_saver: SqliteSaver
) -> None:
    """An older LangGraph's writes table has no `task_path`; the backend asks SQLite."""
    from threadlog.inspect.readonly import open_readonly

    write_thread(sqlite_saver)
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE writes DROP COLUMN task_path")
    conn.close()
    with open_readonly(db) as ro:
        backend = backend_of(ro)
        checked = 0
        for tup in list(ro.list(CFG)):
            cid = tup.checkpoint["id"]
            theirs = ro.get_delta_channel_history(config=tup.config, channels=BOTH)
            assert backend.read("t1", "", BOTH, cid) == theirs
            checked += 1
        assert checked > 20
