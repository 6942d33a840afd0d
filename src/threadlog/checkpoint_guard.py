"""The per-thread run guard: a saver wrapper that refuses to fork a thread by accident.

Contract. For every write to a thread's root namespace the guard holds a per-thread
lock that spans processes (a Postgres advisory lock, an `flock` on a file next to a
SQLite database, a `threading.Lock` in memory), reads the thread's current state and
only then lets the wrapped saver write:

* **`put`** (a new checkpoint) is accepted when its parent is the thread's *head* (its
  newest checkpoint; `None` for a new thread), or when LangGraph marks it as a
  deliberate fork (metadata `source` is `"update"` — `update_state` — or `"fork"`).
  Otherwise another run moved the thread on after this run read it: the write is
  refused with `ConcurrentRunError` and nothing is stored.
* **`put_writes`** (a task's results, stored on the checkpoint the task ran from) is
  refused when another run already stored a *different* result for the same task and
  slot, or when the checkpoint already has a child stored by another saver (another
  worker) and the writes are new: children replay all of their parent's writes, so a
  late write would leak into another run's history. (A run's own writes may land after
  its own next checkpoint — LangGraph saves both concurrently — and are accepted.)
  Writes identical to stored ones are replays and pass. LangGraph's own upsert
  channels (`__error__`, `__interrupt__`, `__resume__`, `__scheduled__`) are
  not compared: they are meant to be replaced.
* **A turn's input** (the `source="input"` checkpoint and the `__start__` task's
  writes) is first dry-run against the stored log (`threadlog.checkpoint_input`): bad
  input raises the log's own error and nothing is stored.

So two workers on one thread give one linear history: the first to store a step wins,
the other gets `ConcurrentRunError` (before it stores anything of the step) and may
retry from the new head. The write check works step by step, so a run that starts
while another is between two steps may still move the thread on first (the earlier run
then gets the error; its stored input stays in the log, unanswered until the next
turn). To keep whole turns apart, hold the thread for the run:
`with saver.exclusive(thread_id): graph.invoke(...)` — a second holder gets
`ConcurrentRunError` before anything is stored (or waits, with `wait=True`).

All locks die with their holder (a database session or a file descriptor), so a
SIGKILLed worker never blocks the thread. Subgraph namespaces are not guarded (their
parent's checkpoints are).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import START

from threadlog.checkpoint_input import InputCheck

__all__ = [
    "ConcurrentRunError",
    "GuardedSaver",
    "MemoryHeadStore",
    "PostgresHeadStore",
    "SqliteHeadStore",
]

_FORK_SOURCES = frozenset({"update", "fork"})


class ConcurrentRunError(RuntimeError):
    """Another run wrote to this thread first; retry from the thread's new head."""

    def __init__(
        self,
        problem: str,
        *,
        thread_id: str,
        checkpoint_id: str | None = None,
        head: str | None = None,
    ) -> None:
        self.problem = problem
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.head = head
        super().__init__(
            f"thread {thread_id!r}: {problem}. Another run wrote to this thread first; "
            "nothing of this step was stored — retry the call (it starts from the new "
            "head), or fork on purpose with graph.update_state(<old config>, ...)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments do not survive the default pickling, and this error
        # crosses process boundaries (worker pools, langgraph dev).
        return (
            _rebuild,
            (self.problem, self.thread_id, self.checkpoint_id, self.head),
        )


def _rebuild(
    problem: str, thread_id: str, checkpoint_id: str | None, head: str | None
) -> ConcurrentRunError:
    return ConcurrentRunError(
        problem, thread_id=thread_id, checkpoint_id=checkpoint_id, head=head
    )


StoredWrite = tuple[str, bytes]
"""(serializer type tag, blob) of one stored write."""


class HeadStore(Protocol):
    """What the guard needs to know about a thread, read under its lock."""

    def lock(self, thread_id: str) -> contextlib.AbstractContextManager[None]: ...

    def try_run_lock(self, thread_id: str, wait: bool) -> bool: ...

    def run_unlock(self, thread_id: str) -> None: ...

    def head(self, thread_id: str, ns: str) -> str | None: ...

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool: ...

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]: ...

    def close(self) -> None: ...


class GuardedSaver(BaseCheckpointSaver[Any]):
    """Wraps a saver; refuses writes that would silently fork a thread (see module doc)."""

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        store: HeadStore,
        input_check: InputCheck | None = None,
        _own_parents: _Recent | None = None,
    ) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.store = store
        self.input_check = input_check
        # Checkpoints this saver stored a child of. LangGraph saves a step's task
        # writes and the next checkpoint concurrently ("async" durability), so a
        # run's own writes may land after its own child: those are not strays.
        self.own_parents = _own_parents or _Recent()

    # -- whole-run lock ---------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self, thread_id: str, *, wait: bool = False) -> Iterator[None]:
        """Hold the thread for a whole run: `with saver.exclusive(tid): graph.invoke(...)`.

        Another holder — in this process or any other using the same database — makes
        this raise `ConcurrentRunError` at once (`wait=False`) before anything is
        stored, or wait its turn (`wait=True`). The lock dies with its process.
        """
        tid = str(thread_id)
        if not self.store.try_run_lock(tid, wait):
            raise ConcurrentRunError(
                "another run holds this thread (saver.exclusive)", thread_id=tid
            )
        try:
            yield
        finally:
            self.store.run_unlock(tid)

    # -- reads and everything else: the wrapped saver ---------------------------

    @property
    def config_specs(self) -> list[Any]:
        return self.inner.config_specs

    def __getattr__(self, name: str) -> Any:
        # setup(), conn, … of the concrete saver stay reachable. ("inner" itself is
        # missing only mid-construction or mid-copy: no recursion then.)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.inner.aget_tuple(config)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, **kwargs)

    async def alist(
        self, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self.inner.alist(config, **kwargs):
            yield item

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Any:
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Any:
        return await self.inner.aget_delta_channel_history(config=config, channels=channels)

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        return self.inner.get_next_version(current, channel)

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.inner.adelete_thread(thread_id)

    # Maintenance calls rewrite or drop whole threads; they are the operator's, not a
    # run's, so they go straight to the wrapped saver.
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.inner.delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.inner.adelete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.inner.copy_thread(source_thread_id, target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.inner.acopy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], **kwargs: Any) -> None:
        self.inner.prune(thread_ids, **kwargs)

    async def aprune(self, thread_ids: Sequence[str], **kwargs: Any) -> None:
        await self.inner.aprune(thread_ids, **kwargs)

    def with_allowlist(self, extra_allowlist: Any) -> GuardedSaver:
        inner = self.inner.with_allowlist(extra_allowlist)
        if inner is self.inner:
            return self
        return GuardedSaver(inner, self.store, self.input_check, self.own_parents)

    # -- guarded writes ---------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        key = _guarded_key(config)
        if key is None:
            return self.inner.put(config, checkpoint, metadata, new_versions)
        self._check_input(config, checkpoint, metadata)
        with self.store.lock(key[0]):
            self._check_put(key, config, metadata)
            out = self.inner.put(config, checkpoint, metadata, new_versions)
        self.own_parents.add(config["configurable"].get("checkpoint_id"))
        return out

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        key = _guarded_key(config)
        if key is None:
            return await self.inner.aput(config, checkpoint, metadata, new_versions)
        await self._acheck_input(config, checkpoint, metadata)
        async with _alock(self.store, key[0]):
            await _in_thread(self._check_put, key, config, metadata)
            out = await self.inner.aput(config, checkpoint, metadata, new_versions)
        self.own_parents.add(config["configurable"].get("checkpoint_id"))
        return out

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        key = _guarded_key(config)
        if key is None:
            return self.inner.put_writes(config, writes, task_id, task_path)
        self._check_start_writes(config, writes, task_path)
        with self.store.lock(key[0]):
            self._check_writes(key, config, writes, task_id)
            return self.inner.put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        key = _guarded_key(config)
        if key is None:
            return await self.inner.aput_writes(config, writes, task_id, task_path)
        await self._acheck_start_writes(config, writes, task_path)
        async with _alock(self.store, key[0]):
            await _in_thread(self._check_writes, key, config, writes, task_id)
            return await self.inner.aput_writes(config, writes, task_id, task_path)

    def _input_values(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> tuple[RunnableConfig | None, dict[str, Any]]:
        if self.input_check is None or metadata.get("source") != "input":
            return None, {}
        parent = config if config["configurable"].get("checkpoint_id") else None
        start = checkpoint["channel_values"].get(START)
        return parent, self.input_check.from_input_checkpoint(start)

    def _start_values(
        self, writes: Sequence[tuple[str, Any]], task_path: str
    ) -> dict[str, Any]:
        # task_path of a root pull task is "~__pregel_pull, <node>".
        if self.input_check is None or task_path.rsplit(", ", 1)[-1] != START:
            return {}
        return self.input_check.from_start_writes(writes)

    def _check_input(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> None:
        at, values = self._input_values(config, checkpoint, metadata)
        if values and self.input_check is not None:
            self.input_check.check(self.inner, at, values)

    async def _acheck_input(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> None:
        at, values = self._input_values(config, checkpoint, metadata)
        if values and self.input_check is not None:
            await self.input_check.acheck(self.inner, at, values)

    def _check_start_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_path: str
    ) -> None:
        values = self._start_values(writes, task_path)
        if values and self.input_check is not None:
            self.input_check.check(self.inner, config, values)

    async def _acheck_start_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_path: str
    ) -> None:
        values = self._start_values(writes, task_path)
        if values and self.input_check is not None:
            await self.input_check.acheck(self.inner, config, values)

    def _check_put(
        self, key: tuple[str, str], config: RunnableConfig, metadata: CheckpointMetadata
    ) -> None:
        thread_id, ns = key
        parent = config["configurable"].get("checkpoint_id")
        head = self.store.head(thread_id, ns)
        if head == parent or metadata.get("source") in _FORK_SOURCES:
            return
        raise ConcurrentRunError(
            f"this run started from checkpoint {parent!r} but the thread's head is now "
            f"{head!r} (if you addressed that older checkpoint on purpose, branch from it "
            "with graph.update_state(<its config>, ...) and invoke the config it returns)",
            thread_id=thread_id,
            checkpoint_id=parent,
            head=head,
        )

    def _check_writes(
        self,
        key: tuple[str, str],
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
    ) -> None:
        thread_id, ns = key
        cid = config["configurable"]["checkpoint_id"]
        stored = self.store.writes(thread_id, ns, cid, task_id)
        new = False
        for i, (channel, value) in enumerate(writes):
            if channel in WRITES_IDX_MAP:
                continue  # LangGraph's upsert channels: replacing them is the design
            old = stored.get(i)
            if old is None:
                new = True
                continue
            if _same(self.serde.dumps_typed(value), old):
                continue
            raise ConcurrentRunError(
                f"task {task_id!r} at checkpoint {cid!r} already has a different "
                f"{channel!r} result, written by another run",
                thread_id=thread_id,
                checkpoint_id=cid,
                head=self.store.head(thread_id, ns),
            )
        if new and cid not in self.own_parents and self.store.has_child(thread_id, ns, cid):
            raise ConcurrentRunError(
                f"checkpoint {cid!r} already has a newer checkpoint after it, so new "
                f"writes of task {task_id!r} there would leak into another run's history",
                thread_id=thread_id,
                checkpoint_id=cid,
                head=self.store.head(thread_id, ns),
            )


class _Recent:
    """A bounded set of recent checkpoint ids (oldest forgotten first)."""

    def __init__(self, size: int = 4096) -> None:
        self._ids: dict[str, None] = {}
        self._size = size
        self._lock = threading.Lock()

    def add(self, checkpoint_id: str | None) -> None:
        if checkpoint_id is None:
            return
        with self._lock:
            self._ids[checkpoint_id] = None
            while len(self._ids) > self._size:
                del self._ids[next(iter(self._ids))]

    def __contains__(self, checkpoint_id: object) -> bool:
        return checkpoint_id in self._ids


def _same(new: tuple[str, bytes], old: StoredWrite) -> bool:
    return new[0] == old[0] and bytes(new[1]) == bytes(old[1])


def _guarded_key(config: RunnableConfig) -> tuple[str, str] | None:
    conf = config.get("configurable") or {}
    ns = conf.get("checkpoint_ns") or ""
    thread_id = conf.get("thread_id")
    if ns or thread_id is None:
        return None  # subgraph checkpoints ride on their parent's, which are guarded
    return str(thread_id), ns


async def _in_thread(fn: Any, *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


_GATES: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def _alock(store: HeadStore, thread_id: str) -> AsyncIterator[None]:
    # The locks are blocking (file locks, a psycopg session lock), so they are taken in
    # a worker thread. An asyncio gate per event loop lets only one coroutine at a
    # time park a thread on them: parked threads could otherwise use up the default
    # executor that the lock holder (and LangGraph's sync nodes) need to go on.
    loop = asyncio.get_running_loop()
    gate = _GATES.get(loop)
    if gate is None:
        gate = _GATES[loop] = asyncio.Lock()
    async with gate:
        cm = store.lock(thread_id)
        await asyncio.to_thread(cm.__enter__)
        try:
            yield
        finally:
            await asyncio.to_thread(cm.__exit__, None, None, None)


# -- head stores ---------------------------------------------------------------


class _LocalRuns:
    """Which threads this process holds a run lock on (OS/database locks are per
    process or per session, so they cannot keep two threads of one process apart)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: set[str] = set()

    def acquire(self, thread_id: str, wait: bool) -> bool:
        with self._cond:
            while thread_id in self._held:
                if not wait:
                    return False
                self._cond.wait()
            self._held.add(thread_id)
            return True

    def release(self, thread_id: str) -> None:
        with self._cond:
            self._held.discard(thread_id)
            self._cond.notify_all()


class MemoryHeadStore:
    """Reads an `InMemorySaver`'s dicts; one process, so a thread lock is the mutex."""

    def __init__(self, saver: InMemorySaver) -> None:
        self.saver = saver
        self._lock = threading.Lock()
        self._runs = _LocalRuns()

    def try_run_lock(self, thread_id: str, wait: bool) -> bool:
        return self._runs.acquire(thread_id, wait)

    def run_unlock(self, thread_id: str) -> None:
        self._runs.release(thread_id)

    @contextlib.contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        with self._lock:
            yield

    def head(self, thread_id: str, ns: str) -> str | None:
        ids = self.saver.storage.get(thread_id, {}).get(ns, {})
        return max(ids) if ids else None

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        saved = self.saver.storage.get(thread_id, {}).get(ns, {})
        return any(entry[2] == checkpoint_id for entry in saved.values())

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        stored = self.saver.writes.get((thread_id, ns, checkpoint_id), {})
        return {idx: w[2] for (tid, idx), w in stored.items() if tid == task_id}

    def close(self) -> None:
        pass


class SqliteHeadStore:
    """Reads a SQLite checkpoint file through its own connection; `flock` across processes."""

    def __init__(self, path: str, conn: sqlite3.Connection | None = None) -> None:
        self.path = path
        self._thread_lock = threading.Lock()
        # ":memory:" is private to one connection, so that one is shared (`conn`).
        self._own = conn is None
        self._conn = conn or sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._lock_fd: int | None = None
        if path != ":memory:":
            self._lock_fd = os.open(path + ".threadlog-lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._runs = _LocalRuns()
        self._run_fds: dict[str, int] = {}

    def try_run_lock(self, thread_id: str, wait: bool) -> bool:
        if not self._runs.acquire(thread_id, wait):
            return False
        if self._lock_fd is None:
            return True
        # One lock file per thread in a directory next to the database.
        folder = self.path + ".threadlog-runs"
        os.makedirs(folder, exist_ok=True)
        name = hashlib.blake2b(thread_id.encode(), digest_size=12).hexdigest()
        fd = os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self._runs.release(thread_id)
            return False
        self._run_fds[thread_id] = fd
        return True

    def run_unlock(self, thread_id: str) -> None:
        fd = self._run_fds.pop(thread_id, None)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._runs.release(thread_id)

    @contextlib.contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        # One lock for the whole file: SQLite serializes writers anyway, and a
        # byte-range lock per thread would buy nothing but complexity.
        with self._thread_lock:
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if self._lock_fd is not None:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _one(self, sql: str, args: tuple[Any, ...]) -> Any:
        try:
            row = self._conn.execute(sql, args).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None  # nothing stored yet
            raise
        return row

    def head(self, thread_id: str, ns: str) -> str | None:
        row = self._one(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ns),
        )
        return None if row is None else str(row[0])

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        row = self._one(
            "SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND parent_checkpoint_id = ? LIMIT 1",
            (thread_id, ns, checkpoint_id),
        )
        return row is not None

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        try:
            rows = self._conn.execute(
                "SELECT idx, type, value FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id = ? AND task_id = ?",
                (thread_id, ns, checkpoint_id, task_id),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
        return {int(idx): (str(typ), bytes(val)) for idx, typ, val in rows}

    def close(self) -> None:
        if self._own:
            self._conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


class PostgresHeadStore:
    """Reads through its own connection; a session advisory lock per thread.

    The lock lives on this store's connection, so it is released by Postgres itself
    when the holder's process dies.
    """

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.Connection.connect(url, autocommit=True, prepare_threshold=0)
        self._thread_lock = threading.Lock()
        self._url = url
        self._runs = _LocalRuns()
        self._run_conns: dict[str, Any] = {}

    def try_run_lock(self, thread_id: str, wait: bool) -> bool:
        import psycopg

        if not self._runs.acquire(thread_id, wait):
            return False
        # A connection per held run lock: a blocking wait must not hold up the
        # write-guard queries of this process's other runs.
        conn = psycopg.Connection.connect(self._url, autocommit=True, prepare_threshold=0)
        key = self.lock_key("run:" + thread_id)
        if wait:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        else:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not (row and row[0]):
                conn.close()
                self._runs.release(thread_id)
                return False
        self._run_conns[thread_id] = conn
        return True

    def run_unlock(self, thread_id: str) -> None:
        conn = self._run_conns.pop(thread_id, None)
        if conn is not None:
            conn.close()  # closing the session releases its advisory locks
        self._runs.release(thread_id)

    @staticmethod
    def lock_key(thread_id: str) -> int:
        # A stable signed 64-bit key; "threadlog:" keeps us off other apps' lock keys.
        digest = hashlib.blake2b(f"threadlog:{thread_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    @contextlib.contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        key = self.lock_key(thread_id)
        with self._thread_lock:
            self._conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                yield
            finally:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def head(self, thread_id: str, ns: str) -> str | None:
        row = self._conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ns),
        ).fetchone()
        return None if row is None else str(row[0])

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND parent_checkpoint_id = %s LIMIT 1",
            (thread_id, ns, checkpoint_id),
        ).fetchone()
        return row is not None

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        rows = self._conn.execute(
            "SELECT idx, type, blob FROM checkpoint_writes WHERE thread_id = %s "
            "AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s",
            (thread_id, ns, checkpoint_id, task_id),
        ).fetchall()
        return {int(idx): (str(typ), bytes(blob)) for idx, typ, blob in rows}

    def close(self) -> None:
        self._conn.close()
