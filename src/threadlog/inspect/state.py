"""`StateValues`: every key of the state at one checkpoint — what Studio shows per step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadlog.inspect.keys import MISSING, is_message_list, value_changes, value_text
from threadlog.inspect.records import short
from threadlog.inspect.table import Cell, Column, Table

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread

__all__ = ["StateValues"]


class StateValues(Table):
    columns = (
        Column("key", "key", 22),
        Column("kind", "kind", 11),
        Column("changed", "step", 7),
        Column("value", "value"),
    )

    def __init__(self, thread: Thread, checkpoint: str | None = None) -> None:
        self.at = thread.get(checkpoint)
        parent = thread.parent(self.at)
        known = parent is not None or self.at.parent_id is None
        changed = {
            k: a for k, a, _ in value_changes(self.at.values, parent.values if parent else None, ())
        }
        self._rows: list[dict[str, Any]] = []
        for key in sorted(self.at.values):
            value = self.at.values[key]
            if key == "compactions" and not value:  # the stand-in schema always has it
                continue
            message_key = key in thread.message_keys or is_message_list(value)
            kind = "messages" if message_key else "compactions" if key == "compactions" else "value"
            before = changed.get(key, None) if known else None
            self._rows.append(
                {
                    "key": key,
                    "kind": kind,
                    "read": key == thread.key,  # the key the other views read
                    "count": len(value) if isinstance(value, (list, tuple)) else None,
                    "value": value_text(value),
                    "changed": key in changed if known else None,
                    "before": None if before is None or before is MISSING else value_text(before),
                }
            )
        self.title = (
            f"{thread.label} · state at {short(self.at.checkpoint_id)} (step {self.at.step})"
        )

    def summary(self) -> list[str]:
        n = sum(1 for r in self._rows if r["changed"])
        return [f"{len(self._rows)} keys · {n} changed by step {self.at.step}"]

    def display_rows(self) -> list[dict[str, Cell]]:
        out: list[dict[str, Cell]] = []
        for r in self._rows:
            value = r["value"]
            if r["kind"] == "messages":
                where = "shown" if r["read"] else f"--key {r['key']}"
                value = f"{r['count']} message(s) ({where})"
            step = "-" if r["changed"] is None else ("changed" if r["changed"] else "")
            out.append({"key": r["key"], "kind": r["kind"], "changed": step, "value": value})
        return out

    def notes(self) -> list[str]:
        return ["step: whether the step that made this checkpoint changed the key"]
