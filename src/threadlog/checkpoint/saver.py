"""`checkpointer(url)` / `acheckpointer(url)`: a ready, guarded, strict saver from a URL.

    with threadlog.checkpointer("sqlite:///threads.db") as saver:
        graph = builder.compile(checkpointer=saver)

Contract:

* **URLs.** `sqlite:///relative/path.db`, `sqlite:////absolute/path.db` (and
  `sqlite:///:memory:`) → LangGraph's `SqliteSaver` / `AsyncSqliteSaver`;
  `postgresql://…` or `postgres://…` → `PostgresSaver` / `AsyncPostgresSaver` from
  `langgraph-checkpoint-postgres` (the `threadlog[postgres]` extra), tables created on
  first use; `memory://` → `InMemorySaver`. Anything else raises one `ValueError`
  naming the supported schemes.
* **Strict serializer.** Every saver gets `strict_serializer()`: stored blobs only
  rebuild allowlisted types (`threadlog.checkpoint.serde`), whatever
  `LANGGRAPH_STRICT_MSGPACK` says. Pass `allowed_types=` for your own state classes.
* **Run guard.** With `guard=True` (the default) the saver is wrapped in `GuardedSaver`
  (`threadlog.checkpoint.guard`): a run holds its thread for its whole turn, and a
  second run meanwhile waits for it (`multitask_strategy="enqueue"`, the default) or
  gets `ConcurrentRunError` before anything is stored (`"reject"`); writes that would
  fork the thread silently are refused. A turn's input is checked against the stored log
  before it is stored (`threadlog.checkpoint.input_check`; `max_input_chars` caps a message's
  text), so bad input raises the log's own error and leaves the thread unchanged.
* **History cache.** With `cache=True` (the default) the backend saver gets
  `threadlog.with_history_cache`: a warm process rebuilds a thread's log from the new
  writes only, instead of re-reading the whole thread every turn.
* The saver and its connections are closed when the `with` block ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadlog._upstream import averify_hooks, verify_hooks
from threadlog.checkpoint.cache import with_history_cache
from threadlog.checkpoint.finished import keep_finished_work
from threadlog.checkpoint.guard import GuardedSaver, MultitaskStrategy
from threadlog.checkpoint.heads import (
    HeadStore,
    MemoryHeadStore,
    PostgresHeadStore,
    SqliteHeadStore,
)
from threadlog.checkpoint.input_check import InputCheck
from threadlog.checkpoint.integrity import chain_writes
from threadlog.checkpoint.own_writes import record_own_writes
from threadlog.checkpoint.serde import strict_serializer

__all__ = ["SCHEMES", "SaverWrapper", "acheckpointer", "checkpointer", "parse_url"]

SCHEMES = ("sqlite:///path", "postgresql://…", "memory://")

SaverWrapper = Callable[[BaseCheckpointSaver[Any]], BaseCheckpointSaver[Any]]
"""A function that wraps a ready saver (the history cache is one)."""


@dataclass(frozen=True)
class Target:
    kind: Literal["sqlite", "postgres", "memory"]
    location: str
    """The SQLite path, the Postgres URL, or "" for memory."""


def parse_url(url: str) -> Target:
    """Which backend a checkpointer URL names; `ValueError` naming the schemes if none."""
    if not isinstance(url, str) or "://" not in url:
        raise _bad_url(url, "it has no scheme")
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        if not url.lower().startswith("sqlite:///") or len(url) == len("sqlite:///"):
            raise _bad_url(url, "a SQLite URL is sqlite:///relative.db or sqlite:////abs.db")
        return Target("sqlite", url[len("sqlite:///") :])
    if scheme in ("postgresql", "postgres"):
        return Target("postgres", url)
    if scheme == "memory":
        return Target("memory", "")
    raise _bad_url(url, f"unknown scheme {scheme!r}")


def _bad_url(url: object, why: str) -> ValueError:
    return ValueError(
        f"unsupported checkpointer URL {url!r} ({why}); supported: {', '.join(SCHEMES)}"
    )


@contextlib.contextmanager
def checkpointer(
    url: str,
    *,
    guard: bool = True,
    allowed_types: Iterable[tuple[str, str] | type] = (),
    wrap: SaverWrapper | None = None,
    max_input_chars: int | None = None,
    cache: bool = True,
    multitask_strategy: MultitaskStrategy = "enqueue",
) -> Iterator[BaseCheckpointSaver[Any]]:
    """A sync saver for `url` (see module doc), closed when the block ends.

    Args:
        url: `sqlite:///path.db`, `postgresql://...` (the `postgres` extra) or `memory://`.
        guard: wrap the saver in the run guard (no silent forks, input checked first).
        allowed_types: extra `(module, class)` pairs or classes the strict serializer may
            rebuild from stored blobs (your own state classes).
        wrap: a function applied to the backend saver before the guard (your own wrapper).
        max_input_chars: refuse a turn's input message longer than this many characters.
        cache: keep the warm-process history cache on (a turn reads only new writes).
        multitask_strategy: what a run does while another run holds its thread:
            `"enqueue"` waits for it, `"reject"` raises `ConcurrentRunError` before
            anything is stored (per thread: `saver.set_multitask_strategy`).
    """
    if guard:
        verify_hooks()  # once per process: UpstreamChangedError on an incompatible LangGraph
    target = parse_url(url)
    serde = strict_serializer(allowed_types)
    with contextlib.ExitStack() as stack:
        saver: BaseCheckpointSaver[Any]
        store: HeadStore
        if target.kind == "memory":
            mem = InMemorySaver(serde=serde)
            saver, store = mem, MemoryHeadStore(mem)
        elif target.kind == "sqlite":
            saver = _sqlite_saver(target.location, serde, stack)
            shared = saver.conn if target.location == ":memory:" else None  # type: ignore[attr-defined]
            store = SqliteHeadStore(target.location, shared)
        else:
            saver = _postgres_saver(target.location, serde, stack)
            store = PostgresHeadStore(target.location)
        stack.callback(store.close)
        yield _finish(
            saver, store, guard=guard, wrap=wrap, max_input_chars=max_input_chars, cache=cache,
            multitask_strategy=multitask_strategy,
        )


@contextlib.asynccontextmanager
async def acheckpointer(
    url: str,
    *,
    guard: bool = True,
    allowed_types: Iterable[tuple[str, str] | type] = (),
    wrap: SaverWrapper | None = None,
    max_input_chars: int | None = None,
    cache: bool = True,
    multitask_strategy: MultitaskStrategy = "enqueue",
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """An async saver for `url` (see module doc), closed when the block ends."""
    if guard:
        await averify_hooks()
    target = parse_url(url)
    serde = strict_serializer(allowed_types)
    async with contextlib.AsyncExitStack() as stack:
        saver: BaseCheckpointSaver[Any]
        store: HeadStore
        if target.kind == "memory":
            mem = InMemorySaver(serde=serde)
            saver, store = mem, MemoryHeadStore(mem)
        elif target.kind == "sqlite":
            import aiosqlite
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            conn = await stack.enter_async_context(aiosqlite.connect(target.location))
            asaver = AsyncSqliteSaver(conn, serde=serde)
            await asaver.setup()
            saver, store = asaver, SqliteHeadStore(target.location)
        else:
            _require_postgres()
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg import AsyncConnection
            from psycopg.rows import dict_row

            aconn = await stack.enter_async_context(
                await AsyncConnection.connect(
                    target.location, autocommit=True, prepare_threshold=0, row_factory=dict_row
                )
            )
            pg = AsyncPostgresSaver(aconn, serde=serde)
            store = PostgresHeadStore(target.location)
            if target.location not in _SET_UP:
                # Migrations under an advisory lock, so workers starting together
                # do not race on CREATE TABLE.
                with store.lock("__setup__"):
                    await pg.setup()
                _SET_UP.add(target.location)
            saver = pg
        stack.callback(store.close)
        yield _finish(
            saver, store, guard=guard, wrap=wrap, max_input_chars=max_input_chars, cache=cache,
            multitask_strategy=multitask_strategy,
        )


def _finish(
    saver: BaseCheckpointSaver[Any],
    store: HeadStore,
    *,
    guard: bool,
    wrap: SaverWrapper | None,
    max_input_chars: int | None,
    cache: bool,
    multitask_strategy: MultitaskStrategy = "enqueue",
) -> BaseCheckpointSaver[Any]:
    """The one place a ready saver gets wrapped: the history cache, finished work, `wrap`,
    the guard.

    The read cache (`threadlog.checkpoint.cache`) wraps the backend saver *inside* the
    guard, so both the graph's reads and the guard's input check read through it, and
    every write still passes the guard. It is on by default: without it every turn
    re-reads and re-checks the thread's whole history (see BENCHMARKS.md). Head reads
    carry the work a crash left without its checkpoint (`threadlog.checkpoint.finished`),
    so new input does not drop it; every checkpoint records a count and checksum of the
    message writes it is rebuilt from, checked on read (`threadlog.checkpoint.integrity`).
    """
    out: BaseCheckpointSaver[Any] = (
        record_own_writes(with_history_cache(saver)) if cache else saver
    )
    out = keep_finished_work(chain_writes(out))
    out = wrap(out) if wrap is not None else out
    if guard:
        out = GuardedSaver(
            out, store, InputCheck(max_chars=max_input_chars),
            multitask_strategy=multitask_strategy,
        )
    return out


def _sqlite_saver(
    path: str, serde: JsonPlusSerializer, stack: contextlib.ExitStack
) -> BaseCheckpointSaver[Any]:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    # check_same_thread=False: LangGraph writes from its background threads (as
    # SqliteSaver.from_conn_string does); timeout: other processes may hold the file.
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    stack.callback(conn.close)
    saver = SqliteSaver(conn, serde=serde)
    saver.setup()
    return saver


def _postgres_saver(
    url: str, serde: JsonPlusSerializer, stack: contextlib.ExitStack
) -> BaseCheckpointSaver[Any]:
    _require_postgres()
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = stack.enter_context(
        Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    )
    saver = PostgresSaver(conn, serde=serde)
    if url not in _SET_UP:
        # Migrations under an advisory lock, so workers starting together do not
        # race on CREATE TABLE; once per process and URL is enough.
        lock_store = PostgresHeadStore(url)
        try:
            with lock_store.lock("__setup__"):
                saver.setup()
        finally:
            lock_store.close()
        _SET_UP.add(url)
    return saver


_SET_UP: set[str] = set()


def _require_postgres() -> None:
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "postgresql:// checkpointers need langgraph-checkpoint-postgres and psycopg: "
            "pip install 'threadlog[postgres]'"
        ) from exc
