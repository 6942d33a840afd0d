"""The history cache's reads of LangGraph's tables: now `Backend.walk` / `read` in `backends`.

Kept so existing imports work, each a thin call of the saver's backend (no SQL here):
`sqlite_walk` / `postgres_walk` are `backend_of(saver).walk(...)`, `sqlite_read` is
`backend_of(saver).read(...)`, `underlying(saver, cls)` is the concrete saver under
`saver`'s wrappers when it is a `cls`. New code calls `backend_of(saver)` directly.
"""

from __future__ import annotations

import sys
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite

from threadlog.checkpoint.backends import backend_of, unwrap

__all__ = [
    "postgres_saver_class",
    "postgres_walk",
    "sqlite_read",
    "sqlite_saver_class",
    "sqlite_walk",
    "underlying",
]

try:
    from langgraph.checkpoint.sqlite import SqliteSaver as sqlite_saver_class
except ImportError:  # pragma: no cover - sqlite saver not installed
    sqlite_saver_class = None  # type: ignore[assignment,misc]


def postgres_saver_class() -> type[Any] | None:
    """PostgresSaver, if its module is already loaded: a saver instance implies it is, and
    SQLite users then never import psycopg (`import threadlog` stays light)."""
    module = sys.modules.get("langgraph.checkpoint.postgres")
    return getattr(module, "PostgresSaver", None)


def underlying(saver: Any, cls: type[Any] | None) -> Any:
    """The concrete saver under `saver`'s wrappers (`backends.unwrap`), if it is a `cls`."""
    raw = None if saver is None else unwrap(saver)
    return raw if cls is not None and isinstance(raw, cls) else None


def sqlite_walk(
    saver: Any, thread_id: str, ns: str, channels: list[str], target: str, cached_id: str,
    max_walk: int,
) -> dict[str, list[PendingWrite]] | None:
    """Each channel's writes from `cached_id` up to `target`, or None (not reached)."""
    return backend_of(saver).walk(thread_id, ns, channels, target, cached_id, max_walk)


postgres_walk = sqlite_walk


def sqlite_read(
    saver: Any, thread_id: str, ns: str, channels: list[str], target: str
) -> dict[str, DeltaChannelHistory] | None:
    """`SqliteSaver.get_delta_channel_history`, for a cold read of a long thread."""
    return backend_of(saver).read(thread_id, ns, channels, target)
