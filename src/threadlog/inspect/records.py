"""Reading a thread's checkpoints into plain `CheckpointRecord`s, oldest first.

A checkpoint's writers are its `versions_seen` bumps and its parent's `Send`s; its failed
tasks are its `__error__` writes and the writes the log refuses when handed them again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.constants import TASKS
from langgraph.pregel import Pregel
from langgraph.types import Send

from threadlog.channel import MessageLogChannel
from threadlog.errors import MessageLogError

__all__ = [
    "CheckpointRecord",
    "Graph",
    "Progress",
    "TaskError",
    "error_text",
    "linked",
    "list_tuples",
    "parse_time",
    "pause",
    "pause_of",
    "records_from",
    "refused",
]

Graph = Pregel[Any, Any, Any, Any]
Progress = Callable[[int, int], None]
"""Called with (checkpoints rebuilt, checkpoints to rebuild) while a thread loads."""

_ERROR = "__error__"
_INTERRUPT = "__interrupt__"
_INTERNAL_NODES = ("__input__", "__interrupt__")


def _bookkeeping(name: str) -> bool:
    # LangGraph's own `versions_seen` entries are not nodes; `__start__` is (input, update).
    return name in _INTERNAL_NODES or (
        name.startswith("__") and name.endswith("__") and name != "__start__"
    )


@dataclass(frozen=True, slots=True)
class TaskError:
    """A task that failed while running from a checkpoint (its `__error__` write)."""

    task: str  # node name when known, else "task <id prefix>"
    error: str


@dataclass(slots=True)
class CheckpointRecord:
    """One checkpoint of a thread, rebuilt: ids, provenance, state, writes saved against it."""

    checkpoint_id: str
    parent_id: str | None
    step: int
    source: str
    created_at: str
    config: RunnableConfig
    values: dict[str, Any]
    writers: tuple[str, ...]
    next: tuple[str, ...]
    pending_channels: tuple[str, ...]
    errors: tuple[TaskError, ...]
    interrupts: tuple[str, ...]
    stored_bytes: int | None = None
    children: list[str] = field(default_factory=list)
    interrupted: tuple[str, ...] = ()
    paused: str | None = None  # "interrupted in review", "paused before tools", or None
    # The state key the views read as the conversation (`thread(..., key=...)`).
    message_key: str = "messages"

    # Every view asks for the messages of every checkpoint: filtered once per key.
    _messages: dict[str, list[BaseMessage]] = field(default_factory=dict, repr=False, compare=False)
    # What views computed from this record and its parent (`inspect.steps.extends`).
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def messages(self) -> list[BaseMessage]:
        cached = self._messages.get(self.message_key)
        if cached is None:
            msgs = self.values.get(self.message_key) or []
            cached = [m for m in msgs if isinstance(m, BaseMessage)]
            self._messages[self.message_key] = cached
        return cached

    @property
    def compactions(self) -> list[dict[str, Any]]:
        events = self.values.get("compactions") or []
        return [dict(e) for e in events if isinstance(e, Mapping)]

    @property
    def short_id(self) -> str:
        return short(self.checkpoint_id)


def parse_time(value: str) -> datetime | None:
    """An ISO 8601 time (a checkpoint's `created_at`), or None when it is not one."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def short(checkpoint_id: str | None) -> str:
    """The last 8 characters of a checkpoint id: the part that differs between steps."""
    return "-" if not checkpoint_id else checkpoint_id[-8:]


def list_tuples(
    saver: BaseCheckpointSaver[Any], config: RunnableConfig, last: int | None = None
) -> dict[str, CheckpointTuple]:
    """`{checkpoint_id: tuple}` of the thread's checkpoints (all, or the newest `last`)."""
    conf = dict(config.get("configurable") or {})
    if "thread_id" not in conf:
        raise ValueError("config['configurable']['thread_id'] is required to inspect a thread")
    ns = str(conf.get("checkpoint_ns") or "")
    base: RunnableConfig = {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": ns}}
    if last is not None and last < 1:
        raise ValueError(f"last must be a positive number of checkpoints, got {last!r}")
    tuples = {t.config["configurable"]["checkpoint_id"]: t for t in saver.list(base, limit=last)}
    if not tuples:
        where = f" in namespace {ns!r}" if ns else ""
        raise LookupError(
            f"thread {conf['thread_id']!r} has no checkpoints{where} in this checkpointer"
        )
    return tuples


def records_from(
    graph: Graph,
    tuples: Mapping[str, CheckpointTuple],
    config: RunnableConfig,
    *,
    real_graph: bool,
    progress: Progress | None = None,
) -> list[CheckpointRecord]:
    conf = config.get("configurable") or {}
    base = {"thread_id": conf["thread_id"], "checkpoint_ns": str(conf.get("checkpoint_ns") or "")}
    # The newest first: under a history cache each older log steps back from it.
    snapshots = {}
    ids = sorted(tuples)
    for cid in ids[-1:] + ids[:-1]:
        snapshots[cid] = graph.get_state({"configurable": {**base, "checkpoint_id": cid}})
        if progress is not None:
            progress(len(snapshots), len(tuples))
    records: list[CheckpointRecord] = []
    task_names_of: dict[str, dict[str, str]] = {}
    for cid, tup in tuples.items():
        snap = snapshots[cid]
        meta: Mapping[str, Any] = tup.metadata or {}
        parent = _parent_id(tup)
        task_names = {t.id: t.name for t in snap.tasks}
        task_names_of[cid] = task_names
        records.append(
            CheckpointRecord(
                checkpoint_id=cid,
                parent_id=parent,
                step=int(meta.get("step", -1)),
                source=str(meta.get("source", "?")),
                created_at=str(tup.checkpoint.get("ts") or snap.created_at or ""),
                config=tup.config,
                values=dict(snap.values) if isinstance(snap.values, Mapping) else {},
                writers=(),
                next=tuple(snap.next),
                pending_channels=tuple(sorted({w[1] for w in tup.pending_writes or ()})),
                errors=_errors(tup, task_names),
                interrupts=_interrupts(tup),
                interrupted=tuple(t.name for t in snap.tasks if t.interrupts),
            )
        )
    by_id = linked(records)
    for r in records:
        r.writers = _writers(r, tuples, by_id)
    for r in records:  # a failed task named by the writers of the steps after it
        r.errors = _name_errors(r, tuples, by_id)
        if not any(by_id[c].source == "loop" for c in r.children):
            tup, names = tuples[r.checkpoint_id], task_names_of[r.checkpoint_id]
            found = refused(graph.channels, tup.pending_writes or (), r.values, names)
            r.errors += tuple(TaskError(task, error) for task, error in found)
        r.paused = pause_of(r, graph if real_graph else None)
    return records


def linked(records: list[CheckpointRecord]) -> dict[str, CheckpointRecord]:
    """Sorts `records` oldest first (uuid6 ids sort by creation time), fills in `children`,
    and returns them by id."""
    records.sort(key=lambda r: r.checkpoint_id)
    by_id = {r.checkpoint_id: r for r in records}
    for r in records:
        if r.parent_id in by_id:
            by_id[r.parent_id].children.append(r.checkpoint_id)
    return by_id


def pause_of(rec: CheckpointRecord, graph: Graph | None = None) -> str | None:
    """How the thread waits at `rec` when nothing ran from it (a leaf checkpoint):

    * "interrupted in NODE" — a task called `interrupt()` (its `__interrupt__` write);
    * "paused before NODE" — tasks to run and none started; given the graph, its
      `interrupt_after` nodes give "paused after NODE" and other nodes not in
      `interrupt_before` "stopped before NODE";
    * None — the thread finished there, a task failed (`errors`), or a step ran from it.
    """
    if rec.children:
        return None
    return pause(
        next_nodes=rec.next,
        interrupted=bool(rec.interrupts),
        interrupted_in=rec.interrupted,
        failed=bool(rec.errors),
        source=rec.source,
        writers=rec.writers,
        graph=graph,
    )


def pause(
    *,
    next_nodes: tuple[str, ...],
    interrupted_in: tuple[str, ...],
    failed: bool,
    source: str,
    writers: tuple[str, ...] = (),
    graph: Graph | None = None,
    interrupted: bool | None = None,
) -> str | None:
    """`pause_of` from its parts (the listing has a head's snapshot, not a record)."""
    if interrupted or (interrupted is None and interrupted_in):
        where = ", ".join(dict.fromkeys(interrupted_in))
        return f"interrupted in {where}" if where else "interrupted"
    nodes = [n for n in dict.fromkeys(next_nodes) if not _bookkeeping(n)]
    if failed or not nodes or source == "input":
        return None
    names = ", ".join(nodes)
    if graph is None:
        return f"paused before {names}"
    before = _names(getattr(graph, "interrupt_before_nodes", ()))
    after = _names(getattr(graph, "interrupt_after_nodes", ()))
    if before == "*" or (before and set(nodes) & set(before)):
        return f"paused before {names}"
    ran = [w for w in writers if after == "*" or w in after]
    if ran:
        return f"paused after {', '.join(ran)}"
    return f"stopped before {names}"


def _names(nodes: Any) -> Any:
    return "*" if nodes == "*" else tuple(nodes or ())


def _parent_id(tup: CheckpointTuple) -> str | None:
    if tup.parent_config is None:
        return None
    pid = tup.parent_config.get("configurable", {}).get("checkpoint_id")
    return str(pid) if pid else None


def _interrupts(tup: CheckpointTuple) -> tuple[str, ...]:
    writes = [v for _, ch, v in tup.pending_writes or () if ch == _INTERRUPT]
    items = [x for v in writes for x in (v if isinstance(v, (list, tuple)) else [v])]
    return tuple(str(getattr(v, "value", v)) for v in items)


def _errors(tup: CheckpointTuple, names: Mapping[str, str]) -> tuple[TaskError, ...]:
    return tuple(
        TaskError(names.get(task_id) or f"task {task_id[:8]}", error_text(value))
        for task_id, channel, value in tup.pending_writes or ()
        if channel == _ERROR
    )


def error_text(value: Any) -> str:
    # Savers store an error as its repr (a str) or as the exception itself.
    return value if isinstance(value, str) else f"{type(value).__name__}: {value}"


def _name_errors(
    rec: CheckpointRecord,
    tuples: Mapping[str, CheckpointTuple],
    by_id: Mapping[str, CheckpointRecord],
) -> tuple[TaskError, ...]:
    # Without the graph a failed task is known by id: name it when one node ran from here.
    if not any(e.task.startswith("task ") for e in rec.errors):
        return rec.errors
    names: set[str] = set()
    for child in rec.children:
        names.update(by_id[child].writers)
    if not names and rec.parent_id in tuples:
        names = set(_sent_to(tuples[rec.parent_id or ""]))
    if len(names) != 1:
        return rec.errors
    (name,) = names
    return tuple(TaskError(name, e.error) if e.task.startswith("task ") else e for e in rec.errors)


def _writers(
    rec: CheckpointRecord,
    tuples: Mapping[str, CheckpointTuple],
    by_id: Mapping[str, CheckpointRecord],
) -> tuple[str, ...]:
    if rec.parent_id is not None and rec.parent_id not in tuples:
        return ()  # the parent was not loaded (`last=N`): nothing to compare with
    seen: Mapping[str, Any] = tuples[rec.checkpoint_id].checkpoint.get("versions_seen") or {}
    pid = rec.parent_id
    parent_seen: Mapping[str, Any] = {}
    if pid is not None:
        parent_seen = tuples[pid].checkpoint.get("versions_seen") or {}
    gp = by_id[pid].parent_id if pid is not None else None
    grand = tuples.get(gp) if gp else None
    names = [n for n, v in seen.items() if not _bookkeeping(n) and v and parent_seen.get(n) != v]
    if rec.source == "update":
        # update_state writes "as" a node it does not always name: name the call itself.
        names = names or [n for n in seen if n not in parent_seen and not _bookkeeping(n)]
        names = names or ["update_state"]
    elif grand is not None and rec.source == "loop":
        # A Send written in step k is saved against checkpoint k-1 and runs in step k+1.
        names += _sent_to(grand)
    return tuple(dict.fromkeys(names))


def _sent_to(tup: CheckpointTuple) -> list[str]:
    return [v.node for _, ch, v in tup.pending_writes or () if ch == TASKS and isinstance(v, Send)]


def refused(
    channels: Mapping[str, Any],
    pending_writes: Sequence[tuple[str, str, Any]],
    values: Mapping[str, Any],
    task_names: Mapping[str, str],
) -> list[tuple[str, str]]:
    """One `(task, error)` per message-log channel that refuses its pending writes."""
    out: list[tuple[str, str]] = []
    for key, spec in channels.items():
        if not isinstance(spec, MessageLogChannel):
            continue
        writes = [(tid, v) for tid, ch, v in pending_writes if ch == key]
        if not writes:
            continue
        try:
            channel = spec.from_checkpoint(list(values.get(key) or []))
            channel.update([v for _, v in writes])
        except (MessageLogError, ValueError, TypeError) as exc:  # what the run raised too
            tasks = dict.fromkeys(task_names.get(t) or f"task {t[:8]}" for t, _ in writes)
            what = f"{type(exc).__name__}: {exc}"
            out.append((", ".join(tasks), f"the log refused the write to {key}: {what}"))
    return out
