"""`recover_results`: tool results an interrupted or failed step stored, found again.

New input discards a stopped step's pending writes; this reads its finished calls' back.

* `recover_results(saver, config, call_ids, *, requests=(), max_walk=16)` (and `a…`) returns
  the stored results of the calls that have one (a `RECEIPT_CHANNEL` write counts), and in
  `started` the calls whose newest tool-node marker (`STARTED_CHANNEL`) is "started". It
  only reads, through `get_tuple` / `list` of any saver (`NotImplementedError`: nothing).
* The walk starts at the checkpoint `config` names (not stored yet: the newest before it)
  and follows this branch's parents; the newest result wins. It stops when every call is
  found, after the checkpoint holding every AIMessage id in `requests`, at the first
  checkpoint, or after `max_walk` checkpoints.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal, cast

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, PendingWrite
from langgraph.constants import CONFIG_KEY_CHECKPOINTER

from threadlog._upstream import PREGEL
from threadlog.checkpoint.receipts import RECEIPT_CHANNEL, is_receipt, receipt_message
from threadlog.errors import MessageLogError
from threadlog.flows import Flow, call, drivers, listed
from threadlog.log.message_log import flatten_write, is_resent
from threadlog.log.messages import coerce_message
from threadlog.log.pairing import Recovered

__all__ = [
    "DEFAULT_MAX_WALK",
    "STARTED_CHANNEL",
    "MarkerEvent",
    "arecover_results",
    "finished_result",
    "marker_prefix",
    "node_checkpoint",
    "recover_flow",
    "recover_for_node_flow",
    "recover_results",
    "started_marker",
]

DEFAULT_MAX_WALK = 16  # a tool step is a few checkpoints behind the model step

# The channel of the tool node's markers: never a graph's, so LangGraph applies nothing.
STARTED_CHANNEL = "__threadlog_started__"

MarkerEvent = Literal["started", "stopped", "finished"]
_EVENT_ORDER: dict[str, int] = {"started": 0, "stopped": 1, "finished": 2}


def started_marker(
    call_id: str, event: MarkerEvent, result: ToolMessage | None = None
) -> tuple[str, list[tuple[str, Any]]]:
    """(task id, writes) of one marker of `call_id`; "finished" carries its `result`."""
    at = time.time_ns()
    value: dict[str, Any] = {"call_id": call_id, "event": event, "at": at}
    if result is not None:
        value["result"] = result
    return f"{marker_prefix(call_id, event)}{at}", [(STARTED_CHANNEL, value)]


def marker_prefix(call_id: str, event: MarkerEvent) -> str:
    return f"threadlog-{event}:{call_id}:"


def finished_result(writes: Iterable[PendingWrite], call_id: str) -> ToolMessage | None:
    """The result a "finished" marker of `call_id` among `writes` carries, or None."""
    for _task, channel, value in writes:
        if (
            channel == STARTED_CHANNEL
            and isinstance(value, Mapping)
            and value.get("call_id") == call_id
            and value.get("event") == "finished"
            and isinstance(value.get("result"), ToolMessage)
        ):
            return cast(ToolMessage, value["result"])
    return None


def node_checkpoint(
    config: RunnableConfig | None,
) -> tuple[BaseCheckpointSaver[Any], RunnableConfig] | None:
    """The run's checkpointer and the config of the checkpoint a node runs from."""
    conf = (config or {}).get("configurable") or {}
    saver = conf.get(CONFIG_KEY_CHECKPOINTER)
    thread_id = conf.get("thread_id")
    if not isinstance(saver, BaseCheckpointSaver) or thread_id is None:
        return None
    # A task's namespace is its graph's namespace plus "node:task_id"; the checkpoint
    # map names the checkpoint each enclosing graph is at, keyed by its namespace.
    task_ns = str(conf.get("checkpoint_ns") or "")
    graph_ns = task_ns.rsplit(PREGEL.ns_sep, 1)[0] if PREGEL.ns_sep in task_ns else ""
    at: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": graph_ns}
    checkpoint_id = (conf.get(PREGEL.checkpoint_map) or {}).get(graph_ns)
    if checkpoint_id:
        at["checkpoint_id"] = checkpoint_id
    return saver, {"configurable": at}


def recover_for_node_flow(
    config: RunnableConfig | None, calls: Mapping[str, AIMessage]
) -> Flow[Recovered]:
    """Stored results of `calls` (call id -> its request), read from inside a node."""
    found = node_checkpoint(config) if calls else None
    if found is None:
        return Recovered()
    saver, at = found
    requests = {m.id for m in calls.values() if m.id is not None}
    return (yield from recover_flow(saver, at, list(calls), requests=requests))


def recover_flow(
    saver: BaseCheckpointSaver[Any],
    config: RunnableConfig,
    call_ids: Collection[str],
    *,
    requests: Collection[str] = (),
    max_walk: int = DEFAULT_MAX_WALK,
    markers: Iterable[PendingWrite] = (),
) -> Flow[Recovered]:
    """The walk (module doc); `markers`: marker writes read elsewhere, weighed too."""
    search = _Search(call_ids, requests)
    if not search.wanted:
        return Recovered()
    search.read([m for m in markers if m[1] in (STARTED_CHANNEL, RECEIPT_CHANNEL)])
    conf = config.get("configurable") or {}
    ns = conf.get("checkpoint_ns", "")
    thread: RunnableConfig = {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": ns}}
    checkpoint_id = conf.get("checkpoint_id")
    try:
        saved = yield from call(saver, "get_tuple", thread if checkpoint_id is None else config)
        if saved is None and checkpoint_id is not None:
            # Not stored yet: the newest before it (ids grow with time, stored in order).
            before: RunnableConfig = {"configurable": {"checkpoint_id": checkpoint_id}}
            older = yield from listed(saver, thread, before=before, limit=1)
            saved = older[0] if older else None
        for _ in range(max_walk):
            if saved is None or search.read(saved.pending_writes or ()):
                break
            parent = saved.parent_config
            saved = (yield from call(saver, "get_tuple", parent)) if parent else None
    except NotImplementedError:  # a saver without this form (SqliteSaver in async code)
        return Recovered()
    return search.result()


recover_results, arecover_results = drivers(
    recover_flow,
    "recover_results",
    "Stored results of `call_ids` on this branch's recent checkpoints (module doc).",
)


class _Search:
    def __init__(self, call_ids: Iterable[str], requests: Iterable[str]) -> None:
        self.wanted = set(call_ids)
        self.requests = set(requests)
        self.bounded = bool(self.requests)
        self.found: dict[str, ToolMessage] = {}
        self.markers: dict[str, tuple[int, int]] = {}  # call id -> newest (at, event order)
        self.finished: dict[str, ToolMessage] = {}  # results "finished" markers carry

    def read(self, writes: Iterable[PendingWrite]) -> bool:
        """Take the results in one checkpoint's writes; True when the walk may stop."""
        for _task, channel, value in writes:
            if channel == STARTED_CHANNEL:
                self._marker(value)
            elif channel == RECEIPT_CHANNEL:
                self._receipt(value)
            else:
                self._results(value)
        return len(self.found) == len(self.wanted) or (self.bounded and not self.requests)

    def _results(self, value: Any) -> None:
        for item in _items(value):
            if isinstance(item, ToolMessage):
                cid = item.tool_call_id
                if cid in self.wanted and cid not in self.found:
                    self.found[cid] = item  # walking back: the first is the newest
            elif item.id is not None:
                self.requests.discard(item.id)

    def _receipt(self, value: Any) -> None:
        # An idempotent tool's receipt stands for a result never stored (a newer one wins).
        if not is_receipt(value) or value["call_id"] not in self.wanted:
            return
        cid = str(value["call_id"])
        if cid not in self.found and (message := receipt_message(value)) is not None:
            self.found[cid] = message

    def _marker(self, value: Any) -> None:
        if not isinstance(value, Mapping) or value.get("call_id") not in self.wanted:
            return
        at, event = value.get("at"), value.get("event")
        if not isinstance(at, int) or event not in _EVENT_ORDER:
            return
        cid = str(value["call_id"])
        result = value.get("result")
        if event == "finished" and isinstance(result, ToolMessage):
            # The node stored it as its task's write may be lost; that write wins (`result`).
            self.finished.setdefault(cid, result)
        # The newest wins; at the same instant "stopped" (the report came second).
        self.markers[cid] = max((at, _EVENT_ORDER[event]), self.markers.get(cid, (-1, -1)))

    def result(self) -> Recovered:
        found = {**self.finished, **self.found}
        started = (c for c, (_, e) in self.markers.items() if e == 0 and c not in found)
        return Recovered(found, started)


def _items(value: Any) -> list[ToolMessage | AIMessage]:
    """The results and requests in one write; anything else (routing, errors) is skipped."""
    if isinstance(value, (ToolMessage, AIMessage)):
        return [value]
    if is_resent(value) or isinstance(value, (list, tuple)):  # a resent write: its new items
        raws = flatten_write(value)
    elif isinstance(value, Mapping):
        raws = [value]
    else:
        return []
    out: list[ToolMessage | AIMessage] = []
    for raw in raws:
        if isinstance(raw, Mapping) and raw.get("role") in ("tool", "assistant", "ai"):
            try:
                raw = coerce_message(raw)
            except (MessageLogError, ValueError, TypeError):
                continue  # not a message the log could hold: nothing to recover
        if isinstance(raw, (ToolMessage, AIMessage)):
            out.append(raw)
    return out
