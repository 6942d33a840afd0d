"""Provider profiles as data, and `validate`: would this provider accept this history?

A profile states a provider's rules about message *structure* — where system and
developer text go, how tool results travel, whether `name` is sent — as plain fields
that can be read and printed (`PROFILES`). `validate` applies the structural rules every
tool-calling provider shares (each result answers one earlier call; a call is answered
before the conversation moves on) plus the profile's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.errors import InvalidMessageError, ToolPairingError
from threadlog.messages import calls_of, coerce_message, is_stored_form, role_of

__all__ = ["PROFILES", "Profile", "get_profile", "validate"]


@dataclass(frozen=True)
class Profile:
    """What one provider API accepts, as data."""

    name: str
    description: str
    system: Literal["messages", "top-level"]
    """Where system text goes: in the message list, or a separate request field."""
    developer: Literal["native", "as-system"]
    """`native`: sent with role developer; `as-system`: folded into system text."""
    system_anywhere: bool
    """Whether system/developer messages may appear after the first conversation message."""
    tool_results: Literal["tool-role", "user-block"]
    """`tool-role`: one `tool` message per result; `user-block`: blocks inside a user turn."""
    name_pattern: str | None
    """Regex a `name` must match to be sent; None: `name` is never sent."""
    first_turn_user: bool
    """Whether the first non-system message must be a user message."""

    def allows_name(self, name: str | None) -> bool:
        return bool(
            name and self.name_pattern and re.fullmatch(self.name_pattern, name)
        )


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="openai-chat",
            description="OpenAI Chat Completions",
            system="messages",
            developer="native",
            system_anywhere=True,
            tool_results="tool-role",
            name_pattern=r"[a-zA-Z0-9_-]{1,64}",
            first_turn_user=False,
        ),
        Profile(
            name="openai-responses",
            description="OpenAI Responses API (instructions + input items)",
            system="top-level",
            developer="native",
            system_anywhere=True,
            tool_results="tool-role",
            name_pattern=None,
            first_turn_user=False,
        ),
        Profile(
            name="anthropic",
            description="Anthropic Messages API",
            system="top-level",
            developer="as-system",
            system_anywhere=False,
            tool_results="user-block",
            name_pattern=None,
            first_turn_user=True,
        ),
        Profile(
            name="gemini",
            description="Google Gemini generateContent",
            system="top-level",
            developer="as-system",
            system_anywhere=False,
            tool_results="user-block",
            name_pattern=None,
            first_turn_user=True,
        ),
        Profile(
            name="openai-compatible",
            description="OpenAI-compatible servers (DeepSeek, Qwen, vLLM, local)",
            system="messages",
            developer="as-system",
            system_anywhere=True,
            tool_results="tool-role",
            name_pattern=None,
            first_turn_user=False,
        ),
    )
}


def get_profile(profile: str | Profile) -> Profile:
    if isinstance(profile, Profile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise ValueError(
            f"unknown provider profile {profile!r}; known: {', '.join(PROFILES)}"
        ) from None


def validate(
    messages: Sequence[Any],
    profile: str | Profile = "openai-chat",
    *,
    allow_pending_calls: bool = True,
    checked: bool = False,
) -> None:
    """Raise a `MessageLogError` subclass if `profile`'s provider would reject `messages`.

    Checks: every message is storable; every tool result answers a call of an earlier
    AIMessage that is still open (no orphan, no duplicate); every call is answered
    before any later non-tool message; plus the profile's placement rules. Calls still
    open at the very end are allowed unless `allow_pending_calls=False` (a history
    about to be *sent* must have none). Returns None when the history is acceptable.

    `checked=True` says the messages come from a log, which checked each one when it was
    appended: messages of the exact stored types with an id are then not re-coerced
    (`ModelNode` validates every call's context; re-checking the whole history each
    turn cost more than the rules themselves).
    """
    prof = get_profile(profile)
    open_calls: dict[str, tuple[int, str]] = {}  # call id -> (ai position, ai id)
    answered: dict[str, str | None] = {}
    seen_conversation = False
    first_non_system: str | None = None
    for pos, raw in enumerate(messages):
        msg: BaseMessage = (
            raw if checked and is_stored_form(raw) else coerce_message(raw, position=pos)
        )
        role = role_of(msg)
        if isinstance(msg, ToolMessage):
            cid = msg.tool_call_id
            if cid in answered:
                raise ToolPairingError(
                    f"second result for call {cid!r} (first: {answered[cid]!r})",
                    message_id=msg.id,
                    role=role,
                    position=pos,
                    fix="drop the duplicate; each call gets exactly one result",
                )
            if cid not in open_calls:
                raise ToolPairingError(
                    f"tool result answers call {cid!r}, which no earlier AIMessage "
                    "made (or a later message already closed it)",
                    message_id=msg.id,
                    role=role,
                    position=pos,
                    fix="keep each result right after the AIMessage that requested it",
                )
            del open_calls[cid]
            answered[cid] = msg.id
            continue
        if open_calls:
            cid, (ai_pos, ai_id) = next(iter(open_calls.items()))
            raise ToolPairingError(
                f"call {cid!r} of the AIMessage at position {ai_pos} has no result "
                f"before this {role} message",
                message_id=msg.id,
                role=role,
                position=pos,
                fix="answer every call first (threadlog.ModelNode repairs unanswered "
                "calls with an explicit error result)",
            )
        if role in ("system", "developer"):
            if seen_conversation and not prof.system_anywhere:
                raise InvalidMessageError(
                    f"{prof.description} takes system text only before the "
                    "conversation",
                    message_id=msg.id,
                    role=role,
                    position=pos,
                    fix="put system/developer messages first",
                )
        else:
            seen_conversation = True
            if first_non_system is None:
                first_non_system = role
                if prof.first_turn_user and role != "user":
                    raise InvalidMessageError(
                        f"{prof.description} needs the conversation to start with a "
                        f"user message, not {role}",
                        message_id=msg.id,
                        role=role,
                        position=pos,
                        fix="keep the turn's user message when trimming",
                    )
        if isinstance(msg, AIMessage):
            for call in calls_of(msg):  # invalid_tool_calls need results too
                cid = call["id"] or ""
                if cid in answered or cid in open_calls:
                    raise ToolPairingError(
                        f"call id {cid!r} is used twice",
                        message_id=msg.id,
                        role=role,
                        position=pos,
                        fix="each tool call needs an id unique in the history",
                    )
                open_calls[cid] = (pos, msg.id or "")
    if open_calls and not allow_pending_calls:
        cid, (ai_pos, ai_id) = next(iter(open_calls.items()))
        raise ToolPairingError(
            f"call {cid!r} of the AIMessage at position {ai_pos} has no result at the "
            "end of the history",
            message_id=ai_id,
            role="assistant",
            position=ai_pos,
            fix="run the tools, or repair the unanswered call before the model call",
        )
