"""`ThreadRecords`: the loaded checkpoints of one thread and how they link up (parents,
paths, lookup by id), plus the model node's settings when loaded from a graph. The views
(`timeline`, `pairs`, ...) take this; `Thread` adds the methods that build them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadlog.inspect.catalog import resolve_checkpoint
from threadlog.inspect.namespaces import Subgraph
from threadlog.inspect.records import CheckpointRecord, Graph

if TYPE_CHECKING:
    from threadlog.nodes.model import ModelNode

__all__ = ["ThreadRecords"]


class ThreadRecords:
    """The loaded checkpoints of one thread, oldest first, and how they link up."""

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
        # With `last=N`, the oldest loaded checkpoints have parents that were not loaded.
        loaded = {r.checkpoint_id for r in records}
        self.partial = any(r.parent_id and r.parent_id not in loaded for r in records)
        self.graph = graph
        self.records = records
        self.bytes_known = bytes_known
        self._by_id = {r.checkpoint_id: r for r in records}
        self._inherited: frozenset[str] | None = None
        # The state keys holding messages, and the one the views read (`thread(key=)`).
        self.message_keys: list[str] = ["messages"]
        self.key = "messages"
        # The recorded model calls, when loaded (`thread(..., calls=True)`).
        self.recorded: Any = None
        # The store items its steps read and wrote (`inspect.store_items.StoreUse`), ditto.
        self.store_used: Any = None

    @property
    def label(self) -> str:
        """"thread ID", or "thread ID, namespace NS" for a subgraph's checkpoints, then
        ", key KEY" when the views read another key than `messages`."""
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
        """The most recent checkpoint (what `graph.get_state(config)` returns)."""
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
        """The checkpoints from the root to `checkpoint` (default: the head), oldest first."""
        out: list[CheckpointRecord] = []
        rec: CheckpointRecord | None = self.get(checkpoint)
        while rec is not None:
            out.append(rec)
            rec = self.parent(rec)
        return out[::-1]

    def inherited_ids(self) -> frozenset[str]:
        """In a subgraph's namespace, the ids of the messages it received as input from
        the enclosing graph; empty for the root."""
        if self._inherited is None:  # every turn of the page asks: computed once
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
        # Imported here: reading a database thread needs no model node (a faster start).
        from threadlog.nodes.model import ModelNode

        for node in self.graph.nodes.values():
            for obj in (node.bound, getattr(node.bound, "func", None)):
                if isinstance(obj, ModelNode):
                    return obj
        return None
