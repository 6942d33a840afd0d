"""A warm-process cache of rebuilt message logs, so a turn does not re-read its thread.

Contract:

* `HistoryLayer` (the innermost layer of `threadlog.checkpointer()`) answers
  `get_delta_channel_history` from a `HistoryCache` first; `with_history_cache(saver)` binds
  it onto any saver and returns the same object.
* An entry maps `(thread_id, checkpoint_ns, channel)` to the log at one checkpoint id.
  Loading checkpoint `C` walks `C`'s parents to the cached id and hands the channel that log
  plus the writes in between: a warm turn costs O(new writes).
* Anything the cache cannot prove exactly right (no entry, a walk longer than `max_walk`,
  a stored snapshot on the way) is read by the saver itself. A snapshot this process
  stores, or a load starting at one, is adopted when it holds the cached log's objects.
* An ancestor a walk passed is the cached log at the version recorded there
  (`KeyedWrites.states`); the cache never steps back over stored writes.
* A walk over checkpoints this saver stored needs no query (`own_writes`); else the
  backend's one- or two-query `walk`, else `get_tuple` per step. A cold read decodes each
  distinct stored message once (`shared_records`).
* Only threadlog's channels take part: a delta channel the loading graph declares as
  another kind gets the saver's own answer.
* Bounded: at most `max_messages` messages across entries (least recently used first out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
)

from threadlog._upstream import DeltaSnapshot, declared_channels
from threadlog.channel import (
    WRITE_LOCK,
    CachedSeed,
    KeyedWrites,
    LogChannel,
    SeededSnapshot,
    SnapshotToCache,
)
from threadlog.checkpoint.backends import Backend, backend_of
from threadlog.checkpoint.layered import Layer, PutArgs, SaverView, bind_layers, layer_of
from threadlog.checkpoint.own_writes import OwnWrites
from threadlog.checkpoint.resent import ResentLayer
from threadlog.checkpoint.shared_records import sharing
from threadlog.flows import Flow, Io

__all__ = [
    "CachedSeed",
    "HistoryCache",
    "HistoryLayer",
    "KeyedWrites",
    "history_cache_of",
    "with_history_cache",
]

DEFAULT_MAX_MESSAGES = 200_000
DEFAULT_MAX_WALK = 64
_MAX_STATES = 4096  # checkpoint versions kept per slot (a history view's worth, many times)

_Slot = tuple[str, str, str]  # thread_id, checkpoint_ns, channel
# checkpoint id, the log a channel registered (MessageLog, EventLog), its version there
_Entry = tuple[str, Any, int]
S = TypeVar("S", bound=BaseCheckpointSaver[Any])


class HistoryCache:
    """Per (thread, namespace, channel): the log at the last checkpoint loaded there."""

    def __init__(
        self, *, max_messages: int = DEFAULT_MAX_MESSAGES, max_walk: int = DEFAULT_MAX_WALK
    ) -> None:
        self.max_messages = max_messages
        self.max_walk = max_walk
        self._entries: OrderedDict[_Slot, _Entry] = OrderedDict()
        # Per slot: the entry's log's version at each checkpoint a walk passed.
        self._states: dict[_Slot, OrderedDict[str, int]] = {}
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """Messages held across all entries."""
        return self._size

    def get(self, slot: _Slot) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None:
                self._entries.move_to_end(slot)
            return entry

    def put(self, slot: _Slot, checkpoint_id: str, log: Any, version: int) -> None:
        with self._lock:
            old = self._entries.pop(slot, None)
            if old is not None:
                self._size -= old[2]
            if old is None or old[1] is not log or version > self.max_messages:
                self._states.pop(slot, None)
            if version > self.max_messages:
                return  # one thread larger than the whole budget: not cached
            self._entries[slot] = (checkpoint_id, log, version)
            self._size += version
            while self._size > self.max_messages:
                evicted_slot, evicted = self._entries.popitem(last=False)
                self._size -= evicted[2]
                self._states.pop(evicted_slot, None)

    def states_of(self, slot: _Slot, log: Any, passed: Sequence[tuple[str, int]]) -> None:
        """Record `log`'s versions at the checkpoints a walk passed (if the slot holds it)."""
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry[1] is not log:
                return
            known = self._states.setdefault(slot, OrderedDict())
            for cid, version in passed:
                known[cid] = version
                known.move_to_end(cid)
            while len(known) > _MAX_STATES:
                known.popitem(last=False)

    def state_at(self, slot: _Slot, checkpoint_id: str) -> tuple[Any, int] | None:
        """(the slot's log, its version) at `checkpoint_id`, when a walk passed it."""
        with self._lock:
            entry = self._entries.get(slot)
            known = self._states.get(slot)
            if entry is None or known is None:
                return None
            if checkpoint_id == entry[0]:
                return entry[1], entry[2]
            version = known.get(checkpoint_id)
            return None if version is None else (entry[1], version)

    def forget(self, thread_id: str) -> None:
        """Drop a thread's entries (its stored history was rewritten)."""
        with self._lock:
            for slot in [s for s in self._entries if s[0] == thread_id]:
                self._size -= self._entries.pop(slot)[2]
                self._states.pop(slot, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._states.clear()
            self._size = 0


class HistoryLayer(Layer):
    """The history cache as a saver layer: delta-history reads consult `cache` first."""

    name = "history"

    def __init__(self, cache: HistoryCache, own: OwnWrites | None = None) -> None:
        self.cache = cache
        self.own = own  # what this saver stored itself: walks with no query

    def get_delta_channel_history(
        self, below: SaverView, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Flow[Mapping[str, DeltaChannelHistory]]:
        # A cached log is a seed only threadlog's channels can take.
        foreign = _foreign(channels)
        if not foreign:
            return (yield from self._history(below, config, channels))
        out: dict[str, DeltaChannelHistory] = dict(
            (yield from below.flow("get_delta_channel_history", config=config, channels=foreign))
        )
        ours = [ch for ch in channels if ch not in foreign]
        if ours:
            out.update((yield from self._history(below, config, ours)))
        return out

    def _history(
        self, below: SaverView, config: RunnableConfig, channels: Sequence[str]
    ) -> Flow[Mapping[str, DeltaChannelHistory]]:
        if not channels:
            return {}
        cache = self.cache
        thread_id, ns, target = _address(config)
        if target is None:
            tup = yield from below.flow("get_tuple", config)
            if tup is None:
                plain: Mapping[str, DeltaChannelHistory] = yield from below.flow(
                    "get_delta_channel_history", config=config, channels=channels
                )
                return plain
            target = str(tup.config["configurable"]["checkpoint_id"])
            config = tup.config
        out: dict[str, DeltaChannelHistory] = {}
        rest: list[str] = []
        slot = (thread_id, ns)
        for cached_id, group in _groups(cache, thread_id, ns, channels, rest).items():
            # uuid6 ids sort by creation: an older target is likely an ancestor.
            back_first = target < cached_id
            found = None
            if back_first:
                found = self._back_from_cached(slot, group, target)
            if found is None:
                walked = yield from self._walk_to_cached(
                    below, thread_id, ns, list(group), config, target, cached_id
                )
                if walked is not None:
                    cache.hits += len(group)
                    found = {
                        ch: _keyed(walked[ch], CachedSeed(log, v), cache, (*slot, ch), target)
                        for ch, (_, log, v) in group.items()
                    }
            if found is None and not back_first:
                found = self._back_from_cached(slot, group, target)
            if found is None:
                rest.extend(group)
            else:
                out.update(found)
        if rest and self.own is not None:
            # A thread this process started: its whole history may be this saver's own.
            whole = self.own.walk((thread_id, ns), rest, target, None, cache.max_walk)
            if whole is not None:
                cache.hits += len(rest)
                for ch in rest:
                    out[ch] = _keyed(whole[ch], _NO_SEED, cache, (thread_id, ns, ch), target)
                rest = []
        if rest:
            cache.misses += 1
            backend = backend_of(below.inner)
            fast = yield Io(backend.read, backend.aread, (thread_id, ns, rest, target))
            if fast is None:
                with sharing(getattr(backend.saver, "serde", None)):
                    fast = yield from below.flow(
                        "get_delta_channel_history", config=config, channels=rest
                    )
            for ch in rest:
                got = fast[ch]
                out[ch] = _keyed(
                    got["writes"], got.get("seed", _NO_SEED), cache, (thread_id, ns, ch), target
                )
        return out

    def put(self, below: SaverView, *args: *PutArgs) -> Flow[RunnableConfig]:
        config, checkpoint, _, _ = args
        out = yield from below.flow("put", *args)
        _adopt_snapshots(self.cache, config, checkpoint)
        return out  # type: ignore[no-any-return]

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        tup = yield from below.flow("get_tuple", config)
        if tup is not None:
            _seed_snapshots(self.cache, tup)
        return tup  # type: ignore[no-any-return]

    def _walk_to_cached(
        self,
        below: SaverView,
        thread_id: str,
        ns: str,
        channels: list[str],
        config: RunnableConfig,
        target: str,
        cached_id: str,
    ) -> Flow[dict[str, list[PendingWrite]] | None]:
        if target == cached_id:
            return {ch: [] for ch in channels}
        max_walk = self.cache.max_walk
        if self.own is not None:
            own = self.own.walk((thread_id, ns), channels, target, cached_id, max_walk)
            if own is not None:
                return own
        walked = yield from _sql_walk(below, thread_id, ns, channels, target, cached_id, max_walk)
        if walked is not _NO_SQL:
            return walked  # type: ignore[no-any-return]
        tup = yield from below.flow("get_tuple", config)
        collected: list[list[PendingWrite]] = []
        for _ in range(max_walk):
            cursor = None if tup is None else tup.parent_config
            tup = None if cursor is None else (yield from below.flow("get_tuple", cursor))
            if tup is None:
                return None
            # The cached checkpoint's own writes lead to its child: they belong too.
            collected.append([w for w in tup.pending_writes or () if w[1] in channels])
            if tup.checkpoint["id"] == cached_id:
                flat = [w for ws in reversed(collected) for w in ws]  # oldest first
                return {ch: [w for w in flat if w[1] == ch] for ch in channels}
            if any(ch in tup.checkpoint["channel_values"] for ch in channels):
                return None  # a snapshot on the way (a fork starts there): the saver's read
        return None

    def _back_from_cached(
        self, at: tuple[str, str], group: _Group, target: str
    ) -> dict[str, DeltaChannelHistory] | None:
        """The cached log at its version at `target`, when a walk building it passed
        `target`; not registered, so the entry stays at the newest checkpoint."""
        out: dict[str, DeltaChannelHistory] = {}
        for ch in group:
            found = self.cache.state_at((*at, ch), target)
            if found is None:
                return None
            out[ch] = {"seed": CachedSeed(found[0], found[1], at=target), "writes": []}
        self.cache.hits += len(out)
        return out


_NO_SQL: Any = object()  # the backend has no one-query walk: walk with get_tuple
_NO_SEED: Any = object()


def _sql_walk(
    below: SaverView,
    thread_id: str,
    ns: str,
    channels: list[str],
    target: str,
    cached_id: str,
    max_walk: int,
) -> Flow[Any]:
    """The backend's one- or two-query walk, or `_NO_SQL` when it has none."""
    backend = backend_of(below.inner)
    kind = type(backend)
    sync = backend.walk if kind.walk is not Backend.walk else _no_sql
    async_ = backend.awalk if kind.awalk is not Backend.awalk else _ano_sql
    return (yield Io(sync, async_, (thread_id, ns, channels, target, cached_id, max_walk)))


def _no_sql(*_: Any) -> Any:
    return _NO_SQL


async def _ano_sql(*_: Any) -> Any:
    return _NO_SQL


_Group = dict[str, _Entry]  # channel -> its cache entry (all at one checkpoint id)


def _adopt_snapshots(cache: HistoryCache, config: RunnableConfig, checkpoint: Checkpoint) -> None:
    """Move a slot's cached id to `checkpoint` when it stores a snapshot of the cached
    log: LangGraph snapshots the live channel's value, the very objects of that log."""
    values = checkpoint.get("channel_values") or {}
    if not any(isinstance(v, DeltaSnapshot) for v in values.values()):
        return
    thread_id, ns, _ = _address(config)
    for ch, value in values.items():
        if not isinstance(value, DeltaSnapshot) or not isinstance(value.value, list):
            continue
        slot = (thread_id, ns, ch)
        entry = cache.get(slot)
        if entry is not None and (version := _version_holding(entry[1], value.value)) is not None:
            cache.put(slot, str(checkpoint["id"]), entry[1], version)


def _seed_snapshots(cache: HistoryCache, tup: CheckpointTuple) -> None:
    """Mark a stored snapshot at exactly a cached checkpoint id with the cached log; one
    whose slot the cache holds nothing for, with where to register the log a channel
    builds from it (`SnapshotToCache`: the snapshot is the value at this checkpoint)."""
    values = tup.checkpoint.get("channel_values") or {}
    if not any(type(v) is DeltaSnapshot for v in values.values()):
        return
    thread_id, ns, _ = _address(tup.config)
    cid = str(tup.checkpoint["id"])
    foreign = _foreign(list(values))
    for ch, value in list(values.items()):
        if type(value) is not DeltaSnapshot or ch in foreign:
            continue
        slot = (thread_id, ns, ch)
        entry = cache.get(slot)
        if entry is None:
            caching = SnapshotToCache(value.value)
            caching.cache, caching.slot, caching.checkpoint_id = cache, slot, cid
            values[ch] = caching
        elif entry[0] == cid:
            seeded = SeededSnapshot(value.value)
            seeded.seed = CachedSeed(entry[1], entry[2])
            values[ch] = seeded


def _foreign(channels: Sequence[str]) -> list[str]:
    """The channels the graph LangGraph is loading declares as another delta channel."""
    declared = declared_channels()
    if declared is None:
        return []
    return [ch for ch in channels if ch in declared and not isinstance(declared[ch], LogChannel)]


def _version_holding(log: Any, items: list[Any]) -> int | None:
    """The version of `log` whose value is exactly `items` (the same objects), or None."""
    n = len(items)
    if n > getattr(log, "version", -1):
        return None
    with WRITE_LOCK:  # the log may be growing in the run's next step
        held = log.messages_at(n) if hasattr(log, "messages_at") else list(log.events[:n])
    if len(held) != n or any(a is not b for a, b in zip(held, items, strict=True)):
        return None
    return n


def _groups(
    cache: HistoryCache, thread_id: str, ns: str, channels: Sequence[str], rest: list[str]
) -> dict[str, _Group]:
    """The channels' cache entries grouped by cached checkpoint id; misses go to `rest`."""
    groups: dict[str, _Group] = {}
    for ch in channels:
        entry = cache.get((thread_id, ns, ch))
        if entry is None:
            rest.append(ch)
        else:
            groups.setdefault(entry[0], {})[ch] = entry
    return groups


def _address(config: RunnableConfig) -> tuple[str, str, str | None]:
    conf = config.get("configurable") or {}
    return str(conf.get("thread_id")), str(conf.get("checkpoint_ns", "")), get_checkpoint_id(config)


def _keyed(
    writes: Sequence[PendingWrite], seed: Any, cache: HistoryCache, slot: _Slot, target: str
) -> DeltaChannelHistory:
    out: DeltaChannelHistory = {"writes": KeyedWrites(writes, cache, slot, target)}
    if seed is not _NO_SEED:
        out["seed"] = seed
    return out


def with_history_cache(
    saver: S,
    *,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    max_walk: int = DEFAULT_MAX_WALK,
) -> S:
    """Give any `BaseCheckpointSaver` a warm-process history cache; returns the same
    object, its class unchanged. Calling it twice keeps the first cache."""
    if layer_of(saver, HistoryLayer) is not None:
        return saver
    cache = HistoryCache(max_messages=max_messages, max_walk=max_walk)
    # Reads only: writes threadlog's saver stored may name the history they re-sent.
    return bind_layers(saver, [ResentLayer(cache, None), HistoryLayer(cache)])


def history_cache_of(saver: BaseCheckpointSaver[Any]) -> HistoryCache | None:
    """The cache serving `saver` (or the saver wrapping it), if any."""
    layer = layer_of(saver, HistoryLayer)
    return None if layer is None else layer.cache
