"""`MessageLogChannel`: the message log as a LangGraph channel, and the `Messages` type.

* **Parallel writers.** Two branches of one superstep that both append conversation raise
  `ParallelWriteError`; parallel tool branches each add their result, placed in call order.

* **Delta storage.** A `DeltaChannel`: a checkpoint stores only its step's writes and a
  thread is rebuilt by replaying them (the log's writes are batching-invariant, which
  `DeltaChannel` requires). Periodic snapshots are off by default (`snapshot_frequency`).
* **Refused writes.** A step whose writes break a rule raises the `MessageLogError` and
  changes nothing; resuming that checkpoint reports the same error; `get_state` skips
  writes the log refuses and shows the last good state; new input continues the thread.
  Snapshots and plain lists read back as dicts are coerced to messages.
* **Cost.** The value is a `(MessageLog, version)` view: `copy()` is O(1), a write at the
  latest version goes in place, any other copies first. With `with_history_cache` on the
  saver, loading costs O(new writes) and the channel never snapshots; a channel a plain
  saver rebuilt snapshots every `PLAIN_SAVER_SNAPSHOT_FREQUENCY` updates, bounding that
  saver's walk back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, Self

from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import PendingWrite
from langgraph.errors import EmptyChannelError
from typing_extensions import TypedDict

from threadlog._upstream import (
    MISSING,
    DeltaSnapshot,
    in_state_preview,
    install_hooks,
    is_overwrite,
    on_run_input,
    on_update_state,
    stamp_message_ids,
)
from threadlog.errors import AppendOnlyError, MessageLogError
from threadlog.log.edits import update_item
from threadlog.log.message_log import MessageLog, append_messages, flatten_write
from threadlog.log.messages import coerce_message

__all__ = [
    "LOG_KINDS",
    "PLAIN_SAVER_SNAPSHOT_FREQUENCY",
    "CachedSeed",
    "KeyedWrites",
    "LogChannel",
    "MessageLogChannel",
    "Messages",
    "MessagesState",
    "SeedRegistry",
    "SeededSnapshot",
    "SnapshotToCache",
]

_Slot = tuple[str, str, str]  # thread_id, checkpoint_ns, channel


class SeedRegistry(Protocol):
    """Where a channel registers the log it rebuilt (a history cache, for instance)."""

    def put(self, slot: _Slot, checkpoint_id: str, log: Any, version: int) -> None: ...


@dataclass(slots=True, eq=False)
class CachedSeed:
    """A seed handed from a history cache to a channel: `log` at `version`."""

    log: Any
    version: int
    at: str | None = None  # the checkpoint it is the value of, when not the entry's own


class SeededSnapshot(DeltaSnapshot):
    """A stored snapshot the history cache holds as a log: channels take `seed`."""

    seed: CachedSeed


class SnapshotToCache(DeltaSnapshot):
    """A stored snapshot the history cache holds nothing for: channels `register` the log they
    build from it, the log at `checkpoint_id`."""

    cache: SeedRegistry
    slot: _Slot
    checkpoint_id: str

    def register(self, log: Any, version: int) -> None:
        self.cache.put(self.slot, self.checkpoint_id, log, version)


class KeyedWrites(list[PendingWrite]):
    """The writes of one channel's history (a plain list to every reader), carrying where to
    `register` the rebuilt log. `states`: `(n, checkpoint_id)` for each checkpoint on the walk
    (the seed plus the first `n` writes); the channel reports the log's version there."""

    __slots__ = ("cache", "checkpoint_id", "passed", "slot", "states")

    def __init__(
        self, writes: Sequence[PendingWrite], cache: SeedRegistry, slot: _Slot, checkpoint_id: str
    ) -> None:
        super().__init__(writes)
        self.cache = cache
        self.slot = slot
        self.checkpoint_id = checkpoint_id
        self.states: list[tuple[int, str]] = list(getattr(writes, "states", ()))
        self.passed: list[tuple[str, int]] = []

    def register(self, log: Any, version: int) -> None:
        self.cache.put(self.slot, self.checkpoint_id, log, version)
        states = getattr(self.cache, "states_of", None)
        if states is not None and self.passed:
            states(self.slot, log, self.passed)


# Effectively "never by count": LangGraph still snapshots every 5000 supersteps
# (DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT), which bounds a cold replay.
DEFAULT_SNAPSHOT_FREQUENCY = 1_000_000_000
# A channel rebuilt by a plain saver's own walk: DeltaChannel's default cadence.
PLAIN_SAVER_SNAPSHOT_FREQUENCY = 100


def _batch_reducer_messages(state: list[BaseMessage], writes: Sequence[Any]) -> list[BaseMessage]:
    # DeltaChannel's batch reducer signature, for code that calls `.reducer` directly.
    out = state
    for w in writes:
        out = append_messages(out, w)
    return out


LOG_KINDS: list[type[LogChannel]] = []
"""threadlog's delta channels, the message log first: what thread maintenance rebuilds."""


class LogChannel(DeltaChannel[Any]):
    """What threadlog's delta channels share: a fixed reducer, equality by kind and cadence, the
    value as a view `(_log, _ver)` of a shared log, a cadence decided by how it was loaded."""

    __slots__ = ("_fixed_frequency", "_log", "_seeded", "_ver", "_walked")
    _threadlog_own = True  # `_upstream.OWN_MARK`: a graph with this channel is threadlog's
    _kind: type[LogChannel]
    _reduce: Callable[[Any, Sequence[Any]], Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if LogChannel in cls.__bases__:
            cls._kind = cls  # subclasses of a channel compare equal to it, as before
            LOG_KINDS.append(cls)

    def __init__(
        self,
        reducer: Callable[[Any, Sequence[Any]], Any] | None = None,
        typ: Any = None,
        *,
        snapshot_frequency: int | None = None,
    ) -> None:
        # A reducer: LangGraph re-creating the channel for a graph declaring it.
        if reducer is not None:
            install_hooks()
        self._seeded = self._walked = False  # loaded from a history cache / a saver's walk
        # LangGraph passes `snapshot_frequency` back: the default means "decide per instance".
        self._fixed_frequency = (
            None
            if snapshot_frequency is None or snapshot_frequency == DEFAULT_SNAPSHOT_FREQUENCY
            else snapshot_frequency
        )
        frequency = DEFAULT_SNAPSHOT_FREQUENCY if snapshot_frequency is None else snapshot_frequency
        super().__init__(type(self)._reduce, list, snapshot_frequency=frequency)
        self._log: Any = None
        self._ver = 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self._kind) and other._fixed_frequency == self._fixed_frequency

    def __hash__(self) -> int:
        return hash((self._kind, self._fixed_frequency))

    @property
    def snapshot_frequency(self) -> int:
        """Updates between full snapshots. Unless set: never by count when a history cache seeded
        it (or a new thread); `PLAIN_SAVER_SNAPSHOT_FREQUENCY` when a plain saver's walk
        rebuilt it, since that saver walks back to the nearest snapshot on every load."""
        if self._fixed_frequency is not None:
            return self._fixed_frequency
        if self._walked and not self._seeded and self._may_snapshot():
            return PLAIN_SAVER_SNAPSHOT_FREQUENCY
        return DEFAULT_SNAPSHOT_FREQUENCY

    @snapshot_frequency.setter
    def snapshot_frequency(self, value: int) -> None:
        # DeltaChannel.__init__ assigns it (and validates it); the property decides.
        pass

    def _may_snapshot(self) -> bool:
        # Whether a count-based snapshot keeps everything this channel's log holds.
        return True

    def _loaded_by(self, writes: Sequence[PendingWrite]) -> None:
        if isinstance(writes, KeyedWrites):
            self._seeded = True  # a history cache handed the writes over
        else:
            self._walked = True

    @staticmethod
    def _items_of(log: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def _load(items: Any) -> Any:
        raise NotImplementedError

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = self._new()
        if isinstance(checkpoint, CachedSeed | SeededSnapshot):
            seed = checkpoint if isinstance(checkpoint, CachedSeed) else checkpoint.seed
            new._seeded = True
            new._set(seed.log, seed.version)
            return new
        if isinstance(checkpoint, DeltaSnapshot):
            new._set(self._load(checkpoint.value or ()))
            if isinstance(checkpoint, SnapshotToCache):
                checkpoint.register(new._log, new._ver)
        else:  # nothing yet, or the plain list a non-delta channel stored: migrated
            new._set(self._load(() if checkpoint is MISSING or checkpoint is None else checkpoint))
        return new

    def _new(self) -> Self:
        new = self.__class__(snapshot_frequency=self._fixed_frequency)
        new.key = self.key
        return new

    def _set(self, log: Any, version: int | None = None) -> None:
        self._log = log
        self._ver = 0 if log is None else log.version if version is None else version
        self.value = MISSING if log is None else self._items_of(log)

    def copy(self) -> Self:
        new = self._new()
        new._seeded, new._walked = self._seeded, self._walked
        if self._log is not None:
            new._set(self._log, self._ver)  # O(1): the log is shared, see `_set`
        return new

    def is_available(self) -> bool:
        return self._log is not None


class MessageLogChannel(LogChannel):
    """An append-only, pairing-checked message list (rules: `threadlog.log`). `get()` returns
    a fresh list, so a node mutating the list it was handed cannot corrupt the log."""

    __slots__ = ()
    _reduce = staticmethod(_batch_reducer_messages)
    _log: MessageLog | None

    @property
    def log(self) -> MessageLog:
        """The log at this channel's version, maybe shared with other channels."""
        if self._log is None:
            raise EmptyChannelError()
        if self._ver != self._log.version:
            with WRITE_LOCK:
                self._set(self._log.at(self._ver))
        return self._log

    @staticmethod
    def _items_of(log: MessageLog) -> list[BaseMessage]:
        return log.messages

    def _may_snapshot(self) -> bool:
        # LangGraph snapshots the view: none by count once the log hides messages.
        return self._log is None or not self._log.hides_any

    def _write(self, writes: list[list[Any]], *, single_writer: bool, stored: bool = False) -> None:
        """Append one superstep's writes: in place at the log's tip, else on a copy."""
        log = self._log
        if log is None:
            log = MessageLog()
            log.extend_writes(writes, single_writer=single_writer, stored=stored)
            self._set(log)
            return
        with WRITE_LOCK:
            if self._ver == log.version:
                log.extend_writes(writes, single_writer=single_writer, stored=stored)
                self._ver = log.version
                return
            # Someone sharing this log wrote first; if exactly these messages, move up.
            talking = sum(any(not isinstance(m, ToolMessage) for m in w) for w in writes)
            if not single_writer or talking <= 1:
                ver = log.fast_forward(self._ver, [m for w in writes for m in w])
                if ver is not None:
                    self._ver = ver
                    return
            own = log.at(self._ver)  # under the lock: a consistent copy
        own.extend_writes(writes, single_writer=single_writer, stored=stored)
        self._set(own)

    @staticmethod
    def _load(items: Any) -> MessageLog:
        # Dicts read back by a serializer that does not rebuild messages are coerced.
        return MessageLog(
            m if isinstance(m, BaseMessage) else coerce_message(m, position=i)
            for i, m in enumerate(items)
        )

    def from_checkpoint(self, checkpoint: Any) -> Self:
        install_hooks()  # a channel given to a graph directly, not through its state
        return super().from_checkpoint(checkpoint)

    def replay_writes(self, writes: Sequence[PendingWrite]) -> None:
        self._loaded_by(writes)
        if self._log is None:
            self._set(MessageLog())
        states = writes.states if isinstance(writes, KeyedWrites) else []
        s = 0
        for i, (_, _, value) in enumerate(writes):
            while s < len(states) and states[s][0] <= i:
                assert isinstance(writes, KeyedWrites)
                writes.passed.append((states[s][1], self._ver))
                s += 1
            _refuse_overwrite(value)
            self._write([flatten_write(value)], single_writer=False, stored=True)
        if self._log is not None:
            with WRITE_LOCK:
                self._log.note_open_requests()
        if isinstance(writes, KeyedWrites) and self._log is not None:
            for _, cid in states[s:]:  # checkpoints whose writes were none
                writes.passed.append((cid, self._ver))
            writes.register(self._log, self._ver)

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        try:
            for v in values:
                _refuse_overwrite(v)
            self._write([flatten_write(v) for v in values], single_writer=True)
        except MessageLogError:
            if in_state_preview():
                # `get_state` previewing a failed step's writes: the last good state.
                return False
            raise
        return True

    def get(self) -> list[AnyMessage]:
        if self._log is None:
            raise EmptyChannelError()
        with WRITE_LOCK:  # a shared log may be growing in another thread
            return self._log.view_at(self._ver)  # type: ignore[return-value]


# One lock keeps "am I at the tip?" and the write together when threads share a log;
# the history cache takes it to read a shared log while a run may append.
WRITE_LOCK = threading.Lock()


def _refuse_overwrite(value: Any) -> None:
    if is_overwrite(value):
        raise AppendOnlyError(
            "Overwrite would replace the whole message history",
            fix="the message log is append-only; to change what the model sees, use "
            "threadlog.ContextPolicy, which records trimming as compaction events",
        )


def _update_state_writes(graph: Any, values: Any) -> Any:
    """`update_state`'s messages with an id, as `edits.update_item`."""
    channels = getattr(graph, "channels", None)
    if not isinstance(values, dict) or not isinstance(channels, dict):
        return values
    keys = [k for k in values if isinstance(channels.get(k), MessageLogChannel)]
    if not keys:
        return values
    out = dict(values)
    for key in keys:
        value = values[key]
        if is_overwrite(value):
            continue
        out[key] = [update_item(m) if _revisable(m) else m for m in flatten_write(value)]
    return out


def _revisable(item: Any) -> bool:
    if isinstance(item, RemoveMessage):
        return False
    if isinstance(item, BaseMessage):
        return bool(item.id)
    return (
        isinstance(item, dict)
        and bool(item.get("id"))
        and ("role" in item or item.get("type") in ("human", "ai", "system", "tool"))
    )


on_update_state(_update_state_writes)


def _stamp_input_ids(run_input: Any, specs: Any) -> None:
    keys = [k for k, spec in specs.items() if isinstance(spec, MessageLogChannel)]
    if not keys:
        return
    if isinstance(run_input, dict):
        values = {k: run_input[k] for k in keys if k in run_input}
    else:  # a pydantic or dataclass state given as input
        values = {k: getattr(run_input, k) for k in keys if hasattr(run_input, k)}
    try:
        stamp_message_ids(specs, values)
    except Exception:  # a write LangGraph cannot read fails where it always has
        return


on_run_input(_stamp_input_ids)


Messages = Annotated[list[AnyMessage], MessageLogChannel()]
"""Annotate a state key with this to make it a message log: `messages: Messages`."""


class MessagesState(TypedDict):
    """Drop-in for `langgraph.graph.MessagesState`; subclass it to add keys."""

    messages: Messages
