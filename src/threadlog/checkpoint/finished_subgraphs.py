"""Work a subgraph stored in its own namespace, carried to the parent's head like its own.

Why. A compiled subgraph used as a node (sharing the parent's `messages` key) stores its
steps in its own namespace (`checkpoint_ns = "node:task_id"`): its model's tool calls,
its tools' results. The parent sees none of it until the subgraph *returns*. A process
killed (or a run interrupted or failed) inside the subgraph leaves the parent's head with
the subgraph's task unfinished; resuming (`invoke(None)`) re-enters the subgraph at its
own checkpoint, but **new input** gives the parent a new step, so the subgraph runs again
as a new task in a new namespace from the parent's log — everything the first run stored
(calls, tool results, answers the user saw streamed) was silently dropped, and the model
re-asked for tools whose side effects had happened.

Used by `finished.keep_finished_work` only for a run that brings new input (a resume
re-enters the subgraph, whose return then decides what the parent gets); the carried
calls left without a result are answered "not completed" there.

Contract:

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

from collections.abc import Generator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.constants import TASKS

from threadlog._upstream import PREGEL

# finished.py imports this module; its names are read when called, not at import.
from threadlog.checkpoint import finished

__all__ = ["asubgraph_work", "may_run_subgraphs", "subgraph_work"]

_UNFINISHED = frozenset({ERROR, INTERRUPT})

Work = dict[str, list["finished.Batch"]]
_Walk = Generator[dict[str, Any], list[CheckpointTuple], None]


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


def subgraph_work(saver: BaseCheckpointSaver[Any], tup: CheckpointTuple) -> Work:
    """channel -> batches of the subgraphs' stored messages, every level (module doc)."""
    out: Work = {}
    walk = _walk(tup, "", {}, out)
    try:
        query = next(walk)
        while True:
            query = walk.send(list(saver.list(_thread(tup), filter=query)))
    except StopIteration:
        return out


async def asubgraph_work(saver: BaseCheckpointSaver[Any], tup: CheckpointTuple) -> Work:
    out: Work = {}
    walk = _walk(tup, "", {}, out)
    try:
        query = next(walk)
        while True:
            found = [t async for t in saver.alist(_thread(tup), filter=query)]
            query = walk.send(found)
    except StopIteration:
        return out


def _walk(head: CheckpointTuple, head_ns: str, head_parents: dict[str, str], out: Work) -> _Walk:
    """Add to `out` the work of the subgraphs running from `head` (namespace `head_ns`),
    then, for each, of the subgraphs running from its own head."""
    parents = {**head_parents, head_ns: _id(head)}
    found = yield {"parents": parents}
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
                if task in failed:
                    continue
                if (items := finished.message_items(value)) is not None:
                    out.setdefault(str(channel), []).append((None, items))
        if may_run_subgraphs(subs[-1]):
            yield from _walk(subs[-1], ns, parents, out)


def _thread(tup: CheckpointTuple) -> RunnableConfig:
    # No `checkpoint_ns`: every namespace of the thread (the metadata filter narrows it).
    return {"configurable": {"thread_id": tup.config["configurable"]["thread_id"]}}


def _id(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"]["checkpoint_id"])
