"""`ResentLayer`: a message-log write that re-sends what the log holds is stored as what it adds.

A write (a subgraph's input, a `Send`'s state) whose leading items are, unchanged, the log
at a cached checkpoint `A` on its branch is stored as `resent_write(A, count, rest)`,
applied as `rest` and rebuilt as written by `get_tuple` (and, for an enclosing namespace's
log, in the delta history); another delta channel's list snapshot that repeats the last
one stored is a reference to it (`SNAPSHOT_CHAIN` at most in a row). `own=None`: reads
only. docs/durability.md, "Writes stored as what they add", is the contract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
)
from langgraph.constants import START, TASKS
from langgraph.types import Send

from threadlog._upstream import MISSING, PREGEL, DeltaSnapshot, declared_channels
from threadlog.channel import WRITE_LOCK, KeyedWrites, LogChannel, MessageLogChannel
from threadlog.checkpoint.layered import Layer, PutArgs, PutWritesArgs, SaverView
from threadlog.errors import StoredDataError
from threadlog.flows import Flow
from threadlog.log.message_log import MessageLog, is_resent, resent_write

if TYPE_CHECKING:  # the cache binds this layer (`with_history_cache`): types only here
    from threadlog.checkpoint.cache import HistoryCache
    from threadlog.checkpoint.own_writes import OwnWrites

__all__ = ["SNAPSHOT_CHAIN", "ResentLayer", "log_view", "snapshot_ref"]

SNAPSHOT_CHAIN = 8  # references in a row to earlier snapshots before one is stored whole
_MEMO = 256  # slots (and listed checkpoints) remembered; the oldest are forgotten


class ResentLayer(Layer):
    """Stores message-log writes as what they add; rebuilds them on read (module doc)."""

    name = "resent"

    def __init__(self, cache: HistoryCache, own: OwnWrites | None) -> None:
        self.cache = cache
        self.own = own  # None: reads only (a saver `with_history_cache` gave the cache)
        # (thread, ns, channel) -> (checkpoint id, references in a row) of the last
        # snapshot of another delta channel this layer stored.
        self._snaps: dict[tuple[str, str, str], tuple[str, int]] = {}
        # (thread, ns, checkpoint id) -> channels `listed` left out (module doc).
        self._left_out: dict[tuple[str, str, str], list[str]] = {}
        # (thread, ns) -> the other delta channels its graph declared when LangGraph
        # loaded it (a put runs where the graph is not known).
        self._foreign: dict[tuple[str, str], frozenset[str]] = {}

    def put_writes(self, below: SaverView, *args: *PutWritesArgs) -> Flow[None]:
        config, writes, task_id, task_path = args
        stored = writes if self.own is None else self._stored_form(config, writes)
        yield from below.flow("put_writes", config, stored, task_id, task_path)

    def put(self, below: SaverView, *args: *PutArgs) -> Flow[RunnableConfig]:
        config, checkpoint, metadata, new_versions = args
        whole = checkpoint
        if self.own is not None:
            checkpoint = self._stored_input(config, checkpoint)
            checkpoint = self._stored_tasks(config, checkpoint)
            checkpoint = yield from self._stored_snapshots(below, config, checkpoint)
        out: RunnableConfig = yield from below.flow(
            "put", config, checkpoint, metadata, new_versions
        )
        if self.own is not None:  # stored: later snapshots may refer to this one
            self._note_snapshots(config, whole, checkpoint)
        return out

    def _stored_snapshots(
        self, below: SaverView, config: RunnableConfig, checkpoint: Checkpoint
    ) -> Flow[Checkpoint]:
        values = checkpoint.get("channel_values") or {}
        if not any(type(v) is DeltaSnapshot for v in values.values()):
            return checkpoint
        thread_id, ns = _slot_of(config)
        foreign = self._foreign.get((str(thread_id), ns), ())
        out: dict[str, Any] | None = None
        for ch, value in values.items():
            # Not in `foreign`: threadlog's own log, or a graph not seen loading.
            last = self._snaps.get((str(thread_id), ns, ch)) if ch in foreign else None
            if type(value) is not DeltaSnapshot or not isinstance(value.value, list):
                continue
            if last is None or last[1] >= SNAPSHOT_CHAIN:
                continue
            # Compared with what a reader rebuilds from storage: a checkpoint deleted since,
            # or an item changed in place after it was stored, cannot slip in.
            try:
                items = yield from self._snapshot_at(below, str(thread_id), ns, ch, last[0], {})
            except StoredDataError:
                continue
            count = 0
            for old, new in zip(items, value.value, strict=False):
                if type(old) is not type(new) or old != new:
                    break
                count += 1
            if count:
                out = dict(values) if out is None else out
                out[ch] = DeltaSnapshot(resent_write(last[0], count, value.value[count:]))
        if out is None:
            return checkpoint
        return {**checkpoint, "channel_values": out}

    def _note_snapshots(
        self, config: RunnableConfig, whole: Checkpoint, stored: Checkpoint
    ) -> None:
        thread_id, ns = _slot_of(config)
        snaps = whole.get("channel_values") or {}
        if thread_id is None or not any(type(v) is DeltaSnapshot for v in snaps.values()):
            return
        values = stored.get("channel_values") or {}
        for ch, value in snaps.items():
            if type(value) is not DeltaSnapshot or not isinstance(value.value, list):
                continue
            last = self._snaps.get((thread_id, ns, ch))
            chained = last[1] + 1 if last and snapshot_ref(values.get(ch)) else 0
            _remember(self._snaps, (thread_id, ns, ch), (str(whole["id"]), chained))

    def forget(self, thread_id: str) -> None:
        for key in [k for k in self._snaps if k[0] == thread_id]:
            del self._snaps[key]
        for cid in [k for k in self._left_out if k[0] == thread_id]:
            del self._left_out[cid]

    def _note_foreign(self, config: RunnableConfig) -> None:
        declared = declared_channels()
        thread_id, ns = _slot_of(config)
        if declared is None or thread_id is None:
            return
        foreign = frozenset(
            ch
            for ch, c in declared.items()
            if isinstance(c, DeltaChannel) and not isinstance(c, LogChannel)
        )
        if foreign:
            _remember(self._foreign, (thread_id, ns), foreign)

    def listed(self, tup: CheckpointTuple) -> CheckpointTuple:
        values = tup.checkpoint.get("channel_values") or {}
        refs = [ch for ch, v in values.items() if snapshot_ref(v)]
        if not refs:
            return tup
        thread_id, ns = _slot_of(tup.config)
        _remember(self._left_out, (str(thread_id), ns, str(tup.checkpoint["id"])), refs)
        kept = {ch: v for ch, v in values.items() if ch not in refs}
        return tup._replace(checkpoint={**tup.checkpoint, "channel_values": kept})

    def _whole_snapshots(
        self, below: SaverView, tup: CheckpointTuple, views: _Views
    ) -> Flow[CheckpointTuple]:
        values = tup.checkpoint.get("channel_values") or {}
        if not any(snapshot_ref(v) for v in values.values()):
            return tup
        whole = yield from self._wholes(below, tup.config, values, views)
        return tup._replace(checkpoint={**tup.checkpoint, "channel_values": whole})

    def _wholes(
        self, below: SaverView, config: RunnableConfig, values: Mapping[str, Any], views: _Views
    ) -> Flow[dict[str, Any]]:
        thread_id, ns = _slot_of(config)
        whole = dict(values)
        for ch, value in values.items():
            if snapshot_ref(value):
                at = str(value.value["at"])
                base = yield from self._snapshot_at(below, str(thread_id), ns, ch, at, views)
                whole[ch] = DeltaSnapshot(_applied(ch, value.value, base))
        return whole

    def _snapshot_at(
        self, below: SaverView, thread_id: str, ns: str, ch: str, at: str, views: _Views
    ) -> Flow[list[Any]]:
        """The snapshot of `ch` at checkpoint `at`, its chain of references followed."""
        chain: list[Any] = []
        while True:
            key = (ns, "snapshot:" + at, ch)
            base = views.get(key)
            if base is not None:
                break
            config: RunnableConfig = {
                "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": at}
            }
            tup = yield from below.flow("get_tuple", config)
            value = (tup.checkpoint.get("channel_values") or {}).get(ch) if tup else None
            if not isinstance(value, DeltaSnapshot):
                raise StoredDataError(
                    f"a snapshot of channel {ch!r} refers to checkpoint {at!r}, which does "
                    "not store one"
                )
            if len(chain) > SNAPSHOT_CHAIN:  # stored chains are shorter: a loop or damage
                raise StoredDataError(
                    f"the snapshot of channel {ch!r} at checkpoint {at!r} is reached through "
                    f"more than {SNAPSHOT_CHAIN} references"
                )
            if not snapshot_ref(value):
                base = views[key] = list(value.value)
                break
            chain.append(value.value)
            at = str(value.value["at"])
        for ref in reversed(chain):
            base = _applied(ch, ref, base)
        return base

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        if self.own is not None:
            self._note_foreign(config)
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        if tup is None:
            return tup
        conf = tup.config["configurable"]
        views: _Views = {}
        tup = yield from self._whole_snapshots(below, tup, views)
        start = tup.checkpoint.get("channel_values", {}).get(START)
        if isinstance(start, Mapping) and any(is_resent(v) for v in start.values()):
            whole = yield from self._rebuilt_state(below, conf, start, views)
            values = {**tup.checkpoint["channel_values"], START: whole}
            tup = tup._replace(checkpoint={**tup.checkpoint, "channel_values": values})
        tasks = tup.checkpoint.get("channel_values", {}).get(TASKS)
        if isinstance(tasks, list) and any(_sent_refs(p) for p in tasks):
            sends = []
            for packet in tasks:
                sends.append((yield from self._rebuilt_send(below, conf, packet, views)))
            values = {**tup.checkpoint["channel_values"], TASKS: sends}
            tup = tup._replace(checkpoint={**tup.checkpoint, "channel_values": values})
        if not any(is_resent(v) or _sent_refs(v) for _, _, v in tup.pending_writes or ()):
            return tup
        pending = []
        for task_id, channel, value in tup.pending_writes or ():
            if is_resent(value):
                value = yield from self._rebuilt(below, conf, channel, value, views)
            elif _sent_refs(value):
                value = yield from self._rebuilt_send(below, conf, value, views)
            pending.append((task_id, channel, value))
        return tup._replace(pending_writes=pending)

    def _rebuilt_send(self, below: SaverView, conf: Any, packet: Any, views: _Views) -> Flow[Any]:
        refs = _sent_refs(packet)
        if not refs:
            return packet
        return _with_state(packet, (yield from self._rebuilt_state(below, conf, refs, views)))

    def _rebuilt_state(
        self, below: SaverView, conf: Any, state: Mapping[Any, Any], views: _Views
    ) -> Flow[dict[Any, Any]]:
        whole = dict(state)
        for key, value in state.items():
            if is_resent(value):
                whole[key] = yield from self._rebuilt(below, conf, str(key), value, views)
        return whole

    def _stored_tasks(self, config: RunnableConfig, checkpoint: Checkpoint) -> Checkpoint:
        tasks = (checkpoint.get("channel_values") or {}).get(TASKS)
        thread_id, ns = _slot_of(config)
        if not isinstance(tasks, list) or not tasks or thread_id is None:
            return checkpoint
        cid = (config.get("configurable") or {}).get("checkpoint_id")
        slot = (thread_id, ns, str(cid) if cid else None)
        stored = [self._stored_send(slot, declared_channels(), p) for p in tasks]
        if all(a is b for a, b in zip(stored, tasks, strict=True)):
            return checkpoint
        return {**checkpoint, "channel_values": {**checkpoint["channel_values"], TASKS: stored}}

    def _stored_send(self, slot: _Slot, declared: Mapping[str, Any] | None, packet: Any) -> Any:
        state = _sent_state(packet)
        if state is None:
            return packet
        stored = {k: self._stored_value(slot, declared, str(k), v) for k, v in state.items()}
        if all(stored[k] is v for k, v in state.items()):
            return packet
        return _with_state(packet, stored)

    def _stored_value(
        self, slot: _Slot, declared: Mapping[str, Any] | None, channel: str, value: Any
    ) -> Any:
        if not isinstance(value, list) or not value:
            return value
        if declared is not None and not isinstance(declared.get(channel), MessageLogChannel):
            return value  # not threadlog's log in the graph writing it
        thread_id, ns, cid = slot
        ref = self._here(thread_id, ns, cid, channel, value) if cid else None
        return ref or self._from_parent(thread_id, ns, channel, value) or value

    def _stored_input(self, config: RunnableConfig, checkpoint: Checkpoint) -> Checkpoint:
        thread_id, ns = _slot_of(config)
        start = (checkpoint.get("channel_values") or {}).get(START)
        if not ns or thread_id is None or not isinstance(start, Mapping):
            return checkpoint
        stored = dict(start)
        for key, value in start.items():
            if isinstance(value, list) and value:
                stored[key] = self._from_parent(thread_id, ns, str(key), value) or value
        if stored == start:
            return checkpoint
        return {**checkpoint, "channel_values": {**checkpoint["channel_values"], START: stored}}

    def get_delta_channel_history(
        self, below: SaverView, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Flow[Mapping[str, DeltaChannelHistory]]:
        conf = config.get("configurable") or {}
        views: _Views = {}
        thread_id, ns = _slot_of(config)
        left = self._left_out.get((str(thread_id), ns, str(conf.get("checkpoint_id"))))
        if left and set(channels) <= set(left):
            # A listed checkpoint whose snapshot `listed` left out: that snapshot, whole.
            stored = yield from below.flow("get_tuple", config)
            if stored is not None:
                tup = yield from self._whole_snapshots(below, stored, views)
                values = tup.checkpoint["channel_values"]
                return {ch: {"seed": values[ch], "writes": []} for ch in channels}
        out: Mapping[str, DeltaChannelHistory] = yield from below.flow(
            "get_delta_channel_history", config=config, channels=channels
        )
        if seeds := {ch: h["seed"] for ch, h in out.items() if snapshot_ref(h.get("seed"))}:
            whole = yield from self._wholes(below, config, seeds, views)
            out = {ch: {**h, "seed": whole[ch]} if ch in seeds else h for ch, h in out.items()}
        if not any(_elsewhere(v) for h in out.values() for _, _, v in h.get("writes") or ()):
            return out
        # A subgraph's input that re-sent its parent's history: the log of this namespace
        # never held those messages, so the write is rebuilt before it is applied.
        rebuilt = dict(out)
        for ch, history in out.items():
            writes = history.get("writes") or []
            if any(_elsewhere(v) for _, _, v in writes):
                fixed = []
                for task_id, channel, value in writes:
                    if _elsewhere(value):
                        value = yield from self._rebuilt(below, conf, channel, value, views)
                    fixed.append((task_id, channel, value))
                rebuilt[ch] = {**history, "writes": _same_kind(writes, fixed)}
        return rebuilt

    def _rebuilt(
        self, below: SaverView, conf: Any, channel: str, value: dict[str, Any], views: _Views
    ) -> Flow[Any]:
        """The write `value` stands for; the stored form when its view cannot be read."""
        named = value.get("ns")
        ns = str(named if named is not None else conf.get("checkpoint_ns", ""))
        at = str(value["at"])
        key = (ns, at, channel)
        if key not in views:
            views[key] = yield from self._view_at(below, str(conf["thread_id"]), ns, channel, at)
        view = views[key]
        count = int(value["count"])
        if view is None or len(view) < count:
            return value
        return [*view[:count], *value["items"]]

    def _view_at(
        self, below: SaverView, thread_id: str, ns: str, channel: str, at: str
    ) -> Flow[list[Any] | None]:
        """The log's view of `channel` at checkpoint `at` of namespace `ns`, through here."""
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": at}
        }
        # A stored value (LangGraph snapshots where new input lands on carried work) is
        # the view: its ancestors' delta history need not add up to it.
        tup = yield from below.flow("get_tuple", config)
        values = tup.checkpoint.get("channel_values", {}) if tup is not None else {}
        if channel in values:
            return log_view(values[channel], ())
        histories = yield from self.get_delta_channel_history(
            below, config=config, channels=[channel]
        )
        history = histories.get(channel)
        return (
            None if history is None else log_view(history.get("seed", MISSING), history["writes"])
        )

    def _stored_form(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]]
    ) -> Sequence[tuple[str, Any]]:
        thread_id, ns = _slot_of(config)
        cid = (config.get("configurable") or {}).get("checkpoint_id")
        if not cid or thread_id is None:
            return writes
        slot, declared = (thread_id, ns, str(cid)), declared_channels()
        stored = [
            (c, self._stored_send(slot, declared, v))
            if c == TASKS and isinstance(v, Send)
            else (c, self._stored_value(slot, declared, c, v))
            for c, v in writes
        ]
        return writes if all(a[1] is b[1] for a, b in zip(stored, writes, strict=True)) else stored

    def _here(
        self, thread_id: str, ns: str, cid: str, channel: str, value: list[Any]
    ) -> dict[str, Any] | None:
        assert self.own is not None
        at, count = self._prefix(thread_id, ns, channel, value)
        if not count or (
            at != cid and not self.own.descends((thread_id, ns), cid, at, self.cache.max_walk)
        ):
            return None  # nothing re-sent, or the cached log is not on this write's branch
        return resent_write(at, count, value[count:])

    def _from_parent(
        self, thread_id: str, ns: str, channel: str, value: list[Any]
    ) -> dict[str, Any] | None:
        """A subgraph's write re-sending an enclosing graph's history, as a reference."""
        best: dict[str, Any] | None = None
        for parent in _enclosing(ns):
            at, count = self._prefix(thread_id, parent, channel, value)
            if count and (best is None or count > best["count"]):
                best = resent_write(at, count, value[count:], ns=parent)
        return best

    def _prefix(self, thread_id: str, ns: str, channel: str, value: list[Any]) -> tuple[str, int]:
        """(checkpoint, how many leading items of `value` its cached log holds unchanged)."""
        entry = self.cache.get((thread_id, ns, channel))
        if entry is None or not isinstance(entry[1], MessageLog):
            return "", 0
        at, log, version = entry
        with WRITE_LOCK:  # the log may be growing in the run's next step
            return at, log.resent_prefix(value, version)


_Views = dict[tuple[str, str, str], "list[Any] | None"]
K = TypeVar("K")
V = TypeVar("V")
_Slot = tuple[str, str, str | None]  # thread, namespace, checkpoint id


def log_view(seed: Any, writes: Sequence[PendingWrite]) -> list[BaseMessage]:
    """A message log's view from its seed and writes, read as LangGraph's loader reads it."""
    channel = MessageLogChannel().from_checkpoint(seed)
    channel.replay_writes(writes)
    return list(channel.get()) if channel.is_available() else []


def _sent_state(packet: Any) -> Mapping[Any, Any] | None:
    """A `Send`'s state: its argument's `"state"` mapping (`ToolNode`), or the argument."""
    if not isinstance(packet, Send) or not isinstance(packet.arg, Mapping):
        return None
    inner = packet.arg.get("state")
    return inner if isinstance(inner, Mapping) else packet.arg


def _sent_refs(packet: Any) -> Mapping[Any, Any] | None:
    state = _sent_state(packet)
    if state is None or not any(is_resent(v) for v in state.values()):
        return None
    return state


def _with_state(packet: Send, state: dict[Any, Any]) -> Send:
    arg = packet.arg
    if isinstance(arg.get("state"), Mapping):
        return Send(packet.node, {**arg, "state": state})
    return Send(packet.node, state)


def _remember(memo: dict[K, V], key: K, value: V) -> None:
    memo.pop(key, None)
    memo[key] = value
    if len(memo) > _MEMO:
        del memo[next(iter(memo))]


def _slot_of(config: RunnableConfig) -> tuple[str | None, str]:
    conf = config.get("configurable") or {}
    thread_id = conf.get("thread_id")
    return (None if thread_id is None else str(thread_id)), str(conf.get("checkpoint_ns") or "")


def _applied(ch: str, ref: Mapping[str, Any], base: list[Any]) -> list[Any]:
    count = int(ref["count"])
    if len(base) < count:
        raise StoredDataError(
            f"a snapshot of channel {ch!r} refers to {count} items of the one at "
            f"{ref['at']!r}, which holds {len(base)}"
        )
    return [*base[:count], *ref["items"]]


def snapshot_ref(value: Any) -> bool:
    """A snapshot stored as a reference to an earlier one (module doc)."""
    return isinstance(value, DeltaSnapshot) and is_resent(value.value)


def _elsewhere(value: Any) -> bool:
    return is_resent(value) and value.get("ns") is not None


def _enclosing(ns: str) -> list[str]:
    """The namespaces enclosing `ns`, nearest first: "a:1|b:2" -> ["a:1", ""]."""
    if not ns:
        return []
    parts = ns.split(PREGEL.ns_sep)
    return [PREGEL.ns_sep.join(parts[:k]) for k in range(len(parts) - 1, -1, -1)]


def _same_kind(writes: Sequence[PendingWrite], fixed: list[PendingWrite]) -> list[PendingWrite]:
    """`fixed` carrying what `writes` carried (a history cache's `KeyedWrites`)."""
    if isinstance(writes, KeyedWrites):
        out = KeyedWrites(fixed, writes.cache, writes.slot, writes.checkpoint_id)
        out.states = list(writes.states)
        return out
    return fixed
