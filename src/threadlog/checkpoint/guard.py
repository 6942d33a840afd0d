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
* **New input** (a `source="input"` checkpoint) is also refused when another run stored
  task results on its parent after this saver read that parent: LangGraph drops a
  head's unfinished tasks' writes from the new run's state, but readers replay every
  write stored there, so the stored branch would differ from what the run holds.
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
  writes) is first dry-run against the stored log (`threadlog.checkpoint.input_check`): bad
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
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.constants import START

from threadlog.checkpoint.heads import (
    HeadStore,
    StoredWrite,
)
from threadlog.checkpoint.input_check import InputCheck
from threadlog.errors import ConcurrentRunError

__all__ = ["ConcurrentRunError", "GuardedSaver"]

_FORK_SOURCES = frozenset({"update", "fork"})


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
        # The task writes this saver saw on each checkpoint it read, and the ones it
        # wrote itself: new input on a checkpoint discards its unfinished tasks' writes
        # in memory, but readers replay every write stored there, so another run's
        # result landing in between would make the stored branch differ from this run's.
        self._seen_writes: dict[str, frozenset[tuple[str, str]]] = {}
        self._own_writes: dict[str, set[tuple[str, str]]] = {}
        self.__class__ = _with_maintenance(type(self), type(inner))

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
        return self._remember(self.inner.get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._remember(await self.inner.aget_tuple(config))

    def _remember(self, tup: CheckpointTuple | None) -> CheckpointTuple | None:
        if tup is not None and _guarded_key(tup.config) is not None:
            if len(self._seen_writes) > 4096:
                self._seen_writes.pop(next(iter(self._seen_writes)))
            self._seen_writes[tup.config["configurable"]["checkpoint_id"]] = _write_keys(tup)
        return tup

    def _check_unseen_writes(
        self, key: tuple[str, str], parent: str | None, now: CheckpointTuple | None
    ) -> None:
        seen = self._seen_writes.get(parent or "")
        if seen is None or now is None:
            return
        unseen = _write_keys(now) - seen - self._own_writes.get(parent or "", set())
        if unseen:
            raise ConcurrentRunError(
                f"another run stored results on checkpoint {parent!r} after this run read "
                f"it (tasks {sorted(t for t, _ in unseen)}); read the thread again and retry",
                thread_id=key[0],
                checkpoint_id=parent,
                head=self.store.head(*key),
            )

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
            if metadata.get("source") == "input" and config["configurable"].get("checkpoint_id"):
                parent = config["configurable"]["checkpoint_id"]
                self._check_unseen_writes(key, parent, self.inner.get_tuple(config))
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
            if metadata.get("source") == "input" and config["configurable"].get("checkpoint_id"):
                parent = config["configurable"]["checkpoint_id"]
                self._check_unseen_writes(key, parent, await self.inner.aget_tuple(config))
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
            self._note_own(config, writes, task_id)
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
            self._note_own(config, writes, task_id)
            return await self.inner.aput_writes(config, writes, task_id, task_path)

    def _note_own(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str
    ) -> None:
        cid = config["configurable"]["checkpoint_id"]
        if len(self._own_writes) > 4096:
            self._own_writes.pop(next(iter(self._own_writes)))
        self._own_writes.setdefault(cid, set()).update((task_id, c) for c, _ in writes)

    def _input_values(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> tuple[RunnableConfig | None, dict[str, Any]]:
        if self.input_check is None or metadata.get("source") != "input":
            return None, {}
        parent = config if config["configurable"].get("checkpoint_id") else None
        start = checkpoint["channel_values"].get(START)
        return parent, self.input_check.from_input_checkpoint(start)

    def _start_values(self, writes: Sequence[tuple[str, Any]], task_path: str) -> dict[str, Any]:
        # The task_path of a root pull task ends with ", <node name>".
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


def _write_keys(tup: CheckpointTuple) -> frozenset[tuple[str, str]]:
    """(task id, channel) of a checkpoint's task writes, LangGraph's upsert channels aside."""
    return frozenset(
        (task_id, channel)
        for task_id, channel, _ in tup.pending_writes or ()
        if channel not in WRITES_IDX_MAP
    )


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


# Maintenance calls (copy_thread, prune, delete_for_runs) rewrite or drop whole threads;
# they are the operator's, not a run's, so they go straight to the wrapped saver. A guarded
# saver has exactly the ones its wrapped saver has: LangGraph Server and the conformance
# suite detect them by class, and a claimed method that raises NotImplementedError breaks
# thread copy / prune.
_MAINTENANCE = (
    "delete_for_runs",
    "adelete_for_runs",
    "copy_thread",
    "acopy_thread",
    "prune",
    "aprune",
)
_maintained: dict[tuple[type[Any], frozenset[str]], type[Any]] = {}


def _forward(name: str) -> Any:
    if name.startswith("a") and name[1:] in _MAINTENANCE:

        async def forward_async(self: GuardedSaver, *args: Any, **kwargs: Any) -> Any:
            return await getattr(self.inner, name)(*args, **kwargs)

        return forward_async

    def forward(self: GuardedSaver, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, name)(*args, **kwargs)

    return forward


def _with_maintenance(cls: type[Any], inner: type[Any]) -> type[Any]:
    names = frozenset(
        n for n in _MAINTENANCE if getattr(inner, n, None) is not getattr(BaseCheckpointSaver, n)
    )
    if not names:
        return cls
    key = (cls, names)
    sub = _maintained.get(key)
    if sub is None:
        sub = type(cls.__name__, (cls,), {n: _forward(n) for n in sorted(names)})
        sub.__module__ = cls.__module__
        _maintained[key] = sub
    return sub
