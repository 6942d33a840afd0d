"""`ThreadList`: the threads of a checkpointer, newest first — how to find the one to inspect.

Contract: `threads(source, search=None, limit=20)` returns a `ThreadList` whose rows are one
per thread: id, created and updated (ISO 8601 UTC), checkpoints, turns (user messages),
messages, the last user message (full text in `.rows()`), calls still open at the head,
errors: tasks that failed from the head, then tool results with `status="error"` — counted
over every message key of the state (`messages` first; `message_keys` has the count of
each other key, such as `supervisor_messages`, `threadlog.inspect.keys`) — and
`subgraphs`, how many subgraph namespaces stored checkpoints on the thread (see
`Thread.subgraphs()`; `None` from a LangGraph server, whose API does not tell).
`source` is a database URL or plain SQLite path (opened read-only, see
`threadlog.inspect.readonly`), a checkpointer, or a LangGraph server URL
(`http://host:port`, read through `langgraph-sdk`).

Threads are ordered by their newest checkpoint. `limit` (0 = no limit) bounds how many
heads are rebuilt; `search` keeps threads whose id or any message text contains it,
ignoring case, so a search rebuilds every thread's head. Each head is rebuilt by LangGraph's
loader through threadlog's channels (a stand-in graph), so a thread written by plain
LangGraph (`add_messages`) lists as well as a threadlog one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from threadlog.inspect.catalog import head_errors, thread_heads
from threadlog.inspect.keys import message_keys, pick_key
from threadlog.inspect.namespaces import subgraph_counts
from threadlog.inspect.summary import ThreadSummary, matches, summarize
from threadlog.inspect.table import Cell, Column, Table
from threadlog.terminal import display_width, safe

__all__ = ["ThreadList", "ThreadSummary", "summaries", "summarize", "threads"]

Progress = Callable[[int, int], None]


def summaries(
    saver: BaseCheckpointSaver[Any],
    *,
    search: str | None = None,
    limit: int = 20,
    progress: Progress | None = None,
) -> Iterator[ThreadSummary]:
    """Summaries of `saver`'s threads, newest first (see the module docstring)."""
    from threadlog.inspect.source import quiet_stand_in, stand_in, stored_keys

    heads = thread_heads(saver)
    if not search and limit > 0:
        heads = heads[:limit]
    errors = head_errors(saver, heads)
    nested = subgraph_counts(saver, [h.thread_id for h in heads])
    graphs: dict[frozenset[tuple[str, bool]], Any] = {}  # one stand-in per set of keys
    needle = (search or "").lower()
    shown = 0
    with quiet_stand_in(True):
        for i, head in enumerate(heads):
            if progress is not None:
                progress(i, len(heads))
            conf = {"thread_id": head.thread_id, "checkpoint_ns": "", "checkpoint_id": head.head_id}
            keys = stored_keys(saver, {"configurable": conf})
            spec = frozenset(keys.items())
            if spec not in graphs:
                graphs[spec] = stand_in(saver, None, {"configurable": conf})
            snap = graphs[spec].get_state({"configurable": conf})
            values = snap.values if isinstance(snap.values, dict) else {}
            found = message_keys([values], graphs[spec].channels)
            main = pick_key(found, None)
            lists = {
                k: [m for m in values.get(k) or [] if isinstance(m, BaseMessage)] for k in found
            }
            messages = lists.pop(main, [])
            s = summarize(
                head, messages, errors.get(head.thread_id, []), snap.created_at or "",
                others={k: v for k, v in lists.items() if v},
            )
            s = replace(s, subgraphs=nested.get(head.thread_id, 0))
            if needle and not matches(needle, s, messages):
                continue
            yield s
            shown += 1
            if limit > 0 and shown >= limit:
                break
    if progress is not None:
        progress(len(heads), len(heads))


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
        # Ids are what you pass to `inspect --thread`: shown whole (a uuid is 36 columns),
        # measured as printed (control characters escaped, wide characters two columns).
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
            "and tool results with status error · subs: subgraph namespaces "
            "(inspect --namespace NS, export --namespace NS)"
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


def threads(
    source: Any,
    *,
    search: str | None = None,
    limit: int = 20,
    progress: Progress | None = None,
) -> ThreadList:
    """The threads of `source`, newest first (see the module docstring)."""
    from threadlog.inspect.readonly import describe, is_server_url, open_readonly

    if isinstance(source, BaseCheckpointSaver):
        items = list(summaries(source, search=search, limit=limit, progress=progress))
        return ThreadList(items, type(source).__name__, more=_more(items, limit))
    if isinstance(source, str) and is_server_url(source):
        from threadlog.inspect.remote import Server

        with Server(source) as server:
            items = server.threads(search=search, limit=limit)
        return ThreadList(items, describe(source), more=_more(items, limit))
    if isinstance(source, str):
        with open_readonly(source) as saver:
            items = list(summaries(saver, search=search, limit=limit, progress=progress))
        return ThreadList(items, describe(source), more=_more(items, limit))
    raise TypeError(
        f"cannot list the threads of a {type(source).__name__}: pass a checkpointer, a database "
        "URL or path, or a LangGraph server URL"
    )


def _more(items: list[ThreadSummary], limit: int) -> bool:
    # At the limit, more may exist; the listing does not count them to stay cheap.
    return limit > 0 and len(items) >= limit
