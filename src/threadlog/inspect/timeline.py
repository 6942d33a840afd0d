"""`Timeline`: one row per checkpoint of a thread (all branches, or one branch's path)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from threadlog.inspect.keys import other_appended, state_lines, value_changes, value_text
from threadlog.inspect.records import CheckpointRecord, short
from threadlog.inspect.steps import (
    appended,
    compactions_added,
    describe_compaction,
    edit_line,
    edits_added,
    message_line,
    message_row,
    open_at,
    removed_since,
    usage_at,
)
from threadlog.inspect.table import Cell, Column, Table

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread

__all__ = ["Timeline", "human_bytes"]


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} kB"
    return f"{n / 1024 / 1024:.1f} MB"


class Timeline(Table):
    columns = (
        Column("step", "step", 4, ">"),
        Column("checkpoint", "ckpt", 8),
        Column("parent", "parent", 8),
        Column("source", "source", 6),
        Column("writers", "wrote", 9),
        Column("open", "open", 4, ">"),
        Column("tokens", "tokens", 6, ">"),
        Column("bytes", "bytes", 7, ">"),
        Column("events", "messages appended · events", below=True),
    )

    def __init__(self, thread: Thread, records: list[CheckpointRecord]) -> None:
        self.thread = thread
        self.records = records
        self.state_lines: dict[str, list[str]] = {}
        self._changed: dict[str, tuple[list[BaseMessage], list[BaseMessage]]] = {}
        self._rows = [self._row(r) for r in records]
        heads = sum(1 for r in thread.records if not r.children)
        self.title = f"{thread.label} · timeline"
        last = records[-1]
        self._summary = (
            f"{len(records)} checkpoints · {len(last.messages)} messages at "
            f"{short(last.checkpoint_id)} · {heads} branch head(s) · "
            f"{human_bytes(self.total_bytes) if thread.bytes_known else '? B'} stored"
            + (" · only the newest checkpoints were loaded" if thread.partial else "")
        )

    @property
    def total_bytes(self) -> int | None:
        if not self.thread.bytes_known:
            return None
        return sum(r.stored_bytes or 0 for r in self.records)

    def _row(self, rec: CheckpointRecord) -> dict[str, Any]:
        parent = self.thread.parent(rec)
        known = rec.parent_id is None or parent is not None  # not with `last=N`
        # Bytes along the path (what rebuilding this state reads), when all were loaded.
        path = self.thread.path(rec.checkpoint_id)
        cum = None if path[0].parent_id else sum(r.stored_bytes or 0 for r in path)
        before = parent.values if parent is not None else None
        keys = self.thread.message_keys
        changes = value_changes(rec.values, before, [*keys, "compactions"]) if known else []
        others = other_appended(rec.values, before, [k for k in keys if k != rec.message_key])
        others = others if known else {}
        self.state_lines[rec.checkpoint_id] = state_lines(changes, others)
        new = appended(rec, parent) if known else []
        gone = removed_since(rec, parent) if known else []
        self._changed[rec.checkpoint_id] = (new, gone)
        return {
            "step": rec.step,
            "checkpoint_id": rec.checkpoint_id,
            "parent_id": rec.parent_id,
            "source": rec.source,
            "created_at": rec.created_at,
            "writers": list(rec.writers),
            "appended": [message_row(m) for m in new],
            "edited": edits_added(rec, parent) if known else [],
            "removed": [
                {**message_row(m), "by": list(rec.writers), "checkpoint_id": rec.checkpoint_id}
                for m in gone
            ],
            "messages": len(rec.messages),
            "open_calls": open_at(rec, parent),
            "compactions": compactions_added(rec, parent) if known else [],
            "errors": [{"task": e.task, "error": e.error} for e in rec.errors],
            "interrupts": list(rec.interrupts),
            "paused": rec.paused,
            "next": list(rec.next),
            **{f"cum_{k}": v for k, v in usage_at(rec, parent).items()},
            "stored_bytes": rec.stored_bytes,
            "path_bytes": cum if self.thread.bytes_known else None,
            "parent_loaded": known,
            "state": [
                {"key": k, "before": value_text(a), "after": value_text(b)} for k, a, b in changes
            ],
            "other_messages": {k: [message_row(m) for m in ms] for k, ms in others.items()},
        }

    def summary(self) -> list[str]:
        return [self._summary]

    def display_rows(self) -> list[dict[str, Cell]]:
        out: list[dict[str, Cell]] = []
        for rec, row in zip(self.records, self._rows, strict=True):
            new, gone = self._changed[rec.checkpoint_id]
            events: list[str] = [message_line(m) for m in new]
            events += [edit_line(e) for e in row["edited"]]
            events += [
                f"removed {message_line(m)} (RemoveMessage by {', '.join(rec.writers) or '?'})"
                for m in gone
            ]
            if not row["parent_loaded"]:
                events.append(f"(parent not loaded: {len(rec.messages)} messages in the log)")
            events += [describe_compaction(e) for e in row["compactions"]]
            events += self.state_lines[rec.checkpoint_id]
            events += [f"⚠ {e['task']} failed: {e['error']}" for e in row["errors"]]
            events += [f"⚠ interrupt: {i}" for i in row["interrupts"]]
            events += [f"⏸ {rec.paused}"] if rec.paused else []
            if rec.source == "input" and not events:
                events = ["(the input; appended by the next step)"]
            out.append(
                {
                    "step": str(rec.step),
                    "checkpoint": short(rec.checkpoint_id),
                    "parent": short(rec.parent_id),
                    "source": rec.source,
                    "writers": list(rec.writers) or ["-"],
                    "open": str(len(row["open_calls"])),
                    "tokens": str(row["cum_total_tokens"]),
                    "bytes": human_bytes(rec.stored_bytes) if self.thread.bytes_known else "?",
                    "events": events or ["-"],
                }
            )
        return out

    def notes(self) -> list[str]:
        return [
            "open: tool calls without a result after the step · tokens: cumulative "
            "usage_metadata of the log · bytes: the checkpoint's rows (checkpoint, new blobs, "
            "writes saved against it)"
        ]
