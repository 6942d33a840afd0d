"""What providers would reject in one stored history: every problem, not just the first.

Contract: `find_problems(messages, profiles)` walks a message list once and returns one
`Finding` per problem, in log order, each naming its kind, the position and id of the
message at fault, the call id where one is involved, and which of `profiles` reject it.
`threadlog.validate` raises on the *first* problem of one profile (it guards a send);
this lists them all for every profile at once (it audits a store), with the same rules:

* `open_call` — a call with no result: before the next non-tool message, or at the end.
* `orphan_result` — a result whose call no earlier message made, or whose call the
  conversation had already moved past (its result came too late).
* `result_before_call` — a result stored before the message that makes its call.
* `duplicate_result` — a second result for one call.
* `duplicate_call_id` — a call id used by two calls.
* `call_without_id` — a call no result can ever answer (`threadlog.log.pairing.NO_ID`).
* `system_out_of_place` — system/developer text after the conversation started, for a
  profile that takes system text only first (`Profile.system_anywhere`).
* `first_not_user` — the conversation starts with another role than user, for a profile
  whose first turn must be the user's (`Profile.first_turn_user`).
* `empty_content` — a message with no text and no calls (other than the last), for the
  profiles that carry tool results as user blocks (Anthropic, Gemini), whose APIs refuse
  empty content.
* `invalid_message` — a stored value threadlog cannot read as a message.

Structural kinds (the pairing ones, `invalid_message`) are rejected by every profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.errors import MessageLogError
from threadlog.log.messages import calls_of, coerce_message, role_of
from threadlog.providers.profiles import Profile

__all__ = ["KINDS", "REPAIRABLE", "Finding", "find_problems"]

KINDS: tuple[str, ...] = (
    "open_call",
    "orphan_result",
    "result_before_call",
    "duplicate_result",
    "duplicate_call_id",
    "call_without_id",
    "system_out_of_place",
    "first_not_user",
    "empty_content",
    "invalid_message",
)
REPAIRABLE = frozenset({"open_call"})
"""Kinds `threadlog check --repair` answers by appending (a "not completed" result)."""


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    position: int
    message_id: str | None
    detail: str
    profiles: tuple[str, ...]
    call_id: str | None = None
    call_name: str | None = None
    closed_by: int | None = None
    """For `open_call`: the position of the message that moved on without the result
    (None: the call is open at the end of the history)."""


def _text_of(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") != "text":
            return "<non-text>"  # an image or other block: not empty
        elif isinstance(block, dict):
            parts.append(str(block.get("text") or ""))
    return "".join(parts)


def find_problems(messages: Sequence[Any], profiles: Sequence[Profile]) -> list[Finding]:
    """Every problem of `messages` for `profiles` (module doc), in log order."""
    every = tuple(p.name for p in profiles)
    late_system = tuple(p.name for p in profiles if not p.system_anywhere)
    user_first = tuple(p.name for p in profiles if p.first_turn_user)
    no_empty = tuple(p.name for p in profiles if p.tool_results == "user-block")
    out: list[Finding] = []
    msgs: list[BaseMessage | None] = []
    for pos, raw in enumerate(messages):
        try:
            msgs.append(raw if isinstance(raw, BaseMessage) else coerce_message(raw, position=pos))
        except MessageLogError as exc:
            msgs.append(None)
            out.append(Finding("invalid_message", pos, None, str(exc), every))
    made_at: dict[str, int] = {}  # call id -> position of the first message making it
    for pos, m in enumerate(msgs):
        if isinstance(m, AIMessage):
            for call in calls_of(m):
                made_at.setdefault(call.get("id") or "", pos)

    open_: dict[str, tuple[int, str | None, str | None]] = {}  # id -> (pos, ai id, name)
    answered: dict[str, int] = {}
    moved_past: dict[str, int] = {}  # call id -> position of the message that moved on
    seen: set[str] = set()
    conversation = False
    last = len(msgs) - 1
    for pos, m in enumerate(msgs):
        if m is None:
            continue
        role = role_of(m)
        if isinstance(m, ToolMessage):
            cid = m.tool_call_id
            if cid in open_:
                del open_[cid]
                answered[cid] = pos
            elif cid in answered:
                out.append(
                    Finding(
                        "duplicate_result",
                        pos,
                        m.id,
                        f"second result for call {cid!r} (first at position {answered[cid]})",
                        every,
                        cid,
                        m.name,
                    )
                )
            elif made_at.get(cid, -1) > pos:
                out.append(
                    Finding(
                        "result_before_call",
                        pos,
                        m.id,
                        f"result for call {cid!r}, which the message at position "
                        f"{made_at[cid]} makes later",
                        every,
                        cid,
                        m.name,
                    )
                )
            elif cid in moved_past:
                out.append(
                    Finding(
                        "orphan_result",
                        pos,
                        m.id,
                        f"result for call {cid!r} comes after the conversation moved on "
                        f"(position {moved_past[cid]})",
                        every,
                        cid,
                        m.name,
                    )
                )
            else:
                out.append(
                    Finding(
                        "orphan_result",
                        pos,
                        m.id,
                        f"result for call {cid!r}, which no earlier message made",
                        every,
                        cid,
                        m.name,
                    )
                )
            continue
        for cid, (at, ai_id, name) in open_.items():
            out.append(
                Finding(
                    "open_call",
                    at,
                    ai_id,
                    f"call {cid!r} ({name}) has no result before the {role} message at "
                    f"position {pos}",
                    every,
                    cid,
                    name,
                    pos,
                )
            )
            moved_past[cid] = pos
        open_.clear()
        if role in ("system", "developer"):
            if conversation and late_system:
                out.append(
                    Finding(
                        "system_out_of_place",
                        pos,
                        m.id,
                        f"{role} message after the conversation started",
                        late_system,
                    )
                )
        elif not conversation:
            conversation = True
            if role != "user" and user_first:
                out.append(
                    Finding(
                        "first_not_user",
                        pos,
                        m.id,
                        f"the conversation starts with a {role} message, not a user one",
                        user_first,
                    )
                )
        calls = calls_of(m) if isinstance(m, AIMessage) else []
        if not calls and pos != last and no_empty and not _text_of(m).strip():
            out.append(
                Finding("empty_content", pos, m.id, f"{role} message with no content", no_empty)
            )
        for call in calls:
            cid = call.get("id") or ""
            name = call.get("name")
            if not cid:
                out.append(
                    Finding(
                        "call_without_id",
                        pos,
                        m.id,
                        f"call {name!r} has no id, so no result can answer it",
                        every,
                        None,
                        name,
                    )
                )
            elif cid in seen:
                out.append(
                    Finding(
                        "duplicate_call_id",
                        pos,
                        m.id,
                        f"call id {cid!r} is used twice",
                        every,
                        cid,
                        name,
                    )
                )
            else:
                seen.add(cid)
                open_[cid] = (pos, m.id, name)
    for cid, (at, ai_id, name) in open_.items():
        out.append(
            Finding(
                "open_call",
                at,
                ai_id,
                f"call {cid!r} ({name}) has no result (the history ends here)",
                every,
                cid,
                name,
            )
        )
    out.sort(key=lambda f: f.position)
    return out
