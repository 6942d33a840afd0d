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
* **Rebuilt exactly.** `get_tuple` hands LangGraph each such pending write as it was
  written — the first `count` messages of the view at `A` (read through the layers
  below, the history cache first), then `rest` — so a `StateSnapshot`'s task results and
  anything else reading one checkpoint's writes see the original list. `list` (history)
  leaves them in the stored form (`docs/durability.md`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from threadlog._upstream import MISSING, declared_channels
from threadlog.channel import WRITE_LOCK, MessageLogChannel
from threadlog.checkpoint.cache import HistoryCache
from threadlog.checkpoint.layered import Layer, SaverView
from threadlog.checkpoint.own_writes import OwnWrites
from threadlog.flows import Flow
from threadlog.log.message_log import MessageLog, is_resent, resent_write

__all__ = ["ResentLayer"]


class ResentLayer(Layer):
    """Stores message-log writes as what they add; rebuilds them for `get_tuple`."""

    name = "resent"

    def __init__(self, cache: HistoryCache, own: OwnWrites) -> None:
        self.cache = cache
        self.own = own

    def put_writes(
        self,
        below: SaverView,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Flow[None]:
        stored = self._stored_form(config, writes)
        yield from below.flow("put_writes", config, stored, task_id, task_path)

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        if tup is None or not any(is_resent(v) for _, _, v in tup.pending_writes or ()):
            return tup
        conf = tup.config["configurable"]
        views: dict[tuple[str, str], list[Any] | None] = {}
        pending = []
        for task_id, channel, value in tup.pending_writes or ():
            if is_resent(value):
                at = str(value["at"])
                if (channel, at) not in views:
                    views[(channel, at)] = yield from _view_at(below, conf, channel, at)
                view = views[(channel, at)]
                count = int(value["count"])
                if view is not None and len(view) >= count:
                    value = [*view[:count], *value["items"]]
            pending.append((task_id, channel, value))
        return tup._replace(pending_writes=pending)

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
            if not isinstance(value, list) or not value:
                continue
            if declared is not None and not isinstance(declared.get(channel), MessageLogChannel):
                continue  # not threadlog's log in the graph writing it
            entry = self.cache.get((thread_id, ns, channel))
            if entry is None or not isinstance(entry[1], MessageLog):
                continue
            at, log, version = entry
            if at != cid and not self.own.descends(
                (thread_id, ns), str(cid), at, self.cache.max_walk
            ):
                continue  # the cached log is not on this write's branch
            with WRITE_LOCK:  # the log may be growing in the run's next step
                count = log.resent_prefix(value, version)
            if count == 0:
                continue
            if out is None:
                out = list(writes)
            out[i] = (channel, resent_write(at, count, value[count:]))
        return writes if out is None else out


def _view_at(below: SaverView, conf: Any, channel: str, at: str) -> Flow[list[Any] | None]:
    """The message log's view of `channel` at checkpoint `at` (same thread and namespace),
    rebuilt from its delta history through the layers below (the history cache first)."""
    config: RunnableConfig = {
        "configurable": {
            "thread_id": conf["thread_id"],
            "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "checkpoint_id": at,
        }
    }
    histories = yield from below.flow(
        "get_delta_channel_history", config=config, channels=[channel]
    )
    history = histories.get(channel)
    if history is None:
        return None
    ch = MessageLogChannel().from_checkpoint(history.get("seed", MISSING))
    ch.replay_writes(history["writes"])
    return list(ch.get()) if ch.is_available() else []
