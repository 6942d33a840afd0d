"""What one checkpoint changed, compared with its parent: the facts behind every view.

Contract: pure functions over `CheckpointRecord`s. `appended(rec, parent)` is the messages in
`rec`'s log whose ids are not in the parent's, in log order (a tool result may land in the
middle of the log, next to its call, so this is a set difference, not a suffix).
`open_calls(messages)` are calls with no result yet, `usage(messages)` sums the
`usage_metadata` of the AIMessages, and `message_line` is the one-line form shared by the
text and HTML renderers.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.inspect.records import CheckpointRecord
from threadlog.messages import calls_of, preview, role_of

__all__ = [
    "appended",
    "compactions_added",
    "describe_compaction",
    "message_line",
    "message_row",
    "open_calls",
    "short_id",
    "usage",
]


def appended(rec: CheckpointRecord, parent: CheckpointRecord | None) -> list[BaseMessage]:
    before = {m.id for m in parent.messages} if parent else set()
    return [m for m in rec.messages if m.id not in before]


def compactions_added(
    rec: CheckpointRecord, parent: CheckpointRecord | None
) -> list[dict[str, Any]]:
    before = len(parent.compactions) if parent else 0
    return rec.compactions[before:]


def open_calls(messages: list[BaseMessage]) -> list[str]:
    """Ids of tool calls still waiting for a result, in log order."""
    # One pass, no index: building a MessageLog per checkpoint cost O(log) each time.
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        str(call.get("id"))
        for m in messages
        if isinstance(m, AIMessage)
        for call in calls_of(m)
        if call.get("id") not in answered
    ]


def usage(messages: list[BaseMessage]) -> dict[str, int]:
    total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for m in messages:
        if isinstance(m, AIMessage) and m.usage_metadata:
            meta: dict[str, Any] = dict(m.usage_metadata)
            for k in total:
                total[k] += int(meta.get(k) or 0)
    return total


def message_row(m: BaseMessage, width: int | None = None) -> dict[str, Any]:
    """A message as a flat dict; every message has the same keys (None where n/a).

    Rows are data (`.rows()`, `--json`): the content is whole unless `width` asks for a
    preview, and each call is listed with its name and arguments as well as its id.
    """
    text = m.text if isinstance(m.content, list) else str(m.content)
    return {
        "role": role_of(m),
        "id": m.id,
        "content": text if width is None else preview(m, width),
        "tool_calls": [c.get("id") for c in m.tool_calls] if isinstance(m, AIMessage) else None,
        "calls": [
            {"id": c.get("id"), "name": c.get("name"), "args": c.get("args")}
            for c in m.tool_calls
        ]
        if isinstance(m, AIMessage)
        else None,
        "tool_call_id": m.tool_call_id if isinstance(m, ToolMessage) else None,
        "status": m.status if isinstance(m, ToolMessage) else None,
    }


def message_line(m: BaseMessage, width: int = 120) -> str:
    """`role id: content` — the role first, so renderers can colour the line.

    A request without text reads as its calls with their argument values
    (`calls get_weather(Beijing), get_weather(Shanghai)`): which city was asked matters
    more in a timeline than the call ids, which the pairs view lists.
    """
    role = role_of(m)
    status = " ⚠error" if isinstance(m, ToolMessage) and m.status == "error" else ""
    text = preview(m, width)
    if isinstance(m, AIMessage) and m.tool_calls and not m.text.strip():
        text = "calls " + ", ".join(
            f"{c['name']}({', '.join(str(v) for v in (c.get('args') or {}).values())})"
            for c in m.tool_calls
        )
    return f"{role} {short_id(m.id)}{status}: {text}"


def describe_compaction(event: dict[str, Any]) -> str:
    """A one-line description of a compaction event, whatever keys its producer used."""
    kind = event.get("kind") or event.get("type") or "compaction"
    parts = [f"✂ {kind}"]
    for key in ("cut_to", "summary_id", "hidden", "tokens_before", "tokens_after", "reason"):
        value = event.get(key)
        if value is None or value == [] or value == ():
            continue
        if isinstance(value, (list, tuple)):
            value = f"{len(value)} messages"
        parts.append(f"{key}={value}")
    return " ".join(str(p) for p in parts)


def short_id(mid: str | None, width: int = 12) -> str:
    """An id cut in the middle: generated ids differ at both ends (`call_ab12…_0`, `_1`)."""
    if not mid:
        return "-"
    if len(mid) <= width:
        return mid
    tail = (width - 1) // 2
    return mid[: width - 1 - tail] + "…" + mid[-tail:]
