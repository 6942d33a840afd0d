"""What `ModelNode` records about each model call, for the inspector: one namespaced key.

Contract: `timed(ai, ...)` returns the AIMessage with `response_metadata["threadlog"]` set
to a small JSON dict — `started_at` (ISO 8601 UTC wall clock when the model was called),
`latency_ms` (the model call), `step_ms` (the whole node: context, checks, call), `model`
(the provider's `model_name` when it reports one, else the chat model's own name),
`context_messages` (how many messages were sent, system prompt included) and
`system_prompt` (the id naming the system prompt's text, or None). Tokens stay where the
provider puts them (`usage_metadata`, per call). Everything lives under the single
`"threadlog"` key, so a message compares and serializes as before with one extra entry,
and `to_wire` never sends it (response metadata does not reach a provider).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage

__all__ = ["TRACE_KEY", "model_name", "timed"]

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
) -> AIMessage:
    record = {
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "latency_ms": round(latency_s * 1000, 3),
        "step_ms": round(step_s * 1000, 3),
        "model": model_name(model, ai),
        "context_messages": context_messages,
        "system_prompt": system_prompt,
    }
    return ai.model_copy(
        update={"response_metadata": {**ai.response_metadata, TRACE_KEY: record}}
    )
