"""What `ModelNode` records about each model call, for the inspector: one namespaced key.

Contract: `timed(ai, ...)` sets `response_metadata["threadlog"]` to a small JSON dict:
`started_at` (ISO 8601 UTC), `latency_ms` (the model call), `step_ms` (the whole node),
`model`, `context_messages` (system prompt included) and `system_prompt` (the id naming
its text, or None). With a prompt also `system_prompt_digest`, and for a prompt chosen per
run, on the first call of the thread that sent it, `system_prompt_text` (once per thread;
`prompt_text(log, record)` reads it). Tokens stay in `usage_metadata`. `to_wire` never
sends it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from threadlog.log.messages import digest

__all__ = ["TRACE_KEY", "model_name", "prompt_recorded", "prompt_text", "record_of", "timed"]

TRACE_KEY = "threadlog"


def model_name(model: Any, ai: AIMessage) -> str:
    reported = ai.response_metadata.get("model_name") or ai.response_metadata.get("model")
    if reported:
        return str(reported)
    while hasattr(model, "bound"):  # bind_tools / bind wrap the chat model
        model = model.bound
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def timed(
    ai: AIMessage,
    *,
    model: Any,
    started: float,
    latency_s: float,
    step_s: float,
    context_messages: int,
    system_prompt: str | None,
    system: SystemMessage | None = None,
    text_recorded: bool = True,
) -> AIMessage:
    record: dict[str, Any] = {
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "latency_ms": round(latency_s * 1000, 3),
        "step_ms": round(step_s * 1000, 3),
        "model": model_name(model, ai),
        "context_messages": context_messages,
        "system_prompt": system_prompt,
    }
    if system is not None:
        record["system_prompt_digest"] = digest(system)
        if not text_recorded:
            record["system_prompt_text"] = system.text
    return ai.model_copy(update={"response_metadata": {**ai.response_metadata, TRACE_KEY: record}})


def record_of(message: BaseMessage) -> Mapping[str, Any]:
    """The trace record of a model call (`{}` for any other message)."""
    if not isinstance(message, AIMessage):
        return {}
    rec = message.response_metadata.get(TRACE_KEY)
    return rec if isinstance(rec, Mapping) else {}


def _text_in(log: Sequence[BaseMessage], want: str) -> str | None:
    # Newest first: a prompt used call after call is found at the previous model call.
    for m in reversed(log):
        rec = record_of(m)
        if rec.get("system_prompt_digest") == want and "system_prompt_text" in rec:
            return str(rec["system_prompt_text"])
    return None


def prompt_recorded(log: Sequence[BaseMessage], system: SystemMessage) -> bool:
    """Whether a model call of `log` already stored this prompt's text."""
    return _text_in(log, digest(system)) is not None


def prompt_text(log: Sequence[BaseMessage], record: Mapping[str, Any]) -> str | None:
    """The system prompt text a call's `record` sent (from it or an earlier call), or None."""
    if record.get("system_prompt") is None:
        return None
    if "system_prompt_text" in record:
        return str(record["system_prompt_text"])
    want = record.get("system_prompt_digest")
    return _text_in(log, str(want)) if want else None
