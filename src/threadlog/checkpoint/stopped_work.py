"""`StoppedWorkLayer`: what a stopped step stored is kept (docs/durability.md is the contract).

A root head read (no `checkpoint_id`) adds, per channel, one `NULL_TASK_ID` write with
the finished work's messages that the stored log accepts (the waiting `__start__` input,
then each task without `__error__` / `__interrupt__`); new input also gets the work of the
subgraphs running from the head, and answers each call the head's task abandons: its
stored result, "outcome unknown" once its tool started, an idempotent tool's rerun, else
"not completed". Nothing is stored. `with_finished_work`: the reader's carry for one tuple.
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
from threadlog.channel import MessageLogChannel
from threadlog.checkpoint.layered import Layer, SaverView
from threadlog.checkpoint.receipts import RECEIPT_CHANNEL, rerun_flow
from threadlog.checkpoint.recover import STARTED_CHANNEL, recover_flow
from threadlog.checkpoint.resent import log_view
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
    ns = conf.get("checkpoint_ns")
    return conf.get("thread_id") is not None and not conf.get("checkpoint_id") and not ns


def _is_reader(config: RunnableConfig) -> bool:
    # A run's own read of its starting checkpoint carries LangGraph's runtime; readers don't.
    return CONFIG_KEY_RUNTIME not in (config.get("configurable") or {})


def message_items(value: Any) -> list[Any] | None:
    """The items of a write when every one is a message with an id, else None."""
    items = flatten_write(value)
    return items if items and all(map(_has_id, items)) else None


def _has_id(item: Any) -> bool:
    if isinstance(item, BaseMessage):
        return bool(item.id)
    return isinstance(item, Mapping) and isinstance(item.get("id"), str)


Batch = tuple[str | None, list[Any]]  # (its task, None for the waiting input; its messages)


def finished_work(tup: CheckpointTuple) -> dict[str, list[Batch]]:
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
    channels = tuple(str(k) for k, v in loop.specs.items() if isinstance(v, MessageLogChannel))
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


def _replayed(
    logs: Mapping[str, MessageLog], rounds: Sequence[Mapping[str, list[Batch]]]
) -> tuple[dict[str, list[BaseMessage]], set[str]]:
    """Append `rounds` to `logs`, each taken or refused whole: messages gained, tasks carried."""
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
    """ "Not completed" results for the calls still open in `log` the input leaves open."""
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
    entry = (history or {}).get(channel) or {}
    return entry.get("seed", MISSING), entry.get("writes", ())


class StoppedWorkLayer(Layer):
    name = "stopped_work"

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        if tup is None or not _is_head_read(config):
            return tup
        rounds = [finished_work(tup)]
        abandon = None
        markers: list[PendingWrite] = []
        if may_run_subgraphs(tup) and (loop := _new_input_loop()) is not None:
            rounds.append({})
            yield from _walk(below, tup, "", {}, rounds[-1], markers)
            abandon = _abandoning(loop)
        flow = _carry_flow(below, tup, rounds, abandon, reader=_is_reader(config), markers=markers)
        return (yield from flow)


def with_finished_work(saver: BaseCheckpointSaver[Any], tup: CheckpointTuple) -> CheckpointTuple:
    """`tup` (a head of any namespace) with its finished work carried, as a reader sees it."""
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
    """The head with NULL-task writes carrying what its logs accept (module doc)."""
    # The channels whose head log is needed: carried work, or calls to answer.
    wanted = [*dict.fromkeys(c for work in rounds for c, b in work.items() if b)]
    wanted += [c for c in (abandon.channels if abandon else ()) if c not in wanted]
    if not wanted:
        return tup
    values = tup.checkpoint.get("channel_values", {})
    history = None
    if missing := [c for c in wanted if c not in values]:
        history = yield from call(
            saver, "get_delta_channel_history", config=tup.config, channels=missing
        )
    logs = {c: MessageLog(log_view(*_seed_and_writes(tup, c, history))) for c in wanted}
    new, carried = _replayed(logs, rounds)
    if abandon is not None:
        calls: dict[str, AIMessage] = {}
        for channel in abandon.channels:
            calls.update(open_calls(logs[channel].messages))
        if calls := {cid: m for cid, m in calls.items() if cid not in abandon.answered}:
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
    loop = running_loop()
    return None if loop is None or loop.input is None or isinstance(loop.input, Command) else loop


def may_run_subgraphs(tup: CheckpointTuple) -> bool:
    """Whether the head still has a task to run: a branch taken, or a `Send`."""
    values = tup.checkpoint.get("channel_values", {})
    # `Send`s wait in the next checkpoint's tasks value, or in pending writes.
    if values.get(TASKS) or any(str(k).startswith(PREGEL.branch_to) for k in values):
        return True
    return any(channel == TASKS for _, channel, _ in tup.pending_writes or ())


def _walk(
    saver: BaseCheckpointSaver[Any],
    head: CheckpointTuple,
    head_ns: str,
    head_parents: dict[str, str],
    out: dict[str, list[Batch]],
    markers: list[PendingWrite],
) -> Flow[None]:
    """Add to `out` the messages the subgraphs running from `head` stored; to `markers`, markers."""
    parents = {**head_parents, head_ns: _id(head)}
    # No `checkpoint_ns`: every namespace of the thread (the metadata filter narrows it).
    thread: RunnableConfig = {
        "configurable": {"thread_id": head.config["configurable"]["thread_id"]}
    }
    found = yield from listed(saver, thread, filter={"parents": parents})
    writes = head.pending_writes or ()
    unfinished = {task for task, channel, _ in writes if channel in _UNFINISHED}
    done = {task for task, _, _ in writes} - unfinished
    prefix = f"{head_ns}{PREGEL.ns_sep}" if head_ns else ""
    by_ns: dict[str, list[CheckpointTuple]] = {}
    for sub in found:
        ns = str(sub.config["configurable"].get("checkpoint_ns") or "")
        # Postgres' metadata filter is containment, SQLite's equality: keep one level.
        one_level = (
            ns.startswith(prefix) and ns != prefix and PREGEL.ns_sep not in ns[len(prefix) :]
        )
        mine = ((sub.metadata or {}).get("parents") or {}) == parents
        if one_level and mine and ns.rsplit(PREGEL.ns_end, 1)[-1] not in done:
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


def _id(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"]["checkpoint_id"])
