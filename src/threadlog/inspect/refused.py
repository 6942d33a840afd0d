"""Writes the message log refused: the error a run raised that no checkpoint stores.

Contract: `refused(...)` finds, for a checkpoint whose step was not applied (no `loop`
child), the pending writes each message-log channel refuses when handed them as the run
did (`MessageLogChannel.update`), and returns one `(task, error)` per refusal ("the log
refused the write to messages: ToolPairingError: …"). Nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadlog.channel import MessageLogChannel
from threadlog.errors import MessageLogError

__all__ = ["refused"]


def refused(
    channels: Mapping[str, Any],
    pending_writes: Sequence[tuple[str, str, Any]],
    values: Mapping[str, Any],
    task_names: Mapping[str, str],
) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, spec in channels.items():
        if not isinstance(spec, MessageLogChannel):
            continue
        writes = [(tid, v) for tid, ch, v in pending_writes if ch == key]
        if not writes:
            continue
        try:
            channel = spec.from_checkpoint(list(values.get(key) or []))
            channel.update([v for _, v in writes])
        except (MessageLogError, ValueError, TypeError) as exc:  # what the run raised too
            tasks = dict.fromkeys(task_names.get(t) or f"task {t[:8]}" for t, _ in writes)
            what = f"{type(exc).__name__}: {exc}"
            out.append((", ".join(tasks), f"the log refused the write to {key}: {what}"))
    return out
