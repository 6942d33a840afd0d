"""Writes that hold events (edits, `update_state` revisions, removals): applied item by
item on a copy of the log, whose state the log then adopts (all or nothing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage

from threadlog.errors import EditError, ToolPairingError
from threadlog.log.edits import EDIT_TYPE, UPDATE_TYPE, apply_edit, apply_update, is_update
from threadlog.log.refusals import parallel_error
from threadlog.log.removals import (
    REMOVE_ALL_MESSAGES,
    Replacing,
    after_removals,
    apply_removal,
    finish_remove_all,
    is_removal,
    removal_target,
    replace_all,
    start_remove_all,
)

if TYPE_CHECKING:
    from threadlog.log.message_log import MessageLog

_END = object()  # marks the end of a write


def has_event(write: Sequence[Any]) -> bool:
    # The hot path: usually not.
    for raw in write:
        if type(raw) is RemoveMessage:
            return True
        if isinstance(raw, dict) and raw.get("type") in (EDIT_TYPE, UPDATE_TYPE, "remove"):
            return True
    return False


def _is_event(raw: Any) -> bool:
    return (isinstance(raw, Mapping) and raw.get("type") in (EDIT_TYPE, UPDATE_TYPE)) or is_removal(
        raw
    )


def extend_with_events(
    log: MessageLog,
    writes: Sequence[Sequence[Any]],
    *,
    single_writer: bool,
    stored: bool,
    dry_run: bool,
    restored: Mapping[str, AIMessage] | None = None,
) -> list[BaseMessage]:
    """`MessageLog.extend_writes` for writes holding events. Edits do not count as
    conversation for the parallel-writer rule: parallel approval branches each edit their
    own call (`base`, see `threadlog.log.edits`)."""
    trial = log.copy()
    for mid, ai in (restored or {}).items():  # requests as logged (`resent_as_edits`)
        trial._by_id[mid] = ai
        trial._digests.pop(mid, None)
        trial.messages = [ai if m.id == mid else m for m in trial.messages]
    added: list[BaseMessage] = []
    conversational: list[tuple[int, list[BaseMessage]]] = []
    for w, write in enumerate(writes):
        here: list[BaseMessage] = []
        run: list[Any] = []
        replacing: Replacing | None = None  # after REMOVE_ALL_MESSAGES in this write
        removed_here: set[str] = set()  # RemoveMessage targets earlier in this write
        for raw in [*write, _END]:
            if raw is not _END and not _is_event(raw):
                run.append(raw)
                continue
            if run:
                if replacing is not None:
                    here += replace_all(trial, replacing, run, stored=stored)
                elif removed_here:
                    here += after_removals(trial, run, removed_here, stored=stored)
                else:
                    here += trial.extend_writes([run], stored=stored)
                run = []
            if replacing is not None:
                finish_remove_all(trial, replacing)
                replacing = None
            if raw is _END:
                break
            if is_update(raw):
                here += apply_update(trial, raw, stored=stored)
            elif is_removal(raw):
                target = removal_target(raw)
                if target == REMOVE_ALL_MESSAGES:
                    replacing = start_remove_all(trial)
                    removed_here.clear()
                else:
                    apply_removal(trial, target, len(trial.messages))
                    removed_here.add(target)
            else:
                try:
                    apply_edit(trial, raw, len(trial.messages))
                except (EditError, ToolPairingError):
                    if not (stored and raw.get("source") == "resent"):
                        raise
                    # Read back, a stored in-place change the edit rules refuse (a
                    # request changed after its calls ran) reads as it was logged.
        added += here
        talk = [m for m in here if not isinstance(m, ToolMessage)]
        if talk:
            conversational.append((w, talk))
    if single_writer and len(conversational) > 1:
        raise parallel_error(conversational, len(log.messages))
    if not dry_run:
        log.adopt(trial)
    return added
