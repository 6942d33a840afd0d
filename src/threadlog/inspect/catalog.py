"""Which threads a checkpointer holds: ids, checkpoint counts, first and newest checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from langgraph.checkpoint.base import BaseCheckpointSaver

from threadlog.checkpoint.backends import backend_of

__all__ = [
    "Head",
    "checkpoint_ids",
    "head_errors",
    "id_time",
    "resolve_checkpoint",
    "thread_heads",
]

_GREGORIAN_OFFSET = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01


@dataclass(frozen=True, slots=True)
class Head:
    thread_id: str
    head_id: str
    first_id: str
    checkpoints: int


def id_time(checkpoint_id: str) -> str:
    """The creation time a uuid6 checkpoint id carries, ISO 8601 UTC ("" if not uuid6)."""
    try:
        u = UUID(checkpoint_id)
    except ValueError:
        return ""
    if u.version != 6:
        return ""
    ticks = ((u.int >> 80) << 12) | ((u.int >> 64) & 0x0FFF)
    seconds = (ticks - _GREGORIAN_OFFSET) / 10_000_000
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def thread_heads(saver: BaseCheckpointSaver[Any]) -> list[Head]:
    heads = [Head(t, h, f, n) for t, h, f, n in backend_of(saver).thread_heads()]
    heads.sort(key=lambda h: h.head_id, reverse=True)
    return heads


def head_errors(saver: BaseCheckpointSaver[Any], heads: list[Head]) -> dict[str, list[str]]:
    """`{thread_id: [error text, ...]}` for tasks that failed from each thread's head."""
    found = backend_of(saver).head_errors([(h.thread_id, h.head_id) for h in heads])
    out: dict[str, list[str]] = {}
    for tid, _, value in found:
        # Savers store an error as its repr (a str) or as the exception itself.
        text = value if isinstance(value, str) else f"{type(value).__name__}: {value}"
        out.setdefault(tid, []).append(text)
    return out


def checkpoint_ids(
    saver: BaseCheckpointSaver[Any], thread_id: str, namespace: str = ""
) -> list[str]:
    """The ids of a thread's checkpoints in `namespace`, oldest first (no blob decoded)."""
    return backend_of(saver).checkpoint_ids(thread_id, namespace)


def resolve_checkpoint(
    ids: Sequence[str],
    checkpoint: str,
    thread_id: str,
    *,
    see: str = "threadlog inspect",
    error: type[LookupError] = LookupError,
) -> str:
    """The one id of `ids` that is `checkpoint` or ends/starts with it; else `error`."""
    if checkpoint in ids:
        return checkpoint
    found = [i for i in ids if i.endswith(checkpoint) or i.startswith(checkpoint)]
    if len(found) == 1:
        return found[0]
    what = "matches no" if not found else f"matches {len(found)}"
    raise error(
        f"checkpoint {checkpoint!r} {what} checkpoint of thread {thread_id!r}; "
        f"use a full id or a longer suffix (see {see})"
    )
