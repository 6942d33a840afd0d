"""What providers would reject in one stored history: every problem, not just the first.

Contract: `find_problems(messages, profiles)` walks a message list and returns one
`Finding` per problem, in log order, each naming its kind, the position and id of the
message at fault, the call id where one is involved, and which of `profiles` reject it
(it audits a store). `validate(messages, profile)` raises the *first* of those problems
for one profile as a `MessageLogError` (it guards a send): one walk, so the two cannot
disagree. The rules:

* `open_call` — a call with no result: before the next non-tool message, or at the end
  (`validate` allows those at the end unless `allow_pending_calls=False`).
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.errors import InvalidMessageError, MessageLogError, ToolPairingError
from threadlog.log.messages import calls_of, coerce_message, is_stored_form, role_of
from threadlog.providers.profiles import Profile, get_profile

__all__ = ["KINDS", "REPAIRABLE", "Finding", "find_problems", "validate"]

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
    closed_by: int | None = None  # open_call: the message moving on (None: open at the end)
    error: MessageLogError | None = field(default=None, compare=False, repr=False)


def _is_empty(msg: BaseMessage) -> bool:
    # A non-text block (an image…) is content.
    blocks = msg.content if isinstance(msg.content, list) else ()
    if any(isinstance(b, dict) and b.get("type") != "text" for b in blocks):
        return False
    return not msg.text.strip()


def find_problems(messages: Sequence[Any], profiles: Sequence[Profile]) -> list[Finding]:
    """Every problem of `messages` for `profiles` (module doc), in log order."""
    return _Walk(profiles, lambda m: isinstance(m, BaseMessage)).run(messages)


def validate(
    messages: Sequence[Any],
    profile: str | Profile = "openai-chat",
    *,
    allow_pending_calls: bool = True,
    checked: bool = False,
) -> None:
    """Raise the first problem `find_problems` finds for `profile` as a `MessageLogError`.

    `checked=True`: messages come from a log (stored types with an id are not re-coerced)."""
    prof = get_profile(profile)
    walk = _Walk((prof,), is_stored_form if checked else lambda m: False)
    for found in walk.run(messages):
        if found.kind == "open_call" and found.closed_by is None and allow_pending_calls:
            continue
        raise _error(found, prof, walk.msgs)


def _error(found: Finding, prof: Profile, msgs: Sequence[BaseMessage | None]) -> Exception:
    if found.error is not None:
        return found.error
    pos, mid = found.position, found.message_id
    if found.kind == "open_call":
        if found.closed_by is None:
            return ToolPairingError(
                f"call {found.call_id!r} of the AIMessage at position {pos} has no result "
                "at the end of the history",
                message_id=mid,
                role="assistant",
                position=pos,
                fix="run the tools, or repair the unanswered call before the model call",
            )
        pos = found.closed_by
        closing = msgs[pos]
        mid = closing.id if closing is not None else None
    msg = msgs[pos]
    role = role_of(msg) if msg is not None else None
    text, fix = _ERRORS[found.kind]
    cls = InvalidMessageError if found.kind in _PROFILE_KINDS else ToolPairingError
    return cls(
        text.format(found=found, profile=prof.description, role=role),
        message_id=mid,
        role=role,
        position=pos,
        fix=fix,
    )


_PROFILE_KINDS = ("system_out_of_place", "first_not_user", "empty_content")
_ERRORS: dict[str, tuple[str, str]] = {
    "open_call": (
        "call {found.call_id!r} of an earlier AIMessage has no result before this {role} message",
        "answer every call first "
        "(threadlog.ModelNode repairs unanswered calls with an explicit error result)",
    ),
    "orphan_result": (
        "tool result answers call {found.call_id!r}, which "
        "no earlier AIMessage made (or a later message already closed it)",
        "keep each result right after the AIMessage that requested it",
    ),
    "result_before_call": (
        "tool {found.detail}",
        "keep each result right after the AIMessage that requested it",
    ),
    "duplicate_result": ("{found.detail}", "drop the duplicate; each call gets exactly one result"),
    "duplicate_call_id": ("{found.detail}", "each tool call needs an id unique in the history"),
    "call_without_id": ("{found.detail}", "give each tool call an id"),
    "system_out_of_place": (
        "{profile} takes system text only before the conversation",
        "put system/developer messages first",
    ),
    "first_not_user": (
        "{profile} needs the conversation to start with a user message, not {role}",
        "keep the turn's user message when trimming",
    ),
    "empty_content": (
        "{profile} refuses a {role} message with no content",
        "drop the message, or give it text",
    ),
}
KINDS: tuple[str, ...] = (*_ERRORS, "invalid_message")


class _Walk:
    """One walk of a history for some profiles; `msgs`: the messages read (None: unreadable)."""

    def __init__(self, profiles: Sequence[Profile], taken: Callable[[Any], bool]) -> None:
        self.every = tuple(p.name for p in profiles)
        self.late_system = tuple(p.name for p in profiles if not p.system_anywhere)
        self.user_first = tuple(p.name for p in profiles if p.first_turn_user)
        self.no_empty = tuple(p.name for p in profiles if p.tool_results == "user-block")
        self.narrow = {
            "system_out_of_place": self.late_system,
            "first_not_user": self.user_first,
            "empty_content": self.no_empty,
        }
        self.taken = taken  # a value used as it is, not read again by `coerce_message`
        self.out: list[Finding] = []
        self.msgs: list[BaseMessage | None] = []
        self.open: dict[str, tuple[int, BaseMessage, str | None]] = {}  # id -> (pos, ai, name)
        self.answered: dict[str, int] = {}
        self.moved_past: dict[str, int] = {}  # call id -> position of the message moving on
        self.seen: set[str] = set()
        self.conversation = False

    def run(self, messages: Sequence[Any]) -> list[Finding]:
        for pos, raw in enumerate(messages):
            try:
                self.msgs.append(raw if self.taken(raw) else coerce_message(raw, position=pos))
            except MessageLogError as exc:
                self.msgs.append(None)
                self.out.append(
                    Finding("invalid_message", pos, None, str(exc), self.every, error=exc)
                )
        made_at: dict[str, int] = {}  # call id -> position of the first message making it
        for pos, m in enumerate(self.msgs):
            if isinstance(m, AIMessage):
                for call in calls_of(m):
                    made_at.setdefault(call.get("id") or "", pos)
        last = len(self.msgs) - 1
        for pos, m in enumerate(self.msgs):
            if isinstance(m, ToolMessage):
                self._result(pos, m, made_at)
            elif m is not None:
                self._message(pos, m, last)
        self._close("(the history ends here)", None)
        self.out.sort(key=lambda f: f.position)
        return self.out

    def _add(self, kind: str, pos: int, m: BaseMessage, detail: str, *call: Any) -> None:
        who = self.narrow.get(kind, self.every)
        self.out.append(Finding(kind, pos, m.id, detail, who, *call))

    def _result(self, pos: int, m: ToolMessage, made_at: dict[str, int]) -> None:
        cid = m.tool_call_id
        if cid in self.open:
            del self.open[cid]
            self.answered[cid] = pos
            return
        kind, what = "orphan_result", f"result for call {cid!r}"
        if cid in self.answered:
            kind = "duplicate_result"
            what = f"second result for call {cid!r} (first at position {self.answered[cid]})"
        elif made_at.get(cid, -1) > pos:
            kind = "result_before_call"
            what += f", which the message at position {made_at[cid]} makes later"
        elif cid in self.moved_past:
            what += f" comes after the conversation moved on (position {self.moved_past[cid]})"
        else:
            what += ", which no earlier message made"
        self._add(kind, pos, m, what, cid, m.name)

    def _message(self, pos: int, m: BaseMessage, last: int) -> None:
        role = role_of(m)
        self._close(f"before the {role} message at position {pos}", pos)
        if role in ("system", "developer"):
            if self.conversation and self.late_system:
                what = f"{role} message after the conversation started"
                self._add("system_out_of_place", pos, m, what)
        elif not self.conversation:
            self.conversation = True
            if role != "user" and self.user_first:
                what = f"the conversation starts with a {role} message, not a user one"
                self._add("first_not_user", pos, m, what)
        calls = calls_of(m) if isinstance(m, AIMessage) else []
        if not calls and pos != last and self.no_empty and _is_empty(m):
            self._add("empty_content", pos, m, f"{role} message with no content")
        for call in calls:
            cid, name = call.get("id") or "", call.get("name")
            if not cid:
                what = f"call {name!r} has no id, so no result can answer it"
                self._add("call_without_id", pos, m, what, None, name)
            elif cid in self.seen:
                self._add("duplicate_call_id", pos, m, f"call id {cid!r} is used twice", cid, name)
            else:
                self.seen.add(cid)
                self.open[cid] = (pos, m, name)

    def _close(self, where: str, closed_by: int | None) -> None:
        for cid, (at, ai, name) in self.open.items():
            detail = f"call {cid!r} ({name}) has no result {where}"
            self._add("open_call", at, ai, detail, cid, name, closed_by)
            if closed_by is not None:
                self.moved_past[cid] = closed_by
        self.open.clear()
