"""`checkpointer(url)` / `acheckpointer(url)`: a ready, guarded, strict saver from a URL.

    with threadlog.checkpointer("sqlite:///threads.db") as saver:
        graph = builder.compile(checkpointer=saver)

`sqlite:///relative.db`, `sqlite:////absolute.db`, `sqlite:///:memory:` → `SqliteSaver` /
`AsyncSqliteSaver`; `postgresql://…`, `postgres://…` → `PostgresSaver` / `AsyncPostgresSaver`
(the `threadlog[postgres]` extra; tables created on first use); `memory://` → `InMemorySaver`;
anything else raises one `ValueError` naming the schemes. Every saver gets
`strict_serializer()`, and by default the run guard and the history cache
(docs/durability.md). The saver and its connections are closed when the block ends.
"""

from __future__ import annotations

import contextlib
import inspect
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadlog._upstream import averify_hooks, verify_hooks
from threadlog.checkpoint.backends import HeadStore, backend_of, lock_bound, release_lock, take_lock
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


@dataclass(frozen=True, kw_only=True)
class _Options:
    """The arguments of `checkpointer` and `acheckpointer`, written once (their doc)."""

    url: str = field(kw_only=False)
    guard: bool = True
    allowed_types: Iterable[tuple[str, str] | type] = ()
    wrap: SaverWrapper | None = None
    max_input_chars: int | None = None
    cache: bool = True
    multitask_strategy: MultitaskStrategy = "enqueue"
    max_lock_connections: int | None = None
    record_calls: bool = True

    def __post_init__(self) -> None:
        lock_bound(self.max_lock_connections, 1)  # a bad value fails here, before anything opens
        object.__setattr__(self, "allowed_types", tuple(self.allowed_types))


def _openers(options: Callable[P, _Options]) -> tuple[
    Callable[P, contextlib.AbstractContextManager[BaseCheckpointSaver[Any]]],
    Callable[P, contextlib.AbstractAsyncContextManager[BaseCheckpointSaver[Any]]],
]:
    # Both take the parameters of `options`, checked when called, as a signature's are.

    def checkpointer(
        *args: P.args, **kwargs: P.kwargs
    ) -> contextlib.AbstractContextManager[BaseCheckpointSaver[Any]]:
        """A sync saver for `url` (see module doc), closed when the block ends.

        Args:
            url: `sqlite:///path.db`, `postgresql://...` (the `postgres` extra) or
                `memory://`.
            guard: wrap the saver in the run guard (no silent forks, input checked first).
            allowed_types: extra `(module, class)` pairs or classes the strict serializer
                may rebuild, beyond what `threadlog.allow_state_types(graph)` allows.
            wrap: a function applied to the backend saver (your own wrapper); threadlog's
                layers sit above what it returns.
            max_input_chars: refuse a turn's input message longer than this.
            cache: keep the warm-process history cache on (a turn reads only new writes).
            multitask_strategy: what a run does while another run holds its thread:
                `"enqueue"` waits for it, `"reject"` raises `ConcurrentRunError` before
                anything is stored (per thread: `saver.set_multitask_strategy`).
            max_lock_connections: how many connections the run guard's locks may hold
                open (docs/durability.md); None: 2 Postgres sessions, 256 SQLite lock files.
            record_calls: store what every chat-model call of a run sent, with the step
                that made it (`threadlog.checkpoint.calls`; `threadlog inspect --calls`).
        """
        return _opened(options(*args, **kwargs))

    def acheckpointer(
        *args: P.args, **kwargs: P.kwargs
    ) -> contextlib.AbstractAsyncContextManager[BaseCheckpointSaver[Any]]:
        """An async saver for `url` (the arguments of `checkpointer`), closed when the
        block ends."""
        return _aopened(options(*args, **kwargs))

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
def _opened(options: _Options) -> Iterator[BaseCheckpointSaver[Any]]:
    with contextlib.ExitStack() as stack:
        yield run(_build(options, stack))


@contextlib.asynccontextmanager
async def _aopened(options: _Options) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    async with contextlib.AsyncExitStack() as stack:
        yield await arun(_build(options, stack))


checkpointer, acheckpointer = _openers(_Options)


def _build(options: _Options, stack: Any) -> Flow[BaseCheckpointSaver[Any]]:
    """Open the backend, its head store, the schema once per process, then the layers."""
    target = parse_url(options.url)
    serde = strict_serializer(options.allowed_types)
    if options.guard:
        # Once per process: UpstreamChangedError on a LangGraph whose entry points the
        # guard's hook no longer sees (`_upstream.verify_hooks`), never an unguarded run.
        yield Io(verify_hooks, averify_hooks)
    saver: BaseCheckpointSaver[Any]
    if target.kind == "memory":
        saver = InMemorySaver(serde=serde)
    else:
        if target.kind == "postgres":
            _require_postgres()
        opener, aopener = _OPENERS[target.kind]
        saver = yield Io(opener, aopener, (target.location, serde, stack))
    store = backend_of(saver).head_store(target.location, options.max_lock_connections)
    stack.callback(store.close)
    if target.kind == "sqlite":
        yield _setup(saver)  # CREATE TABLE IF NOT EXISTS; SQLite serializes it
    elif target.kind == "postgres" and target.location not in _SET_UP:
        # Under an advisory lock: workers starting together do not race on CREATE TABLE.
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
    """The one place a ready saver gets its layers, outermost first: the run guard (the
    `GuardedSaver` wrapper; without it the layers are bound onto the backend object),
    recorded calls, re-sent messages, stopped work, checksums, own writes, the history
    cache; then the user's `wrap`, then the backend. A `wrap` that gave a history cache
    keeps it."""
    inner = options.wrap(saver) if options.wrap is not None else saver
    history: HistoryCache | None = None
    cached: list[Layer] = []
    if options.cache:
        given = history_cache_of(inner)  # (a HistoryCache is falsy while empty)
        history = given if given is not None else HistoryCache()
        own = OwnWritesLayer()
        resent = ResentLayer(history, own.record)
        cached = [own, HistoryLayer(history, own.record)]
    else:
        # Reads only: a thread stored with the cache on must read back whole without it.
        resent = ResentLayer(HistoryCache(), None)
    calls: list[Layer] = [CallsLayer()] if options.record_calls else []
    layers = [*calls, resent, StoppedWorkLayer(), ChecksumLayer(history), *cached]
    if not options.guard:
        return bind_layers(inner, layers)
    check, strategy = InputCheck(max_chars=options.max_input_chars), options.multitask_strategy
    return GuardedSaver(inner, store, check, multitask_strategy=strategy, layers=layers)


def _setup(saver: BaseCheckpointSaver[Any]) -> Io:
    # LangGraph's async savers name their coroutine `setup` too.
    return Io(saver.setup, saver.setup)  # type: ignore[attr-defined]


def _open_sqlite(
    path: str, serde: JsonPlusSerializer, stack: contextlib.ExitStack
) -> BaseCheckpointSaver[Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    # LangGraph writes from its background threads; other processes may hold the file.
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    stack.callback(conn.close)
    return SqliteSaver(conn, serde=serde)


async def _aopen_sqlite(
    path: str, serde: JsonPlusSerializer, stack: contextlib.AsyncExitStack
) -> BaseCheckpointSaver[Any]:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await stack.enter_async_context(aiosqlite.connect(path, check_same_thread=False))
    return AsyncSqliteSaver(conn, serde=serde)


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


_OPENERS = {"sqlite": (_open_sqlite, _aopen_sqlite), "postgres": (_open_postgres, _aopen_postgres)}
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
