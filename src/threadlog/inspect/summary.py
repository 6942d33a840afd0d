"""`ThreadSummary`: one thread in a listing, made from its head's messages by `summarize`."""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from threadlog.inspect.catalog import Head, id_time
from threadlog.inspect.steps import open_calls, text_of

__all__ = ["ThreadSummary", "matches", "summarize", "tool_failed"]


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    thread_id: str
    created_at: str
    updated_at: str
    checkpoints: int
    turns: int
    messages: int
    last_user: str
    open_calls: list[str]
    errors: list[str]
    head_checkpoint_id: str
    subgraphs: int | None = None  # None: unknown (a server source)
    message_keys: dict[str, int] = field(default_factory=dict)  # other keys' message counts
    paused: str | None = None
    # Tool results the app wrote with status="error" on purpose: not counted in `errors`.
    reported_errors: list[str] = field(default_factory=list)


def summarize(
    head: Head,
    messages: list[BaseMessage],
    errors: list[str],
    updated_at: str = "",
    others: dict[str, list[BaseMessage]] | None = None,
) -> ThreadSummary:
    """`messages`: the main key's; `others`: the other message keys' (counted, not read)."""
    every = [messages, *(others or {}).values()]
    users = [m for m in messages if isinstance(m, HumanMessage)]
    results = [
        m for msgs in every for m in msgs if isinstance(m, ToolMessage) and m.status == "error"
    ]
    failed = [_error_line(m) for m in results if tool_failed(m)]
    reported = [_error_line(m) for m in results if not tool_failed(m)]
    return ThreadSummary(
        thread_id=head.thread_id,
        created_at=id_time(head.first_id),
        updated_at=updated_at or id_time(head.head_id),
        checkpoints=head.checkpoints,
        turns=len(users),
        messages=sum(len(msgs) for msgs in every),
        last_user=(users[-1].text if users else ""),
        open_calls=[c for msgs in every for c in open_calls(msgs)],
        errors=[*errors, *failed],
        head_checkpoint_id=head.head_id,
        message_keys={k: len(v) for k, v in (others or {}).items()},
        reported_errors=reported,
    )


# LangGraph's prebuilt ToolNode's text for an exception it caught.
_LANGGRAPH_ERROR = ("Error: ", "Please fix your mistakes.")


def tool_failed(result: ToolMessage) -> bool:
    """Whether an error result says a tool failed (not the app's deliberate error result)."""
    if "threadlog_error" in (result.response_metadata or {}):
        return True  # threadlog's tool node, and its repairs of open calls
    if str(result.id or "").startswith("tl-repair-"):
        return True
    text = result.text.strip()
    return text.startswith(_LANGGRAPH_ERROR[0]) and text.endswith(_LANGGRAPH_ERROR[1])


def _error_line(m: ToolMessage) -> str:
    return f"{m.name or 'tool'} [{m.tool_call_id}]: {' '.join(m.text.split())[:200]}"


def matches(needle: str, s: ThreadSummary, messages: list[BaseMessage]) -> bool:
    return needle in s.thread_id.lower() or any(needle in _text(m).lower() for m in messages)


def _text(m: BaseMessage) -> str:
    calls = getattr(m, "tool_calls", None) or []
    return text_of(m) + "".join(f" {c.get('name')} {c.get('args')}" for c in calls)
