"""Checkpoint helpers: a ready saver from a URL, the run guard, the history cache.

One file per idea: `saver` (`checkpointer(url)` / `acheckpointer(url)`), `serde` (the
strict msgpack allowlist), `guard` (`GuardedSaver`: whole turns per thread, no silent
forks), `heads` (per-backend thread heads and cross-process locks), `input_check` (bad
input refused before it is stored), `recover` (results a crashed step had already
stored), `cache` + `cache_sql` (the warm-process history cache and its one-query walks),
`own_writes` (what this saver stored itself: a warm turn's walk with no query).

Names are loaded on first use, so `import threadlog` does not import a saver backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadlog.checkpoint.cache import HistoryCache, with_history_cache
    from threadlog.checkpoint.guard import GuardedSaver
    from threadlog.checkpoint.saver import SCHEMES, acheckpointer, checkpointer, parse_url
    from threadlog.checkpoint.serde import strict_serializer

_WHERE = {
    "SCHEMES": "saver",
    "acheckpointer": "saver",
    "checkpointer": "saver",
    "parse_url": "saver",
    "GuardedSaver": "guard",
    "HistoryCache": "cache",
    "with_history_cache": "cache",
    "strict_serializer": "serde",
}

__all__ = [
    "SCHEMES",
    "GuardedSaver",
    "HistoryCache",
    "acheckpointer",
    "checkpointer",
    "parse_url",
    "strict_serializer",
    "with_history_cache",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'threadlog.checkpoint' has no attribute {name!r}")
    return getattr(importlib.import_module(f"threadlog.checkpoint.{module}"), name)
