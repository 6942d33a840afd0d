"""What one checkpoint changed, compared with its parent: the facts behind every view.

Pure functions over `CheckpointRecord`s, memoized on the record when the step only appended.
"""

from __future__ import annotations

from operator import is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.inspect.records import CheckpointRecord
from threadlog.log.edits import edits_of, original_of
from threadlog.log.messages import calls_of, preview, role_of
from threadlog.log.pairing import call_id, open_in

__all__ = [
    "appended",
    "compactions_added",
    "describe_compaction",
    "edit_line",
    "edits_added",
    "extends",
    "message_line",
    "message_row",
    "open_at",
    "open_calls",
    "short_id",
    "text_of",
    "usage",
    "usage_at",
]


def extends(rec: CheckpointRecord, parent: CheckpointRecord | None) -> bool:
    """Whether `rec`'s log is `parent`'s very messages plus new ones (the usual step)."""
    if parent is None:
        return False
    key = f"extends:{parent.checkpoint_id}:{rec.message_key}"
    if key not in rec.memo:
        old, new = parent.messages, rec.messages
        rec.memo[key] = len(old) <= len(new) and all(map(is_, old, new))
    return bool(rec.memo[key])


def open_at(rec: CheckpointRecord, parent: CheckpointRecord | None) -> list[str]:
    key = f"open:{rec.message_key}"
    if key not in rec.memo:
        if parent is not None and extends(rec, parent):
            new = appended(rec, parent)
            answered = {m.tool_call_id for m in new if isinstance(m, ToolMessage)}
            added = open_calls(new)
            keep = [c for c in open_at(parent, None) if c == "" or c not in answered]
            rec.memo[key] = [c for c in keep if c == "" or c not in added] + added
        else:
            rec.memo[key] = open_calls(rec.messages)
    return list(rec.memo[key])


def usage_at(rec: CheckpointRecord, parent: CheckpointRecord | None) -> dict[str, int]:
    key = f"usage:{rec.message_key}"
    if key not in rec.memo:
        if parent is not None and extends(rec, parent):
            base, new = usage_at(parent, None), usage(appended(rec, parent))
            rec.memo[key] = {k: base[k] + new[k] for k in base}
        else:
            rec.memo[key] = usage(rec.messages)
    return dict(rec.memo[key])


def appended(rec: CheckpointRecord, parent: CheckpointRecord | None) -> list[BaseMessage]:
    if parent is not None and extends(rec, parent):
        return rec.messages[len(parent.messages) :]
    before = {m.id for m in parent.messages} if parent else set()
    return [m for m in rec.messages if m.id not in before]


def removed_since(rec: CheckpointRecord, parent: CheckpointRecord | None) -> list[BaseMessage]:
    """The messages `rec`'s step hid from the view (`RemoveMessage`)."""
    if parent is None or extends(rec, parent):
        return []
    now = {m.id for m in rec.messages}
    return [m for m in parent.messages if m.id not in now]


def edits_added(rec: CheckpointRecord, parent: CheckpointRecord | None) -> list[dict[str, Any]]:
    """The reviewer edits `rec`'s step recorded, with the calls and content they superseded."""
    before: set[str] = set()
    scan = rec.messages
    if parent is not None and extends(rec, parent):
        scan = scan[len(parent.messages) :]
    elif parent is not None:
        before = {str(e.get("id")) for m in parent.messages for e in edits_of(m)}
    out: list[dict[str, Any]] = []
    for m in scan:
        history = edits_of(m)
        if not history:
            continue
        first = original_of(m)
        prior = _calls(calls_of(first))
        prior_text = _content_text(first.content)
        for e in history:
            now = _calls(e.get("tool_calls") or [])
            text = _content_text(e.get("content")) if "content" in e else prior_text
            if str(e.get("id")) not in before:
                out.append(
                    {
                        "message_id": m.id,
                        "edit_id": e.get("id"),
                        "at": e.get("at"),
                        "by": e.get("by"),
                        "reason": e.get("reason"),
                        "source": e.get("source"),
                        "superseded_calls": prior,
                        "calls": now,
                        "superseded_content": prior_text,
                        "content": text,
                    }
                )
            prior, prior_text = now, text
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(
            b if isinstance(b, str) else str(b.get("text", "")) if isinstance(b, dict) else ""
            for b in content
        )
    return "" if content is None else str(content)


def _calls(calls: Any) -> list[dict[str, Any]]:
    return [{"id": c.get("id"), "name": c.get("name"), "args": c.get("args")} for c in calls]


def _calls_line(calls: Any) -> str:
    return ", ".join(
        f"{c['name']}({', '.join(str(v) for v in (c.get('args') or {}).values())})" for c in calls
    )


def edit_line(edit: dict[str, Any]) -> str:
    """`✎ edit of <message> by <who>: <new calls> supersede <old calls>`, or for an edit
    that kept the calls, `content '<old>' → '<new>'`."""
    who = f" by {edit['by']}" if edit.get("by") else ""
    via = f" ({edit['source']})" if edit.get("source") else ""
    head = f"✎ edit of {short_id(edit['message_id'])}{who}{via}: "
    calls, old = edit["calls"], edit["superseded_calls"]
    if calls == old or (not calls and not old):
        before, after = edit.get("superseded_content"), edit.get("content")
        if before is not None and after is not None and before != after:
            return f"{head}content {_quote(before)} → {_quote(after)}"
        return f"{head}content changed"
    return f"{head}{_calls_line(calls) or 'no calls'} supersede {_calls_line(old) or 'no calls'}"


def _quote(text: str, width: int = 40) -> str:
    one = " ".join(str(text).split())
    return repr(one if len(one) <= width else one[: width - 1] + "…")


def compactions_added(
    rec: CheckpointRecord, parent: CheckpointRecord | None
) -> list[dict[str, Any]]:
    before = len(parent.compactions) if parent else 0
    return rec.compactions[before:]


def open_calls(messages: list[BaseMessage]) -> list[str]:
    """Ids of tool calls still waiting for a result, in log order (one per call)."""
    return [call_id(o.call) for o in open_in(messages)]


def usage(messages: list[BaseMessage]) -> dict[str, int]:
    total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for m in messages:
        if isinstance(m, AIMessage) and m.usage_metadata:
            meta: dict[str, Any] = dict(m.usage_metadata)
            for k in total:
                total[k] += int(meta.get(k) or 0)
    return total


def message_row(m: BaseMessage) -> dict[str, Any]:
    """A message as a flat dict, the same keys for every message (None where n/a)."""
    return {
        "role": role_of(m),
        "id": m.id,
        "content": text_of(m),
        "tool_calls": [c.get("id") for c in m.tool_calls] if isinstance(m, AIMessage) else None,
        "calls": _calls(m.tool_calls) if isinstance(m, AIMessage) else None,
        "tool_call_id": m.tool_call_id if isinstance(m, ToolMessage) else None,
        "status": m.status if isinstance(m, ToolMessage) else None,
        "original_calls": _calls(calls_of(original_of(m))) if edits_of(m) else None,
        "edits": [
            {k: e.get(k) for k in ("id", "at", "by", "reason", "source")} for e in edits_of(m)
        ]
        or None,
    }


def message_line(m: BaseMessage, width: int = 120) -> str:
    """`role id: content`; a request without text reads as its calls (`calls f(1), g(2)`)."""
    role = role_of(m)
    status = " ⚠error" if isinstance(m, ToolMessage) and m.status == "error" else ""
    text = preview(m, width)
    if isinstance(m, AIMessage) and m.tool_calls and not m.text.strip():
        text = "calls " + _calls_line(m.tool_calls)
    return f"{role} {short_id(m.id)}{status}: {text}"


def describe_compaction(event: dict[str, Any]) -> str:
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


def text_of(m: BaseMessage) -> str:
    return m.text if isinstance(m.content, list) else str(m.content)


def short_id(mid: str | None, width: int = 12) -> str:
    """An id cut in the middle: generated ids differ at both ends (`call_ab12…_0`, `_1`)."""
    if not mid:
        return "-"
    if len(mid) <= width:
        return mid
    tail = (width - 1) // 2
    return mid[: width - 1 - tail] + "…" + mid[-tail:]
