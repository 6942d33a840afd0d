"""`Handoffs`: where a multi-agent app passed the conversation from one agent to another.

A handoff is a tool result with langgraph-supervisor's `__handoff_destination` metadata, or
of a `transfer_to_<agent>` / `transfer_back_to_<agent>` tool (langgraph-swarm's too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, ToolMessage

from threadlog.inspect.table import Cell, Column, Table

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread

__all__ = ["Handoffs", "handoff_destination"]

DESTINATION = "__handoff_destination"  # langgraph-supervisor's result metadata
BACK = "__is_handoff_back"
_PREFIXES = ("transfer_back_to_", "transfer_to_")


def handoff_destination(result: ToolMessage, tool: str | None) -> str | None:
    """The agent a tool result handed the conversation to, or None."""
    meta = result.response_metadata or {}
    if isinstance(meta.get(DESTINATION), str):
        return str(meta[DESTINATION])
    for name in (tool, result.name):
        for prefix in _PREFIXES:
            if name and name.startswith(prefix) and len(name) > len(prefix):
                return name[len(prefix) :]
    return None


class Handoffs(Table):
    columns = (
        Column("n", "#", 3, ">"),
        Column("from", "from agent", 24),
        Column("to", "to agent", 24),
        Column("call", "call", 0),
    )

    def __init__(self, thread: Thread, checkpoint: str | None = None) -> None:
        at = thread.get(checkpoint)
        self.title = f"{thread.label} · handoffs"
        made: dict[str, tuple[str | None, str]] = {}  # call id: (the caller's name, the tool)
        self._rows: list[dict[str, Any]] = []
        for m in at.messages:
            if isinstance(m, AIMessage):
                made.update(
                    {str(c["id"]): (m.name, c["name"]) for c in m.tool_calls if c.get("id")}
                )
            elif isinstance(m, ToolMessage):
                maker, tool = made.get(m.tool_call_id, (None, None))
                to = handoff_destination(m, tool)
                if to is None or m.status == "error":
                    continue
                self._rows.append(
                    {
                        "from": maker or "?",
                        "to": to,
                        "call_id": m.tool_call_id,
                        "tool": tool or m.name,
                        "back": bool((m.response_metadata or {}).get(BACK)),
                    }
                )

    def display_rows(self) -> list[dict[str, Cell]]:
        return [
            {
                "n": str(i),
                "from": r["from"],
                "to": r["to"],
                "call": f"{r['tool']} [{r['call_id']}]",
            }
            for i, r in enumerate(self._rows, 1)
        ]

    def summary(self) -> list[str]:
        if not self._rows:
            return ["no handoff between agents"]
        path = " → ".join([self._rows[0]["from"], *(r["to"] for r in self._rows)])
        return [f"{len(self._rows)} handoff(s): {path}"]
