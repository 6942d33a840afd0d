"""The errors the log raises for a write it refuses, each naming the message and a fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from threadlog.errors import ConflictingIdError, ParallelWriteError, ToolPairingError
from threadlog.log.messages import calls_of, fingerprint, preview, role_of


def conflict(existing: BaseMessage, msg: BaseMessage, at: int, pos: int) -> ConflictingIdError:
    mid = msg.id
    fix = (
        "give a new message a new id; re-send a stored message unchanged, or not at all; "
        "to revise it, write it through graph.update_state (recorded as an edit event)"
    )
    if isinstance(existing, AIMessage) and isinstance(msg, AIMessage) and calls_of(existing):
        fix = (
            f"to change the calls of AIMessage {mid!r} during review, write it through "
            f"graph.update_state, or threadlog.Edit(AIMessage(id={mid!r}, tool_calls=[...])) "
            "(through update_state or a node): it is recorded as an edit event, the "
            "original stays in the log and the model sees the edited calls"
        )
    return ConflictingIdError(
        f"id {mid!r} is already used by the {role_of(existing)} message at "
        f"position {at}, with different {_differing(existing, msg)}",
        message_id=mid,
        role=role_of(msg),
        position=pos,
        fix=fix,
    )


def reused_superseded(
    index: int, call: Mapping[str, Any], dropped: tuple[str, str], mid: str, pos: int
) -> ToolPairingError:
    cid = call.get("id")
    return ToolPairingError(
        f"call {index} ({call.get('name')!r}) reuses call id {cid!r}, which edit "
        f"{dropped[1]!r} dropped from message {dropped[0]!r} (its audit record keeps the id)",
        message_id=mid,
        role="assistant",
        position=pos,
        fix="each tool call needs an id unique in the thread, the calls an edit superseded "
        "included: give the new call a fresh id (threadlog.ModelNode re-keys a reply's "
        "colliding ids itself)",
    )


def _differing(old: BaseMessage, new: BaseMessage) -> str:
    a, b = fingerprint(old), fingerprint(new)
    fields = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return ", ".join(fields) or "content"


def parallel_error(
    conversational: list[tuple[int, list[BaseMessage]]], start: int
) -> ParallelWriteError:
    parts = []
    for w, msgs in conversational:
        shown = "; ".join(
            f"{role_of(m)} id={m.id!r}{' name=' + repr(m.name) if m.name else ''} "
            f"{preview(m, 40)!r}"
            for m in msgs
        )
        parts.append(f"writer #{w + 1}: {shown}")
    first = conversational[1][1][0]
    return ParallelWriteError(
        "two tasks of one superstep appended conversation messages, which would "
        "interleave their turns (" + " | ".join(parts) + ")",
        message_id=first.id,
        role=role_of(first),
        position=start,
        fix="let parallel branches return only ToolMessages, or run the branches "
        "in separate supersteps (e.g. a join node that writes one message)",
    )
