"""The per-thread run guard: whole turns on a shared thread, and no silent forks.

Contract.

* **Whole turns (`multitask_strategy`).** A run holds its thread from the moment its
  Pregel loop reads the thread until the loop exits — finished, interrupted, failed or
  cancelled — through a per-thread lock that spans processes (a Postgres advisory lock,
  an `flock` next to a SQLite database, a mutex-guarded set in memory). A second run
  on the thread meanwhile, in this process or another, follows the thread's strategy,
  LangGraph Server's words: `"enqueue"` (the default) waits for the thread and then
  reads it fresh; `"reject"` raises `ConcurrentRunError` before anything is stored.
  So two runs never interleave inside a turn: no run's input lands among another
  run's open tool calls (which the model node would then have to answer as "not
  completed" although the tool ran), and no run returns with its input unanswered.
  The strategy is the saver's (`checkpointer(url, multitask_strategy=...)`), per
  thread (`saver.set_multitask_strategy(thread_id, ...)`), or per run
  (`config["configurable"]["multitask_strategy"]`). `saver.exclusive(thread_id)`
  holds the same lock around any block of code; runs inside it do not wait for it.
  Locks die with their holder (a database session, a file descriptor), so a SIGKILLed
  worker never blocks a thread. A held lock is waited for by polling (`take_lock`,
  `threadlog.checkpoint.backends`): under asyncio nothing of the guard waits in the event
  loop's executor — a worker thread runs one statement or file call at a time, and a
  task's writes await their checkpoint's put on a future of their loop.
* **`update_state` waits for a running turn** (or is refused by it, `"reject"`): its
  writes take the thread's run lock for the one write. A node's own `update_state`
  does not wait for itself: a hold lives in the run's context, which LangGraph copies
  into its tasks and background writes. (A node must not run the graph again on its own
  thread: that run would fork the turn it is part of.)
* **Writes outside a hold are checked** under a short per-thread lock (a turn's input,
  `update_state`, other tools and versions); a run's own later checkpoints and task
  writes skip the re-checks — every other guarded writer waits for the hold:
  - `put` (a new checkpoint) must follow the thread's head (its newest checkpoint: as a
    run read it right after taking the thread's lock, else one indexed query), unless
    LangGraph marks it a deliberate fork (`update_state`:
    source `"update"`/`"fork"`), it is the input of a run that *named* the checkpoint it
    read (LangGraph's time travel: a fork from it), or it is a **direct root put**: made outside any
    LangGraph run (no runtime in its config) with no parent checkpoint. That is the
    low-level saver API (`saver.put(...)` by user code, `update_state` on an empty
    thread), which every LangGraph saver stores as given and the conformance suite
    specifies; it still waits for a running turn like `update_state`. A run's puts
    and any put naming a parent are ordered (docs/durability.md, "Which writes").
  - new input is refused when another run stored task results on its parent after
    this run read it (LangGraph drops those from the run's state; readers would
    replay them into its branch);
  - `put_writes` is refused when another run stored a *different* result for the same
    task, or when the checkpoint already has a child by another saver and the writes
    are new (children replay their parent's writes). A run's own late writes pass.
    LangGraph's upsert channels (`__error__`, `__interrupt__`, …) are not compared.
* **A refused write stores nothing.** A turn's input (the input checkpoint and the
  `__start__` writes) and `update_state`'s writes are dry-run against the stored log
  first (`threadlog.checkpoint.input_check`); the log's own error is raised and nothing is
  stored.
* **`get_state` always answers.** Its read of a checkpoint whose stored task writes
  the log refuses (a step that failed on them) shows the last good state: those writes
  are left out of `pending_writes` and the task carries the log's error as its
  `__error__` write, as a failed task does. Every other read (runs, `update_state`,
  `list`) gets the raw checkpoint, so resuming it raises the error again.

Subgraph namespaces are not guarded (their parent's checkpoints are). The guard is the
outermost layer of the saver (`GuardLayer`, `threadlog.checkpoint.layered`): each hook is
one flow for sync and async alike (`threadlog.flows`). `GuardedSaver` is the
wrapper whose first layer it is, with the guard's own methods (`exclusive`, strategies).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
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
# Writes under a task id of threadlog's own that no reader rebuilds state from: the tool
# node's started/stopped markers, the recorded model calls (`calls.CallsLayer`, below
# this layer, so a run's own calls are never among the writes it noted).
_MARKERS = frozenset({STARTED_CHANNEL, CALLS_CHANNEL})
_UNREAD: Any = object()  # no head known from the run's own read
# Seconds a task's writes wait for their checkpoint to be stored (a put is one round trip).
_CHECKPOINT_WAIT = 30.0
_STORED_RECHECK = 1.0
"""Seconds before `stored_flow` first looks in the database for a checkpoint it never saw
(doubling after): long enough for a put queued behind others, under hundreds of runs."""

# Threads this context holds — an `exclusive()` block, or a run (its tasks and
# background writes run in copies of its context): they must not wait for themselves.
# A hold is marked done when it ends, so a context copied earlier (or one whose reset
# never ran: LangGraph may exit an async loop from another context) does not keep it.
_HELD: contextvars.ContextVar[dict[str, _Hold]] = contextvars.ContextVar(
    "threadlog_held_threads", default={}  # noqa: B039 - never mutated, only replaced
)


class _Hold:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


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


# -- the I/O a guard step needs (performed by `steps.run` / `steps.arun`) -------------


def _store(fn: Callable[..., Any], *args: Any) -> Io:
    """A head-store call: one statement or file call that never waits on a lock another
    run holds (locks are polled, `take_lock`), so under asyncio a worker thread runs it."""
    return Io(fn, None, args)


def _run_lock(store: HeadStore, thread_id: str, wait: bool) -> Flow[bool]:
    """Take the thread's run lock: wait for it (`wait`), or try once (-> bool)."""
    return take_lock(store.try_run_lock, store.run_unlock, thread_id, wait)


def _write_lock(store: HeadStore, thread_id: str) -> Flow[bool]:
    """Take the thread's short write lock, waiting for it."""
    return take_lock(store.try_lock, store.unlock, thread_id, True)


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
        # Checkpoints this saver stored a child of. LangGraph saves a step's task
        # writes and the next checkpoint concurrently ("async" durability), so a
        # run's own writes may land after its own child: those are not strays.
        self.own_parents = _Recent()
        # The task writes this saver saw on each checkpoint it read, and the ones it
        # wrote itself: new input on a checkpoint discards its unfinished tasks' writes
        # in memory, but readers replay every write stored there, so another run's
        # result landing in between would make the stored branch differ from this run's.
        # Checkpoints are remembered by (thread, namespace, id): a copied thread keeps its
        # source's checkpoint ids, and what one thread stored says nothing of the other.
        self._seen_writes: dict[_CpKey, frozenset[tuple[str, str]]] = {}
        self._own_writes: dict[_CpKey, set[tuple[str, str]]] = {}
        # Per thread: the checkpoint its current run read, when its logs are exactly
        # that checkpoint's (no pending writes to replay) — the input check's base.
        self._bases: dict[str, str] = {}
        # Per thread: the keys its current run's graph declares as message logs. Another
        # delta channel under a message key (LangGraph's own, an app's) has its own rules:
        # its input is the graph's to judge, not the log's.
        self._log_keys: dict[str, frozenset[str]] = {}
        # First checkpoints of threads a run of this saver started (no parent, no log
        # values): their logs are empty, so their input task's writes are checked against
        # empty logs without reading them back. Checkpoint ids are never reused.
        self._empty_roots = _Recent()
        # Per thread: the Runtime object of the run of this saver holding it, and the hold.
        self._runs: dict[str, tuple[Any, _Hold]] = {}
        # Per thread: the head its current run read right after taking the run lock.
        self._run_heads: dict[str, str | None] = {}
        # Per thread: the checkpoint its current run named explicitly (a fork's base).
        self._forks: dict[str, str] = {}
        # Checkpoints being stored right now, by id. LangGraph stores a step's checkpoint
        # and its tasks' writes from background threads; a task's writes that landed
        # before their checkpoint would be unreachable if the process died in between
        # (the kill harness found this), so writes wait for their checkpoint's put.
        self._putting: dict[_CpKey, _InFlight] = {}
        self._putting_lock = threading.Lock()
        # Checkpoints this saver stored or read (so they exist), and the ones a waiter
        # expects a put of (`stored_flow`): the tool node's "started" marker waits for
        # its step's checkpoint without reading the database over and over.
        self._known = _Recent(16384)
        self._expected: dict[_CpKey, _InFlight] = {}

    # -- shared threads: strategy and whole-run lock ---------------------------------

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
        """Hold the thread around a block: `with saver.exclusive(tid): graph.invoke(...)`.

        Another holder — a run or an `exclusive` block, in this process or any other
        using the same database — makes this raise `ConcurrentRunError` at once
        (`wait=False`) before anything is stored, or wait its turn (`wait=True`).
        Runs inside the block do not wait for it. The lock dies with its process.
        """
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
        """Hold a thread for a maintenance call (`threadlog.checkpoint.lifecycle`): wait
        for a run holding it ("enqueue") or refuse before anything changes ("reject"),
        per the thread's strategy. False: the caller already holds it (an `exclusive`
        block) and nothing is to be given back."""
        tid = str(thread_id)
        if _holds(tid):
            return False
        strategy = self._strategies.get(tid, self.multitask_strategy)
        if not (yield from _run_lock(self.store, tid, strategy == "enqueue")):
            raise ConcurrentRunError(
                "a run is working on this thread (multitask_strategy='reject'); the "
                "maintenance call changed nothing",
                thread_id=tid,
            )
        return True

    def maintenance_release(self, thread_id: str) -> Io:
        return release_lock(self.store.run_unlock, str(thread_id))

    def _held_by_run(self, thread_id: str, config: RunnableConfig) -> bool:
        """Whether this write comes from the run (or exclusive block) holding the thread."""
        if _holds(thread_id):
            return True
        run = self._runs.get(thread_id)
        runtime = config["configurable"].get(CONFIG_KEY_RUNTIME)
        return run is not None and runtime is not None and run[0] is runtime and not run[1].done

    def _hold_for_run(self, config: RunnableConfig, loop: Any) -> _Steps:
        """Take the thread's run lock for `loop`'s run; released when the loop exits."""
        tid = str(config["configurable"]["thread_id"])
        if _holds(tid):
            return False  # an exclusive() block, this run's own second read, or a nested run
        strategy = self.strategy_for(config)
        if not (yield from _run_lock(self.store, tid, strategy == "enqueue")):
            raise ConcurrentRunError(
                "another run is working on this thread (multitask_strategy='reject'); "
                "nothing of this run was stored",
                thread_id=tid,
            )
        release = _Release(self.store, tid)
        # LangGraph does not always carry the run's context into its task threads; the
        # run's Runtime object rides in the config of every write it makes.
        entry = (config["configurable"].get(CONFIG_KEY_RUNTIME), release._hold)
        self._runs[tid] = entry

        def forget(*_: Any) -> None:
            # The Runtime reaches the loop (its stream writer), hence the whole log: a
            # finished run's entry kept per thread grew a server's memory with every
            # thread it served. Runs before the release (exit callbacks run LIFO), so a
            # next run on the thread cannot have registered yet.
            if self._runs.get(tid) is entry:
                del self._runs[tid]

        if isinstance(loop.stack, contextlib.AsyncExitStack):
            # Awaited off the event loop: the unlock is a statement on a shared session.
            loop.stack.push_async_callback(release.aclose)
        else:
            loop.stack.callback(release)
        loop.stack.callback(forget)
        # Belt and braces: a loop whose __enter__ failed after this read never runs
        # its exit stack; its lock goes when the loop is collected.
        weakref.finalize(loop.loop, release)
        return True

    # -- the hooks -------------------------------------------------------------------

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> _Steps:
        loop, shown = _reader(config)
        took = False
        if loop is not None:
            took = yield from self._hold_for_run(config, loop)
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        if loop is not None:
            self._note_run_head(config, tup, took)
            self._note_log_keys(config, loop.specs)
        if tup is None or _guarded_key(tup.config) is None:
            return tup
        cid = str(tup.config["configurable"]["checkpoint_id"])
        self._known.add(_cp_key(tup.config))
        if len(self._seen_writes) > 4096:
            self._seen_writes.pop(next(iter(self._seen_writes)))
        self._seen_writes[_cp_key(tup.config)] = _write_keys(tup)
        if loop is not None:
            tid = str(tup.config["configurable"]["thread_id"])
            if self._writes_to_logs(tup):
                self._bases.pop(tid, None)
            else:
                self._bases[tid] = cid
                if len(self._bases) > 4096:  # a forgotten base: the full input check
                    self._bases.pop(next(iter(self._bases)))
            return tup
        if self.input_check is None or not shown:
            return tup  # runs, update_state, nodes: the raw checkpoint
        assert self.input_check is not None
        refused = yield from self.input_check.refused_flow(
            below, tup, _logs_of(self.input_check.message_keys, declared_channels())
        )
        return _with_errors(tup, refused) if refused else tup

    def _note_log_keys(self, config: RunnableConfig, specs: Any) -> None:
        key = _guarded_key(config)
        if key is None or self.input_check is None:
            return
        self._log_keys[key[0]] = _logs_of(self.input_check.message_keys, specs)
        if len(self._log_keys) > 4096:  # a forgotten thread: every message key checked
            self._log_keys.pop(next(iter(self._log_keys)))

    def _run_logs(self, thread_id: str, values: dict[str, Any]) -> dict[str, Any]:
        """`values` under the keys the thread's running graph declares as logs."""
        keys = self._log_keys.get(thread_id)
        return values if keys is None else {k: v for k, v in values.items() if k in keys}

    def _note_run_head(
        self, config: RunnableConfig, tup: CheckpointTuple | None, took: bool
    ) -> None:
        # A run that took the thread's lock and then read its head (no checkpoint_id)
        # knows the head with no further query: every guarded writer waits for the lock.
        key = _guarded_key(config)
        if key is None:
            return
        asked = config["configurable"].get("checkpoint_id")
        if took and not asked:
            self._run_heads[key[0]] = (
                None if tup is None else str(tup.config["configurable"]["checkpoint_id"])
            )
            self._forks.pop(key[0], None)
            return
        self._run_heads.pop(key[0], None)
        if took:
            # A run that names a checkpoint reads it on purpose: its input there is a
            # fork (LangGraph's time travel), not a stale head. (Later reads of the same
            # run, `took` False, leave it.)
            if asked and tup is not None:
                self._forks[key[0]] = str(asked)
            else:
                self._forks.pop(key[0], None)

    def _writes_to_logs(self, tup: CheckpointTuple) -> bool:
        keys = self.input_check.message_keys if self.input_check is not None else ()
        return any(c in keys for _, c, _ in tup.pending_writes or ())

    def _check_unseen_writes(
        self, key: tuple[str, str], parent: str | None, now: frozenset[tuple[str, str]]
    ) -> None:
        at = (key[0], key[1], parent or "")
        seen = self._seen_writes.get(at)
        if seen is None:
            return
        # LangGraph's upsert channels, and threadlog's markers (`_MARKERS`): a late
        # marker (a timed-out sync tool's queued call starting after its run stopped)
        # changes nothing a reader rebuilds, so it is no other run's result.
        unseen = {
            (t, c) for t, c in now if c not in WRITES_IDX_MAP and c not in _MARKERS
        } - seen - self._own_writes.get(at, set())
        if unseen:
            raise ConcurrentRunError(
                f"another run stored results on checkpoint {parent!r} after this run read "
                f"it (tasks {sorted(t for t, _ in unseen)}); read the thread again and retry",
                thread_id=key[0],
                checkpoint_id=parent,
            )

    # -- guarded writes: one generator each, two drivers ---------------------------

    def put(self, below: SaverView, *args: *PutArgs) -> _Steps:
        config, checkpoint, metadata, _ = args
        with self._storing(config, checkpoint):
            if self._trusted_put(config, metadata):
                out = yield from below.flow("put", *args)
                return self._stored(config, out)
            return (yield from self._put_steps(below, *args))

    def put_writes(self, below: SaverView, *args: *PutWritesArgs) -> _Steps:
        config = args[0]
        pending = self._checkpoint_in_flight(config)
        if pending is not None:
            # Awaited, not a parked executor thread: under asyncio the awaited put this
            # waits for may itself need the default executor's few threads.
            yield Io(pending.wait, pending.wait_async, (_CHECKPOINT_WAIT,))
        if self._trusted_writes(*args):
            return (yield from below.flow("put_writes", *args))
        return (yield from self._put_writes_steps(below, *args))

    # -- a task's writes never land before their checkpoint ---------------------------

    @contextlib.contextmanager
    def _storing(self, config: RunnableConfig, checkpoint: Checkpoint) -> Iterator[None]:
        cid = _cp_key(config, checkpoint["id"])
        with self._putting_lock:
            # A waiter that came before the put (`stored_flow`) waits on this one.
            done = self._expected.pop(cid, None) or _InFlight()
            self._putting[cid] = done
        stored = False
        try:
            yield
            stored = True
        finally:
            with self._putting_lock:
                if stored:
                    self._known.add(cid)
                if self._putting.get(cid) is done:
                    del self._putting[cid]
            done.set()

    def write_keys_flow(self, config: RunnableConfig) -> Flow[frozenset[tuple[str, str]]]:
        """(task id, channel) of every write stored on the checkpoint `config` names, read
        from the head store (no value decoded, no wait for a put under way): how an
        idempotent tool looks for its receipt cheaply (`threadlog.checkpoint.receipts`)."""
        conf = config.get("configurable") or {}
        key = (str(conf["thread_id"]), str(conf.get("checkpoint_ns") or ""))
        found = yield _store(self.store.write_keys, *key, str(conf["checkpoint_id"]))
        return frozenset(found)

    def stored_flow(
        self,
        saver: Any,
        config: RunnableConfig,
        timeout: float,
        run_config: RunnableConfig | None = None,
    ) -> Flow[bool]:
        """Wait until the checkpoint `config` names is stored (read through `saver`, this
        layer's saver, when it must look); False past `timeout`. `run_config`: the config
        of the run asking (its runtime), when it has one.

        For the tool node's "started" marker under `durability="async"` (LangGraph stores
        the step's checkpoint in the background while its tasks run). At once when this
        saver stored or read that checkpoint; while its put runs, or before the put has
        begun (a run's step checkpoint is always put), awaited on the put — no polling.
        A checkpoint this saver never saw (stored by another process, forgotten from
        memory) is looked for in the database after `_STORED_RECHECK` seconds, then less
        often — but never for a run holding the thread: nobody else writes it, and this
        saver read the run's starting checkpoint, so the rest are the run's own puts."""
        if not (config.get("configurable") or {}).get("checkpoint_id"):
            return True
        cid = _cp_key(config)
        if cid in self._known:
            return True
        deadline = time.monotonic() + timeout
        key = _guarded_key(run_config or config)
        held = run_config is not None and key is not None and self._held_by_run(key[0], run_config)
        recheck = timeout if held else _STORED_RECHECK
        try:
            while True:
                with self._putting_lock:
                    if cid in self._known:
                        return True
                    pending = self._putting.get(cid) or self._expected.setdefault(
                        cid, _InFlight()
                    )
                left = deadline - time.monotonic()
                if left > 0 and (
                    yield Io(pending.wait, pending.wait_async, (min(recheck, left),))
                ):
                    if cid in self._known:
                        return True  # its put ended (a failed put: look, below)
                if (yield from self._found(saver, config)) or left <= recheck:
                    return cid in self._known
                recheck *= 2
        finally:
            # Stored, found, or given up on: a put still to come needs no waiter (one
            # more marker on it waiting would look in the database, as above).
            with self._putting_lock:
                self._expected.pop(cid, None)

    def saw_marker(self, config: RunnableConfig, prefix: str) -> bool:
        """Whether the checkpoint `config` names held a tool node's marker whose task id
        starts with `prefix` when this saver last read it (no read here)."""
        seen = self._seen_writes.get(_cp_key(config)) or ()
        return any(c == STARTED_CHANNEL and t.startswith(prefix) for t, c in seen)

    def _found(self, saver: Any, config: RunnableConfig) -> Flow[bool]:
        tup = yield from call(saver, "get_tuple", config)
        if tup is not None:
            self._known.add(_cp_key(config))
        return tup is not None

    def _checkpoint_in_flight(self, config: RunnableConfig) -> _InFlight | None:
        if not (config.get("configurable") or {}).get("checkpoint_id"):
            return None
        with self._putting_lock:
            pending = self._putting.get(_cp_key(config))
        return None if pending is None or pending.is_set() else pending

    # The common case, decided once for both drivers: a run's own checkpoints and task
    # writes inside its hold need no step (a turn's input and its __start__ writes do).

    def _trusted_put(self, config: RunnableConfig, metadata: CheckpointMetadata) -> bool:
        key = _guarded_key(config)
        return (
            key is not None
            and metadata.get("source") != "input"
            and CONFIG_KEY_RUNTIME in config["configurable"]
            and self._held_by_run(key[0], config)
        )

    def _stored(self, config: RunnableConfig, out: RunnableConfig) -> RunnableConfig:
        if config["configurable"].get("checkpoint_id"):
            self.own_parents.add(_cp_key(config))
        return out

    def _trusted_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> bool:
        key = _guarded_key(config)
        if (
            key is None
            or CONFIG_KEY_RUNTIME not in config["configurable"]
            or task_path.rsplit(", ", 1)[-1] == START
            or not self._held_by_run(key[0], config)
        ):
            return False
        self._note_own(_cp_key(config), writes, task_id)
        return True

    def _put_steps(self, below: SaverView, *args: *PutArgs) -> _Steps:
        config, checkpoint, metadata, _ = args
        key = _guarded_key(config)
        if key is None:
            return (yield from below.flow("put", *args))
        parent = config["configurable"].get("checkpoint_id")
        is_input = metadata.get("source") == "input"
        if is_input and self.input_check is not None:
            values = self._run_logs(key[0], self.input_check.from_input_checkpoint(
                checkpoint["channel_values"].get(START)
            ))
            if values:
                base = self._bases.get(key[0])
                at = config if parent else None
                yield from self._check(below, at, values, base if base == parent else None)
        in_run = CONFIG_KEY_RUNTIME in config["configurable"]
        if in_run and self._held_by_run(key[0], config):
            # This run holds the thread for its turn and read it after taking the hold;
            # every other guarded writer (runs, update_state) waits for the hold. The
            # head this run read under its lock is the head; otherwise (a run from a
            # named checkpoint, inside exclusive()) one indexed query verifies it.
            if is_input and self._forks.pop(key[0], None) != parent:
                head = self._run_heads.pop(key[0], _UNREAD)
                if head is _UNREAD or head != parent:
                    head = yield _store(self.store.head, *key)
                self._refuse_moved(key, parent, head, metadata)
            # else: new input at the checkpoint the run named — a fork, stored as a
            # branch from it (readers of the head are unaffected).
            stored: RunnableConfig = yield from below.flow("put", *args)
            if parent:
                self.own_parents.add(_cp_key(config))
            if is_input and parent is None and set(checkpoint["channel_values"]) <= {START}:
                self._empty_roots.add(str(checkpoint["id"]))
            return stored
        updating = not in_run and (yield from self._hold_for_update(key[0], config))
        try:
            yield from _write_lock(self.store, key[0])
            try:
                if in_run or parent is not None:
                    head = yield _store(self.store.head, *key)
                    self._refuse_moved(key, parent, head, metadata)
                # else: a direct root put (module doc) is stored as given.
                if is_input and parent:
                    now = yield _store(self.store.write_keys, *key, parent)
                    self._check_unseen_writes(key, parent, now)
                out: RunnableConfig = yield from below.flow("put", *args)
                # Before the lock goes: this run's own late writes on `parent` (stored
                # concurrently with this checkpoint) must not look like strays.
                if parent:
                    self.own_parents.add(_cp_key(config))
            finally:
                yield release_lock(self.store.unlock, key[0])
        finally:
            if updating:
                yield release_lock(self.store.run_unlock, key[0])
        return out

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

    def _hold_for_update(self, thread_id: str, config: RunnableConfig) -> _Steps:
        """`update_state` and other writers outside a run: hold the thread for the one
        write, so it never lands inside another run's turn (per the thread's strategy).
        True when the lock was taken here (the caller releases it)."""
        if _holds(thread_id):
            return False  # an exclusive() block, or a node of the run that holds it
        enqueue = self.strategy_for(config) == "enqueue"
        if not (yield from _run_lock(self.store, thread_id, enqueue)):
            raise ConcurrentRunError(
                "a run is working on this thread (multitask_strategy='reject'); the "
                "update stored nothing",
                thread_id=thread_id,
            )
        return True

    def _put_writes_steps(
        self,
        below: SaverView,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> _Steps:
        args = (config, writes, task_id, task_path)
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
                    k: v for k, v in self.input_check.from_start_writes(writes).items()
                    if k in keys
                }
                if values:
                    yield from self._check(below, config, values, None)
            elif task_path.rsplit(", ", 1)[-1] == START:
                # task_path of a root pull task is "~__pregel_pull, <node>".
                values = self._run_logs(key[0], self.input_check.from_start_writes(writes))
                if values:
                    # At a thread's first checkpoint (at=None: empty logs) nothing is read.
                    at = None if cid in self._empty_roots else config
                    yield from self._check(below, at, values, self._bases.get(key[0]))
        if not is_update and self._held_by_run(key[0], config):
            # This run holds the thread for its whole turn: no other run can have
            # stored a result for its task, or a child of its checkpoint, meanwhile.
            self._note_own(_cp_key(config), writes, task_id)
            return (yield from below.flow("put_writes", *args))
        updating = is_update and (yield from self._hold_for_update(key[0], config))
        try:
            yield from _write_lock(self.store, key[0])
            try:
                yield from self._checked_writes(below, key, cid, args, is_update)
            finally:
                yield release_lock(self.store.unlock, key[0])
        finally:
            if updating:
                yield release_lock(self.store.run_unlock, key[0])

    def _checked_writes(
        self,
        below: SaverView,
        key: tuple[str, str],
        cid: str,
        args: tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str],
        is_update: bool,
    ) -> _Steps:
        """`put_writes(*args)` under the thread's short lock: refused when another run
        stored a different result for the task, or a child of `cid` (module doc)."""
        writes, task_id = args[1], args[2]
        # update_state replays a pending task's id on purpose: it replaces.
        if not is_update:
            stored = yield _store(self.store.writes, *key, cid, task_id)
            new = self._compare_writes(key, cid, task_id, writes, stored)
        else:
            new = True
        if new and (key[0], key[1], cid) not in self.own_parents:
            # Checkpoint ids grow with time (LangGraph's "latest" is the largest), so
            # only a head newer than `cid` can be a child of it: the common case —
            # `cid` is the head, or not stored yet — needs one indexed query.
            head = yield _store(self.store.head, *key)
            if head is not None and head > cid and (
                yield _store(self.store.has_child, *key, cid)
            ):
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
            if _same(self.serde.dumps_typed(value), old):
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

    def _check(
        self,
        below: SaverView,
        at: RunnableConfig | None,
        values: dict[str, Any],
        base: str | None,
    ) -> _Steps:
        assert self.input_check is not None
        yield from self.input_check.check_flow(below, at, values, base)

    def _note_own(self, cid: _CpKey, writes: Sequence[tuple[str, Any]], task_id: str) -> None:
        if len(self._own_writes) > 4096:
            self._own_writes.pop(next(iter(self._own_writes)))
        self._own_writes.setdefault(cid, set()).update((task_id, c) for c, _ in writes)


class GuardedSaver(LayeredSaver):
    """A saver whose outermost layer is the run guard (module doc); `inner` is the backend.

    `layers` below the guard are the other capabilities, in order (the saver module
    builds them)."""

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
    def input_check(self) -> InputCheck | None:
        return self.guard.input_check

    @property
    def multitask_strategy(self) -> MultitaskStrategy:
        return self.guard.multitask_strategy

    @multitask_strategy.setter
    def multitask_strategy(self, value: MultitaskStrategy) -> None:
        self.guard.multitask_strategy = _strategy(value)

    def set_multitask_strategy(self, thread_id: str, strategy: MultitaskStrategy | None) -> None:
        """What a run does when another run holds `thread_id` (None: the saver's default)."""
        self.guard.set_multitask_strategy(thread_id, strategy)

    def strategy_for(self, config: RunnableConfig) -> MultitaskStrategy:
        return self.guard.strategy_for(config)

    # -- the thread lifecycle (`threadlog.checkpoint.lifecycle`; LangGraph Server's
    # rollback, thread copy and TTL call these), on every backend

    @property
    def maintenance(self) -> lifecycle.Maintenance:
        """What the lifecycle flows need of this saver."""
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
        """Hold the thread around a block: `with saver.exclusive(tid): graph.invoke(...)`.

        Another holder — a run or an `exclusive` block, in this process or any other
        using the same database — makes this raise `ConcurrentRunError` at once
        (`wait=False`) before anything is stored, or wait its turn (`wait=True`).
        Runs inside the block do not wait for it. The lock dies with its process.
        """
        return self.guard.exclusive(thread_id, wait=wait)


class _InFlight:
    """A checkpoint being stored, which its task writes wait for: a thread on an event, a
    task on a future of its own loop — woken when the put ends, with no polling. (The
    event is made only for a thread that waits: most puts have no waiter at all.)"""

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
        # The run's context (and the tasks and background writes LangGraph copies from
        # it) knows it holds the thread: its writes skip the re-checks, a nested run
        # or update_state on the same thread does not wait for it.
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
        """The release under asyncio: the store's async unlock on the loop (else the
        unlock in a worker thread), finished even when the run's exit is cancelled
        meanwhile (shielded)."""
        if self._claim():
            op = release_lock(self.store.run_unlock, self.thread_id)
            assert op.async_ is not None  # release_lock gives both forms
            await op.async_(*op.args)


class _Recent:
    """A bounded set of recent checkpoints, ids or `_CpKey`s (oldest forgotten first)."""

    def __init__(self, size: int = 4096) -> None:
        self._ids: dict[object, None] = {}
        self._size = size
        self._lock = threading.Lock()

    def add(self, checkpoint_id: object) -> None:
        if checkpoint_id is None:
            return
        with self._lock:
            self._ids[checkpoint_id] = None
            while len(self._ids) > self._size:
                del self._ids[next(iter(self._ids))]

    def __contains__(self, checkpoint_id: object) -> bool:
        return checkpoint_id in self._ids


def _same_resent(value: Any, stored: Any) -> bool:
    """Whether `stored`, a write kept as what it added, is `value` as it was written: the
    same length, the same added items."""
    if not is_resent(stored) or not isinstance(value, list):
        return False
    count, items = int(stored["count"]), list(stored["items"])
    return len(value) == count + len(items) and value[count:] == items


def _logs_of(keys: tuple[str, ...], declared: Any) -> frozenset[str]:
    """Which of the message `keys` a graph declaring `declared` (name -> channel; None:
    not known) keeps as threadlog's log."""
    if not isinstance(declared, Mapping):
        return frozenset(keys)
    return frozenset(
        k for k in keys if k not in declared or isinstance(declared[k], MessageLogChannel)
    )


def _reader(config: RunnableConfig) -> tuple[Any, bool]:
    """(the loop starting a run with this read, or None; whether get_state shows it)."""
    if _guarded_key(config) is None:
        return None, False
    loop = running_loop()
    return loop, loop is None and in_get_state()


def _strategy(value: object) -> MultitaskStrategy:
    if value not in MULTITASK_STRATEGIES:
        raise ValueError(
            f"multitask_strategy must be one of {', '.join(MULTITASK_STRATEGIES)}, got {value!r}"
        )
    return cast(MultitaskStrategy, value)


def _with_errors(tup: CheckpointTuple, refused: Mapping[str, Exception]) -> CheckpointTuple:
    """`tup` with each refused task's writes replaced by its error (a failed task)."""
    kept = [w for w in tup.pending_writes or () if w[0] not in refused]
    kept += [(task_id, ERROR, err) for task_id, err in refused.items()]
    return tup._replace(pending_writes=kept)


def _write_keys(tup: CheckpointTuple) -> frozenset[tuple[str, str]]:
    """(task id, channel) of a checkpoint's task writes, LangGraph's upsert channels aside."""
    return frozenset(
        (task_id, channel)
        for task_id, channel, _ in tup.pending_writes or ()
        if channel not in WRITES_IDX_MAP
    )


def _same(new: tuple[str, bytes], old: StoredWrite) -> bool:
    return new[0] == old[0] and bytes(new[1]) == bytes(old[1])


_CpKey = tuple[str, str, str]  # thread_id, checkpoint_ns, checkpoint_id


def _cp_key(config: RunnableConfig, checkpoint_id: str | None = None) -> _CpKey:
    """The checkpoint `config` names (or `checkpoint_id` in its thread and namespace)."""
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
