"""`ChecksumLayer`: a per-checkpoint count and checksum of the message writes, checked on read.

Each checkpoint stored gets `metadata["threadlog_chain"]`: per message channel rebuilt
from writes, `[n, sum]` of the rows since its last snapshot (sum modulo 2**64 of each
row's hash of its task id and messages' ids), from the parent's chain and writes. Reading
a delta history checks its writes against it: fewer rows or another sum is a
`StoredDataError`; more are not (the guard's concern). docs/durability.md, "Integrity of
stored history", says what is not detected.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from threadlog.checkpoint.cache import CachedSeed, HistoryCache, history_cache_of
from threadlog.checkpoint.layered import (
    Layer,
    PutArgs,
    PutWritesArgs,
    SaverView,
    bind_layers,
    layer_of,
)
from threadlog.errors import StoredDataError
from threadlog.flows import Flow
from threadlog.log.message_log import flatten_write, is_resent

S = TypeVar("S", bound=BaseCheckpointSaver[Any])

__all__ = [
    "CHAIN_KEY",
    "ChecksumLayer",
    "chain_metadata",
    "chain_minus",
    "read_chain",
    "row_hash",
]

CHAIN_KEY = "threadlog_chain"
_MASK = (1 << 64) - 1
Chain = dict[str, tuple[int, int]]  # channel -> (rows, sum)


def _item_key(item: Any) -> str:
    if isinstance(item, BaseMessage):
        return "id:" + item.id if item.id else "v:" + repr(item.content)
    if isinstance(item, Mapping):
        mid = item.get("id")
        return "id:" + mid if isinstance(mid, str) and mid else "v:" + repr(sorted(map(str, item)))
    if isinstance(item, (list, tuple)):
        return "v:" + repr([_item_key(x) for x in item])
    return "v:" + repr(item)


def _fast_keys(value: Any) -> list[str] | None:
    # The common row (messages with ids) without the general walk; same keys as `_item_key`.
    if is_resent(value):
        value = value["items"]
    if type(value) is not list:
        return None
    keys = []
    for m in value:  # one pass: every row of a cold read comes here
        if not (isinstance(m, BaseMessage) and m.id):
            return None
        keys.append("id:" + m.id)
    return keys


def _has_messages(value: Any) -> bool:
    return any(
        isinstance(i, BaseMessage) or (isinstance(i, Mapping) and "role" in i)
        for i in flatten_write(value)
    )


def row_hash(task_id: str, value: Any) -> int:
    """The 64-bit hash of one stored write: its task id and its messages' ids."""
    keys = _fast_keys(value)
    if keys is None:
        keys = [_item_key(i) for i in flatten_write(value)]
    text = task_id + "\x00" + "\x1f".join(keys)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).digest())


def read_chain(metadata: Mapping[str, Any] | None) -> Chain | None:
    """A checkpoint's chain (`channel -> (rows, sum)`), or None when it has none."""
    raw = (metadata or {}).get(CHAIN_KEY)
    if not isinstance(raw, Mapping):
        return None
    return {
        str(ch): (int(pair[0]), int(str(pair[1]), 16))
        for ch, pair in raw.items()
        if isinstance(pair, (list, tuple)) and len(pair) == 2
    }


def chain_metadata(chain: Chain) -> dict[str, list[Any]]:
    return {ch: [n, f"{s:016x}"] for ch, (n, s) in chain.items()}


def chain_minus(chain: Chain, older: Mapping[str, tuple[int, int]]) -> Chain:
    """`chain` without the rows `older` counts (an ancestor's chain, now a snapshot)."""
    out = dict(chain)
    for ch, (n, s) in older.items():
        if ch in out:
            n0, s0 = out[ch]
            out[ch] = (max(n0 - n, 0), (s0 - s) & _MASK)
    return out


# A copied thread keeps its source's checkpoint ids: the thread is part of the key.
Key = tuple[str, str, str]  # thread_id, checkpoint_ns, checkpoint_id


class _Seen:
    """Bounded memory of checkpoints: their chain, and the writes stored on them."""

    def __init__(self, size: int = 4096) -> None:
        self.chains: OrderedDict[Key, Chain] = OrderedDict()
        # Per checkpoint, its rows keyed as storage keys them: (hash, holds messages).
        self.writes: OrderedDict[Key, dict[tuple[str, str, int], tuple[int, bool]]] = OrderedDict()
        self.size = size
        self.lock = threading.Lock()

    def chain(self, cid: Key, chain: Chain) -> None:
        with self.lock:
            self.chains[cid] = chain
            self.chains.move_to_end(cid)
            while len(self.chains) > self.size:
                self.chains.popitem(last=False)

    def add_writes(self, cid: Key, rows: Iterable[tuple[str, str, Any]]) -> None:
        # Keyed as storage keys them: a task's n-th write to a channel.
        counts: dict[tuple[str, str], int] = {}
        with self.lock:
            known = self.writes.setdefault(cid, {})
            self.writes.move_to_end(cid)
            for task_id, ch, value in rows:
                idx = counts[(task_id, ch)] = counts.get((task_id, ch), -1) + 1
                if (task_id, ch, idx) not in known:  # storage keeps the first
                    known[(task_id, ch, idx)] = (row_hash(task_id, value), _has_messages(value))
            while len(self.writes) > self.size:
                self.writes.popitem(last=False)


def _key(config: RunnableConfig | None) -> Key | None:
    conf = (config or {}).get("configurable") or {}
    cid = conf.get("checkpoint_id")
    if not cid:
        return None
    return str(conf.get("thread_id")), str(conf.get("checkpoint_ns") or ""), str(cid)


class ChecksumLayer(Layer):
    """Writes and checks the chain of the checkpoints that pass through it (module doc)."""

    name = "checksums"

    def __init__(self, cache: HistoryCache | None = None) -> None:
        self._threadlog_seen = _Seen()
        self.cache = cache

    def _remember(self, tup: CheckpointTuple | None) -> CheckpointTuple | None:
        cid = None if tup is None else _key(tup.config)
        if tup is None or cid is None:
            return tup
        chain = read_chain(tup.metadata)
        seen = self._threadlog_seen
        if chain is not None:
            seen.chain(cid, chain)
        seen.add_writes(cid, ((str(t), c, v) for t, c, v in tup.pending_writes or ()))
        return tup

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        return self._remember((yield from below.flow("get_tuple", config)))

    def listed(self, tup: CheckpointTuple) -> CheckpointTuple:
        self._remember(tup)
        return tup

    def verify(self, tup: CheckpointTuple, histories: Mapping[str, DeltaChannelHistory]) -> None:
        """Check histories read from the backend for `tup` as a read through here would."""
        self._remember(tup)
        self._check(tup.config, histories, {})

    def resealed(self, checkpoint_id: Key, chain: Chain | None) -> None:
        """A checkpoint's chain as maintenance rewrote it (None: it has none now)."""
        seen = self._threadlog_seen
        if chain is not None:
            seen.chain(checkpoint_id, chain)
        else:
            with seen.lock:
                seen.chains.pop(checkpoint_id, None)

    def put_writes(self, below: SaverView, *args: *PutWritesArgs) -> Flow[None]:
        config, writes, task_id, _ = args
        yield from below.flow("put_writes", *args)
        if (cid := _key(config)) is not None:
            self._threadlog_seen.add_writes(cid, ((task_id, c, v) for c, v in writes))

    def put(self, below: SaverView, *args: *PutArgs) -> Flow[RunnableConfig]:
        config, checkpoint, metadata, new_versions = args
        parent = _key(config)
        seen = self._threadlog_seen
        if parent is not None and parent not in seen.chains and parent not in seen.writes:
            # another process wrote it: read it once
            self._remember((yield from below.flow("get_tuple", config)))
        metadata = self._with_chain(parent, checkpoint, metadata)
        out: RunnableConfig = yield from below.flow(
            "put", config, checkpoint, metadata, new_versions
        )
        cid, chain = _key(out), read_chain(metadata)
        if cid is not None and chain is not None:
            seen.chain(cid, chain)
        return out

    def _with_chain(
        self, parent: Key | None, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> CheckpointMetadata:
        seen = self._threadlog_seen
        with seen.lock:
            base = seen.chains.get(parent) if parent else {}
            rows = dict(seen.writes.get(parent, {})) if parent else {}
        if base is None:
            return metadata  # the parent has no chain: nothing is chained from here
        # A chain lists every channel with rows since its snapshot; the parent's writes
        # (channel, row hash, holds messages) are folded in, in any order.
        chain = dict(base)
        for (_, ch, _), (h, has_messages) in rows.items():
            if ch in base or (ch not in chain and has_messages):
                n, s = chain.get(ch, (0, 0))
                chain[ch] = (n + 1, (s + h) & _MASK)
        values = checkpoint.get("channel_values", {})  # a stored value is rebuilt from here
        kept = {ch: v for ch, v in chain.items() if ch not in values}
        return {**metadata, CHAIN_KEY: chain_metadata(kept)}  # type: ignore[misc]

    def get_delta_channel_history(
        self, below: SaverView, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Flow[Mapping[str, DeltaChannelHistory]]:
        seeds = self._cached_seeds(config, channels)
        out: Mapping[str, DeltaChannelHistory] = yield from below.flow(
            "get_delta_channel_history", config=config, channels=channels
        )
        self._check(config, out, seeds)
        return out

    def _cached_seeds(self, config: RunnableConfig, channels: Sequence[str]) -> dict[str, str]:
        if self.cache is None:
            return {}
        conf = config.get("configurable") or {}
        slot = (str(conf.get("thread_id")), str(conf.get("checkpoint_ns") or ""))
        entries = {ch: self.cache.get((*slot, ch)) for ch in channels}
        return {ch: entry[0] for ch, entry in entries.items() if entry is not None}

    def _check(
        self,
        config: RunnableConfig,
        histories: Mapping[str, DeltaChannelHistory],
        seeds: Mapping[str, str],
    ) -> None:
        key = _key(config)
        target = key[2] if key else None
        chains = self._threadlog_seen.chains
        with self._threadlog_seen.lock:
            expected = chains.get(key) if key else None
            # Only the chains of the cached seeds, not a copy of all.
            known = {
                c: chains[(key[0], key[1], c)]
                for c in seeds.values()
                if key and (key[0], key[1], c) in chains
            }
        if expected is None:
            return
        for ch, history in histories.items():
            want = expected.get(ch, (0, 0))
            seed = history.get("seed")
            if isinstance(seed, CachedSeed):
                if seed.at is not None:
                    continue  # the log at this very checkpoint: no cached chain describes it
                start = known.get(seeds.get(ch, ""), {}).get(ch)
                if start is None:
                    continue  # a cached log whose chain this process has not seen
            else:
                start = (0, 0)
            n, s = start
            for task_id, _, value in history["writes"]:
                n, s = n + 1, (s + row_hash(str(task_id), value)) & _MASK
            # More rows than were written: a concurrent run's (the run guard's business).
            if n < want[0] or (n == want[0] and s != want[1]):
                conf = config.get("configurable") or {}
                raise StoredDataError(
                    f"thread {conf.get('thread_id')!r}, checkpoint {target!r}: the stored "
                    f"writes of channel {ch!r} do not match what was written ({n} rows read, "
                    f"{want[0]} written{'' if n != want[0] else ', some with other values'}): "
                    "a writes row was deleted, added or swapped in storage. The history "
                    "would read back different from what happened, so it is not shown"
                )


def chain_writes(saver: S) -> S:
    """`saver` itself with the write chain bound onto its own methods (`bind_layers`)."""
    if layer_of(saver, ChecksumLayer) is not None:
        return saver
    return bind_layers(saver, [ChecksumLayer(history_cache_of(saver))])
