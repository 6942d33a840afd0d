"""`Thread`: every checkpoint of one conversation thread, loaded once, ready to inspect.

`thread(source, thread_or_config)` reads a whole thread into memory. `source` is one of

* a compiled graph with a checkpointer, and a config (or a thread id): the state is
  rebuilt by that graph's own channels;
* a checkpointer or a database URL (`sqlite:///path`, a path, `postgresql://…`), and a
  thread id: rebuilt by a stand-in graph (`schema=` for one with more keys);
* a LangGraph server URL and a thread id: the server's own state history.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from threadlog.checkpoint.backends import backend_of
from threadlog.checkpoint.cache import with_history_cache
from threadlog.context.policy import ContextPolicy
from threadlog.inspect.catalog import resolve_checkpoint
from threadlog.inspect.context_seen import ContextSeen
from threadlog.inspect.diff import CheckpointDiff
from threadlog.inspect.forks import ForkTree
from threadlog.inspect.handoffs import Handoffs
from threadlog.inspect.keys import message_keys, pick_key
from threadlog.inspect.namespaces import (
    InNamespace,
    Subgraph,
    SubgraphTable,
    no_such_namespace,
    subgraph_namespaces,
)
from threadlog.inspect.pairs import ToolPairs
from threadlog.inspect.readonly import describe, is_server_url, local_saver
from threadlog.inspect.records import (
    CheckpointRecord,
    Graph,
    Progress,
    list_tuples,
    records_from,
)
from threadlog.inspect.source import quiet_stand_in, shape_of, stand_in
from threadlog.inspect.state import StateValues
from threadlog.inspect.steps import removed_since
from threadlog.inspect.table import Table
from threadlog.inspect.timeline import Timeline

if TYPE_CHECKING:
    from threadlog.inspect.plot import ThreadPlot
    from threadlog.nodes.model import ModelNode

__all__ = ["Removed", "Thread", "thread"]


@dataclass(frozen=True, slots=True)
class Removed:
    """A message a removal event hid from the view (`Thread.removed`)."""

    message: BaseMessage
    step: int
    checkpoint_id: str
    node: str


class Thread:
    """The loaded checkpoints of one thread, oldest first, how they link up, and the views."""

    def __init__(
        self,
        thread_id: str,
        records: list[CheckpointRecord],
        *,
        bytes_known: bool,
        graph: Graph | None = None,
        source: str | None = None,
        namespace: str = "",
        subgraph_list: list[Subgraph] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.namespace = namespace  # a subgraph's checkpoint_ns, or "" (the root)
        self.subgraph_list = subgraph_list or []
        self.source = source  # a LangGraph server's URL when read from one
        self.graph = graph
        self.records = records
        self.bytes_known = bytes_known
        self._by_id = {r.checkpoint_id: r for r in records}
        self.partial = any(r.parent_id and r.parent_id not in self._by_id for r in records)
        self._inherited: frozenset[str] | None = None
        self.message_keys: list[str] = ["messages"]
        self.key = "messages"  # the message key the views read
        # With `calls=True`: the recorded model calls and the store items (`StoreUse`).
        self.recorded: Any = None
        self.store_used: Any = None

    @property
    def label(self) -> str:
        where = f", namespace {self.namespace}" if self.namespace else ""
        which = f", key {self.key}" if self.key != "messages" else ""
        return f"thread {self.thread_id}{where}{which}"

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        where = f" (namespace {self.namespace!r})" if self.namespace else ""
        return f"<Thread {self.thread_id!r}{where}: {len(self.records)} checkpoints>"

    @property
    def head(self) -> CheckpointRecord:
        """The most recent checkpoint."""
        return self.records[-1]

    def get(self, checkpoint: str | None = None) -> CheckpointRecord:
        """A checkpoint by full id or a unique suffix/prefix of it; `None` is the head."""
        if checkpoint is None:
            return self.head
        if checkpoint in self._by_id:
            return self._by_id[checkpoint]
        ids = [r.checkpoint_id for r in self.records]
        found = resolve_checkpoint(
            ids, checkpoint, self.thread_id, see=".timeline()", error=KeyError
        )
        return self._by_id[found]

    def parent(self, record: CheckpointRecord) -> CheckpointRecord | None:
        return self._by_id.get(record.parent_id) if record.parent_id else None

    def path(self, checkpoint: str | None = None) -> list[CheckpointRecord]:
        """The checkpoints from the root to `checkpoint` (default: the head)."""
        out: list[CheckpointRecord] = []
        rec: CheckpointRecord | None = self.get(checkpoint)
        while rec is not None:
            out.append(rec)
            rec = self.parent(rec)
        return out[::-1]

    def inherited_ids(self) -> frozenset[str]:
        """In a subgraph's namespace, the ids of the messages it got from the enclosing graph."""
        if self._inherited is None:
            out: set[str] = set()
            for rec in self.records if self.namespace else ():
                parent = self.parent(rec)
                if parent is not None and parent.source == "input":
                    before = {m.id for m in parent.messages}
                    out.update(m.id for m in rec.messages if m.id and m.id not in before)
            self._inherited = frozenset(out)
        return self._inherited

    def model_node(self) -> ModelNode | None:
        """The graph's model node, when the thread was loaded from a graph that has one."""
        if self.graph is None:
            return None
        from threadlog.nodes.model import ModelNode

        for node in self.graph.nodes.values():
            for obj in (node.bound, getattr(node.bound, "func", None)):
                if isinstance(obj, ModelNode):
                    return obj
        return None

    def timeline(self, branch: str | None = None) -> Timeline:
        """One row per checkpoint (all branches; `branch=` limits to root → that one)."""
        return Timeline(self, self.path(branch) if branch else self.records)

    def removed(self, branch: str | None = None) -> list[Removed]:
        """Every message a removal event hid along `branch` (default: the head's path)."""
        path = self.path(branch)
        out: list[Removed] = []
        for parent, rec in pairwise(path):
            out += [
                Removed(m, rec.step, rec.checkpoint_id, ", ".join(rec.writers) or "?")
                for m in removed_since(rec, parent)
            ]
        return out

    def handoffs(self, checkpoint: str | None = None) -> Handoffs:
        """Each handoff from one agent to another in the log at `checkpoint`."""
        return Handoffs(self, checkpoint)

    def pairs(self, checkpoint: str | None = None) -> ToolPairs:
        """Each tool call in the log at `checkpoint` with its result."""
        return ToolPairs(self, checkpoint)

    def context(
        self,
        call: str | int = -1,
        *,
        policy: ContextPolicy | None = None,
        system_prompt: str | None = None,
        checkpoint: str | None = None,
    ) -> ContextSeen:
        """What the model saw for one call (an AIMessage id or index among model calls)."""
        return ContextSeen(
            self, call, policy=policy, system_prompt=system_prompt, checkpoint=checkpoint
        )

    def diff(self, a: str, b: str | None = None) -> CheckpointDiff:
        """What changed from checkpoint `a` to `b` (default: the head)."""
        return CheckpointDiff(self.get(a), self.get(b))

    def state(self, checkpoint: str | None = None) -> StateValues:
        """Every state key at `checkpoint`: messages, values, changes."""
        return StateValues(self, checkpoint)

    def subgraphs(self) -> SubgraphTable:
        """The thread's subgraph namespaces."""
        return SubgraphTable(self.thread_id, self.subgraph_list)

    def forks(self) -> ForkTree:
        """The thread's checkpoints as a tree of branches (update_state / time travel)."""
        return ForkTree(self)

    def plot(self) -> ThreadPlot:
        """Messages, context tokens, stored bytes and tool latency."""
        from threadlog.inspect.plot import ThreadPlot

        return ThreadPlot(self)

    def html(self, *extra: Table) -> str:
        """The thread as one standalone HTML page, then any `extra` views."""
        from threadlog.inspect.page import thread_page

        return thread_page(self, extra=extra)

    def _repr_html_(self) -> str:
        from threadlog.inspect.page import thread_html

        return thread_html(self)


def thread(
    source: Graph | BaseCheckpointSaver[Any] | str,
    thread: str | RunnableConfig,
    *,
    schema: type[Any] | None = None,
    last: int | None = None,
    progress: Progress | None = None,
    namespace: str = "",
    key: str | None = None,
    calls: bool = False,
) -> Thread:
    """Load one thread for inspection (see the module docstring for `source`).

    `calls=True` also loads the recorded model calls (local threads only). `key`: the
    message key the views read. `namespace`: a subgraph's `checkpoint_ns` to load instead
    of the root. `last=N` loads only the newest N checkpoints.
    """
    config: RunnableConfig = (
        {"configurable": {"thread_id": thread}} if isinstance(thread, str) else thread
    )
    conf = dict(config.get("configurable") or {})
    if not conf.get("thread_id"):
        raise ValueError(
            "no thread id: pass a thread id string or a config with "
            "{'configurable': {'thread_id': ...}}"
        )
    thread_id = str(conf["thread_id"])
    namespace = namespace or str(conf.get("checkpoint_ns") or "")
    if namespace:
        config = {"configurable": {**conf, "checkpoint_ns": ""}}
    if isinstance(source, str) and is_server_url(source):
        from threadlog.inspect.remote import Server, refuse_namespace

        refuse_namespace(namespace, "state history")
        with Server(source) as server:
            records = server.records(thread_id, last=last)
        loaded = Thread(thread_id, records, bytes_known=False, source=describe(source))
        return _keyed(loaded, None, key)
    graph = source if isinstance(source, Pregel) else None
    if graph is not None and not isinstance(graph.checkpointer, BaseCheckpointSaver):
        raise ValueError(
            "this graph was compiled without a checkpointer, so it has no checkpoints "
            "to inspect; compile it with checkpointer=... (e.g. threadlog.checkpointer(url))"
        )
    refusal = (
        "cannot inspect a {}: pass a compiled graph, a checkpointer, or a checkpointer URL "
        "such as 'sqlite:///threads.db'"
    )
    with local_saver(graph.checkpointer if graph is not None else source, refusal) as saver:
        if isinstance(source, str):
            saver = with_history_cache(saver)
        loaded = _load(graph, saver, config, thread_id, last, progress, namespace, schema, key)
        if calls:
            from threadlog.inspect.calls import calls_from, thread_tuples
            from threadlog.inspect.store_items import store_items_from

            stored = thread_tuples(saver, thread_id)
            loaded.recorded = calls_from(stored, thread_id)
            loaded.store_used = store_items_from(stored, thread_id)
        return loaded


def _load(
    graph: Graph | None,
    saver: BaseCheckpointSaver[Any],
    config: RunnableConfig,
    thread_id: str,
    last: int | None,
    progress: Progress | None,
    namespace: str,
    schema: type[Any] | None,
    key: str | None,
) -> Thread:
    if namespace and graph is not None and not _has_subgraph(graph, namespace):
        graph = None  # the subgraph is not a node of this graph
    real_graph = graph is not None
    # The stand-in reads a subgraph's checkpoints through a view rooted at its namespace.
    reader = InNamespace(saver, namespace) if namespace and graph is None else saver
    conf = {**(config.get("configurable") or {}), "checkpoint_ns": namespace if real_graph else ""}
    with quiet_stand_in(not real_graph):
        try:
            tuples = list_tuples(reader, {"configurable": conf}, last)
            if graph is None:  # the stand-in owns every key the newest checkpoint stores
                graph = stand_in(reader, schema, shape_of(next(iter(tuples.values()))))
            records = records_from(
                graph, tuples, {"configurable": conf}, real_graph=real_graph, progress=progress
            )
        except LookupError:
            if not namespace:
                raise
            raise no_such_namespace(saver, thread_id, namespace) from None
    sizes = backend_of(saver).stored_bytes(thread_id, namespace)
    if sizes is not None:
        for r in records:
            r.stored_bytes = sizes.get(r.checkpoint_id, 0)
    subs = [] if namespace else subgraph_namespaces(saver, thread_id)
    shown = graph if real_graph else None
    loaded = Thread(
        thread_id,
        records,
        bytes_known=sizes is not None,
        graph=shown,
        namespace=namespace,
        subgraph_list=subs,
    )
    return _keyed(loaded, graph, key)


def _keyed(loaded: Thread, graph: Graph | None, key: str | None) -> Thread:
    channels = dict(graph.channels) if graph is not None else None
    loaded.message_keys = message_keys((r.values for r in loaded.records), channels)
    loaded.key = pick_key(loaded.message_keys, key)
    for r in loaded.records:
        r.message_key = loaded.key
    return loaded


def _has_subgraph(graph: Graph, namespace: str) -> bool:
    from threadlog._upstream import PREGEL

    sep, end = PREGEL.ns_sep, PREGEL.ns_end
    recast = sep.join(part.rsplit(end, 1)[0] for part in namespace.split(sep))
    return any(True for _ in graph.get_subgraphs(namespace=recast, recurse=True))
