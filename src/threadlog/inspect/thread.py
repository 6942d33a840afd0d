"""`Thread`: every checkpoint of one conversation thread, loaded once, ready to inspect.

Contract: `thread(source, thread_or_config)` reads a whole thread into memory and returns a
`Thread`. `source` is one of

* a compiled graph with a checkpointer, and a config (or a thread id) — the state is rebuilt
  by that graph's own channels;
* a checkpointer (`BaseCheckpointSaver`), or a checkpointer URL (`sqlite:///path`,
  `postgresql://…`, `memory://`), and a thread id — the state is rebuilt by a stand-in graph
  compiled from threadlog's state schema (`threadlog.AgentState` when available, else
  `MessagesState`; pass `schema=` for a graph with more keys). A URL is opened through
  `threadlog.checkpointer` and closed here; reading stores no checkpoint or write.

Either way each checkpoint is read through LangGraph's loader, so a `DeltaChannel` log is
replayed through `MessageLogChannel`; no blob is decoded by hand. The views — `timeline()`,
`pairs()`, `context()`, `diff()`, `forks()` — are computed from the loaded records.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from threadlog.inspect.context_seen import ContextSeen
from threadlog.inspect.diff import CheckpointDiff
from threadlog.inspect.forks import ForkTree
from threadlog.inspect.pairs import ToolPairs
from threadlog.inspect.records import CheckpointRecord, Graph, load_records
from threadlog.inspect.source import open_saver, quiet_stand_in, stand_in
from threadlog.inspect.storage import stored_bytes
from threadlog.inspect.timeline import Timeline
from threadlog.nodes.context import ContextPolicy
from threadlog.nodes.model import ModelNode

__all__ = ["Thread", "thread"]


class Thread:
    """The loaded checkpoints of one thread, oldest first, and the views over them."""

    def __init__(
        self,
        thread_id: str,
        records: list[CheckpointRecord],
        *,
        bytes_known: bool,
        graph: Graph | None = None,
    ) -> None:
        self.thread_id = thread_id
        # With `last=N`, the oldest loaded checkpoints have parents that were not loaded.
        loaded = {r.checkpoint_id for r in records}
        self.partial = any(r.parent_id and r.parent_id not in loaded for r in records)
        self.graph = graph
        self.records = records
        self.bytes_known = bytes_known
        self._by_id = {r.checkpoint_id: r for r in records}

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"<Thread {self.thread_id!r}: {len(self.records)} checkpoints>"

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
        found = [
            r
            for r in self.records
            if r.checkpoint_id.endswith(checkpoint) or r.checkpoint_id.startswith(checkpoint)
        ]
        if len(found) == 1:
            return found[0]
        what = "matches no" if not found else f"matches {len(found)}"
        raise KeyError(
            f"checkpoint {checkpoint!r} {what} checkpoint of thread {self.thread_id!r}; "
            "use a full id or a longer suffix (see .timeline())"
        )

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

    def model_settings(self) -> tuple[ContextPolicy | None, str | None]:
        """(context policy, system prompt) of the graph's model node, when it has one."""
        if self.graph is None:
            return None, None
        for node in self.graph.nodes.values():
            for obj in (node.bound, getattr(node.bound, "func", None)):
                if isinstance(obj, ModelNode):
                    return obj.policy, obj.system_prompt
        return None, None

    # -- views ---------------------------------------------------------------

    def timeline(self, branch: str | None = None) -> Timeline:
        """One row per checkpoint (all branches; `branch=` limits to root → that one)."""
        return Timeline(self, self.path(branch) if branch else self.records)

    def pairs(self, checkpoint: str | None = None) -> ToolPairs:
        """Each tool call in the log at `checkpoint` (default head) with its result."""
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

    def forks(self) -> ForkTree:
        """The thread's checkpoints as a tree of branches (update_state / time travel)."""
        return ForkTree(self)


def thread(
    source: Graph | BaseCheckpointSaver[Any] | str,
    thread: str | RunnableConfig,
    *,
    schema: type[Any] | None = None,
    last: int | None = None,
) -> Thread:
    """Load one thread for inspection (see the module docstring for `source`).

    `last=N` loads only the newest N checkpoints: LangGraph rebuilds each checkpoint of a
    delta channel from its nearest snapshot, so reading a whole long thread costs time
    that grows faster than the thread does.
    """
    config: RunnableConfig = (
        {"configurable": {"thread_id": thread}} if isinstance(thread, str) else thread
    )
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if not thread_id:
        raise ValueError(
            "no thread id: pass a thread id string or a config with "
            "{'configurable': {'thread_id': ...}}"
        )
    if isinstance(source, Pregel):
        saver = source.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            raise ValueError(
                "this graph was compiled without a checkpointer, so it has no checkpoints "
                "to inspect; compile it with checkpointer=... (e.g. threadlog.checkpointer(url))"
            )
        return _load(source, saver, config, str(thread_id), real_graph=True, last=last)
    if isinstance(source, BaseCheckpointSaver):
        graph = stand_in(source, schema)
        return _load(graph, source, config, str(thread_id), real_graph=False, last=last)
    if isinstance(source, str):
        with open_saver(source) as saver:
            graph = stand_in(saver, schema)
            return _load(graph, saver, config, str(thread_id), real_graph=False, last=last)
    raise TypeError(
        f"cannot inspect a {type(source).__name__}: pass a compiled graph, a checkpointer, "
        "or a checkpointer URL such as 'sqlite:///threads.db'"
    )


def _load(
    graph: Graph,
    saver: BaseCheckpointSaver[Any],
    config: RunnableConfig,
    thread_id: str,
    *,
    real_graph: bool,
    last: int | None,
) -> Thread:
    with quiet_stand_in(not real_graph):
        records = load_records(graph, saver, config, real_graph=real_graph, last=last)
    sizes = stored_bytes(saver, thread_id)
    if sizes is not None:
        for r in records:
            r.stored_bytes = sizes.get(r.checkpoint_id, 0)
    return Thread(
        thread_id, records, bytes_known=sizes is not None, graph=graph if real_graph else None
    )
