"""What a stopped step stored is kept: a crashed step's finished work, a stopped subgraph's.

LangGraph stores each task's writes as the task finishes and the step's checkpoint after
all of them; new input on a head with such pending writes discards them
(`pregel/_loop.py`, `discard_tasks`). Contract:

* `StoppedWorkLayer` (under the run guard): reading the root head (`get_tuple` naming a
  thread, no `checkpoint_id`) adds, per channel, one `NULL_TASK_ID` write carrying the
  messages of finished work: the waiting `__start__` input, then every task with writes
  and no `__error__` / `__interrupt__`, in stored order. LangGraph applies those first,
  for a resume and for new input alike.
* Only what the stored log accepts is carried (dry-run on a copy of the head's log, one
  batch per task); messages without an id are not carried.
* New input also gets the work of the subgraphs running from the head, nested ones too,
  after the head's own. Readers and resumes do not: a resumed subgraph returns its own.
* New input on a head with a task to run abandons that task: each call left open in the
  graph's `MessageLogChannel` logs gets one "not completed" result, as `ModelNode` would
  record it (`repair_open_calls`), unless the input answers it. A stored result is read
  back (`recover`), a started tool is answered "outcome unknown", an idempotent tool is
  run again with its key (`threadlog.nodes.tools.rerun`). A finished turn's head keeps
  its open calls: the input may be their results.
* `with_finished_work(saver, tup)`: the reader's carry for one tuple of any namespace
  (finished work only), for the inspector's export.
* Nothing is stored. Reads of a named checkpoint, `list`, and heads without such work
  are returned unchanged.

Subgraphs store their steps in their own namespace (`"node:task_id"`), nested ones as
`outer:<task>|inner:<task>` with every enclosing checkpoint id in `metadata["parents"]`.
`may_run_subgraphs(tup)`: whether a head has a task to run (a `branch:to:` trigger or a
`Send`), the only case worth a look. The walk takes one batch per write,
per channel, oldest first, for each namespace whose parent task has not finished, one
`list(filter={"parents": ...})` per level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, PendingWrite
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.constants import START, TASKS
from langgraph.types import Command

from threadlog._upstream import CONFIG_KEY_RUNTIME, MISSING, PREGEL, running_loop
from threadlog.checkpoint.layered import Layer, SaverView
from threadlog.checkpoint.receipts import RECEIPT_CHANNEL, rerun_flow
from threadlog.checkpoint.recover import STARTED_CHANNEL, recover_flow
from threadlog.errors import MessageLogError
from threadlog.flows import Flow, call, listed, run
from threadlog.log.message_log import MessageLog, flatten_write
from threadlog.log.pairing import open_calls, repair_open_calls

__all__ = [
    "Batch",
    "StoppedWorkLayer",
    "finished_work",
    "may_run_subgraphs",
    "message_items",
    "with_finished_work",
]


_UNFINISHED = frozenset({ERROR, INTERRUPT})


def _is_head_read(config: RunnableConfig) -> bool:
    conf = config.get("configurable") or {}
    return (
        conf.get("thread_id") is not None
        and not conf.get("checkpoint_id")
        and not conf.get("checkpoint_ns")
    )


def _is_reader(config: RunnableConfig) -> bool:
    # A run's own read of its starting checkpoint carries LangGraph's runtime in the
    # config; get_state, update_state and other readers do not.
    return CONFIG_KEY_RUNTIME not in (config.get("configurable") or {})


def message_items(value: Any) -> list[Any] | None:
    """The items of a write when every one is a message with an id, else None."""
    items = flatten_write(value)
    if not items:
        return None
    for item in items:
        if isinstance(item, BaseMessage):
            if not item.id:
                return None
        elif not (isinstance(item, Mapping) and isinstance(item.get("id"), str)):
            return None
    return items


Batch = tuple[str | None, list[Any]]
"""(the task that wrote it, or None for the waiting input; its message items)"""


def finished_work(tup: CheckpointTuple) -> dict[str, list[Batch]]:
    """channel -> one batch of message items per finished writer (module doc)."""
    out: dict[str, list[Batch]] = {}
    start = tup.checkpoint.get("channel_values", {}).get(START)
    if isinstance(start, Mapping):
        for channel, value in start.items():
            if (items := message_items(value)) is not None:
                out.setdefault(str(channel), []).append((None, items))
    writes = tup.pending_writes or ()
    unfinished = {task for task, channel, _ in writes if channel in _UNFINISHED}
    by_task: dict[tuple[str, str], list[Any]] = {}
    for task, channel, value in writes:
        if task == PREGEL.null_task_id or task in unfinished:
            continue
        if (items := message_items(value)) is not None:
            by_task.setdefault((task, channel), []).extend(items)
    for (task, channel), items in by_task.items():
        out.setdefault(channel, []).append((task, items))
    return out


@dataclass(frozen=True)
class _Abandon:
    """What a run's new input abandons at a head that still has a task to run."""

    channels: tuple[str, ...]  # the message-log channels the running graph declares
    answered: frozenset[str]  # call ids the input itself answers: left to it
    recovered: Mapping[str, ToolMessage] = field(default_factory=dict)
    nodes: Mapping[str, Any] = field(default_factory=dict)  # the running graph's nodes


def _abandoning(loop: Any) -> _Abandon:
    from threadlog.channel import MessageLogChannel  # the channel imports the log

    specs: Mapping[str, Any] = loop.specs
    channels = tuple(str(k) for k, v in specs.items() if isinstance(v, MessageLogChannel))
    return _Abandon(channels, _answered_by(loop.input, channels), nodes=loop.nodes)


def _answered_by(given: Any, channels: Sequence[str]) -> frozenset[str]:
    """Call ids the input's tool results answer (a client-side tool's result, say)."""
    out: set[str] = set()
    for channel in channels:
        value = given.get(channel) if isinstance(given, Mapping) else getattr(given, channel, None)
        if value is None:
            continue
        for item in flatten_write(value):
            if isinstance(item, ToolMessage):
                out.add(item.tool_call_id)
            elif isinstance(item, Mapping) and isinstance(item.get("tool_call_id"), str):
                out.add(item["tool_call_id"])
    return frozenset(out)


def _open_in(logs: Mapping[str, list[BaseMessage]], abandon: _Abandon) -> dict[str, AIMessage]:
    """The head logs' open calls the input leaves unanswered: call id -> its request."""
    found: dict[str, AIMessage] = {}
    for channel in abandon.channels:
        if channel in logs:
            found.update(open_calls(logs[channel]))
    return {cid: m for cid, m in found.items() if cid not in abandon.answered}


def _replayed(
    logs: Mapping[str, MessageLog], rounds: Sequence[Mapping[str, list[Batch]]]
) -> tuple[dict[str, list[BaseMessage]], set[str]]:
    """Append `rounds` (own work, then subgraphs') to `logs` in place, each round taken or
    refused whole per channel: the messages each channel gained, and the tasks carried."""
    new: dict[str, list[BaseMessage]] = {}
    carried: set[str] = set()
    for channel, log in logs.items():
        for work in rounds:
            if not (batches := work.get(channel)):
                continue
            try:
                added = log.extend_writes([items for _, items in batches], single_writer=False)
            except (MessageLogError, ValueError, TypeError):
                continue  # a step the log refused stays refused
            new.setdefault(channel, []).extend(added)
            carried.update(task for task, _ in batches if task is not None)
    return new, carried


def _answer_open_calls(log: MessageLog, abandon: _Abandon) -> list[BaseMessage]:
    """Explicit "not completed" results for the calls still open in `log`, as the model
    node would record them; calls the input answers are left to it."""
    try:
        # A stored call without an id is refused here: a head read never fails on it.
        _, results = repair_open_calls(log.messages, recovered=abandon.recovered)
        results = [r for r in results if r.tool_call_id not in abandon.answered]
        if results:
            log.extend_writes([results], single_writer=False)
    except (MessageLogError, ValueError, TypeError):
        return []  # the log refuses them: left to the model node, as before
    return list(results)


def _seed_and_writes(
    tup: CheckpointTuple, channel: str, history: Mapping[str, Any] | None
) -> tuple[Any, Sequence[PendingWrite]]:
    values = tup.checkpoint.get("channel_values", {})
    if channel in values:
        return values[channel], ()
    entry = (history or {}).get(channel)
    if not entry:
        return MISSING, ()
    return entry.get("seed", MISSING), entry.get("writes", ())


def _rebuild(seed: Any, writes: Sequence[PendingWrite]) -> list[BaseMessage]:
    # The channel's own loader reads seeds and writes exactly as LangGraph's does.
    from threadlog.channel import MessageLogChannel

    channel = MessageLogChannel().from_checkpoint(seed)
    channel.replay_writes(writes)
    if not channel.is_available():
        return []
    messages: list[BaseMessage] = list(channel.get())
    return messages


def _wanted(rounds: Sequence[Mapping[str, list[Batch]]], abandon: _Abandon | None) -> list[str]:
    """The channels whose head log is needed: carried work, or calls to answer."""
    wanted = dict.fromkeys(c for work in rounds for c, b in work.items() if b)
    wanted.update(dict.fromkeys(abandon.channels if abandon else ()))
    return list(wanted)


class StoppedWorkLayer(Layer):
    """Head reads carry what a stopped step stored (module doc)."""

    name = "stopped_work"

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        if tup is None or not _is_head_read(config):
            return tup
        rounds = [finished_work(tup)]
        abandon = None
        markers: list[PendingWrite] = []
        if may_run_subgraphs(tup) and (loop := _new_input_loop()) is not None:
            rounds.append((yield from _subgraph_flow(below, tup, markers)))
            abandon = _abandoning(loop)
        flow = _carry_flow(below, tup, rounds, abandon, reader=_is_reader(config), markers=markers)
        return (yield from flow)


def with_finished_work(saver: BaseCheckpointSaver[Any], tup: CheckpointTuple) -> CheckpointTuple:
    """`tup` (a head of any namespace) with its finished tasks' messages carried, as a
    reader of the root's head sees it; open calls stay open."""
    return run(_carry_flow(saver, tup, [finished_work(tup)], None, reader=True))


def _carry_flow(
    saver: BaseCheckpointSaver[Any],
    tup: CheckpointTuple,
    rounds: Sequence[Mapping[str, list[Batch]]],
    abandon: _Abandon | None,
    *,
    reader: bool,
    markers: Sequence[PendingWrite] = (),
) -> Flow[CheckpointTuple]:
    """The head with NULL-task writes carrying the new messages its logs accept: the logs
    the carried work needs are read, the work appended; with `abandon`, calls still open
    after it get their stored results (`markers`: the ones the subgraph walk found) or
    "not completed". For a reader, the carried tasks' own writes are left out, so
    `get_state` lists them in `next`."""
    wanted = _wanted(rounds, abandon)
    if not wanted:
        return tup
    values = tup.checkpoint.get("channel_values", {})
    missing = [c for c in wanted if c not in values]
    history = None
    if missing:
        history = yield from call(
            saver, "get_delta_channel_history", config=tup.config, channels=missing
        )
    logs = {c: MessageLog(_rebuild(*_seed_and_writes(tup, c, history))) for c in wanted}
    new, carried = _replayed(logs, rounds)
    if abandon is not None:
        if calls := _open_in({c: log.messages for c, log in logs.items()}, abandon):
            requests = {m.id for m in calls.values() if m.id is not None}
            stored = yield from recover_flow(
                saver, tup.config, list(calls), requests=requests, markers=markers
            )
            # Idempotent tools' calls are run again with their key instead.
            conf = tup.config["configurable"]
            stored = yield from rerun_flow(abandon.nodes, saver, conf, calls, stored)
            abandon = replace(abandon, recovered=stored)
        for channel, log in logs.items():
            if channel in abandon.channels or any(work.get(channel) for work in rounds[1:]):
                new.setdefault(channel, []).extend(_answer_open_calls(log, abandon))
    added: list[PendingWrite] = [(PREGEL.null_task_id, c, m) for c, m in new.items() if m]
    if not added:
        return tup
    writes = list(tup.pending_writes or ())
    if reader and not any(channel in _UNFINISHED for _, channel, _ in writes):
        writes = [w for w in writes if w[0] not in carried]
    return tup._replace(pending_writes=[*writes, *added])


def _new_input_loop() -> Any | None:
    """The entering Pregel loop when its run brings new input (not a resume), else None."""
    loop = running_loop()
    if loop is None:
        return None
    given = loop.input
    return None if given is None or isinstance(given, Command) else loop


# -- subgraphs: what they stored in their own namespaces --------------------------------

def may_run_subgraphs(tup: CheckpointTuple) -> bool:
    """Whether the head still has a task to run: a branch taken, or a `Send`."""
    values = tup.checkpoint.get("channel_values", {})
    # `Send`s wait in the next checkpoint's tasks value, or in pending writes.
    if values.get(TASKS) or any(str(k).startswith(PREGEL.branch_to) for k in values):
        return True
    return any(channel == TASKS for _, channel, _ in tup.pending_writes or ())


Work = dict[str, list[Batch]]


def _subgraph_flow(
    saver: BaseCheckpointSaver[Any], tup: CheckpointTuple, markers: list[PendingWrite] | None = None
) -> Flow[Work]:
    """channel -> batches of the subgraphs' stored messages, every level (module doc); the
    tool node's markers met on the way go to `markers`."""
    out: Work = {}
    yield from _walk(saver, tup, "", {}, out, [] if markers is None else markers)
    return out


def _walk(
    saver: BaseCheckpointSaver[Any],
    head: CheckpointTuple,
    head_ns: str,
    head_parents: dict[str, str],
    out: Work,
    markers: list[PendingWrite],
) -> Flow[None]:
    """Add to `out` the work of the subgraphs running from `head` (namespace `head_ns`),
    level by level, and to `markers` the tool node's markers stored there."""
    parents = {**head_parents, head_ns: _id(head)}
    found = yield from listed(saver, _thread(head), filter={"parents": parents})
    writes = head.pending_writes or ()
    unfinished = {task for task, channel, _ in writes if channel in _UNFINISHED}
    done = {task for task, _, _ in writes} - unfinished
    prefix = f"{head_ns}{PREGEL.ns_sep}" if head_ns else ""
    by_ns: dict[str, list[CheckpointTuple]] = {}
    for sub in found:
        ns = str(sub.config["configurable"].get("checkpoint_ns") or "")
        # Postgres' metadata filter is containment, SQLite's equality: keep one level.
        if not ns.startswith(prefix) or PREGEL.ns_sep in ns[len(prefix):] or ns == prefix:
            continue
        if ((sub.metadata or {}).get("parents") or {}) != parents:
            continue
        if ns.rsplit(PREGEL.ns_end, 1)[-1] in done:
            continue
        by_ns.setdefault(ns, []).append(sub)
    for ns, subs in sorted(by_ns.items(), key=lambda kv: min(_id(t) for t in kv[1])):
        subs.sort(key=_id)
        for sub in subs:
            sub_writes = sub.pending_writes or ()
            failed = {task for task, channel, _ in sub_writes if channel in _UNFINISHED}
            for task, channel, value in sub_writes:
                if channel in (STARTED_CHANNEL, RECEIPT_CHANNEL):
                    markers.append((task, channel, value))
                    continue
                if task in failed:
                    continue
                if (items := message_items(value)) is not None:
                    out.setdefault(str(channel), []).append((None, items))
        if may_run_subgraphs(subs[-1]):
            yield from _walk(saver, subs[-1], ns, parents, out, markers)


def _thread(tup: CheckpointTuple) -> RunnableConfig:
    # No `checkpoint_ns`: every namespace of the thread (the metadata filter narrows it).
    return {"configurable": {"thread_id": tup.config["configurable"]["thread_id"]}}


def _id(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"]["checkpoint_id"])
