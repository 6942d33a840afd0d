"""A thread's subgraph namespaces: which subgraphs stored checkpoints, and reading one.

A subgraph finished, was handed off (`handed_to`: the nodes a `Command.PARENT` sent its
writes to) or stopped. `InNamespace(saver, namespace)` reads `namespace` as the root.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, TASKS
from langgraph.types import Send

from threadlog._upstream import PREGEL
from threadlog.checkpoint.backends import backend_of
from threadlog.checkpoint.stopped_work import may_run_subgraphs, with_finished_work
from threadlog.inspect.records import short
from threadlog.inspect.table import Cell, Column, Table

__all__ = [
    "InNamespace",
    "Subgraph",
    "SubgraphTable",
    "no_such_namespace",
    "subgraph_namespaces",
]


@dataclass(frozen=True, slots=True)
class Subgraph:
    namespace: str
    node: str
    parent_checkpoint: str | None  # the root checkpoint the subgraph ran from
    checkpoints: int
    head_id: str
    finished: bool
    handed_to: str | None = None  # handed off: the enclosing graph's next node(s)

    @property
    def status(self) -> str:
        if self.finished:
            return "finished"
        return "stopped" if self.handed_to is None else "handed off"

    @property
    def agent(self) -> str:
        return self.node if self.handed_to is None else f"{self.node} → {self.handed_to}"


def _finished(tup: CheckpointTuple | None) -> bool:
    # A subgraph that returned leaves a newest checkpoint with no task to run.
    if tup is None or may_run_subgraphs(tup):
        return False
    if "__start__" in tup.checkpoint.get("channel_values", {}):
        return False
    return not any(ch in (ERROR, INTERRUPT) for _, ch, _ in tup.pending_writes or ())


def _handed_to(
    saver: BaseCheckpointSaver[Any], thread_id: str, ns: str, parents: Any
) -> str | None:
    """Where the enclosing graph went after the subgraph's task stored its writes there."""
    outer_ns = ns.rsplit(PREGEL.ns_sep, 1)[0] if PREGEL.ns_sep in ns else ""
    outer_id = parents.get(outer_ns) if isinstance(parents, dict) else None
    if not outer_id:
        return None
    conf = {"thread_id": thread_id, "checkpoint_ns": outer_ns, "checkpoint_id": outer_id}
    outer = saver.get_tuple({"configurable": conf})
    task_id = ns.rsplit(PREGEL.ns_end, 1)[-1]
    stored = (outer.pending_writes if outer else None) or ()
    writes = [(ch, v) for t, ch, v in stored if t == task_id]
    if not writes or any(ch in (ERROR, INTERRUPT) for ch, _ in writes):
        return None
    to = [ch[len(PREGEL.branch_to) :] for ch, _ in writes if ch.startswith(PREGEL.branch_to)]
    to += [str(v.node) for ch, v in writes if ch == TASKS and isinstance(v, Send)]
    return ", ".join(dict.fromkeys(to)) or "?"


def subgraph_namespaces(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[Subgraph]:
    out: list[Subgraph] = []
    for ns, n, head_id in backend_of(saver).namespace_counts(thread_id):
        conf = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": head_id}
        tup = saver.get_tuple({"configurable": conf})
        parents = ((tup.metadata if tup else None) or {}).get("parents") or {}
        parent = parents.get("")
        node = ns.split(PREGEL.ns_sep)[-1].rsplit(PREGEL.ns_end, 1)[0]
        finished = _finished(tup)
        to = None if finished or tup is None else _handed_to(saver, thread_id, ns, parents)
        out.append(Subgraph(ns, node, str(parent) if parent else None, n, head_id, finished, to))
    out.sort(key=lambda s: (s.parent_checkpoint or "", s.namespace.count(PREGEL.ns_sep), s.head_id))
    return out


def no_such_namespace(
    saver: BaseCheckpointSaver[Any], thread_id: str, namespace: str
) -> LookupError:
    known = [s.namespace for s in subgraph_namespaces(saver, thread_id)]
    return LookupError(
        f"thread {thread_id!r} has no checkpoints in namespace {namespace!r}; "
        f"its subgraph namespaces: {', '.join(known) or 'none'}"
    )


class InNamespace(BaseCheckpointSaver[Any]):
    """A read-only view of `inner` whose root namespace is `namespace`; its read of `head`
    (an id, or None: the newest) carries what the stopped step's finished tasks stored."""

    def __init__(
        self, inner: BaseCheckpointSaver[Any], namespace: str, head: str | None = ""
    ) -> None:
        super().__init__(serde=inner.serde)
        self.inner, self.namespace, self.head = inner, namespace, head

    def _at(self, config: RunnableConfig | None) -> RunnableConfig | None:
        if config is None:
            return None
        conf = dict(config.get("configurable") or {})
        if not conf.get("checkpoint_ns"):
            conf["checkpoint_ns"] = self.namespace
        return {**config, "configurable": conf}

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = self.inner.get_tuple(self._at(config) or config)
        if tup is None or (config.get("configurable") or {}).get("checkpoint_id") != self.head:
            return tup
        return with_finished_work(self.inner, tup)

    def list(self, config: RunnableConfig | None, **kw: Any) -> Iterator[CheckpointTuple]:
        return self.inner.list(self._at(config), **kw)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.inner.aget_tuple(self._at(config) or config)

    def alist(self, config: RunnableConfig | None, **kw: Any) -> AsyncIterator[CheckpointTuple]:
        return self.inner.alist(self._at(config), **kw)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Any:
        return self.inner.get_delta_channel_history(
            config=self._at(config) or config, channels=channels
        )

    def get_next_version(self, current: Any, channel: Any = None) -> Any:
        return self.inner.get_next_version(current, channel)


class SubgraphTable(Table):
    columns = (
        Column("namespace", "namespace", 0),
        Column("node", "agent", 18),
        Column("from", "from", 8),
        Column("checkpoints", "ckpts", 5, ">"),
        Column("status", "status", 10),
    )

    def __init__(self, thread_id: str, subgraphs: Sequence[Subgraph]) -> None:
        self.title = f"subgraphs of thread {thread_id}"
        self.subgraphs = list(subgraphs)

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "namespace": s.namespace,
                "node": s.node,
                "parent_checkpoint": s.parent_checkpoint,
                "checkpoints": s.checkpoints,
                "head": s.head_id,
                "status": s.status,
                "handed_to": s.handed_to,
            }
            for s in self.subgraphs
        ]

    def display_rows(self) -> list[dict[str, Cell]]:
        return [
            {
                "namespace": s.namespace,
                "node": [s.node] if s.handed_to is None else [s.node, f"→ {s.handed_to}"],
                "from": short(s.parent_checkpoint),
                "checkpoints": str(s.checkpoints),
                "status": s.status,
            }
            for s in self.subgraphs
        ]

    def summary(self) -> list[str]:
        if not self.subgraphs:
            return ["no subgraph stored checkpoints on this thread"]
        out = [f"{len(self.subgraphs)} namespace(s); --namespace NS shows one's checkpoints"]
        handed = [s.agent for s in self.subgraphs if s.handed_to is not None]
        if handed:
            out.append(f"{len(handed)} handed off: {'; '.join(handed)}")
        return out
