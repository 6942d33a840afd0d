"""Deletions as events: what `RemoveMessage` means to an append-only log.

LangGraph apps shorten their history with `RemoveMessage(id)` and
`RemoveMessage(id=REMOVE_ALL_MESSAGES)` followed by replacement messages (the LangChain
Academy summarizing chatbot, LangChain's `SummarizationMiddleware`, "keep the last N"
nodes). threadlog records each as a **removal event** and deletes nothing:

* **The view.** What the app reads (`state["messages"]`, what its nodes, `to_wire` and
  the context policy see: `MessageLog.view`) no longer holds a removed message. The log
  (`MessageLog.messages`, the audit) keeps it, marked with the event that hid it:
  `response_metadata[REMOVED_KEY] = {"event": <id>, "target": <id or REMOVE_ALL>}`
  (`removed_by`). What is stored is the app's own write — the `RemoveMessage` (or its
  `{"type": "remove"}` dict), which every serializer round-trips — and replaying it
  rebuilds the event; a thread written before removals existed reads the same.
* **Snapshots.** LangGraph snapshots a delta channel's `get()`, the view, so a log that
  hides messages takes no count-based snapshot (`MessageLogChannel`); one LangGraph
  forces (a fork's first checkpoint, its 5000-step cap) stores the view: the removed
  messages stay readable from the checkpoints before it.
* **Pairs stay whole.** Removing one side of a tool pair hides the whole pair: an
  AIMessage with calls and every result of those calls are one *group*, and removing
  any member hides the group (`group_of`). A result written later for a call of a
  hidden request is hidden by the same event. `REMOVE_ALL_MESSAGES` followed by
  replacements that keep a result without its request (or the reverse) is refused,
  naming both ids (`ToolPairingError`): the log never guesses which side was meant.
* **Replacements.** In one write, `[..., RemoveMessage(id=REMOVE_ALL_MESSAGES), r1, r2,
  ...]` hides every message in the view (the write's own earlier messages included) and
  the view becomes `r1, r2, ...` as `add_messages` does. A replacement already in the
  log with the same content (`SummarizationMiddleware` keeps the recent messages under
  their ids) stays where it is and visible; a new one is logged right before the next
  kept message that follows it in the write (else at the end), so the view keeps the
  write's order. Kept messages must come in log order (they cannot move).
* **Delete and rewrite.** `RemoveMessage(id=X)` followed, in the same write, by a message
  under id X shows X again (with the pair the removal hid) revised by an edit event
  (`threadlog.log.edits.REPLACE_SOURCE`): the audit keeps every version.
* **What a hidden message still counts for.** Its id stays taken (re-sending it is a
  replay, other content a conflict), but its call ids are free for a later reply, and
  derived ids count the view — so a log read back from a snapshot of the view (which never
  saw the hidden messages) derives and re-keys exactly as the live one did.
* **Replays.** The event's id comes from the log it applies to and its target
  (`removal_id`), so replaying the stored write rebuilds the same event; removing a
  message already hidden is a replay (nothing recorded). Removing an id the log never
  held is refused (`AppendOnlyError`, "Attempting to delete a message with an ID that
  doesn't exist", LangGraph's own wording).
* **`Overwrite`** stays refused: write `RemoveMessage(id=REMOVE_ALL_MESSAGES)` and the
  new messages instead, which is recorded as a removal event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

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

REMOVED_KEY = "threadlog_removed"
"""`response_metadata` key of a message a removal event hid: `{"event", "target"}`."""


def is_removal(value: Any) -> bool:
    """Whether a written item is a removal: a `RemoveMessage`, or its dict read back
    (LangGraph Server's stores give `{"type": "remove", "id": ...}`)."""
    if isinstance(value, RemoveMessage):
        return True
    return isinstance(value, Mapping) and value.get("type") == "remove" and "role" not in value


def removal_target(value: Any) -> str:
    """The id a removal names (`REMOVE_ALL_MESSAGES` for all)."""
    target = value.id if isinstance(value, RemoveMessage) else value.get("id")
    return str(target or "")


def removal_id(count: int, anchor: str | None, target: str) -> str:
    """The deterministic id of a removal event: from the log's length and last non-tool
    message when it applies, and its target — a replay of the stored write rebuilds it."""
    seed = f"{count}\x00{anchor or ''}\x00{target}"
    return "tl-remove-" + hashlib.blake2b(seed.encode("utf-8"), digest_size=12).hexdigest()


def removed_by(message: BaseMessage) -> Mapping[str, Any] | None:
    """The removal record of a hidden message (`{"event", "target"}`), else None."""
    rec = message.response_metadata.get(REMOVED_KEY) if message.response_metadata else None
    return rec if isinstance(rec, Mapping) and rec.get("event") else None


def mark_removed(message: BaseMessage, event: str, target: str) -> BaseMessage:
    """A copy of `message` marked as hidden by removal `event`."""
    meta = {**message.response_metadata, REMOVED_KEY: {"event": event, "target": target}}
    return message.model_copy(update={"response_metadata": meta})


def unmarked(message: BaseMessage) -> BaseMessage:
    """`message` without its removal mark (as it was before the event)."""
    if removed_by(message) is None:
        return message
    meta = {k: v for k, v in message.response_metadata.items() if k != REMOVED_KEY}
    return message.model_copy(update={"response_metadata": meta})
