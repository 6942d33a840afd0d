"""A message-log write that re-sends what the log holds is stored as what it adds.

Why. A multi-agent app's nodes return the whole history they were given: an agent
subgraph's output, a handoff's `Command(graph=PARENT, update={"messages": [*all,
tool_msg]})`. The log skips the re-sent messages (same id, same content: a replay), but
the writes table stored each whole list, so storage grew with turns times history, and
every read of an older checkpoint decoded those lists again.

Contract:

* `ResentLayer` is this as a saver layer (`threadlog.checkpoint.layered`), just under
  the run guard in `threadlog.checkpointer()` (with the history cache on), so every
  layer below it — checksums, the own-writes record, storage — sees the stored form.
* **Stored.** A write to a message-log key whose leading items are the first messages of
  the log's view at a checkpoint `A` this process holds the log of (the history cache's
  entry for that thread, namespace and key), unchanged (`MessageLog.resent_prefix`),
  and whose own checkpoint is `A` or descends from it through checkpoints this saver
  stored (`OwnWrites.descends`), is stored as `log.resent_write(A, count, rest)`. In
  every other case — no entry, another branch, a message changed or changed in place,
  another process's checkpoint — the write is stored as written.
* **Applied.** The log applies such a write as `rest` alone: the re-sent messages were in
  the log at `A`, hence at the write's checkpoint, so applying them is a replay the log
  skips (`flatten_write`). Replays, resumes of an interrupted step (its pending writes),
  the checksums and the recovery of stopped work all read it that way, through any
  saver: nothing else needs the re-sent part.
* **Subgraphs.** A subgraph's first write in a new namespace (its input: the parent's
  history, re-sent) is stored the same way against the log of an enclosing namespace
  (`ns`): those messages are not in the new namespace's log, so this layer rebuilds such
  a write before any log applies it — in `get_delta_channel_history` and `get_tuple`.
* **Rebuilt exactly.** `get_tuple` hands LangGraph each such pending write as it was
  written — the first `count` messages of the view at `A` (read through this layer and
  the ones below, the history cache first), then `rest` — so a `StateSnapshot`'s task
  results and anything else reading one checkpoint's writes see the original list.
  The view at an `A` that stores the key's value itself (a snapshot) is that value: its
  ancestors' delta history need not add up to it (new input on carried stopped work).
  `list` (history) leaves them in the stored form (`docs/durability.md`).
* **Sends.** A `Send` packet (a write to the tasks channel, or the tasks channel's value
  in a checkpoint) whose argument carries the state — the argument itself, or its
  `"state"` mapping, as langgraph-prebuilt's `ToolNode` payload (`tool_call_with_context`)
  does — has each message-log list in that state stored the same way, and `get_tuple`
  rebuilds the packet exactly (its checkpoint's tasks value and its pending writes).
* **Snapshots of other delta channels.** LangGraph stores a `DeltaChannel`'s whole value
  (`_DeltaSnapshot`) every N updates. For a list-valued delta channel that is not
  threadlog's log (deepagents' or LangGraph's messages channel), a snapshot whose
  leading items equal (same type, `==`) those of the previous snapshot this layer stored
  for the same thread, namespace and channel, as read back from storage, is stored as
  `_DeltaSnapshot(resent_write(P, count, rest))`: the first `count` items of the
  snapshot stored at checkpoint `P`.
  At most `SNAPSHOT_CHAIN` such references follow each other before one is stored
  whole (a read rebuilds through the chain). `get_tuple` and the seeds of
  `get_delta_channel_history` rebuild the value exactly (the same stored records, in
  order); `list` leaves such a channel out of the checkpoint's values (a pure step, no
  reads), and the delta history LangGraph then asks for at that checkpoint is the
  rebuilt snapshot with no writes. A snapshot whose base cannot be read is a
  `StoredDataError`, never a partial value.
* `with_history_cache(saver)` binds this layer too, reading only (`own=None`): a reader
  of a thread threadlog's saver wrote (the inspector) rebuilds what it must.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

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

__all__ = ["SNAPSHOT_CHAIN", "ResentLayer", "snapshot_ref"]

SNAPSHOT_CHAIN = 8  # references in a row to earlier snapshots before one is stored whole
_MEMO = 256  # slots (and listed checkpoints) remembered; the oldest are forgotten


class ResentLayer(Layer):
    """Stores message-log writes as what they add (when given the own-writes record);
    rebuilds them for `get_tuple` and for a subgraph's delta history."""

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
        """`checkpoint` with each other delta channel's snapshot that repeats the last one
        stored as a reference to it (module doc)."""
        values = checkpoint.get("channel_values") or {}
        if not any(type(v) is DeltaSnapshot for v in values.values()):
            return checkpoint
        thread_id, ns = _slot_of(config)
        foreign = self._foreign.get((str(thread_id), ns), ())
        out: dict[str, Any] | None = None
        for ch, value in values.items():
            if type(value) is not DeltaSnapshot or not isinstance(value.value, list):
                continue
            if ch not in foreign:  # threadlog's own log, or a graph not seen loading
                continue
            last = self._snaps.get((str(thread_id), ns, ch))
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
                if out is None:
                    out = dict(values)
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
            slot = (thread_id, ns, ch)
            last = self._snaps.pop(slot, None)
            chained = snapshot_ref(values.get(ch)) and last is not None
            self._snaps[slot] = (str(whole["id"]), last[1] + 1 if chained and last else 0)
            if len(self._snaps) > _MEMO:
                del self._snaps[next(iter(self._snaps))]

    def forget(self, thread_id: str) -> None:
        """Drop what this layer remembers of `thread_id` (a lifecycle call changed it)."""
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
            ch for ch, c in declared.items()
            if isinstance(c, DeltaChannel) and not isinstance(c, LogChannel)
        )
        if foreign:
            self._foreign.pop((thread_id, ns), None)
            self._foreign[(thread_id, ns)] = foreign
            if len(self._foreign) > _MEMO:
                del self._foreign[next(iter(self._foreign))]

    def listed(self, tup: CheckpointTuple) -> CheckpointTuple:
        values = tup.checkpoint.get("channel_values") or {}
        refs = [ch for ch, v in values.items() if snapshot_ref(v)]
        if not refs:
            return tup
        thread_id, ns = _slot_of(tup.config)
        self._left_out[(str(thread_id), ns, str(tup.checkpoint["id"]))] = refs
        if len(self._left_out) > _MEMO:
            del self._left_out[next(iter(self._left_out))]
        kept = {ch: v for ch, v in values.items() if ch not in refs}
        return tup._replace(checkpoint={**tup.checkpoint, "channel_values": kept})

    def _whole_snapshots(
        self, below: SaverView, tup: CheckpointTuple, views: _Views
    ) -> Flow[CheckpointTuple]:
        """`tup` with each snapshot stored as a reference rebuilt."""
        values = tup.checkpoint.get("channel_values") or {}
        if not any(snapshot_ref(v) for v in values.values()):
            return tup
        thread_id, ns = _slot_of(tup.config)
        whole = dict(values)
        for ch, value in values.items():
            if snapshot_ref(value):
                items = yield from self._snapshot_items(
                    below, str(thread_id), ns, ch, value.value, views
                )
                whole[ch] = DeltaSnapshot(items)
        return tup._replace(checkpoint={**tup.checkpoint, "channel_values": whole})

    def _snapshot_items(
        self, below: SaverView, thread_id: str, ns: str, ch: str, ref: Any, views: _Views
    ) -> Flow[list[Any]]:
        """The items a snapshot stored as `ref` holds."""
        base = yield from self._snapshot_at(below, thread_id, ns, ch, str(ref["at"]), views)
        return _applied(ch, ref, base)

    def _snapshot_at(
        self, below: SaverView, thread_id: str, ns: str, ch: str, at: str, views: _Views
    ) -> Flow[list[Any]]:
        """The whole value of the snapshot of `ch` stored at checkpoint `at`, its chain of
        references read back to the one stored whole."""
        chain: list[Any] = []
        while True:
            key = (ns, "snapshot:" + at, ch)
            base = views.get(key)
            if base is not None:
                break
            config: RunnableConfig = {"configurable": {
                "thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": at}}
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
            whole = dict(start)
            for key, value in start.items():
                if is_resent(value):
                    whole[key] = yield from self._rebuilt(below, conf, key, value, views)
            values = {**tup.checkpoint["channel_values"], START: whole}
            tup = tup._replace(checkpoint={**tup.checkpoint, "channel_values": values})
        tasks = tup.checkpoint.get("channel_values", {}).get(TASKS)
        if isinstance(tasks, list) and any(_sent_refs(p) for p in tasks):
            sends = []
            for packet in tasks:
                packet = yield from self._rebuilt_send(below, conf, packet, views)
                sends.append(packet)
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

    def _rebuilt_send(
        self, below: SaverView, conf: Any, packet: Any, views: _Views
    ) -> Flow[Any]:
        """`packet` as it was written: each message list its state carries rebuilt."""
        refs = _sent_refs(packet)
        if not refs:
            return packet
        state = dict(refs)
        for key, value in refs.items():
            if is_resent(value):
                state[key] = yield from self._rebuilt(below, conf, str(key), value, views)
        return _with_state(packet, state)

    def _stored_tasks(self, config: RunnableConfig, checkpoint: Checkpoint) -> Checkpoint:
        """A checkpoint whose tasks value holds `Send`s carrying the state, with their
        message lists stored as references (module doc)."""
        tasks = (checkpoint.get("channel_values") or {}).get(TASKS)
        if not isinstance(tasks, list) or not tasks:
            return checkpoint
        conf = config.get("configurable") or {}
        if conf.get("thread_id") is None:
            return checkpoint
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns") or "")
        cid = conf.get("checkpoint_id")
        stored = [
            self._stored_send(thread_id, ns, str(cid) if cid else None, p) for p in tasks
        ]
        if all(a is b for a, b in zip(stored, tasks, strict=True)):
            return checkpoint
        values = {**checkpoint["channel_values"], TASKS: stored}
        return {**checkpoint, "channel_values": values}

    def _stored_send(self, thread_id: str, ns: str, cid: str | None, packet: Any) -> Any:
        """`packet` with each message-log list its state carries stored as what it adds,
        or `packet` itself."""
        state = _sent_state(packet)
        if state is None:
            return packet
        declared = declared_channels()
        out: dict[Any, Any] | None = None
        for key, value in state.items():
            if not isinstance(value, list) or not value:
                continue
            if declared is not None and not isinstance(declared.get(key), MessageLogChannel):
                continue
            ref = self._here(thread_id, ns, cid, str(key), value) if cid else None
            if ref is None:
                ref = self._from_parent(thread_id, ns, str(key), value)
            if ref is None:
                continue
            if out is None:
                out = dict(state)
            out[key] = ref
        return packet if out is None else _with_state(packet, out)

    def _stored_input(self, config: RunnableConfig, checkpoint: Checkpoint) -> Checkpoint:
        """A subgraph's input checkpoint with the history its input re-sent (the
        `__start__` value's message lists) stored as references (module doc)."""
        conf = config.get("configurable") or {}
        ns = str(conf.get("checkpoint_ns") or "")
        start = (checkpoint.get("channel_values") or {}).get(START)
        if not ns or conf.get("thread_id") is None or not isinstance(start, Mapping):
            return checkpoint
        thread_id = str(conf["thread_id"])
        stored = dict(start)
        for key, value in start.items():
            if isinstance(value, list) and value:
                ref = self._from_parent(thread_id, ns, str(key), value)
                if ref is not None:
                    stored[key] = ref
        if stored == start:
            return checkpoint
        values = {**checkpoint["channel_values"], START: stored}
        return {**checkpoint, "channel_values": values}

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
        if any(snapshot_ref(h.get("seed")) for h in out.values()):
            out = dict(out)
            for ch, history in out.items():
                if snapshot_ref(history.get("seed")):
                    seed = history["seed"].value
                    items = yield from self._snapshot_items(
                        below, str(thread_id), ns, ch, seed, views
                    )
                    out[ch] = {**history, "seed": DeltaSnapshot(items)}
        if not any(_elsewhere(v) for h in out.values() for _, _, v in h.get("writes") or ()):
            return out
        # A subgraph's input that re-sent its parent's history: the log of this namespace
        # never held those messages, so the write is rebuilt before it is applied.
        rebuilt: dict[str, DeltaChannelHistory] = {}
        for ch, history in out.items():
            writes = history.get("writes") or []
            if not any(_elsewhere(v) for _, _, v in writes):
                rebuilt[ch] = history
                continue
            fixed = []
            for task_id, channel, value in writes:
                if _elsewhere(value):
                    value = yield from self._rebuilt(below, conf, channel, value, views)
                fixed.append((task_id, channel, value))
            new: DeltaChannelHistory = {"writes": _same_kind(writes, fixed)}
            if "seed" in history:
                new["seed"] = history["seed"]
            rebuilt[ch] = new
        return rebuilt

    def _rebuilt(
        self, below: SaverView, conf: Any, channel: str, value: dict[str, Any], views: _Views
    ) -> Flow[Any]:
        """The write `value` stands for, as it was written; the stored form when the view
        it names cannot be read."""
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
        """The message log's view of `channel` at checkpoint `at` of namespace `ns`,
        rebuilt from its delta history through this layer (an enclosing namespace's own
        input rebuilt too) and the layers below (the history cache first)."""
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": at}
        }
        # A checkpoint that stores the channel's value (a snapshot: LangGraph forces one
        # where new input lands on carried work) is that value; the delta history walks
        # its ancestors only, which need not add up to it.
        tup = yield from below.flow("get_tuple", config)
        values = tup.checkpoint.get("channel_values", {}) if tup is not None else {}
        if channel in values:
            ch = MessageLogChannel().from_checkpoint(values[channel])
            return list(ch.get()) if ch.is_available() else []
        histories = yield from self.get_delta_channel_history(
            below, config=config, channels=[channel]
        )
        history = histories.get(channel)
        if history is None:
            return None
        ch = MessageLogChannel().from_checkpoint(history.get("seed", MISSING))
        ch.replay_writes(history["writes"])
        return list(ch.get()) if ch.is_available() else []

    def _stored_form(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]]
    ) -> Sequence[tuple[str, Any]]:
        conf = config.get("configurable") or {}
        cid = conf.get("checkpoint_id")
        if not cid or conf.get("thread_id") is None:
            return writes
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns") or "")
        declared = declared_channels()
        out: list[tuple[str, Any]] | None = None
        for i, (channel, value) in enumerate(writes):
            if channel == TASKS and isinstance(value, Send):
                packet = self._stored_send(thread_id, ns, str(cid), value)
                if packet is not value:
                    if out is None:
                        out = list(writes)
                    out[i] = (channel, packet)
                continue
            if not isinstance(value, list) or not value:
                continue
            if declared is not None and not isinstance(declared.get(channel), MessageLogChannel):
                continue  # not threadlog's log in the graph writing it
            stored = self._here(thread_id, ns, str(cid), channel, value)
            if stored is None:
                stored = self._from_parent(thread_id, ns, channel, value)
            if stored is None:
                continue
            if out is None:
                out = list(writes)
            out[i] = (channel, stored)
        return writes if out is None else out

    def _here(
        self, thread_id: str, ns: str, cid: str, channel: str, value: list[Any]
    ) -> dict[str, Any] | None:
        """The write as what it adds to this namespace's log, or None."""
        assert self.own is not None
        entry = self.cache.get((thread_id, ns, channel))
        if entry is None or not isinstance(entry[1], MessageLog):
            return None
        at, log, version = entry
        if at != cid and not self.own.descends((thread_id, ns), cid, at, self.cache.max_walk):
            return None  # the cached log is not on this write's branch
        with WRITE_LOCK:  # the log may be growing in the run's next step
            count = log.resent_prefix(value, version)
        return resent_write(at, count, value[count:]) if count else None

    def _from_parent(
        self, thread_id: str, ns: str, channel: str, value: list[Any]
    ) -> dict[str, Any] | None:
        """A subgraph's write re-sending an enclosing graph's history (its input), as a
        reference to that history, or None."""
        best: dict[str, Any] | None = None
        for parent in _enclosing(ns):
            entry = self.cache.get((thread_id, parent, channel))
            if entry is None or not isinstance(entry[1], MessageLog):
                continue
            at, log, version = entry
            with WRITE_LOCK:
                count = log.resent_prefix(value, version)
            if count and (best is None or count > best["count"]):
                best = resent_write(at, count, value[count:], ns=parent)
        return best


_Views = dict[tuple[str, str, str], "list[Any] | None"]


def _sent_state(packet: Any) -> Mapping[Any, Any] | None:
    """The state a `Send` packet carries: its argument's `"state"` mapping (the prebuilt
    `ToolNode` payload) or the argument itself when it is a mapping; else None."""
    if not isinstance(packet, Send) or not isinstance(packet.arg, Mapping):
        return None
    inner = packet.arg.get("state")
    return inner if isinstance(inner, Mapping) else packet.arg


def _sent_refs(packet: Any) -> Mapping[Any, Any] | None:
    """The state of a stored `Send` holding references (`_sent_state`), or None."""
    state = _sent_state(packet)
    if state is None or not any(is_resent(v) for v in state.values()):
        return None
    return state


def _with_state(packet: Send, state: dict[Any, Any]) -> Send:
    """`packet` with the state it carries replaced by `state` (`_sent_state`)."""
    arg = packet.arg
    if isinstance(arg.get("state"), Mapping):
        return Send(packet.node, {**arg, "state": state})
    return Send(packet.node, state)


def _slot_of(config: RunnableConfig) -> tuple[str | None, str]:
    conf = config.get("configurable") or {}
    thread_id = conf.get("thread_id")
    return (None if thread_id is None else str(thread_id)), str(conf.get("checkpoint_ns") or "")


def _applied(ch: str, ref: Mapping[str, Any], base: list[Any]) -> list[Any]:
    """The items of the snapshot `ref` stands for, given the whole value it refers to."""
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


