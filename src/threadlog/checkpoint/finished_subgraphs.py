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

* `may_run_subgraphs(tup)`: whether a root-namespace head has a task still to run (a
  `branch:to:<node>` trigger, or a `Send` in its pending writes) — only then is it worth
  looking for subgraph namespaces; a finished turn's head costs nothing more.
* `subgraph_filter(tup)`: the `list(..., filter=)` argument that finds the checkpoints of
  the subgraphs that ran from this head (LangGraph records the enclosing checkpoint ids
  in each checkpoint's `metadata["parents"]`, `{"": head_id}` one level down).
* `subgraph_work(tup, found)`: from those checkpoints, one batch of message items per
  write, per channel, oldest checkpoint first, for each namespace one level below the
  head whose parent task has not finished (a finished task's own writes are the parent's
  finished work already). Writes of a task that failed or was interrupted are skipped,
  as `finished_work` does; so is anything not made of messages with ids.
  The subgraph's first write re-sends the parent's log (its input): the log takes it as
  a replay, so what is new is what the subgraph added.
* Deeper namespaces (a subgraph inside a subgraph) are not read: their work is carried
  only once their own parent subgraph returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from threadlog._upstream import BRANCH_TO, ERROR, INTERRUPT, NS_END, NS_SEP, TASKS

# finished.py imports this module; its names are read when called, not at import.
from threadlog.checkpoint import finished

__all__ = ["may_run_subgraphs", "subgraph_filter", "subgraph_work"]

_UNFINISHED = frozenset({ERROR, INTERRUPT})


def may_run_subgraphs(tup: CheckpointTuple) -> bool:
    values = tup.checkpoint.get("channel_values", {})
    if any(str(k).startswith(BRANCH_TO) for k in values):
        return True
    return any(channel == TASKS for _, channel, _ in tup.pending_writes or ())


def subgraph_filter(tup: CheckpointTuple) -> dict[str, Any]:
    return {"parents": {"": tup.config["configurable"]["checkpoint_id"]}}


def subgraph_work(
    tup: CheckpointTuple, found: Iterable[CheckpointTuple]
) -> dict[str, list[finished.Batch]]:
    """channel -> batches of the subgraphs' stored messages (module doc)."""
    head_id = tup.config["configurable"]["checkpoint_id"]
    writes = tup.pending_writes or ()
    unfinished = {task for task, channel, _ in writes if channel in _UNFINISHED}
    done = {task for task, _, _ in writes} - unfinished
    by_ns: dict[str, list[CheckpointTuple]] = {}
    for sub in found:
        ns = str(sub.config["configurable"].get("checkpoint_ns") or "")
        parents = (sub.metadata or {}).get("parents") or {}
        # Postgres' metadata filter is containment, SQLite's equality: keep one level.
        if not ns or NS_SEP in ns or parents.get("") != head_id:
            continue
        if ns.rsplit(NS_END, 1)[-1] in done:
            continue
        by_ns.setdefault(ns, []).append(sub)
    out: dict[str, list[finished.Batch]] = {}
    for subs in sorted(by_ns.values(), key=lambda s: min(_id(t) for t in s)):
        for sub in sorted(subs, key=_id):
            sub_writes = sub.pending_writes or ()
            failed = {task for task, channel, _ in sub_writes if channel in _UNFINISHED}
            for task, channel, value in sub_writes:
                if task in failed:
                    continue
                if (items := finished.message_items(value)) is not None:
                    out.setdefault(str(channel), []).append((None, items))
    return out


def _id(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"]["checkpoint_id"])
