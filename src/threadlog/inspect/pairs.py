"""`ToolPairs`: each tool call in the log with its result, status and duration.

Duration: the result's recorded `duration_ms` / `threadlog_duration_ms` ("recorded"), else
the time between the two checkpoints ("derived", an upper bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, ToolMessage

from threadlog.checkpoint.receipts import KEY_METADATA
from threadlog.inspect.records import CheckpointRecord, parse_time, short
from threadlog.inspect.steps import appended, short_id
from threadlog.inspect.table import Cell, Column, Table, fit
from threadlog.log.messages import calls_of, preview
from threadlog.log.pairing import call_id, open_in, repair_kind

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread

__all__ = ["ToolPairs"]

_DURATION_KEYS = ("duration_ms", "threadlog_duration_ms")
_ERROR_KEY = "threadlog_error"


class ToolPairs(Table):
    columns = (
        Column("call", "call", 14),
        Column("tool", "tool · args", 24),
        Column("asked", "asked", 5, ">"),
        Column("status", "status", 7),
        Column("answered", "answd", 5, ">"),
        Column("duration", "duration", 10, ">"),
        Column("result", "result"),
    )

    def __init__(self, thread: Thread, checkpoint: str | None = None) -> None:
        self.thread = thread
        path = thread.path(checkpoint)
        self.at = path[-1]
        first_seen: dict[str, CheckpointRecord] = {}
        for prev, rec in zip([None, *path[:-1]], path, strict=True):
            first_seen |= {
                m.id: rec for m in appended(rec, prev) if m.id and m.id not in first_seen
            }
        results = {m.tool_call_id: m for m in self.at.messages if isinstance(m, ToolMessage)}
        still_open = {(id(o.request), o.call_index) for o in open_in(self.at.messages)}
        self._rows: list[dict[str, Any]] = []
        # Loaded with `last=N`: the calls of the oldest loaded checkpoint are older.
        window = path[0] if thread.partial and len(path) > 1 else None
        inherited = thread.inherited_ids()
        self.older = self.inherited = 0
        for m in self.at.messages:
            if not isinstance(m, AIMessage):
                continue
            if window is not None and first_seen.get(m.id or "") is window:
                self.older += len(m.tool_calls) + len(m.invalid_tool_calls)
                continue
            if m.id in inherited:
                self.inherited += len(m.tool_calls) + len(m.invalid_tool_calls)
                continue
            asked = first_seen.get(m.id or "")
            for i, c in enumerate(calls_of(m)):
                result = None if (id(m), i) in still_open else results.get(call_id(c))
                self._rows.append(self._row(c, i < len(m.tool_calls), m, asked, result, first_seen))
        self.title = f"{thread.label} · tool calls at {short(self.at.checkpoint_id)}"

    def _row(
        self,
        call: Mapping[str, Any],
        valid: bool,
        ai: AIMessage,
        asked: CheckpointRecord | None,
        result: ToolMessage | None,
        first_seen: dict[str, CheckpointRecord],
    ) -> dict[str, Any]:
        answered = first_seen.get(result.id or "") if result is not None else None
        duration, how = None, None
        if result is not None:
            for key in _DURATION_KEYS:
                if key in result.response_metadata:
                    duration, how = float(result.response_metadata[key]) / 1000, "recorded"
                    break
            if duration is None and asked and answered:
                t0, t1 = parse_time(asked.created_at), parse_time(answered.created_at)
                if t0 and t1:
                    duration, how = (t1 - t0).total_seconds(), "derived"
        return {
            "call_id": call_id(call),
            "tool": call.get("name"),
            "args": call.get("args"),
            "valid": valid,
            "request_id": ai.id,
            "requested_step": asked.step if asked else None,
            "requested_checkpoint": asked.checkpoint_id if asked else None,
            "result_id": result.id if result is not None else None,
            "status": result.status if result is not None else "open",
            "error_kind": result.response_metadata.get(_ERROR_KEY) if result is not None else None,
            "repair": repair_kind(result) if result is not None else None,
            "result": preview(result, 80) if result is not None else None,
            "answered_step": answered.step if answered else None,
            "answered_checkpoint": answered.checkpoint_id if answered else None,
            "duration_s": duration,
            "duration_source": how,
            "idempotency_key": _key_of(result),
        }

    def summary(self) -> list[str]:
        n = len(self._rows)
        by: dict[str, int] = {}
        for r in self._rows:
            by[r["status"]] = by.get(r["status"], 0) + 1
        parts = ", ".join(f"{v} {k}" for k, v in sorted(by.items()))
        return [f"{n} calls" + (f": {parts}" if parts else "")]

    def display_rows(self) -> list[dict[str, Cell]]:
        return self._display(whole_ids=False)

    def html_rows(self) -> list[dict[str, Cell]]:
        return self._display(whole_ids=True)

    def _display(self, *, whole_ids: bool) -> list[dict[str, Cell]]:
        out: list[dict[str, Cell]] = []
        for r in self._rows:
            args = r["args"] if isinstance(r["args"], str) else _args(r["args"])
            status = r["status"] if r["valid"] else f"{r['status']}*"
            result = r["result"] or "-"
            if r["repair"] == "outcome_unknown":
                result = f"⚠ outcome unknown: {result}"
            elif r["error_kind"]:
                result = f"⚠ {r['error_kind']}: {result}"
            dur = "-"
            if r["duration_s"] is not None:
                mark = "" if r["duration_source"] == "recorded" else "≈"
                dur = f"{mark}{r['duration_s'] * 1000:.0f} ms"
            call: Cell = str(r["call_id"]) if whole_ids else short_id(str(r["call_id"]), 14)
            if r["idempotency_key"]:
                key = str(r["idempotency_key"])
                call = [str(call), f"key {key}" if whole_ids else short_id(key, 14)]
            out.append(
                {
                    "call": call,
                    "tool": [str(r["tool"]), fit(args, 24)],
                    "asked": _step(r["requested_step"]),
                    "status": status,
                    "answered": _step(r["answered_step"]),
                    "duration": dur,
                    "result": result,
                }
            )
        return out

    def notes(self) -> list[str]:
        notes = []
        if self.older:
            notes.append(
                f"{self.older} older calls, asked before the checkpoints loaded (--last), "
                "are not listed"
            )
        if self.inherited:
            notes.append(
                f"{self.inherited} calls came with the input from the enclosing graph and "
                "are listed in its view"
            )
        if any(r["duration_source"] == "derived" for r in self._rows):
            notes.append(
                "≈ derived from checkpoint timestamps (the step's whole time, and any wait "
                "before a resume); the tool did not record its own duration"
            )
        if any(r["repair"] == "outcome_unknown" for r in self._rows):
            notes.append(
                "⚠ outcome unknown: the tool started, but the run stopped before it "
                "reported back; it may have taken effect"
            )
        if any(r["idempotency_key"] for r in self._rows):
            notes.append(
                "key: the idempotency key of a call of an idempotent tool (the same on every "
                "attempt; its result was stored as a receipt when the tool returned)"
            )
        if any(not r["valid"] for r in self._rows):
            notes.append("* an invalid tool call (its arguments did not parse)")
        return notes


def _key_of(result: ToolMessage | None) -> str | None:
    if result is None:
        return None
    key = result.response_metadata.get(KEY_METADATA)
    return key if isinstance(key, str) else None


def _args(args: Any) -> str:
    if isinstance(args, dict):
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return repr(args)


def _step(step: int | None) -> str:
    return "-" if step is None else str(step)
