"""What threadlog asks of a checkpointer's storage: the `Backend` and `HeadStore` protocols.

`Backend` answers through the saver's public API (`list`, `get_tuple`) or not at all (None);
the backends override what their tables answer in one query. Queries with sync and async
users are written once as sans-IO steps (`Query`), driven by `threadlog.flows`. A lock call
is one attempt; waiting is `take_lock`'s polling with backoff (`time.sleep` / `asyncio.sleep`),
never inside the database or a worker thread; the order waiters get a lock is not promised.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, writes_sort_key

from threadlog.flows import Flow, Io

__all__ = [
    "AsyncSteps",
    "Backend",
    "Dialect",
    "HeadReads",
    "HeadRow",
    "HeadStore",
    "Link",
    "LocalRuns",
    "Plan",
    "Query",
    "Rewrite",
    "Stepped",
    "Steps",
    "StoredWrite",
    "SyncSteps",
    "Walk",
    "lock_bound",
    "one_query",
    "release_lock",
    "take_lock",
    "unwrap",
]

T = TypeVar("T")

StoredWrite = tuple[str, bytes]
"""(serializer type tag, blob) of one stored write."""

HeadRow = tuple[str, str, str, int]
"""(thread_id, newest checkpoint id, first checkpoint id, checkpoints) of one thread."""

Link = tuple[str, str, str | None, str | None]
"""(checkpoint_ns, checkpoint_id, parent id, metadata's run_id) of one stored checkpoint."""

Walk = dict[str, list[PendingWrite]]


class Stepped(list[PendingWrite]):
    """A channel's writes on a chain, oldest checkpoint first, with `states`: for each
    checkpoint on the chain, `(n, checkpoint_id)` — the channel's value at that
    checkpoint is its seed plus the first `n` writes. A plain list to every reader."""

    __slots__ = ("states",)

    def __init__(self, writes: Iterable[PendingWrite] = (), states: Any = ()) -> None:
        super().__init__(writes)
        self.states: list[tuple[int, str]] = list(states)


ERROR_CHANNEL = "__error__"  # the channel a failed task's error is stored in


@dataclass(frozen=True, slots=True)
class Query:
    """One statement: its SQL, its parameters, and how each row is read as it arrives."""

    sql: str
    params: Sequence[Any] = ()
    row: Callable[[Sequence[Any]], Any] | None = None


Steps = Generator[Query, list[Any], T]
"""A step generator: yields queries, is sent each one's parsed rows, returns its answer."""


def parse_rows(query: Query, rows: Any) -> list[Any]:
    return list(rows) if query.row is None else [query.row(r) for r in rows]


def queries(
    steps: Steps[T],
    execute: Callable[[Query], list[Any]] | None = None,
    aexecute: Callable[[Query], Awaitable[list[Any]]] | None = None,
) -> Flow[T]:
    """The query steps as one flow: each query an `Io` of the backend's two executors."""
    rows: Any = None
    while True:
        try:
            query = steps.send(rows)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        rows = yield Io(execute, aexecute, (query,))  # type: ignore[arg-type]


def one_query(query: Query) -> Steps[list[Any]]:
    rows = yield query
    return rows


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One stored checkpoint changed in place (same id): its parent, channel values added
    as stored snapshots (`channel -> (its version, the value to store)`), metadata keys
    set (a None value removes the key)."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    snapshots: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def merged(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """`metadata` with this rewrite's keys set (and its None keys removed)."""
        out = {**metadata, **self.metadata}
        return {k: v for k, v in out.items() if not (k in self.metadata and v is None)}


@dataclass(slots=True)
class Plan:
    """What one lifecycle operation changes (`threadlog.checkpoint.lifecycle`), applied by
    `Backend.maintain` / `amaintain` in ONE transaction, in this order: whole-thread
    copies `(source, target)`, rewrites, dropped checkpoints `(thread, ns, id)` with the
    writes stored on them, dropped threads. A channel value no kept checkpoint names any
    more is dropped with them (the backends that store values apart)."""

    copies: list[tuple[str, str]] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    drops: list[tuple[str, str, str]] = field(default_factory=list)
    drop_threads: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.copies or self.rewrites or self.drops or self.drop_threads)

    def drops_by_namespace(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = {}
        for tid, ns, cid in self.drops:
            out.setdefault((tid, ns), []).append(cid)
        return out


class HeadStore(Protocol):
    """What the guard needs to know about a thread, read under its lock, on a connection
    of its own; the stores read LangGraph's tables, never write. Every lock dies with its
    holder (a file descriptor or a database session), so a SIGKILLed worker never blocks
    a thread. Lock calls are one attempt each (take them with `take_lock`): True, taken;
    False, another holder has it; None (run locks only), nothing to lock with is free in
    this process right now — try again (the thread is not busy)."""

    def try_lock(self, thread_id: str) -> bool | None: ...

    def unlock(self, thread_id: str) -> None: ...

    def try_run_lock(self, thread_id: str) -> bool | None: ...

    def run_unlock(self, thread_id: str) -> None: ...

    def head(self, thread_id: str, ns: str) -> str | None: ...

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool: ...

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]: ...

    def write_keys(
        self, thread_id: str, ns: str, checkpoint_id: str
    ) -> frozenset[tuple[str, str]]: ...

    def close(self) -> None: ...


class Dialect(NamedTuple):
    """How SQLite and Postgres name what their shared queries need."""

    p: str  # the parameter placeholder
    writes: str  # the writes table
    value: str  # its value column

    def sql(self, template: str) -> str:
        return template.format(**self._asdict())


class HeadReads:
    """A `HeadStore`'s reads, written once over the `dialect`; `_all` runs one statement."""

    dialect: ClassVar[Dialect]

    def _all(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        raise NotImplementedError

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        return self._all(self.dialect.sql(sql), args)

    def head(self, thread_id: str, ns: str) -> str | None:
        rows = self._read(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = {p} "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ns),
        )
        return str(rows[0][0]) if rows else None

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        rows = self._read(
            "SELECT 1 FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = {p} "
            "AND parent_checkpoint_id = {p} LIMIT 1",
            (thread_id, ns, checkpoint_id),
        )
        return bool(rows)

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        rows = self._read(
            "SELECT idx, type, {value} FROM {writes} WHERE thread_id = {p} "
            "AND checkpoint_ns = {p} AND checkpoint_id = {p} AND task_id = {p}",
            (thread_id, ns, checkpoint_id, task_id),
        )
        return {int(idx): (str(typ), bytes(val)) for idx, typ, val in rows}

    def write_keys(self, thread_id: str, ns: str, checkpoint_id: str) -> frozenset[tuple[str, str]]:
        rows = self._read(
            "SELECT task_id, channel FROM {writes} WHERE thread_id = {p} "
            "AND checkpoint_ns = {p} AND checkpoint_id = {p}",
            (thread_id, ns, checkpoint_id),
        )
        return frozenset((str(t), str(c)) for t, c in rows)


# Seconds between two attempts at a held lock: from 1 ms, doubling, up to 20 ms.
_FIRST_PAUSE, _LAST_PAUSE = 0.001, 0.02


def take_lock(
    try_lock: Callable[[str], bool | None], unlock: Callable[[str], None], name: str, wait: bool
) -> Flow[bool]:
    """Take a lock through its one-attempt call `try_lock(name)`: True once taken; False
    when another holder has it and not `wait`. Under asyncio an attempt runs in a worker
    thread, or as the store's async twin `a<name>` on the loop; a lock taken by an attempt
    whose waiter was cancelled meanwhile is given back (`unlock`)."""
    pause = _FIRST_PAUSE
    atry, aunlock = _async_twin(try_lock), _async_twin(unlock)
    if atry is not None and aunlock is not None:
        attempt = functools.partial(_attempt, atry, functools.partial(_undo_on_loop, aunlock))
    else:
        start = functools.partial(_in_thread, try_lock)
        attempt = functools.partial(_attempt, start, functools.partial(_undo_in_thread, unlock))
    while True:
        got = yield Io(try_lock, attempt, (name,))
        if got:
            return True
        if got is False and not wait:
            return False
        yield Io(time.sleep, asyncio.sleep, (pause,))
        pause = min(pause * 2, _LAST_PAUSE)


def release_lock(unlock: Callable[[str], None], name: str) -> Io:
    """Give a lock back; under asyncio shielded from cancellation (a lock left taken would
    block its thread for good), awaited on the loop when `unlock` has an async twin."""
    aunlock = _async_twin(unlock)
    if aunlock is not None:
        return Io(unlock, functools.partial(_ashielded, aunlock), (name,))
    return Io(unlock, functools.partial(_shielded, unlock), (name,))


def _async_twin(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]] | None:
    owner, name = getattr(fn, "__self__", None), getattr(fn, "__name__", None)
    if owner is None or name is None:
        return None
    twin = getattr(owner, "a" + name, None)
    return twin if callable(twin) else None


# A lock attempt: start it; undo what it took for a cancelled waiter (on the loop, no wait).
_Start = Callable[[str], Awaitable[bool | None]]
_Undo = Callable[[asyncio.AbstractEventLoop, str], None]


async def _in_thread(try_lock: Callable[[str], bool | None], name: str) -> bool | None:
    return await asyncio.to_thread(try_lock, name)


def _undo_in_thread(
    unlock: Callable[[str], None], loop: asyncio.AbstractEventLoop, name: str
) -> None:
    loop.run_in_executor(None, unlock, name)


_BACKGROUND: set[asyncio.Task[Any]] = set()  # undo tasks, kept until done


def _undo_on_loop(
    aunlock: Callable[[str], Awaitable[None]], loop: asyncio.AbstractEventLoop, name: str
) -> None:
    task = loop.create_task(_ashielded(aunlock, name))
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


async def _attempt(start: _Start, undo: _Undo, name: str) -> bool | None:
    attempt = asyncio.ensure_future(start(name))
    try:
        return await asyncio.shield(attempt)
    except asyncio.CancelledError:
        loop = asyncio.get_running_loop()

        def undone(done: asyncio.Future[bool | None]) -> None:
            if not done.cancelled() and done.exception() is None and done.result():
                undo(loop, name)

        attempt.add_done_callback(undone)
        raise


async def _shielded(fn: Callable[[str], None], name: str) -> None:
    await asyncio.shield(asyncio.to_thread(fn, name))


async def _ashielded(fn: Callable[[str], Awaitable[None]], name: str) -> None:
    await asyncio.shield(fn(name))


def lock_bound(value: int | None, default: int) -> int:
    """`max_lock_connections` checked (None: the backend's `default`)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_lock_connections must be a positive int or None, got {value!r}")
    return value


class LocalRuns:
    """Which threads this process holds a lock on (OS/database locks are per process or
    per session, so they cannot keep two threads of one process apart)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: set[str] = set()

    def acquire(self, thread_id: str) -> bool:
        """Claim `thread_id` (False: already claimed; never waits)."""
        with self._mutex:
            if thread_id in self._held:
                return False
            self._held.add(thread_id)
            return True

    def release(self, thread_id: str) -> None:
        with self._mutex:
            self._held.discard(thread_id)


class Backend:
    """A saver's storage as threadlog reads it; this base reads through the public API of
    `outer` (the saver `backend_of` was given); `saver` is the concrete saver under it."""

    kind: ClassVar[str] = "saver"

    def __init__(self, saver: Any, outer: Any = None) -> None:
        self.saver = saver
        self.outer = saver if outer is None else outer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {type(self.saver).__name__}>"

    # -- the run guard

    def head_store(self, location: str, max_lock_connections: int | None = None) -> HeadStore:
        """The guard's `HeadStore` for this storage (`location`: the SQLite path or the
        Postgres URL the saver was opened from; "" for memory)."""
        raise TypeError(
            f"threadlog keeps no thread heads or run locks for a {type(self.saver).__name__}; "
            "use a SQLite, Postgres or in-memory saver"
        )

    # -- the history cache (None: not answerable by a query here; the saver reads)

    def walk(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str, cached_id: str,
        max_walk: int,
    ) -> Walk | None:
        """The channels' writes on the checkpoints from `cached_id` (its own writes lead to
        its child) up to `target`'s parent, oldest first — or None when `cached_id` is not
        within `max_walk` ancestors of `target`, or a checkpoint after it on the way stores
        a value of one of the channels (a fork's snapshot: the saver reads)."""
        return None

    async def awalk(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str, cached_id: str,
        max_walk: int,
    ) -> Walk | None:
        return None

    def read(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str
    ) -> dict[str, DeltaChannelHistory] | None:
        """The saver's own `get_delta_channel_history` at `target`, read more cheaply; None
        when this backend has no cheaper read (or the target is not stored)."""
        return None

    async def aread(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str
    ) -> dict[str, DeltaChannelHistory] | None:
        return None

    # -- maintenance (threadlog.checkpoint.lifecycle)

    def checkpoint_links(self, thread_id: str) -> list[Link]:
        """Every checkpoint of the thread, all namespaces, as a `Link` (any order)."""
        return [_link(t) for t in self.outer.list({"configurable": {"thread_id": thread_id}})]

    async def acheckpoint_links(self, thread_id: str) -> list[Link]:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        return [_link(t) async for t in self.outer.alist(config)]

    def maintain(self, plan: Plan) -> None:
        """Apply `plan` in one transaction (all of it or nothing)."""
        raise TypeError(
            f"threadlog has no thread maintenance for a {type(self.saver).__name__}; "
            "use a SQLite, Postgres or in-memory saver"
        )

    async def amaintain(self, plan: Plan) -> None:
        self.maintain(plan)

    # -- the inspector

    def thread_heads(self) -> list[HeadRow]:
        """One row per thread of the root namespace (any order)."""
        seen: dict[str, list[Any]] = {}
        for tup in self.outer.list(None):
            conf = tup.config["configurable"]
            if conf.get("checkpoint_ns", ""):
                continue
            tid, cid = str(conf["thread_id"]), str(conf["checkpoint_id"])
            entry = seen.setdefault(tid, [tid, cid, cid, 0])
            entry[1], entry[2], entry[3] = max(entry[1], cid), min(entry[2], cid), entry[3] + 1
        return [(t, h, f, n) for t, h, f, n in seen.values()]

    def head_errors(self, heads: Collection[tuple[str, str]]) -> list[tuple[str, str, Any]]:
        """(thread_id, checkpoint_id, decoded value) of each `__error__` write saved
        against one of `heads` ((thread_id, checkpoint_id) of the root namespace)."""
        found: list[tuple[str, str, Any]] = []
        for tid, cid in heads:
            conf = {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cid}
            tup = self.outer.get_tuple({"configurable": conf})
            for _, channel, value in (tup.pending_writes if tup else None) or ():
                if channel == ERROR_CHANNEL:
                    found.append((tid, cid, value))
        return found

    def checkpoint_ids(self, thread_id: str, ns: str) -> list[str]:
        """The ids of a thread's checkpoints in `ns`, oldest first (no blob decoded)."""
        base: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        return sorted(str(t.config["configurable"]["checkpoint_id"]) for t in self.outer.list(base))

    def namespace_counts(self, thread_id: str) -> list[tuple[str, int, str]]:
        """(namespace, checkpoints, newest id) of each non-root namespace of the thread."""
        seen: dict[str, list[Any]] = {}
        for tup in self.outer.list({"configurable": {"thread_id": thread_id}}):
            conf = tup.config["configurable"]
            ns, cid = str(conf.get("checkpoint_ns") or ""), str(conf["checkpoint_id"])
            if ns:
                entry = seen.setdefault(ns, [ns, 0, cid])
                entry[1], entry[2] = entry[1] + 1, max(entry[2], cid)
        return [(ns, n, h) for ns, n, h in seen.values()]

    def subgraph_counts(self) -> dict[str, int]:
        """`{thread_id: its number of non-root namespaces}` (threads with none absent)."""
        seen: dict[str, set[str]] = {}
        for tup in self.outer.list(None):
            conf = tup.config["configurable"]
            if ns := str(conf.get("checkpoint_ns") or ""):
                seen.setdefault(str(conf["thread_id"]), set()).add(ns)
        return {t: len(nss) for t, nss in seen.items()}

    def stored_bytes(self, thread_id: str, ns: str) -> dict[str, int] | None:
        """`{checkpoint_id: bytes its rows hold}` in `ns`, or None when not measurable."""
        return None


_Steps = Callable[..., Steps[Any]]


class SyncSteps:
    """A SQL backend of a sync saver: its dialect's steps run by the class's `_run` (on the
    saver's connection), and the inspector's listings over the `checkpoints` table, which
    SQLite and Postgres store alike. `AsyncSteps` awaits the same steps."""

    saver: Any
    dialect: ClassVar[Dialect]
    links_sql: ClassVar[str]
    walk_steps: ClassVar[_Steps]
    read_steps: ClassVar[_Steps]

    def _run(self, steps: Steps[Any]) -> Any:
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any] = (), row: Any = None) -> list[Any]:
        return self._run(one_query(Query(self.dialect.sql(sql), params, row)))  # type: ignore[no-any-return]

    def walk(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str, cached_id: str,
        max_walk: int,
    ) -> Walk | None:
        steps = self.walk_steps(self.saver, thread_id, ns, channels, target, cached_id, max_walk)
        return self._run(steps)  # type: ignore[no-any-return]

    def read(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str
    ) -> dict[str, DeltaChannelHistory] | None:
        return self._run(self.read_steps(self.saver, thread_id, ns, channels, target))  # type: ignore[no-any-return]

    def checkpoint_links(self, thread_id: str) -> list[Link]:
        return self._run(one_query(Query(self.links_sql, (thread_id,), link_row)))  # type: ignore[no-any-return]

    def thread_heads(self) -> list[HeadRow]:
        return [
            (str(t), str(h), str(f), int(n))
            for t, h, f, n in self._rows(
                "SELECT thread_id, max(checkpoint_id), min(checkpoint_id), count(*) "
                "FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id"
            )
        ]

    def head_errors(self, heads: Collection[tuple[str, str]]) -> list[tuple[str, str, Any]]:
        wanted, serde = set(heads), self.saver.serde
        found = self._rows(
            "SELECT thread_id, checkpoint_id, type, {value} FROM {writes} "
            "WHERE checkpoint_ns = '' AND channel = {p}",
            (ERROR_CHANNEL,),
            lambda r: (
                (r[0], r[1], serde.loads_typed((r[2], r[3]))) if (r[0], r[1]) in wanted else None
            ),
        )
        return [f for f in found if f is not None]

    def checkpoint_ids(self, thread_id: str, ns: str) -> list[str]:
        rows = self._rows(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = {p}",
            (thread_id, ns),
        )
        return sorted(str(r[0]) for r in rows)

    def namespace_counts(self, thread_id: str) -> list[tuple[str, int, str]]:
        rows = self._rows(
            "SELECT checkpoint_ns, count(*), max(checkpoint_id) FROM checkpoints "
            "WHERE thread_id = {p} AND checkpoint_ns != '' GROUP BY checkpoint_ns",
            (thread_id,),
        )
        return [(str(ns), int(n), str(h)) for ns, n, h in rows]

    def subgraph_counts(self) -> dict[str, int]:
        rows = self._rows(
            "SELECT thread_id, count(DISTINCT checkpoint_ns) FROM checkpoints "
            "WHERE checkpoint_ns != '' GROUP BY thread_id"
        )
        return {str(t): int(n) for t, n in rows}


class AsyncSteps:
    """`SyncSteps`' walk and read for an async saver, awaited by the class's `_arun`."""

    saver: Any
    links_sql: ClassVar[str]
    walk_steps: ClassVar[_Steps]
    read_steps: ClassVar[_Steps]

    async def _arun(self, steps: Steps[Any]) -> Any:
        raise NotImplementedError

    async def awalk(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str, cached_id: str,
        max_walk: int,
    ) -> Walk | None:
        steps = self.walk_steps(self.saver, thread_id, ns, channels, target, cached_id, max_walk)
        return await self._arun(steps)  # type: ignore[no-any-return]

    async def aread(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str
    ) -> dict[str, DeltaChannelHistory] | None:
        return await self._arun(self.read_steps(self.saver, thread_id, ns, channels, target))  # type: ignore[no-any-return]

    async def acheckpoint_links(self, thread_id: str) -> list[Link]:
        return await self._arun(one_query(Query(self.links_sql, (thread_id,), link_row)))  # type: ignore[no-any-return]


def _link(tup: Any) -> Link:
    conf = tup.config["configurable"]
    parent = ((tup.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
    run = (tup.metadata or {}).get("run_id")
    return link_row((conf.get("checkpoint_ns"), conf["checkpoint_id"], parent, run))


def link_row(row: Sequence[Any]) -> Link:
    ns, cid, parent, run = row
    return (
        str(ns or ""),
        str(cid),
        None if parent is None else str(parent),
        None if run is None else str(run),
    )


def unwrap(saver: Any) -> Any:
    """The saver under threadlog's wrappers: each keeps the one it wraps as `.inner`."""
    for _ in range(8):
        inner = vars(saver).get("inner") if hasattr(saver, "__dict__") else None
        if inner is None:
            return saver
        saver = inner
    return saver


def collect_writes(
    channels: Sequence[str],
    chain_by_ch: Mapping[str, Sequence[str]],
    rows: Iterable[tuple[str, str, str, int, str, Any]],
) -> Walk:
    """Each channel's writes on its chain (newest checkpoint first), oldest checkpoint
    first and in `writes_sort_key` order within one — the order of the savers' own
    delta history. `rows`: (checkpoint_id, channel, task_id, idx, task_path, value)."""
    by_cid: dict[tuple[str, str], list[tuple[str, str, int, str, Any]]] = {}
    for cid, ch, task_id, idx, task_path, value in rows:
        by_cid.setdefault((ch, cid), []).append((ch, task_id, idx, task_path or "", value))
    out: Walk = {}
    for ch in channels:
        collected = Stepped()
        for cid in reversed(chain_by_ch.get(ch, ())):
            collected.states.append((len(collected), cid))
            found = by_cid.get((ch, cid), [])
            found.sort(key=lambda w: writes_sort_key(w[3], w[1], w[2]))
            collected.extend((task_id, ch, value) for _, task_id, _, _, value in found)
        out[ch] = collected
    return out


def attribute_blobs(
    out: dict[str, int],
    checkpoints: Iterable[tuple[str, Mapping[str, Any]]],
    blobs: Mapping[tuple[str, str], int],
) -> None:
    """Add each channel blob's size to the first checkpoint (oldest first) whose channel
    versions name it: where that value was stored (memory and Postgres keep them apart)."""
    counted: set[tuple[str, str]] = set()
    for cid, versions in checkpoints:
        for ch, ver in versions.items():
            key = (ch, str(ver))
            if key in blobs and key not in counted:
                counted.add(key)
                out[cid] = out.get(cid, 0) + int(blobs[key])


def histories(by_ch: Walk, seeds: Mapping[str, Any]) -> dict[str, DeltaChannelHistory]:
    """Each channel's delta history: its writes, and its seed when it has one."""
    return {
        ch: {"writes": w, "seed": seeds[ch]} if ch in seeds else {"writes": w}
        for ch, w in by_ch.items()
    }


def add_sizes(out: dict[str, int], rows: Iterable[Sequence[Any]]) -> None:
    for cid, size in rows:
        if cid is not None:
            out[str(cid)] = out.get(str(cid), 0) + int(size or 0)
