"""What a stopped step stored is kept: a crashed step's finished work, a stopped subgraph's.

Why. LangGraph stores each task's writes the moment the task finishes, and the step's
checkpoint after all of them. A process killed in between leaves the thread's newest
checkpoint (its *head*) with finished tasks' writes pending — and likewise an input
checkpoint whose `__start__` task never ran holds the user's message only in `__start__`.
Resuming (`invoke(None)`) applies those writes; **new input discards them**
(`pregel/_loop.py`, `discard_tasks`), so the next turn silently dropped a user message,
a final answer or a tool call the user had seen streamed (plain `add_messages` graphs
lose the same writes).

Contract:

* `StoppedWorkLayer` is this behaviour as a saver layer (`threadlog.checkpoint.layered`),
  under the run guard; `threadlog.checkpointer()` gives it to every saver it builds.
* Reading the head — `get_tuple` / `aget_tuple` with a config that names a thread but no
  `checkpoint_id`, root namespace — adds, for each channel that finished work wrote
  messages to, one write of task `NULL_TASK_ID` carrying those messages: the `__start__`
  input still waiting (`channel_values["__start__"]`), then the writes of every task
  that finished (it has writes, and no `__error__` or `__interrupt__`), in stored order.
  LangGraph applies a checkpoint's `NULL_TASK_ID` writes first, for a resume and for
  new input alike; new input then lands after them, and the input checkpoint it stores
  snapshots the channel (LangGraph snapshots a delta channel with pending writes), so
  what readers rebuild later is what the run held. A resume re-applies the tasks' own
  writes afterwards, which the log takes as replays (same ids, same content).
* Only what the stored log accepts is carried: the messages are dry-run on a copy of
  the head's log (`MessageLog.extend_writes`, one batch per task). A step the log
  refused (the run raised) is not carried, so new input continues from the intact log
  as before. Messages without an id (bare strings, tuples) are not carried: their ids
  derive from their position, which would differ when the task's own write is replayed.
* A run that brings new input also gets what the subgraphs running from the head stored
  in their own namespaces, nested ones too (below, "Subgraphs"), after the head's own
  finished work.
  Readers and resumes do not: a resumed subgraph returns its own work.
* New input on a head that still has a task to run abandons that task (LangGraph
  discards it): an approval interrupt, a failed or killed tool step — in the root graph
  or in a subgraph, a branch's node or a `Send`'s (LangChain's per-call review pauses
  inside the tool tasks `create_agent` sends). Each call left open in the message logs
  the graph declares (`MessageLogChannel` keys of the run's channel specs), after the
  carried work, gets one explicit `status="error"` "not completed" result, as
  `ModelNode` would record it (`repair_open_calls`: same id and text; a result the step
  had stored is read back with `recover` and logged as stored; a call whose tool had
  started — the tool node's marker, read by the same `recover` walk, or for a call a
  subgraph made, met by the subgraph walk in the namespace its tool step ran in — is
  answered "outcome unknown" instead; a call of a tool marked idempotent that has no
  stored result or receipt is run again with its key, `threadlog.nodes.tools.rerun`,
  and answered with its real result) — unless the input itself answers the call. The
  open calls are those of the head's logs with the carried work in them (`_after`).
  So a graph whose model node does not repair (LangChain's `create_agent` with
  `HumanInTheLoopMiddleware`, LangGraph's prebuilt agent) gets a paired log, the
  answers before the new message. The tool never runs. A head whose turn finished
  (nothing left to run) keeps its open calls: the input may be their results.
* `with_finished_work(saver, tup)`: the reader's carry for one tuple of any namespace,
  read by id (finished work only: no subgraph work, no "not completed" answers), so
  the inspector's export of a head, root or subgraph, shows what the graph would read.
* Nothing is stored: this changes what a reader of the head sees, never the database.
  Reads of a named checkpoint (`checkpoint_id`), `list`, and heads without such work
  are returned unchanged, at the cost of one scan of the head's pending writes.

Subgraphs. A compiled subgraph used as a node (sharing the parent's `messages` key) stores its
steps in its own namespace (`checkpoint_ns = "node:task_id"`): its model's tool calls,
its tools' results. The parent sees none of it until the subgraph *returns*. A process
killed (or a run interrupted or failed) inside the subgraph leaves the parent's head with
the subgraph's task unfinished; resuming (`invoke(None)`) re-enters the subgraph at its
own checkpoint, but **new input** gives the parent a new step, so the subgraph runs again
as a new task in a new namespace from the parent's log — everything the first run stored
(calls, tool results, answers the user saw streamed) was silently dropped, and the model
re-asked for tools whose side effects had happened.

* `may_run_subgraphs(tup)`: whether a head (of the root graph or
  of a subgraph's namespace) has a task still to run (a `branch:to:<node>` trigger, or
  a `Send` waiting in its tasks channel's value (`TASKS`) or its pending writes) — only
  then is it worth looking for subgraph namespaces; a finished turn's head costs
  nothing more.
* `subgraph_work(saver, tup)` / `asubgraph_work(saver, tup)`: one batch of message items
  per write, per channel, oldest checkpoint first, for each namespace below the head whose
  parent task has not finished (a finished task's own writes are the parent's finished
  work already). Writes of a task that failed or was interrupted are skipped, as
  `finished_work` does; so is anything not made of messages with ids.
  The subgraph's first write re-sends the parent's log (its input): the log takes it as
  a replay, so what is new is what the subgraph added.
* Nested subgraphs are walked level by level: LangGraph names a namespace two levels
  down `outer:<task>|inner:<task>` and records every enclosing checkpoint id in
  `metadata["parents"]` (`{"": head_id, "outer:<task>": outer_head_id}`), so each level
  is one `list(filter={"parents": ...})` query, made only when the level's newest
  checkpoint (its head) still has a task to run. A namespace's work comes before the
  work of the subgraphs it was running, which ran from its head.
* The walk itself does no I/O (`_walk` yields each query and receives its checkpoints),
  so the sync and async savers share it.
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
    "subgraph_work",
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


def _requests(calls: Mapping[str, AIMessage]) -> set[str]:
    return {m.id for m in calls.values() if m.id is not None}


def _carry(
    tup: CheckpointTuple,
    rounds: Sequence[Mapping[str, list[Batch]]],
    head_logs: Mapping[str, list[BaseMessage]],
    *,
    reader: bool,
    abandon: _Abandon | None = None,
) -> CheckpointTuple:
    """The head with NULL-task writes carrying the new messages its log accepts.

    `rounds`: the head's own finished work, then what its unfinished subgraphs stored
    (below, "Subgraphs"); each is taken or refused whole, after the ones before it.
    With `abandon` (new input leaves the head's tasks), the calls still open after them
    are answered "not completed", before the input.
    For a reader (not a run), the carried tasks' own writes are left out as well, so
    `get_state` lists them in `next`: their step has no checkpoint yet.
    """
    added: list[PendingWrite] = []
    carried_tasks: set[str] = set()
    channels = dict.fromkeys(c for work in rounds for c in work)
    channels.update(dict.fromkeys(abandon.channels if abandon else ()))
    for channel in channels:
        messages = head_logs.get(channel)
        if messages is None:
            continue
        trial = MessageLog(messages)
        new: list[BaseMessage] = []
        for work in rounds:
            batches = work.get(channel)
            if not batches:
                continue
            try:
                new += trial.extend_writes([items for _, items in batches], single_writer=False)
            except (MessageLogError, ValueError, TypeError):
                continue  # a step the log refused stays refused
            carried_tasks.update(task for task, _ in batches if task is not None)
        if abandon is not None and (
            channel in abandon.channels or any(work.get(channel) for work in rounds[1:])
        ):
            new += _answer_open_calls(trial, abandon)
        if new:
            added.append((PREGEL.null_task_id, channel, new))
    if not added:
        return tup
    writes = list(tup.pending_writes or ())
    if reader and not any(channel in _UNFINISHED for _, channel, _ in writes):
        writes = [w for w in writes if w[0] not in carried_tasks]
    return tup._replace(pending_writes=[*writes, *added])


def _answer_open_calls(log: MessageLog, abandon: _Abandon) -> list[BaseMessage]:
    """Explicit "not completed" results for the calls still open in `log`, as the model
    node would record them (`repair_open_calls`; a result the step had stored is logged
    as stored, a call whose tool started is answered "outcome unknown": `recovered` is a
    `pairing.Recovered`): the new input abandons the step that would have answered them,
    and the graph's own nodes may not repair (LangChain's `create_agent`, LangGraph's
    prebuilt agent). Calls the input answers are left to it."""
    try:
        # A stored call without an id cannot be answered (`pairing`): refused here too,
        # so a head read never fails on it; the model node names it when it repairs.
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
    # The channel's own loader: seeds (snapshots, cached logs, plain lists) and stored
    # writes read exactly as LangGraph's loader reads them.
    from threadlog.channel import MessageLogChannel

    channel = MessageLogChannel().from_checkpoint(seed)
    channel.replay_writes(writes)
    if not channel.is_available():
        return []
    messages: list[BaseMessage] = list(channel.get())
    return messages


def _needs_history(tup: CheckpointTuple, channels: Sequence[str]) -> list[str]:
    values = tup.checkpoint.get("channel_values", {})
    return [c for c in channels if c not in values]


def _wanted(rounds: Sequence[Mapping[str, list[Batch]]], abandon: _Abandon | None) -> list[str]:
    """The channels whose head log is needed: carried work, or calls to answer."""
    wanted = dict.fromkeys(_channels(rounds))
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
    """`tup` (a head of any namespace, read by id) as a reader of the root's head sees it:
    its finished tasks' stored messages carried as `NULL_TASK_ID` writes, only what its
    log accepts, nothing invented (open calls stay open). For the inspector's export."""
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
    """The rest of a head read: the logs the carried work needs, the stored results of
    abandoned calls (and which started: the root's markers, and `markers`, the ones the
    subgraph walk found in the namespaces their calls were made in), then `_carry`."""
    wanted = _wanted(rounds, abandon)
    if not wanted:
        return tup
    missing = _needs_history(tup, wanted)
    history = None
    if missing:
        history = yield from call(
            saver, "get_delta_channel_history", config=tup.config, channels=missing
        )
    logs = {c: _rebuild(*_seed_and_writes(tup, c, history)) for c in wanted}
    if abandon is not None and (calls := _open_in(_after(logs, rounds), abandon)):
        stored = yield from recover_flow(
            saver, tup.config, list(calls), requests=_requests(calls), markers=markers
        )
        # Idempotent tools' calls are run again with their key instead of answered
        # with a guess (`threadlog.nodes.tools.rerun`, through the receipts' hook).
        conf = tup.config["configurable"]
        stored = yield from rerun_flow(abandon.nodes, saver, conf, calls, stored)
        abandon = replace(abandon, recovered=stored)
    return _carry(tup, rounds, logs, reader=reader, abandon=abandon)


def _after(
    logs: Mapping[str, list[BaseMessage]], rounds: Sequence[Mapping[str, list[Batch]]]
) -> dict[str, list[BaseMessage]]:
    """The head logs with the carried work in them, as `_carry` takes it: a subgraph's
    abandoned calls are open there, not in the head's own log."""
    out: dict[str, list[BaseMessage]] = {}
    for channel, messages in logs.items():
        trial = MessageLog(messages)
        for work in rounds:
            if batches := work.get(channel):
                try:
                    trial.extend_writes([items for _, items in batches], single_writer=False)
                except (MessageLogError, ValueError, TypeError):
                    continue  # refused: `_carry` leaves it out too
        out[channel] = list(trial.messages)
    return out


def _new_input_loop() -> Any | None:
    """The entering Pregel loop when its run brings new input, else None.

    A resume (`None`, `Command`) re-enters a stopped subgraph at its own checkpoint, and
    the subgraph's return decides what the parent gets (all of it, or only its last
    message: langgraph-supervisor); it also re-runs an interrupted step. Only new input
    abandons the head's tasks. Readers see the subgraph's stored work through
    `get_state(subgraphs=True)`.
    """
    loop = running_loop()
    if loop is None:
        return None
    given = loop.input
    return None if given is None or isinstance(given, Command) else loop


def _channels(rounds: Sequence[Mapping[str, list[Batch]]]) -> dict[str, list[Batch]]:
    return {c: b for work in rounds for c, b in work.items() if b}


# -- subgraphs: what they stored in their own namespaces --------------------------------

def may_run_subgraphs(tup: CheckpointTuple) -> bool:
    """Whether the head still has a task to run: a branch taken, or a `Send` (a subgraph or
    a tool branch it starts; LangChain's `create_agent` sends each tool call, and
    `HumanInTheLoopMiddleware(interrupt_mode="per_call")` pauses inside those tasks)."""
    values = tup.checkpoint.get("channel_values", {})
    # A step's `Send`s wait in the next checkpoint's `__pregel_tasks` value (a subgraph
    # started by `Send`, a tool branch); ones not yet stepped over sit in pending writes.
    if values.get(TASKS) or any(str(k).startswith(PREGEL.branch_to) for k in values):
        return True
    return any(channel == TASKS for _, channel, _ in tup.pending_writes or ())


Work = dict[str, list[Batch]]


def subgraph_work(saver: BaseCheckpointSaver[Any], tup: CheckpointTuple) -> Work:
    """channel -> batches of the subgraphs' stored messages, every level (module doc)."""
    return run(_subgraph_flow(saver, tup))


def _subgraph_flow(
    saver: BaseCheckpointSaver[Any], tup: CheckpointTuple, markers: list[PendingWrite] | None = None
) -> Flow[Work]:
    """`subgraph_work` as a flow; the tool node's markers met on the way go to `markers`."""
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
    then, for each, of the subgraphs running from its own head; and to `markers` the
    tool node's markers stored there (a subgraph's tool step stores them in the
    subgraph's namespace, where the root's walk for stored results never looks)."""
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
