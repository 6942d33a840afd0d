"""`ThreadList`: the threads of a checkpointer, newest first — how to find the one to inspect.

`threads(source, search=None, limit=20)`: errors are failed tasks, refused writes and tool
results that say a tool failed, counted over every message key. `limit` (0 = none) bounds
how many heads are rebuilt; `search` keeps threads whose id or text contains it (any case).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import START

from threadlog.checkpoint.backends import backend_of
from threadlog.inspect.catalog import head_errors, thread_heads
from threadlog.inspect.keys import message_keys, pick_key
from threadlog.inspect.records import Progress, pause, refused
from threadlog.inspect.summary import ThreadSummary, matches, summarize
from threadlog.inspect.table import Cell, Column, Table
from threadlog.terminal import display_width, safe

__all__ = ["ThreadList", "ThreadSummary", "summaries", "summarize", "threads"]


def summaries(
    saver: BaseCheckpointSaver[Any],
    *,
    search: str | None = None,
    limit: int = 20,
    progress: Progress | None = None,
) -> Iterator[ThreadSummary]:
    from threadlog.inspect.source import Shape, quiet_stand_in, shape_of, stand_in

    heads = thread_heads(saver)
    if not search and limit > 0:
        heads = heads[:limit]
    errors = head_errors(saver, heads)
    nested = backend_of(saver).subgraph_counts() if heads else {}
    graphs: dict[Shape, Any] = {}  # one stand-in per shape of head
    needle = (search or "").lower()
    shown = 0
    with quiet_stand_in(True):
        for i, head in enumerate(heads):
            if progress is not None:
                progress(i, len(heads))
            conf = {"thread_id": head.thread_id, "checkpoint_ns": "", "checkpoint_id": head.head_id}
            tup = saver.get_tuple({"configurable": conf})
            spec = shape_of(tup)
            if spec not in graphs:
                graphs[spec] = stand_in(saver, None, spec)
            snap = graphs[spec].get_state({"configurable": conf})
            # Writes the log refused at the head: the run raised, storing no task error.
            names = {t.id: t.name for t in snap.tasks}
            pending = (tup.pending_writes if tup else None) or ()
            refusals = refused(graphs[spec].channels, pending, snap.values or {}, names)
            failed = [*_named(errors.get(head.thread_id, []), snap)]
            failed += [f"{task}: {error}" for task, error in refusals]
            values = snap.values if isinstance(snap.values, dict) else {}
            found = message_keys([values], graphs[spec].channels)
            main = pick_key(found, None)
            lists = {
                k: [m for m in values.get(k) or [] if isinstance(m, BaseMessage)] for k in found
            }
            messages = lists.pop(main, [])
            others = {k: v for k, v in lists.items() if v}
            s = summarize(head, messages, failed, snap.created_at or "", others=others)
            said = last_input_text(saver, head.thread_id)
            s = replace(
                s,
                subgraphs=nested.get(head.thread_id, 0),
                paused=_paused(snap, bool(failed)),
                last_user=s.last_user if said is None else said,
            )
            if needle and not matches(needle, s, messages):
                continue
            yield s
            shown += 1
            if limit > 0 and shown >= limit:
                break
    if progress is not None:
        progress(len(heads), len(heads))


def last_input_text(saver: BaseCheckpointSaver[Any], thread_id: str) -> str | None:
    """The text of the last user message a run's input brought (not one a node wrote)."""
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    try:
        inputs = list(saver.list(config, filter={"source": "input"}, limit=3))
    except Exception:  # a saver that cannot filter: the head's last user message
        return None
    starts = [(t.checkpoint.get("channel_values") or {}).get(START) for t in inputs]
    texts = (_user_text(v) for s in starts if isinstance(s, Mapping) for v in s.values())
    return next((t for t in texts if t is not None), None)


def _user_text(value: Any) -> str | None:
    items = value if isinstance(value, list) else [value]
    for item in reversed(items):
        if isinstance(item, HumanMessage):
            return item.text
        if isinstance(item, Mapping) and item.get("role") in ("user", "human"):
            return str(item.get("content") or "")
        if isinstance(item, (list, tuple)) and len(item) == 2 and item[0] in ("user", "human"):
            return str(item[1])
    return None


class ThreadList(Table):
    columns: tuple[Column, ...] = (
        Column("updated", "updated (UTC)", 16),
        Column("thread", "thread", 20),
        Column("turns", "turns", 5, ">"),
        Column("messages", "msgs", 5, ">"),
        Column("open", "open", 4, ">"),
        Column("errors", "err", 3, ">"),
        Column("subgraphs", "subs", 4, ">"),
        Column("last_user", "last user message"),
    )

    def __init__(self, items: list[ThreadSummary], source: str, *, more: bool = False) -> None:
        self.items = items
        self.title = f"threads in {source}"
        self.more = more
        # Ids are what `inspect --thread` takes: shown whole (a uuid is 36 columns).
        width = min(36, max([6, *(display_width(safe(s.thread_id)) for s in items)]))
        self.columns = tuple(
            Column(c.key, c.header, width) if c.key == "thread" else c for c in self.columns
        )

    def rows(self) -> list[dict[str, Any]]:
        return [asdict(s) for s in self.items]

    def summary(self) -> list[str]:
        return [f"{len(self.items)} thread(s), newest first"]

    def display_rows(self) -> list[dict[str, Cell]]:
        out: list[dict[str, Cell]] = []
        for s in self.items:
            last = " ".join(s.last_user.split()) or "-"
            if s.paused:  # what the thread waits for, before what was last said
                last = f"⏸ {s.paused} · {last}"
            out.append(
                {
                    "updated": s.updated_at[:16].replace("T", " "),
                    "thread": s.thread_id,
                    "turns": str(s.turns),
                    "messages": str(s.messages),
                    "open": str(len(s.open_calls)),
                    "errors": str(len(s.errors)),
                    "subgraphs": "-" if s.subgraphs is None else str(s.subgraphs),
                    "last_user": last,
                }
            )
        return out

    def notes(self) -> list[str]:
        notes = [
            "open: tool calls without a result at the head · err: tasks that failed there "
            "and tools that failed (not results the app marked error) · subs: subgraph "
            "namespaces (inspect --namespace NS, export --namespace NS)"
        ]
        keyed = sorted({k for s in self.items for k in s.message_keys})
        if keyed:
            notes.append(
                "msgs, open, err count every message key; besides the main one: "
                f"{', '.join(keyed)} (inspect --key KEY)"
            )
        if self.more:
            notes.append("more threads exist: raise --limit (0 = all) or narrow with --search")
        return notes


def _named(errors: list[str], snap: Any) -> list[str]:
    by_text = {str(t.error): t.name for t in snap.tasks if t.error is not None}
    by_text.update({f"{type(t.error).__name__}: {t.error}": t.name for t in snap.tasks if t.error})
    return [f"{by_text[e]}: {e}" if e in by_text else e for e in errors]


def _paused(snap: Any, failed: bool) -> str | None:
    tasks = list(snap.tasks)
    return pause(
        next_nodes=tuple(snap.next),
        interrupted_in=tuple(t.name for t in tasks if t.interrupts),
        failed=failed or any(t.error for t in tasks),
        source=str((snap.metadata or {}).get("source", "")),
    )


def threads(
    source: Any,
    *,
    search: str | None = None,
    limit: int = 20,
    progress: Progress | None = None,
) -> ThreadList:
    from threadlog.inspect.readonly import describe, is_server_url, local_saver

    if isinstance(source, str) and is_server_url(source):
        from threadlog.inspect.remote import Server

        with Server(source) as server:
            items = server.threads(search=search, limit=limit)
    else:
        refusal = (
            "cannot list the threads of a {}: pass a checkpointer, a database URL or path, "
            "or a LangGraph server URL"
        )
        with local_saver(source, refusal) as saver:
            items = list(summaries(saver, search=search, limit=limit, progress=progress))
    name = describe(source) if isinstance(source, str) else type(source).__name__
    return ThreadList(items, name, more=limit > 0 and len(items) >= limit)
