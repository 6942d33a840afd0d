"""Deletions as events: each `RemoveMessage` is a **removal event**; nothing is deleted.

* **The view.** What the app reads (`MessageLog.view`) no longer holds a removed message;
  the log (`MessageLog.messages`, the audit) keeps it, marked:
  `response_metadata[REMOVED_KEY] = {"event": <id>, "target": <id or REMOVE_ALL>}`
  (`removed_by`). What is stored is the app's own write, whose replay rebuilds the event.
* **Snapshots.** LangGraph snapshots the view, so a log that hides messages takes no
  count-based snapshot; one LangGraph forces stores the view.
* **Pairs stay whole.** An AIMessage with calls and every result of those calls are one
  group: removing any member hides the group (`group`), and a later result for a hidden
  request is hidden too. Replacements that keep one side of a pair without the other are
  refused (`ToolPairingError`, naming both ids).
* **Replacements.** `[..., RemoveMessage(id=REMOVE_ALL_MESSAGES), r1, r2, ...]` hides the
  whole view and the view becomes `r1, r2, ...` as with `add_messages`. A replacement
  already logged with the same content stays where it is, visible; a new one goes right
  before the next kept one (else at the end). Kept messages must come in log order.
* **Delete and rewrite.** `RemoveMessage(id=X)` then, in the same write, a message under
  id X shows X again revised by an edit event (`edits.REPLACE_SOURCE`).
* **A hidden message** keeps its id taken, but frees its call ids, and derived ids count
  the view: a log read back from a snapshot of the view derives and re-keys the same.
* **Replays.** The event id comes from the log and the target (`removal_id`); removing a
  hidden message is a replay. Removing an id the log never held is refused
  (`AppendOnlyError`, in LangGraph's wording).
* **`Overwrite`** stays refused: write `RemoveMessage(id=REMOVE_ALL_MESSAGES)` and the new
  messages instead."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from threadlog.errors import AppendOnlyError, ToolPairingError
from threadlog.log.edits import (
    REPLACE_SOURCE,
    apply_edit,
    edits_of,
    is_version,
    item_id,
    update_edit,
)
from threadlog.log.messages import calls_of, coerce_message, digest

if TYPE_CHECKING:
    from threadlog.log.message_log import MessageLog

__all__ = [
    "REMOVED_KEY",
    "REMOVE_ALL_MESSAGES",
    "is_removal",
    "mark_removed",
    "removal_id",
    "removal_target",
    "removed_by",
    "unmarked",
]

REMOVED_KEY = "threadlog_removed"  # `response_metadata` key of a hidden message


def is_removal(value: Any) -> bool:
    if isinstance(value, RemoveMessage):
        return True
    return isinstance(value, Mapping) and value.get("type") == "remove" and "role" not in value


def removal_target(value: Any) -> str:
    target = value.id if isinstance(value, RemoveMessage) else value.get("id")
    return str(target or "")


def removal_id(count: int, anchor: str | None, target: str) -> str:
    seed = f"{count}\x00{anchor or ''}\x00{target}"
    return "tl-remove-" + hashlib.blake2b(seed.encode("utf-8"), digest_size=12).hexdigest()


def removed_by(message: BaseMessage) -> Mapping[str, Any] | None:
    """The removal record of a hidden message (`{"event", "target"}`), else None."""
    rec = message.response_metadata.get(REMOVED_KEY) if message.response_metadata else None
    return rec if isinstance(rec, Mapping) and rec.get("event") else None


def mark_removed(message: BaseMessage, event: str, target: str) -> BaseMessage:
    meta = {**message.response_metadata, REMOVED_KEY: {"event": event, "target": target}}
    return message.model_copy(update={"response_metadata": meta})


def unmarked(message: BaseMessage) -> BaseMessage:
    """`message` without its removal mark (as it was before the event)."""
    if removed_by(message) is None:
        return message
    meta = {k: v for k, v in message.response_metadata.items() if k != REMOVED_KEY}
    return message.model_copy(update={"response_metadata": meta})


@dataclass(slots=True)
class Replacing:
    """A REMOVE_ALL_MESSAGES being applied: its event, the ids it may hide, what it kept."""

    event: str
    visible: list[str]
    kept: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    last_kept: int = -1


def after_removals(
    log: MessageLog, run: list[Any], removed: set[str], *, stored: bool
) -> list[BaseMessage]:
    """A run after `RemoveMessage(id=X)` in one write: a message under id X is shown again,
    revised by a `source="replace"` edit; others as usual."""
    out: list[BaseMessage] = []
    for rewrite, items in groupby(
        run, lambda it: isinstance(i := item_id(it), str) and i in removed
    ):
        if not rewrite:
            out += log.extend_writes([list(items)], stored=stored)
            continue
        for item in items:
            iid = item_id(item)
            msg = coerce_message(item, position=len(log.messages), rekeyable=True)
            current = log._by_id[iid]
            eid = log._hidden.get(iid)
            if eid is not None:  # shown again, with the pair the removal hid with it
                show = [m for m in group(log, iid) if log._hidden.get(m) == eid]
                record_removal(log, new_removal_id(log, f"show\x00{iid}"), iid, (), show)
            if log._digest_of(current) != digest(msg) and not is_version(current, msg):
                earlier = len(edits_of(log._by_id[iid]))
                apply_edit(log, update_edit(msg, earlier, REPLACE_SOURCE), len(log.messages))
    return out


def apply_removal(log: MessageLog, target: str, position: int) -> bool:
    if target not in log._by_id:
        raise AppendOnlyError(
            f"RemoveMessage(id={target!r}): Attempting to delete a message with an ID "
            "that doesn't exist in this thread's log",
            message_id=target,
            role="remove",
            position=position,
            fix="remove a message the thread holds (state['messages'] lists them), or "
            "RemoveMessage(id=REMOVE_ALL_MESSAGES) for all",
        )
    hide = [mid for mid in group(log, target) if mid not in log._hidden]
    if not hide:
        return False
    record_removal(log, new_removal_id(log, target), target, hide, ())
    return True


def group(log: MessageLog, mid: str) -> list[str]:
    """`mid` with the other side of its tool pairs (a removal hides them together)."""
    msg = log._by_id[mid]
    if isinstance(msg, ToolMessage):
        call = log._calls.get(msg.tool_call_id)
        if call is None:
            return [mid]
        mid, msg = call.ai_id, log._by_id[call.ai_id]
    out = [mid]
    for c in calls_of(msg):
        call = log._calls.get(c.get("id") or "")
        if call is not None and call.ai_id == mid and call.result_id is not None:
            out.append(call.result_id)
    return out


def new_removal_id(log: MessageLog, target: str) -> str:
    eid = removal_id(len(log.messages), log._anchor, target)
    k = 0
    while eid in log._removals:  # the same log state twice (nothing new between)
        k += 1
        eid = removal_id(len(log.messages), log._anchor, f"{target}\x00{k}")
    return eid


def start_remove_all(log: MessageLog) -> Replacing:
    return Replacing(
        new_removal_id(log, REMOVE_ALL_MESSAGES),
        [m.id for m in log.messages if m.id not in log._hidden],  # type: ignore[misc]
    )


def replace_all(
    log: MessageLog, state: Replacing, run: list[Any], *, stored: bool
) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for item in run:
        added = log.extend_writes([[item]], stored=stored)
        if added:
            out += added
            state.added += [m.id for m in added]  # type: ignore[misc]
            state.pending += [m.id for m in added if not isinstance(m, ToolMessage)]  # type: ignore[misc]
            continue
        iid = item_id(item)
        if not isinstance(iid, str) or iid not in log._by_id:
            continue
        at = next(j for j, m in enumerate(log.messages) if m.id == iid)
        if at < state.last_kept:
            raise AppendOnlyError(
                f"RemoveMessage(id=REMOVE_ALL_MESSAGES) keeps message {iid!r} after a "
                "message that comes later in the log: kept messages cannot move",
                message_id=iid,
                position=at,
                fix="keep logged messages in the order the thread holds them",
            )
        if state.pending:
            moving = set(state.pending)
            new = [m for m in log.messages if m.id in moving]
            rest = [m for m in log.messages if m.id not in moving]
            at = next(j for j, m in enumerate(rest) if m.id == iid)
            log.messages[:] = [*rest[:at], *new, *rest[at:]]
            at += len(new)
            state.pending = []
        state.kept.append(iid)
        state.last_kept = at
    if state.kept:
        log._anchor = view_anchor(log)  # new replacements may sit before kept ones
    return out


def finish_remove_all(log: MessageLog, state: Replacing) -> None:
    kept = set(state.kept)
    hide = [mid for mid in state.visible if mid not in kept]
    show = [mid for mid in state.kept if mid in log._hidden]
    gone = set(hide) | (set(log._hidden) - set(show))
    for mid in [*state.kept, *state.added]:
        for other in group(log, mid):
            if other in gone:
                raise ToolPairingError(
                    f"RemoveMessage(id=REMOVE_ALL_MESSAGES) keeps message {mid!r} but not "
                    f"{other!r}, the other side of its tool pair: the view would hold a "
                    "split pair",
                    message_id=mid,
                    fix=f"keep both {mid!r} and {other!r}, or neither",
                )
    if hide or show:
        record_removal(log, state.event, REMOVE_ALL_MESSAGES, hide, show)


def record_removal(
    log: MessageLog, eid: str, target: str, hide: Sequence[str], show: Sequence[str]
) -> None:
    where = set(hide) | set(show)
    changes: list[tuple[str, BaseMessage, BaseMessage]] = []
    for j, m in enumerate(log.messages):
        mid = m.id
        if mid not in where:
            continue
        assert mid is not None
        after = mark_removed(m, eid, target) if mid not in log._hidden else unmarked(m)
        if mid in log._hidden:
            del log._hidden[mid]
        else:
            log._hidden[mid] = eid
        log.messages[j] = after
        log._by_id[mid] = after
        changes.append((mid, m, after))
    log._removals[eid] = changes
    log._journal.append(eid)
    log._anchor = view_anchor(log)


def restore_removal(log: MessageLog, message: BaseMessage) -> list[str]:
    rec = removed_by(message)
    if rec is None or message.id is None:
        return []
    eid = str(rec["event"])
    log._hidden[message.id] = eid
    new = eid not in log._removals
    log._removals.setdefault(eid, []).append((message.id, unmarked(message), message))
    return [eid] if new else []


def view_anchor(log: MessageLog) -> str | None:
    for m in reversed(log.messages):
        if not isinstance(m, ToolMessage) and m.id not in log._hidden:
            return m.id
    return None


def hide_late_result(log: MessageLog, msg: ToolMessage) -> BaseMessage:
    ai_id = log._calls[msg.tool_call_id].ai_id
    eid = log._hidden[ai_id]
    rec = removed_by(log._by_id[ai_id]) or {}
    marked = mark_removed(msg, eid, str(rec.get("target") or ai_id))
    assert msg.id is not None
    log._hidden[msg.id] = eid
    log._by_id[msg.id] = marked
    log._removals.setdefault(eid, []).append((msg.id, msg, marked))
    return marked
