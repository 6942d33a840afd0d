"""`checkpointer(url)` / `acheckpointer(url)`: a ready, guarded, strict saver from a URL.

    with threadlog.checkpointer("sqlite:///threads.db") as saver:
        graph = builder.compile(checkpointer=saver)

Contract:

* **URLs.** `sqlite:///relative/path.db`, `sqlite:////absolute/path.db` (and
  `sqlite:///:memory:`) → LangGraph's `SqliteSaver` / `AsyncSqliteSaver`;
  `postgresql://…` or `postgres://…` → `PostgresSaver` / `AsyncPostgresSaver` from
  `langgraph-checkpoint-postgres` (the `threadlog[postgres]` extra), tables created on
  first use (the async one dumps small writes on the loop: `backends/postgres_inline.py`);
  `memory://` → `InMemorySaver`. Anything else raises one `ValueError` naming the
  supported schemes.
* **Strict serializer.** Every saver gets `strict_serializer()`: stored blobs only
  rebuild allowlisted types (`threadlog.checkpoint.serde`), whatever
  `LANGGRAPH_STRICT_MSGPACK` says. `threadlog.allow_state_types(graph)` allows the
  types your state's annotations name; `allowed_types=` any others.
* **Run guard.** With `guard=True` (the default) the saver is wrapped in `GuardedSaver`
  (`threadlog.checkpoint.guard`): a run holds its thread for its whole turn, and a
  second run meanwhile waits for it (`multitask_strategy="enqueue"`, the default) or
  gets `ConcurrentRunError` before anything is stored (`"reject"`); writes that would
  fork the thread silently are refused. A turn's input is checked against the stored log
  before it is stored (`threadlog.checkpoint.input_check`; `max_input_chars` caps a message's
  text), so bad input raises the log's own error and leaves the thread unchanged.
* **Run locks** (`max_lock_connections`). The guard's locks share a bounded set of
  connections per saver, however many runs hold a thread: on Postgres at most that many
  sessions (default 2), each holding any number of advisory locks, so a process opens
  2 + N connections per saver (the saver's, the guard's reads, N lock sessions) for 1 or
  1000 concurrent runs, and no run waits for a session longer than one statement; on
  SQLite at most that many run-lock files open at once (default 256: a held run lock is
  an open file), past which runs queue for a file instead of failing; memory holds
  nothing to bound. A held thread is waited for by polling (1 ms doubling to 20 ms),
  never inside the database or in a worker thread.
* **History cache.** With `cache=True` (the default) the backend saver gets
  `threadlog.with_history_cache`: a warm process rebuilds a thread's log from the new
  writes only, instead of re-reading the whole thread every turn.
* The saver and its connections are closed when the `with` block ends.
"""

from __future__ import annotations

import contextlib
import inspect
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadlog._upstream import averify_hooks, verify_hooks
from threadlog.checkpoint.backends import (
    HeadStore,
    MemoryHeadStore,
    PostgresHeadStore,
    SqliteHeadStore,
    lock_bound,
    release_lock,
    take_lock,
)
from threadlog.checkpoint.cache import HistoryCache, HistoryLayer, history_cache_of
from threadlog.checkpoint.calls import CallsLayer
from threadlog.checkpoint.guard import GuardedSaver, MultitaskStrategy
from threadlog.checkpoint.input_check import InputCheck
from threadlog.checkpoint.integrity import ChecksumLayer
from threadlog.checkpoint.layered import Layer, bind_layers
from threadlog.checkpoint.own_writes import OwnWritesLayer
from threadlog.checkpoint.resent import ResentLayer
from threadlog.checkpoint.serde import strict_serializer
from threadlog.checkpoint.stopped_work import StoppedWorkLayer
from threadlog.flows import Flow, Io, arun, run

__all__ = ["SCHEMES", "SaverWrapper", "acheckpointer", "checkpointer", "parse_url"]

SCHEMES = ("sqlite:///path", "postgresql://…", "memory://")

SaverWrapper = Callable[[BaseCheckpointSaver[Any]], BaseCheckpointSaver[Any]]
"""A function that wraps a ready saver (the history cache is one)."""

P = ParamSpec("P")


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


@dataclass(frozen=True)
class _Options:
    guard: bool
    allowed_types: tuple[tuple[str, str] | type, ...]
    wrap: SaverWrapper | None
    max_input_chars: int | None
    cache: bool
    multitask_strategy: MultitaskStrategy
    max_lock_connections: int | None
    record_calls: bool = True


def _options(
    url: str,
    *,
    guard: bool = True,
    allowed_types: Iterable[tuple[str, str] | type] = (),
    wrap: SaverWrapper | None = None,
    max_input_chars: int | None = None,
    cache: bool = True,
    multitask_strategy: MultitaskStrategy = "enqueue",
    max_lock_connections: int | None = None,
    record_calls: bool = True,
) -> tuple[str, _Options]:
    """The arguments of `checkpointer` and `acheckpointer`, written once (their doc)."""
    lock_bound(max_lock_connections, 1)  # a bad value fails here, before anything opens
    return url, _Options(
        guard, tuple(allowed_types), wrap, max_input_chars, cache, multitask_strategy,
        max_lock_connections, bool(record_calls),
    )


def _openers(options: Callable[P, tuple[str, _Options]]) -> tuple[
    Callable[P, contextlib.AbstractContextManager[BaseCheckpointSaver[Any]]],
    Callable[P, contextlib.AbstractAsyncContextManager[BaseCheckpointSaver[Any]]],
]:
    """`checkpointer` and `acheckpointer`, each with the parameters of `options` (checked
    when called, as a signature's are): one build flow (`_build`) driven by `run` / `arun`."""

    def checkpointer(
        *args: P.args, **kwargs: P.kwargs
    ) -> contextlib.AbstractContextManager[BaseCheckpointSaver[Any]]:
        """A sync saver for `url` (see module doc), closed when the block ends.

        Args:
            url: `sqlite:///path.db`, `postgresql://...` (the `postgres` extra) or
                `memory://`.
            guard: wrap the saver in the run guard (no silent forks, input checked first).
            allowed_types: extra `(module, class)` pairs or classes the strict serializer
                may rebuild from stored blobs, beyond what
                `threadlog.allow_state_types(graph)` allows (a field typed `Any`, an
                object inside a `dict`).
            wrap: a function applied to the backend saver (your own wrapper); threadlog's
                layers sit above what it returns.
            max_input_chars: refuse a turn's input message longer than this many
                characters.
            cache: keep the warm-process history cache on (a turn reads only new writes).
            multitask_strategy: what a run does while another run holds its thread:
                `"enqueue"` waits for it, `"reject"` raises `ConcurrentRunError` before
                anything is stored (per thread: `saver.set_multitask_strategy`).
            max_lock_connections: how many connections the run guard's locks may hold
                open (module doc, "Run locks"); None: 2 Postgres sessions, 256 SQLite
                lock files.
            record_calls: store what every chat-model call of a run sent, with the step
                that made it (`threadlog.checkpoint.calls`; `threadlog inspect --calls`).
        """
        return _opened(*options(*args, **kwargs))

    def acheckpointer(
        *args: P.args, **kwargs: P.kwargs
    ) -> contextlib.AbstractAsyncContextManager[BaseCheckpointSaver[Any]]:
        """An async saver for `url` (the arguments of `checkpointer`), closed when the
        block ends."""
        return _aopened(*options(*args, **kwargs))

    # `help()` and `inspect.signature` show the real parameters, not `*args, **kwargs`.
    signature = inspect.signature(options)
    fns: tuple[Any, ...] = (checkpointer, acheckpointer)
    for fn, returns in zip(fns, ("", "Async"), strict=True):
        fn.__qualname__ = fn.__name__
        fn.__signature__ = signature.replace(
            return_annotation=f"{returns}ContextManager[BaseCheckpointSaver[Any]]"
        )
    return checkpointer, acheckpointer


@contextlib.contextmanager
def _opened(url: str, options: _Options) -> Iterator[BaseCheckpointSaver[Any]]:
    with contextlib.ExitStack() as stack:
        yield run(_build(url, options, stack))


@contextlib.asynccontextmanager
async def _aopened(url: str, options: _Options) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    async with contextlib.AsyncExitStack() as stack:
        yield await arun(_build(url, options, stack))


checkpointer, acheckpointer = _openers(_options)


def _build(url: str, options: _Options, stack: Any) -> Flow[BaseCheckpointSaver[Any]]:
    """The one build path, for both: open the backend (each `Io` names its sync and async
    opener), its head store, the schema once per process, then the layers (`_finish`)."""
    target = parse_url(url)
    serde = strict_serializer(options.allowed_types)
    if options.guard:
        # Once per process: UpstreamChangedError on a LangGraph whose entry points the
        # guard's hook no longer sees (`_upstream.verify_hooks`), never an unguarded run.
        yield Io(verify_hooks, averify_hooks)
    saver: BaseCheckpointSaver[Any]
    store: HeadStore
    if target.kind == "memory":
        mem = InMemorySaver(serde=serde)
        saver, store = mem, MemoryHeadStore(mem)
    elif target.kind == "sqlite":
        saver, shared = yield Io(_open_sqlite, _aopen_sqlite, (target.location, serde, stack))
        # ":memory:" is private to one connection: the head store reads through it.
        store = SqliteHeadStore(target.location, shared, options.max_lock_connections)
    else:
        _require_postgres()
        saver = yield Io(_open_postgres, _aopen_postgres, (target.location, serde, stack))
        store = PostgresHeadStore(target.location, options.max_lock_connections)
    stack.callback(store.close)
    if target.kind == "sqlite":
        yield _setup(saver)  # CREATE TABLE IF NOT EXISTS; SQLite serializes it
    elif target.kind == "postgres" and target.location not in _SET_UP:
        # Migrations under an advisory lock, so workers starting together do not race on
        # CREATE TABLE; once per process and URL. Waited for by polling (`take_lock`):
        # under asyncio neither the event loop nor a worker thread waits on it.
        yield from take_lock(store.try_lock, store.unlock, "__setup__", True)
        try:
            yield _setup(saver)
        finally:
            yield release_lock(store.unlock, "__setup__")
        _SET_UP.add(target.location)
    return _finish(saver, store, options)


def _finish(
    saver: BaseCheckpointSaver[Any], store: HeadStore, options: _Options
) -> BaseCheckpointSaver[Any]:
    """The one place a ready saver gets its layers, in this order (outermost first):

    1. the run guard (`guard.GuardLayer`, `guard=True`): whole turns, checked writes;
    1b. recorded calls (`calls.CallsLayer`, `record_calls=True`): each run's model calls,
       stored with the steps that made them, under the guard so they are part of the
       run's own writes;
    1c. re-sent messages (`resent.ResentLayer`): with `cache=True` a message-log write
       that re-sends what the log holds is stored as what it adds; with `cache=False`
       it only rebuilds such stored writes on read;
    2. stopped work (`stopped_work.StoppedWorkLayer`): a head read carries what a
       stopped step stored, so new input does not drop it;
    3. checksums (`integrity.ChecksumLayer`): a count and checksum of the message writes
       each checkpoint is rebuilt from, checked on read;
    4. own writes (`own_writes.OwnWritesLayer`, `cache=True`): what this saver stored,
       so a warm turn's history walk needs no query;
    5. the history cache (`cache.HistoryLayer`, `cache=True`): a warm process rebuilds a
       thread from the new writes only (without it every turn re-reads and re-checks
       the whole history; BENCHMARKS.md).

    Then the backend, after the user's `wrap`. With the guard the result is one wrapper,
    `GuardedSaver`; without it the layers are bound onto the backend object itself, which
    stays the LangGraph class it is (`layered.bind_layers`). A backend `wrap` already gave
    a history cache keeps it: the layer serves that cache, so there is one.
    """
    inner = options.wrap(saver) if options.wrap is not None else saver
    layers: list[Layer] = []
    history: HistoryCache | None = None
    resent: list[Layer] = []
    if options.cache:
        given = history_cache_of(inner)  # (a HistoryCache is falsy while empty)
        history = given if given is not None else HistoryCache()
        own = OwnWritesLayer()
        layers = [own, HistoryLayer(history, own.record)]
        resent = [ResentLayer(history, own.record)]
    else:
        # Reads only: a thread stored with the cache on (its re-sent writes stored as
        # what they add) must read back whole through a saver without it.
        resent = [ResentLayer(HistoryCache(), None)]
    layers = [*resent, StoppedWorkLayer(), ChecksumLayer(history), *layers]
    if options.record_calls:
        layers.insert(0, CallsLayer())
    if not options.guard:
        return bind_layers(inner, layers)
    return GuardedSaver(
        inner,
        store,
        InputCheck(max_chars=options.max_input_chars),
        multitask_strategy=options.multitask_strategy,
        layers=layers,
    )


def _setup(saver: BaseCheckpointSaver[Any]) -> Io:
    # LangGraph's async savers name their coroutine `setup` too.
    return Io(saver.setup, saver.setup)  # type: ignore[attr-defined]


# The openers: one per backend and form, each only connects (the build path does the rest).


def _open_sqlite(
    path: str, serde: JsonPlusSerializer, stack: contextlib.ExitStack
) -> tuple[BaseCheckpointSaver[Any], sqlite3.Connection | None]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    # check_same_thread=False: LangGraph writes from its background threads (as
    # SqliteSaver.from_conn_string does); timeout: other processes may hold the file.
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    stack.callback(conn.close)
    return SqliteSaver(conn, serde=serde), conn if path == ":memory:" else None


async def _aopen_sqlite(
    path: str, serde: JsonPlusSerializer, stack: contextlib.AsyncExitStack
) -> tuple[BaseCheckpointSaver[Any], sqlite3.Connection | None]:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await stack.enter_async_context(aiosqlite.connect(path, check_same_thread=False))
    # aiosqlite runs its sqlite3 connection on its own thread; ":memory:" lives only in
    # that connection, so the head store shares it (`_conn`: aiosqlite has no public
    # accessor; tests/storage cover it).
    return AsyncSqliteSaver(conn, serde=serde), conn._conn if path == ":memory:" else None


def _open_postgres(
    url: str, serde: JsonPlusSerializer, stack: contextlib.ExitStack
) -> BaseCheckpointSaver[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = stack.enter_context(
        Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    )
    return PostgresSaver(conn, serde=serde)


async def _aopen_postgres(
    url: str, serde: JsonPlusSerializer, stack: contextlib.AsyncExitStack
) -> BaseCheckpointSaver[Any]:
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    from threadlog.checkpoint.backends.postgres_inline import inline_dump_async_postgres_saver

    conn = await stack.enter_async_context(
        await AsyncConnection.connect(
            url, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
    )
    # Small writes dumped on the loop, not in a worker thread (`backends/postgres_inline.py`).
    return inline_dump_async_postgres_saver()(conn, serde=serde)  # type: ignore[no-any-return]


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
