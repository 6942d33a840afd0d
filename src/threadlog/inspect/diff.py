"""`CheckpointDiff`: what changed from one checkpoint to another, on one branch or across
a fork: messages added ("+") or missing ("-"), compaction events, the same for every
other message key (`key` set), and every other state key whose value differs ("~").
"""

from __future__ import annotations

from typing import Any

from threadlog.inspect.keys import is_message_list
from threadlog.inspect.records import CheckpointRecord, short
from threadlog.inspect.steps import describe_compaction, message_line, message_row
from threadlog.inspect.table import Cell, Column, Table

__all__ = ["CheckpointDiff"]


# One shape for every change, so rows make a rectangular table (DataFrame).
_KEYS = (
    "key",
    "id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "status",
    "event",
    "before",
    "after",
)


def _row(change: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"change": change, "kind": kind, **{k: fields.get(k) for k in _KEYS}}


class CheckpointDiff(Table):
    columns = (Column("change", "±", 1), Column("kind", "kind", 10), Column("what", "what"))

    def __init__(self, a: CheckpointRecord, b: CheckpointRecord) -> None:
        self.a, self.b = a, b
        self.title = (
            f"diff {short(a.checkpoint_id)} (step {a.step}) → "
            f"{short(b.checkpoint_id)} (step {b.step})"
        )
        self._rows: list[dict[str, Any]] = []
        self._lines: list[str] = []
        self._messages(None, a.messages, b.messages)
        a_ev = {repr(sorted(e.items())) for e in a.compactions}
        b_ev = {repr(sorted(e.items())) for e in b.compactions}
        for sign, events, seen in (("-", a.compactions, b_ev), ("+", b.compactions, a_ev)):
            for e in events:
                if repr(sorted(e.items())) not in seen:
                    self._rows.append(_row(sign, "compaction", id=e.get("id"), event=e))
                    self._lines.append(describe_compaction(e))
        for key in sorted(set(a.values) | set(b.values)):
            if key in (a.message_key, "compactions"):
                continue
            va, vb = a.values.get(key), b.values.get(key)
            if is_message_list(va) or is_message_list(vb):
                self._messages(key, va or [], vb or [])
                continue
            if va != vb:
                self._rows.append(_row("~", "value", key=key, before=repr(va), after=repr(vb)))
                self._lines.append(f"{key}: {va!r} → {vb!r}")

    def _messages(self, key: str | None, a: list[Any], b: list[Any]) -> None:
        a_ids, b_ids = {m.id for m in a}, {m.id for m in b}
        for sign, msgs, other in (("-", a, b_ids), ("+", b, a_ids)):
            for m in msgs:
                if m.id not in other:
                    self._rows.append(_row(sign, "message", **{**message_row(m), "key": key}))
                    self._lines.append((f"{key}: " if key else "") + message_line(m, 80))

    def _changed(self, sign: str) -> list[dict[str, Any]]:
        # Messages of the log the views read (other keys' rows carry `key`).
        return [
            r for r in self._rows if (r["change"], r["kind"], r["key"]) == (sign, "message", None)
        ]

    @property
    def added(self) -> list[dict[str, Any]]:
        return self._changed("+")

    @property
    def removed(self) -> list[dict[str, Any]]:
        return self._changed("-")

    def summary(self) -> list[str]:
        return [
            f"{len(self.a.messages)} → {len(self.b.messages)} messages: "
            f"+{len(self.added)} / -{len(self.removed)}"
            + ("" if not self.removed else " (the two checkpoints are on different branches)")
        ]

    def display_rows(self) -> list[dict[str, Cell]]:
        return [
            {"change": r["change"], "kind": r["kind"], "what": line}
            for r, line in zip(self._rows, self._lines, strict=True)
        ]
