"""What a model node needs to know about the current turn, and what it does to a reply.

* A *turn* is everything after the last user message; `model_calls_in_turn(log)` counts
  its assistant messages (the log is the counter, so a resumed turn counts right).
* `step_cap_message(n)` ends a turn that reached its cap: text saying why, no calls.
* `rekey_calls(reply, used)` gives a reply's call ids that collide with the log's (an
  edit's dropped ones included) or each other fresh ones (`threadlog.log.call_ids`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from threadlog.log.call_ids import rekey_calls
from threadlog.log.edits import audit_call_ids
from threadlog.log.messages import calls_of

__all__ = [
    "STEP_CAP_REASON",
    "call_ids",
    "model_calls_in_turn",
    "rekey_calls",
    "step_cap_message",
    "turn_started",
]

STEP_CAP_REASON = "max_model_calls"


def model_calls_in_turn(messages: Sequence[BaseMessage]) -> int:
    """Assistant messages after the last user message (the model calls of this turn)."""
    count = 0
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            break
        if isinstance(m, AIMessage):
            count += 1
    return count


def turn_started(messages: Sequence[BaseMessage]) -> bool:
    """Whether the next model call is the turn's first (no tool results to answer yet)."""
    for m in reversed(messages):
        if isinstance(m, ToolMessage | AIMessage):
            return False
        if isinstance(m, HumanMessage):
            return True
    return True


def step_cap_message(limit: int, turn_id: str) -> AIMessage:
    """The message that stops a turn after `limit` model calls (id fixed per turn)."""
    return AIMessage(
        content=(
            f"Stopped: this turn reached its limit of {limit} model calls "
            f"(max_model_calls={limit}) before the model gave an answer without tool calls."
        ),
        id="tl-step-cap-" + hashlib.blake2b(turn_id.encode(), digest_size=10).hexdigest(),
        response_metadata={"threadlog_stop": STEP_CAP_REASON, "max_model_calls": limit},
    )


def call_ids(messages: Iterable[BaseMessage]) -> set[str]:
    """Every call id the messages' calls use, or used before an edit."""
    out: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            out.update(c["id"] or "" for c in calls_of(m))
            out |= audit_call_ids(m)
    return out
