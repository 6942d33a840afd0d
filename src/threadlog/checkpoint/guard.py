"""The per-thread run guard: whole turns on a shared thread, and no silent forks.

Contract.

* **Whole turns (`multitask_strategy`).** A run holds its thread, through a per-thread
  lock that spans processes (Postgres advisory lock, `flock` by a SQLite file, a set in
  memory), from its loop's first read until the loop exits. A second run meanwhile
  follows the strategy: `"enqueue"` (default) waits, then reads the thread fresh;
  `"reject"` raises `ConcurrentRunError` before anything is stored. Per saver, per thread
  (`saver.set_multitask_strategy`) or per run (`configurable["multitask_strategy"]`).
  `saver.exclusive(thread_id)` holds the same lock around a block; runs inside it do not
  wait for it. Locks die with their holder and are polled (`take_lock`).
* **`update_state` waits for a running turn** (or is refused, `"reject"`); a node's own
  `update_state` does not wait for its run (a hold lives in the run's context).
* **Writes outside a hold are checked** under a short per-thread lock:
  - `put` must follow the thread's head, unless it is a fork (source `"update"` /
    `"fork"`), the input of a run that named the checkpoint it read, or a direct root
    put (no runtime, no parent);
  - new input is refused when another run stored task results on its parent after this
    run read it;
  - `put_writes` is refused when another run stored a different result for the same
    task, or the checkpoint already has a child and the writes are new. LangGraph's
    upsert channels (`__error__`, `__interrupt__`, …) are not compared.
* **A refused write stores nothing.** A turn's input and `update_state`'s writes are
  dry-run against the stored log first (`threadlog.checkpoint.input_check`).
* **`get_state` always answers**: a stored task write the log refuses reads as that
  task's `__error__` write.

Subgraph namespaces are not guarded (their parent's checkpoints are).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.types import ERROR
from langgraph.constants import START

from threadlog._upstream import (
    CONFIG_KEY_RUNTIME,
    declared_channels,
    in_get_state,
    running_loop,
)
from threadlog.channel import MessageLogChannel
from threadlog.checkpoint import lifecycle
from threadlog.checkpoint.backends import HeadStore, StoredWrite, release_lock, take_lock
from threadlog.checkpoint.call_records import CALLS_CHANNEL
from threadlog.checkpoint.input_check import InputCheck
from threadlog.checkpoint.layered import Layer, LayeredSaver, PutArgs, PutWritesArgs, SaverView
from threadlog.checkpoint.recover import STARTED_CHANNEL
from threadlog.errors import ConcurrentRunError
from threadlog.flows import Flow, Io, arun, call
from threadlog.flows import run as run_flow
from threadlog.log.message_log import is_resent

__all__ = [
    "MULTITASK_STRATEGIES",
    "ConcurrentRunError",
    "GuardLayer",
    "GuardedSaver",
    "MultitaskStrategy",
]

MultitaskStrategy = Literal["enqueue", "reject"]
MULTITASK_STRATEGIES: tuple[str, ...] = get_args(MultitaskStrategy)

_FORK_SOURCES = frozenset({"update", "fork"})
_MARKERS = frozenset({STARTED_CHANNEL, CALLS_CHANNEL})  # no reader rebuilds state from them
_UNREAD: Any = object()  # no head known from the run's own read
_CHECKPOINT_WAIT = 30.0  # seconds a task's writes wait for their checkpoint's put
_STORED_RECHECK = 1.0  # seconds before `stored_flow` first asks the database (doubling)

# Threads this context (and its copies: a run's tasks) holds, so they never wait for themselves.
_HELD: contextvars.ContextVar[dict[str, _Hold]] = contextvars.ContextVar(
    "threadlog_held_threads",
    default={},  # noqa: B039 - never mutated, only replaced
)


@dataclass(slots=True, eq=False)
class _Hold:
    done: bool = False


def _holds(thread_id: str) -> bool:
    hold = _HELD.get().get(thread_id)
    return hold is not None and not hold.done


def _enter_hold(thread_id: str) -> tuple[_Hold, contextvars.Token[dict[str, _Hold]]]:
    hold = _Hold()
    return hold, _HELD.set({**_HELD.get(), thread_id: hold})


def _exit_hold(hold: _Hold, token: contextvars.Token[dict[str, _Hold]]) -> None:
    hold.done = True
    with contextlib.suppress(ValueError):  # ended from another context: `done` suffices
        _HELD.reset(token)


def _store(fn: Callable[..., Any], *args: Any) -> Io:
    """A head-store call: one statement, never a lock wait (a worker thread under asyncio)."""
    return Io(fn, None, args)


def _run_lock(store: HeadStore, thread_id: str, wait: bool) -> Flow[bool]:
    return take_lock(store.try_run_lock, store.run_unlock, thread_id, wait)


_Steps = Flow[Any]


class GuardLayer(Layer):
    """The run guard as the outermost layer: whole turns per thread, checked writes."""

    name = "guard"

    def __init__(
        self,
        store: HeadStore,
        input_check: InputCheck | None = None,
        *,
        serde: Any,
        multitask_strategy: MultitaskStrategy = "enqueue",
    ) -> None:
        self.serde = serde
        self.store = store
        self.input_check = input_check
        self.multitask_strategy: MultitaskStrategy = _strategy(multitask_strategy)
        self._strategies: dict[str, MultitaskStrategy] = {}
        self._threads: dict[str, _Thread] = {}  # oldest first
        self._threads_lock = threading.Lock()
        # Puts under way (a task's writes wait for theirs), and those a waiter expects.
        self._putting: dict[_CpKey, _InFlight] = {}
        self._putting_lock = threading.Lock()
        self._expected: dict[_CpKey, _InFlight] = {}

    def _thread(self, thread_id: str) -> _Thread:
        """A thread's memory; past `_MAX_THREADS` the oldest unheld one is forgotten."""
        found = self._threads.get(thread_id)
        if found is not None:
            return found
        with self._threads_lock:
            found = self._threads.setdefault(thread_id, _Thread())
            if len(self._threads) > _MAX_THREADS:
                for tid, old in self._threads.items():
                    if old.run is None or old.run[1].done:
                        del self._threads[tid]
                        break
        return found

    def _checkpoint(self, key: _CpKey) -> _Checkpoint:
        checkpoints = self._thread(key[0]).checkpoints
        found = checkpoints.get(key[1:])
        if found is None:
            with self._threads_lock:
                found = checkpoints.setdefault(key[1:], _Checkpoint())
                while len(checkpoints) > _MAX_CHECKPOINTS:
                    del checkpoints[next(iter(checkpoints))]
        return found

    def _known(self, key: _CpKey) -> _Checkpoint | None:
        thread = self._threads.get(key[0])
        return None if thread is None else thread.checkpoints.get(key[1:])

    def set_multitask_strategy(self, thread_id: str, strategy: MultitaskStrategy | None) -> None:
        """What a run does when another run holds `thread_id` (None: the saver's default)."""
        if strategy is None:
            self._strategies.pop(str(thread_id), None)
        else:
            self._strategies[str(thread_id)] = _strategy(strategy)

    def strategy_for(self, config: RunnableConfig) -> MultitaskStrategy:
        conf = config.get("configurable") or {}
        chosen = conf.get("multitask_strategy")
        if chosen is not None:
            return _strategy(chosen)
        return self._strategies.get(str(conf.get("thread_id")), self.multitask_strategy)

    @contextlib.contextmanager
    def exclusive(self, thread_id: str, *, wait: bool = False) -> Iterator[None]:
        """Hold the thread around a block: `with saver.exclusive(tid): graph.invoke(...)`;
        another holder (in any process) raises `ConcurrentRunError`, or is waited for."""
        tid = str(thread_id)
        if not run_flow(_run_lock(self.store, tid, wait)):
            raise ConcurrentRunError(
                "another run holds this thread (saver.exclusive)", thread_id=tid
            )
        hold, token = _enter_hold(tid)
        try:
            yield
        finally:
            _exit_hold(hold, token)
            self.store.run_unlock(tid)

    def maintenance_hold(self, thread_id: str) -> Flow[bool]:
        """Hold a thread for a lifecycle call, per its strategy; False: already held here."""
        tid = str(thread_id)
        strategy = self._strategies.get(tid, self.multitask_strategy)
        what = "the maintenance call changed nothing"
        return (yield from self._take_hold(tid, strategy, "a run", what))

    def _take_hold(self, tid: str, strategy: MultitaskStrategy, who: str, what: str) -> Flow[bool]:
        """Take the run lock as `strategy` says; False: this context holds it already."""
        if _holds(tid):
            return False
        if not (yield from _run_lock(self.store, tid, strategy == "enqueue")):
            raise ConcurrentRunError(
                f"{who} is working on this thread (multitask_strategy='reject'); {what}",
                thread_id=tid,
            )
        return True

    def maintenance_release(self, thread_id: str) -> Io:
        return release_lock(self.store.run_unlock, str(thread_id))

    def _held_by_run(self, thread_id: str, config: RunnableConfig) -> bool:
        if _holds(thread_id):
            return True
        thread = self._threads.get(thread_id)
        run = None if thread is None else thread.run
        runtime = config["configurable"].get(CONFIG_KEY_RUNTIME)
        return run is not None and runtime is not None and run[0] is runtime and not run[1].done

    def _hold_for_run(self, config: RunnableConfig, loop: Any) -> _Steps:
        tid = str(config["configurable"]["thread_id"])
        strategy = self.strategy_for(config)
        what = "nothing of this run was stored"
        if not (yield from self._take_hold(tid, strategy, "another run", what)):
            return False  # this run's own second read, or a nested run
        release = _Release(self.store, tid)
        # The run's context does not always reach its task threads; its Runtime does.
        entry = (config["configurable"].get(CONFIG_KEY_RUNTIME), release._hold)
        thread = self._thread(tid)
        thread.run = entry

        def forget(*_: Any) -> None:
            # Runs before the release (LIFO): no next run has registered yet.
            if thread.run is entry:
                thread.run = None

        if isinstance(loop.stack, contextlib.AsyncExitStack):
            loop.stack.push_async_callback(release.aclose)
        else:
            loop.stack.callback(release)
        loop.stack.callback(forget)
        # A loop whose __enter__ failed after this read never unwinds: release on collection.
        weakref.finalize(loop.loop, release)
        return True

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> _Steps:
        guarded = _guarded_key(config) is not None
        loop = running_loop() if guarded else None
        shown = guarded and loop is None and in_get_state()  # get_state shows this read
        took = False
        if loop is not None:
            took = yield from self._hold_for_run(config, loop)
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        if loop is not None:
            self._note_run_head(config, tup, took)
            if self.input_check is not None:
                thread = self._thread(str(config["configurable"]["thread_id"]))
                thread.log_keys = _logs_of(self.input_check.message_keys, loop.specs)
        if tup is None or _guarded_key(tup.config) is None:
            return tup
        key = _cp_key(tup.config)
        read = self._checkpoint(key)
        read.stored = True
        writes = tup.pending_writes or ()  # LangGraph's upsert channels aside
        read.seen = frozenset((t, c) for t, c, _ in writes if c not in WRITES_IDX_MAP)
        if loop is not None:
            self._thread(key[0]).base = None if self._writes_to_logs(tup) else key[2]
            return tup
        if self.input_check is None or not shown:
            return tup  # runs, update_state, nodes: the raw checkpoint
        refused = yield from self.input_check.refused_flow(
            below, tup, _logs_of(self.input_check.message_keys, declared_channels())
        )
        if not refused:
            return tup
        kept = [w for w in tup.pending_writes or () if w[0] not in refused]
        return tup._replace(pending_writes=[*kept, *((t, ERROR, e) for t, e in refused.items())])

    def _run_logs(self, thread_id: str, values: dict[str, Any]) -> dict[str, Any]:
        thread = self._threads.get(thread_id)
        keys = None if thread is None else thread.log_keys
        return values if keys is None else {k: v for k, v in values.items() if k in keys}

    def _note_run_head(
        self, config: RunnableConfig, tup: CheckpointTuple | None, took: bool
    ) -> None:
        # A run that took the lock, then read the head, knows the head with no query.
        key = _guarded_key(config)
        if key is None:
            return
        asked = config["configurable"].get("checkpoint_id")
        thread = self._thread(key[0])
        if took and not asked:
            thread.head = None if tup is None else str(tup.config["configurable"]["checkpoint_id"])
            thread.fork = None
            return
        thread.head = _UNREAD
        if took:  # a run that names a checkpoint forks there (time travel)
            thread.fork = str(asked) if asked and tup is not None else None

    def _writes_to_logs(self, tup: CheckpointTuple) -> bool:
        keys = self.input_check.message_keys if self.input_check is not None else ()
        return any(c in keys for _, c, _ in tup.pending_writes or ())

    def _check_unseen_writes(
        self, key: tuple[str, str], parent: str | None, now: frozenset[tuple[str, str]]
    ) -> None:
        known = self._known((key[0], key[1], parent or ""))
        seen = None if known is None else known.seen
        if known is None or seen is None:
            return
        # A late marker (a timed-out tool's call starting after its run) is no result.
        unseen = (
            {(t, c) for t, c in now if c not in WRITES_IDX_MAP and c not in _MARKERS}
            - seen
            - known.own
        )
        if unseen:
            raise ConcurrentRunError(
                f"another run stored results on checkpoint {parent!r} after this run read "
                f"it (tasks {sorted(t for t, _ in unseen)}); read the thread again and retry",
                thread_id=key[0],
                checkpoint_id=parent,
            )

    def put(self, below: SaverView, *args: *PutArgs) -> _Steps:
        with self._storing(args[0], args[1]):
            return (yield from self._put_steps(below, *args))

    def put_writes(self, below: SaverView, *args: *PutWritesArgs) -> _Steps:
        pending = None
        if (args[0].get("configurable") or {}).get("checkpoint_id"):
            with self._putting_lock:
                pending = self._putting.get(_cp_key(args[0]))
        if pending is not None and not pending.is_set():
            # Awaited: under asyncio the put itself may need the executor's few threads.
            yield Io(pending.wait, pending.wait_async, (_CHECKPOINT_WAIT,))
        config, writes, task_id, task_path = args
        key = _guarded_key(config)
        if key is None:
            return (yield from below.flow("put_writes", *args))
        cid = config["configurable"]["checkpoint_id"]
        # update_state writes run in no loop: no runtime in their config.
        is_update = CONFIG_KEY_RUNTIME not in config["configurable"]
        if self.input_check is not None:
            if is_update:
                keys = _logs_of(self.input_check.message_keys, declared_channels())
                values = {
                    k: v for k, v in self.input_check.from_start_writes(writes).items() if k in keys
                }
                if values:
                    yield from self.input_check.check_flow(below, config, values, None)
            elif task_path.rsplit(", ", 1)[-1] == START:
                # task_path of a root pull task is "~__pregel_pull, <node>".
                values = self._run_logs(key[0], self.input_check.from_start_writes(writes))
                if values:
                    # At a thread's first checkpoint (at=None: empty logs) nothing is read.
                    known = self._known(_cp_key(config))
                    at = None if known is not None and known.empty_root else config
                    base = self._thread(key[0]).base
                    yield from self.input_check.check_flow(below, at, values, base)
        if not is_update and self._held_by_run(key[0], config):
            # No other run can have stored a result for its task, or a child, meanwhile.
            self._note_own(_cp_key(config), writes, task_id)
            return (yield from below.flow("put_writes", *args))
        body = self._checked_writes(below, key, cid, args, is_update)
        yield from self._locked(key, config, is_update, body)

    @contextlib.contextmanager
    def _storing(self, config: RunnableConfig, checkpoint: Checkpoint) -> Iterator[None]:
        cid = _cp_key(config, checkpoint["id"])
        with self._putting_lock:
            done = self._expected.pop(cid, None) or _InFlight()
            self._putting[cid] = done
        stored = False
        try:
            yield
            stored = True
        finally:
            with self._putting_lock:
                if stored:
                    self._checkpoint(cid).stored = True
                if self._putting.get(cid) is done:
                    del self._putting[cid]
            done.set()

    def write_keys_flow(self, config: RunnableConfig) -> Flow[frozenset[tuple[str, str]]]:
        """(task id, channel) of every write stored on `config`'s checkpoint, undecoded."""
        found = yield _store(self.store.write_keys, *_cp_key(config))
        return frozenset(found)

    def stored_flow(
        self,
        saver: Any,
        config: RunnableConfig,
        timeout: float,
        run_config: RunnableConfig | None = None,
    ) -> Flow[bool]:
        """Wait until `config`'s checkpoint is stored (woken by its put; asked of `saver`
        after `_STORED_RECHECK`, doubling, unless `run_config`'s run holds the thread);
        False past `timeout`."""
        if not (config.get("configurable") or {}).get("checkpoint_id"):
            return True
        cid = _cp_key(config)
        if self._stored(cid):
            return True
        deadline = time.monotonic() + timeout
        key = _guarded_key(run_config or config)
        held = run_config is not None and key is not None and self._held_by_run(key[0], run_config)
        recheck = timeout if held else _STORED_RECHECK
        try:
            while True:
                with self._putting_lock:
                    if self._stored(cid):
                        return True
                    pending = self._putting.get(cid) or self._expected.setdefault(cid, _InFlight())
                left = deadline - time.monotonic()
                if left > 0 and (yield Io(pending.wait, pending.wait_async, (min(recheck, left),))):
                    if self._stored(cid):
                        return True  # its put ended (a failed put: look, below)
                if (yield from call(saver, "get_tuple", config)) is not None:
                    self._checkpoint(cid).stored = True
                    return True
                if left <= recheck:
                    return self._stored(cid)
                recheck *= 2
        finally:
            with self._putting_lock:
                self._expected.pop(cid, None)

    def saw_marker(self, config: RunnableConfig, prefix: str) -> bool:
        """Whether `config`'s checkpoint held a marker task `prefix…` when last read."""
        known = self._known(_cp_key(config))
        seen = (known.seen if known is not None else None) or ()
        return any(c == STARTED_CHANNEL and t.startswith(prefix) for t, c in seen)

    def _stored(self, key: _CpKey) -> bool:
        known = self._known(key)
        return known is not None and known.stored

    def _put_below(self, below: SaverView, *args: *PutArgs) -> _Steps:
        out: RunnableConfig = yield from below.flow("put", *args)
        if args[0]["configurable"].get("checkpoint_id"):
            self._checkpoint(_cp_key(args[0])).own_parent = True
        return out

    def _put_steps(self, below: SaverView, *args: *PutArgs) -> _Steps:
        config, checkpoint, metadata, _ = args
        key = _guarded_key(config)
        if key is None:
            return (yield from below.flow("put", *args))
        parent = config["configurable"].get("checkpoint_id")
        is_input = metadata.get("source") == "input"
        if is_input and self.input_check is not None:
            values = self._run_logs(
                key[0],
                self.input_check.from_input_checkpoint(checkpoint["channel_values"].get(START)),
            )
            if values:
                base = self._thread(key[0]).base
                at = config if parent else None
                yield from self.input_check.check_flow(
                    below, at, values, base if base == parent else None
                )
        in_run = CONFIG_KEY_RUNTIME in config["configurable"]
        if in_run and self._held_by_run(key[0], config):
            # The head read under the run's lock is still the head.
            if is_input:
                thread = self._thread(key[0])
                fork, thread.fork = thread.fork, None
                if fork != parent:  # else: new input at the checkpoint the run named: a fork
                    head, thread.head = thread.head, _UNREAD
                    if head is _UNREAD or head != parent:
                        head = yield _store(self.store.head, *key)
                    self._refuse_moved(key, parent, head, metadata)
            stored: RunnableConfig = yield from self._put_below(below, *args)
            if is_input and parent is None and set(checkpoint["channel_values"]) <= {START}:
                self._checkpoint(_cp_key(config, checkpoint["id"])).empty_root = True
            return stored
        return (yield from self._locked(key, config, not in_run, self._checked_put(below, *args)))

    def _checked_put(self, below: SaverView, *args: *PutArgs) -> _Steps:
        """`put(*args)` under the thread's short lock, checked (module doc)."""
        config, _, metadata, _ = args
        key = _guarded_key(config)
        assert key is not None
        parent = config["configurable"].get("checkpoint_id")
        if CONFIG_KEY_RUNTIME in config["configurable"] or parent is not None:
            head = yield _store(self.store.head, *key)
            self._refuse_moved(key, parent, head, metadata)
        if metadata.get("source") == "input" and parent:
            now = yield _store(self.store.write_keys, *key, parent)
            self._check_unseen_writes(key, parent, now)
        # Noted before the lock goes: this run's late writes on `parent` are no strays.
        out: RunnableConfig = yield from self._put_below(below, *args)
        return out

    def _locked(
        self, key: tuple[str, str], config: RunnableConfig, outside_run: bool, body: _Steps
    ) -> _Steps:
        """`body` under the short write lock (and the run lock, for `update_state`)."""
        what = "the update stored nothing"
        updating = outside_run and (
            yield from self._take_hold(key[0], self.strategy_for(config), "a run", what)
        )
        try:
            yield from take_lock(self.store.try_lock, self.store.unlock, key[0], True)
            try:
                return (yield from body)
            finally:
                yield release_lock(self.store.unlock, key[0])
        finally:
            if updating:
                yield release_lock(self.store.run_unlock, key[0])

    @staticmethod
    def _refuse_moved(
        key: tuple[str, str], parent: str | None, head: str | None, metadata: CheckpointMetadata
    ) -> None:
        if head != parent and metadata.get("source") not in _FORK_SOURCES:
            raise ConcurrentRunError(
                f"this write started from checkpoint {parent!r} without naming it, but the "
                f"thread's head is now {head!r}: the thread moved on since it was read",
                thread_id=key[0],
                checkpoint_id=parent,
                head=head,
            )

    def _checked_writes(
        self,
        below: SaverView,
        key: tuple[str, str],
        cid: str,
        args: tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str],
        is_update: bool,
    ) -> _Steps:
        """`put_writes(*args)` under the thread's short lock, checked (module doc)."""
        writes, task_id = args[1], args[2]
        # update_state replays a pending task's id on purpose: it replaces.
        if not is_update:
            stored = yield _store(self.store.writes, *key, cid, task_id)
            new = self._compare_writes(key, cid, task_id, writes, stored)
        else:
            new = True
        known = self._known((key[0], key[1], cid))
        if new and not (known is not None and known.own_parent):
            # Ids grow with time: only a head newer than `cid` can be its child.
            head = yield _store(self.store.head, *key)
            if head is not None and head > cid and (yield _store(self.store.has_child, *key, cid)):
                raise ConcurrentRunError(
                    f"checkpoint {cid!r} already has a newer checkpoint after it, so "
                    f"new writes of task {task_id!r} there would leak into another "
                    "run's history",
                    thread_id=key[0],
                    checkpoint_id=cid,
                    head=head,
                )
        self._note_own((key[0], key[1], cid), writes, task_id)
        yield from below.flow("put_writes", *args)

    def _compare_writes(
        self,
        key: tuple[str, str],
        cid: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
        stored: dict[int, StoredWrite],
    ) -> bool:
        """Whether `writes` add anything; refuses a different result already stored."""
        new = False
        for i, (channel, value) in enumerate(writes):
            if channel in WRITES_IDX_MAP:
                continue  # LangGraph's upsert channels: replacing them is the design
            old = stored.get(i)
            if old is None:
                new = True
                continue
            kind, data = self.serde.dumps_typed(value)
            if kind == old[0] and bytes(data) == bytes(old[1]):
                continue
            if _same_resent(value, self.serde.loads_typed(old)):
                continue  # stored as what it added (`threadlog.checkpoint.resent`)
            raise ConcurrentRunError(
                f"task {task_id!r} at checkpoint {cid!r} already has a different "
                f"{channel!r} result, written by another run",
                thread_id=key[0],
                checkpoint_id=cid,
            )
        return new

    def _note_own(self, cid: _CpKey, writes: Sequence[tuple[str, Any]], task_id: str) -> None:
        self._checkpoint(cid).own.update((task_id, c) for c, _ in writes)


class GuardedSaver(LayeredSaver):
    """A saver whose outermost layer is the run guard; `layers` go below it, in order."""

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        store: HeadStore,
        input_check: InputCheck | None = None,
        *,
        multitask_strategy: MultitaskStrategy = "enqueue",
        layers: Sequence[Layer] = (),
    ) -> None:
        guard = GuardLayer(
            store, input_check, serde=inner.serde, multitask_strategy=multitask_strategy
        )
        super().__init__(inner, (guard, *layers))

    @property
    def guard(self) -> GuardLayer:
        layer = self.layers[0]
        assert isinstance(layer, GuardLayer)
        return layer

    @property
    def store(self) -> HeadStore:
        return self.guard.store

    @property
    def multitask_strategy(self) -> MultitaskStrategy:
        return self.guard.multitask_strategy

    @multitask_strategy.setter
    def multitask_strategy(self, value: MultitaskStrategy) -> None:
        self.guard.multitask_strategy = _strategy(value)

    def set_multitask_strategy(self, thread_id: str, strategy: MultitaskStrategy | None) -> None:
        self.guard.set_multitask_strategy(thread_id, strategy)

    @property
    def maintenance(self) -> lifecycle.Maintenance:
        guard = self.guard
        return lifecycle.Maintenance(
            self.inner, self.layers[1:], guard.maintenance_hold, guard.maintenance_release
        )

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove what these runs stored, keeping the thread whole (`lifecycle`)."""
        run_flow(lifecycle.delete_for_runs(self.maintenance, run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await arun(lifecycle.delete_for_runs(self.maintenance, run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread whole under a new id, in one transaction (`lifecycle`)."""
        run_flow(lifecycle.copy_thread(self.maintenance, source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await arun(lifecycle.copy_thread(self.maintenance, source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`"keep_latest"`: keep each namespace's head, materialized; `"delete"`: drop the
        threads (`lifecycle`)."""
        run_flow(lifecycle.prune(self.maintenance, thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await arun(lifecycle.prune(self.maintenance, thread_ids, strategy))

    def exclusive(
        self, thread_id: str, *, wait: bool = False
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the thread around a block (`GuardLayer.exclusive`)."""
        return self.guard.exclusive(thread_id, wait=wait)


class _InFlight:
    """A checkpoint being stored: threads wait on an event, tasks on a future of their loop."""

    __slots__ = ("_done", "_event", "_mutex", "_waiters")

    def __init__(self) -> None:
        self._done = False
        self._event: threading.Event | None = None
        self._mutex = threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []

    def is_set(self) -> bool:
        return self._done

    def wait(self, timeout: float) -> bool:
        with self._mutex:
            if self._done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    async def wait_async(self, timeout: float) -> bool:
        waiter = asyncio.get_running_loop().create_future()
        with self._mutex:
            if self._done:
                return True
            self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):  # no extra future, unlike wait_for
                await waiter
        except TimeoutError:
            with self._mutex, contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
            return False
        return True

    def set(self) -> None:
        with self._mutex:
            self._done = True
            event = self._event
            waiters, self._waiters = self._waiters, []
        if event is not None:
            event.set()
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for waiter in waiters:
            loop = waiter.get_loop()
            if loop is here:  # the put ended on the waiter's own loop: no self-pipe wake-up
                loop.call_soon(_wake, waiter)
                continue
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Release:
    """Releases a run lock once, whichever of the loop's exit or its collection comes first."""

    def __init__(self, store: HeadStore, thread_id: str) -> None:
        self.store = store
        self.thread_id = thread_id
        self._done = False
        self._lock = threading.Lock()
        self._hold, self._token = _enter_hold(thread_id)

    def _claim(self) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
        _exit_hold(self._hold, self._token)
        return True

    def __call__(self, *_: Any) -> None:
        if self._claim():
            self.store.run_unlock(self.thread_id)

    async def aclose(self) -> None:
        if self._claim():
            op = release_lock(self.store.run_unlock, self.thread_id)
            assert op.async_ is not None  # release_lock gives both forms
            await op.async_(*op.args)


_MAX_THREADS = 4096  # threads remembered (a thread a run of this saver holds is kept)
_MAX_CHECKPOINTS = 64  # checkpoints remembered per thread, oldest forgotten first


@dataclass(slots=True, eq=False)
class _Checkpoint:
    """What this saver knows of one checkpoint of a thread."""

    stored: bool = False  # stored or read by this saver: it exists
    own_parent: bool = False  # this saver stored a child (own late writes are no strays)
    empty_root: bool = False  # a thread's first checkpoint a run here started
    # The (task, channel) writes it held when read, and the ones this saver wrote.
    seen: frozenset[tuple[str, str]] | None = None
    own: set[tuple[str, str]] = field(default_factory=set)


@dataclass(slots=True, eq=False)
class _Thread:
    """What this saver remembers of one thread: its holding run's, and recent checkpoints."""

    run: tuple[Any, _Hold] | None = None  # the holding run's Runtime, and its hold
    head: Any = _UNREAD  # the head that run read right after taking the lock
    fork: str | None = None  # the checkpoint that run named (a fork's base)
    base: str | None = None  # its read, when no pending writes touch the logs
    log_keys: frozenset[str] | None = None  # the graph's message-log keys (None: all)
    checkpoints: dict[tuple[str, str], _Checkpoint] = field(default_factory=dict)


def _same_resent(value: Any, stored: Any) -> bool:
    """Whether `stored`, a write kept as what it added, is `value` as written."""
    if not is_resent(stored) or not isinstance(value, list):
        return False
    count, items = int(stored["count"]), list(stored["items"])
    return len(value) == count + len(items) and value[count:] == items


def _logs_of(keys: tuple[str, ...], declared: Any) -> frozenset[str]:
    """Which message `keys` a graph declaring `declared` (None: unknown) keeps as logs."""
    if not isinstance(declared, Mapping):
        return frozenset(keys)
    return frozenset(
        k for k in keys if k not in declared or isinstance(declared[k], MessageLogChannel)
    )


def _strategy(value: object) -> MultitaskStrategy:
    if value not in MULTITASK_STRATEGIES:
        raise ValueError(
            f"multitask_strategy must be one of {', '.join(MULTITASK_STRATEGIES)}, got {value!r}"
        )
    return cast(MultitaskStrategy, value)


_CpKey = tuple[str, str, str]  # thread_id, checkpoint_ns, checkpoint_id


def _cp_key(config: RunnableConfig, checkpoint_id: str | None = None) -> _CpKey:
    conf = config.get("configurable") or {}
    cid = checkpoint_id if checkpoint_id is not None else conf.get("checkpoint_id")
    return str(conf.get("thread_id")), str(conf.get("checkpoint_ns") or ""), str(cid or "")


def _guarded_key(config: RunnableConfig) -> tuple[str, str] | None:
    conf = config.get("configurable") or {}
    ns = conf.get("checkpoint_ns") or ""
    thread_id = conf.get("thread_id")
    if ns or thread_id is None:
        return None  # subgraph checkpoints ride on their parent's, which are guarded
    return str(thread_id), ns
