"""The checkpoints and writes a saver stored itself, so the history cache's walk needs no query.

Contract:

* `OwnWritesLayer` records every checkpoint this saver `put` (its parent, the channels it
  stores a value for) and every task write it `put_writes`, kept as storage keeps them.
* `walk(...)` returns the channels' writes from the cached checkpoint (or, with
  `cached_id=None`, the thread's first) up to the target, as the SQL walk would, only
  when every checkpoint on the way was stored by this saver, none holds a value for the
  channels, and none was seen (`get_tuple`) holding a write this saver did not store.
  Anything else returns None and the caller queries the database.
* Bounded: per thread, the checkpoints newer than the last walk's target (at most 512),
  for at most `max_threads` threads (least recently written first out).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)

from threadlog.checkpoint.backends.base import Stepped
from threadlog.checkpoint.layered import Layer, PutArgs, PutWritesArgs, SaverView, layer_of
from threadlog.flows import Flow

__all__ = ["OwnWrites", "OwnWritesLayer", "own_writes_of"]

DEFAULT_MAX_THREADS = 256  # a forgotten thread's next walk is one query
_MAX_PER_THREAD = 512  # checkpoints kept per thread when no walk trims them

# (task_path, task_id, idx) -> (channel, value)
_Writes = dict[tuple[str, str, int], tuple[str, Any]]


@dataclass(slots=True, eq=False)
class _Stored:
    """One checkpoint this saver stored (or is storing: its writes may come first)."""

    stored: bool = False  # its `put` returned
    parent: str | None = None
    values: frozenset[str] = frozenset()  # channels it stores a value for
    writes: _Writes = field(default_factory=dict)
    foreign: bool = False  # seen holding a write this saver did not store


class OwnWrites:
    """Per (thread, namespace): the checkpoints this saver stored, by id."""

    def __init__(self, max_threads: int = DEFAULT_MAX_THREADS) -> None:
        self.max_threads = max_threads
        self._threads: OrderedDict[tuple[str, str], dict[str, _Stored]] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, key: tuple[str, str], cid: str) -> _Stored:
        stored = self._threads.get(key)
        if stored is None:
            stored = self._threads[key] = {}
            while len(self._threads) > self.max_threads:
                self._threads.popitem(last=False)
        else:
            self._threads.move_to_end(key)
        entry = stored.get(cid)
        if entry is None:
            entry = stored[cid] = _Stored()
            if len(stored) > _MAX_PER_THREAD:  # turns longer than any walk: keep the newest
                for old in sorted(stored)[: len(stored) - _MAX_PER_THREAD // 2]:
                    del stored[old]
        return entry

    def put(self, key: tuple[str, str], cid: str, parent: str | None, values: Any) -> None:
        with self._lock:
            entry = self._entry(key, cid)
            entry.parent, entry.values, entry.stored = parent, frozenset(values), True

    def put_writes(
        self,
        key: tuple[str, str],
        cid: str,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        with self._lock:  # may come before their checkpoint's put
            entry = self._entry(key, cid)
            for i, (channel, value) in enumerate(writes):
                # As storage keeps them: special channels replaced, others kept first.
                special = WRITES_IDX_MAP.get(channel)
                if special is not None:
                    entry.writes[(task_path, task_id, special)] = (channel, value)
                else:
                    entry.writes.setdefault((task_path, task_id, i), (channel, value))

    def seen(self, key: tuple[str, str], cid: str, pending: Sequence[PendingWrite]) -> None:
        """A read of `cid` found `pending`: a write not stored here makes it foreign."""
        with self._lock:
            entry = self._threads.get(key, {}).get(cid)
            if entry is None or entry.foreign:
                return
            mine = Counter((task, ch) for (_, task, _), (ch, _) in entry.writes.items())
            entry.foreign = bool(Counter((str(t), ch) for t, ch, _ in pending) - mine)

    def forget(self, thread_id: str) -> None:
        with self._lock:
            for key in [k for k in self._threads if k[0] == thread_id]:
                del self._threads[key]

    def descends(self, key: tuple[str, str], cid: str, ancestor: str, max_walk: int) -> bool:
        """Whether `cid` is `ancestor` or descends from it through checkpoints stored here
        (within `max_walk` parents)."""
        with self._lock:
            stored = self._threads.get(key)
            if stored is None:
                return False
            for _ in range(max_walk + 1):
                if cid == ancestor:
                    return True
                entry = stored.get(cid)
                if entry is None or not entry.stored or entry.parent is None:
                    return False
                cid = entry.parent
            return False

    def walk(
        self,
        key: tuple[str, str],
        channels: Sequence[str],
        target: str,
        cached_id: str | None,
        max_walk: int,
    ) -> dict[str, list[PendingWrite]] | None:
        """Each channel's writes from `cached_id` (None: the thread's root) up to `target`,
        or None (module doc)."""
        with self._lock:
            stored = self._threads.get(key)
            head = None if stored is None else stored.get(target)
            if stored is None or head is None or not head.stored:
                return None
            if cached_id is None and any(ch in head.values for ch in channels):
                return None
            chain: list[_Stored] = []
            ids: list[str] = []
            cid = head.parent
            while cid is not None:
                entry = stored.get(cid)
                if entry is None or not entry.stored or entry.foreign or len(chain) >= max_walk:
                    return None
                chain.append(entry)
                ids.append(cid)
                if cid == cached_id:
                    break
                if any(ch in entry.values for ch in channels):
                    return None  # a snapshot on the way: the saver's read decides
                cid = entry.parent
            else:
                if cached_id is not None:
                    return None  # a root reached without meeting the cached checkpoint
            out: dict[str, list[PendingWrite]] = {ch: Stepped() for ch in channels}
            for entry, at in zip(reversed(chain), reversed(ids), strict=True):
                # Oldest first; a checkpoint's value is the seed plus the writes before it.
                for ch in channels:
                    writes = out[ch]
                    assert isinstance(writes, Stepped)
                    writes.states.append((len(writes), at))
                for path, task_id, idx in sorted(
                    entry.writes, key=lambda k: writes_sort_key(k[0], k[1], k[2])
                ):
                    channel, value = entry.writes[(path, task_id, idx)]
                    if channel in out:
                        out[channel].append((task_id, channel, value))
            # The next walk starts at `target`: older checkpoints are not walked again.
            for old in [c for c in stored if c < target]:
                del stored[old]
            return out


def _key(config: RunnableConfig) -> tuple[tuple[str, str], str] | None:
    conf = config.get("configurable") or {}
    thread_id, cid = conf.get("thread_id"), conf.get("checkpoint_id")
    if thread_id is None or not cid:
        return None
    return (str(thread_id), str(conf.get("checkpoint_ns") or "")), str(cid)


class OwnWritesLayer(Layer):
    """Records the puts and writes that pass through it; no I/O of its own."""

    name = "own_writes"

    def __init__(self, record: OwnWrites | None = None) -> None:
        self.record = record if record is not None else OwnWrites()

    def put(self, below: SaverView, *args: *PutArgs) -> Flow[RunnableConfig]:
        config, checkpoint, _, _ = args
        out: RunnableConfig = yield from below.flow("put", *args)
        stored = _key(out)
        if stored is not None:
            parent = (config.get("configurable") or {}).get("checkpoint_id")
            self.record.put(
                stored[0],
                stored[1],
                str(parent) if parent else None,
                checkpoint.get("channel_values") or {},
            )
        return out

    def put_writes(self, below: SaverView, *args: *PutWritesArgs) -> Flow[None]:
        config, writes, task_id, task_path = args
        yield from below.flow("put_writes", *args)
        at = _key(config)
        if at is not None:
            self.record.put_writes(at[0], at[1], writes, task_id, task_path)

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        if tup is not None:
            at = _key(tup.config)
            if at is not None:
                self.record.seen(at[0], at[1], tup.pending_writes or ())
        return tup

    def delete_thread(self, below: SaverView, thread_id: str) -> Flow[None]:
        self.record.forget(str(thread_id))
        yield from below.flow("delete_thread", thread_id)


def own_writes_of(saver: Any) -> OwnWrites | None:
    """The record serving `saver` (or the saver wrapping it), if any."""
    layer = layer_of(saver, OwnWritesLayer)
    return None if layer is None else layer.record
