"""Where the run guard reads a thread's head and takes its locks: now in `backends`.

Kept so existing imports work: `HeadStore` (the protocol) and `StoredWrite` live in
`threadlog.checkpoint.backends.base`, each store beside its backend's other queries
(`backends.memory`, `backends.sqlite`, `backends.postgres`). New code asks
`backend_of(saver).head_store(location)`.
"""

from __future__ import annotations

from threadlog.checkpoint.backends.base import HeadStore, StoredWrite
from threadlog.checkpoint.backends.memory import MemoryHeadStore
from threadlog.checkpoint.backends.postgres import PostgresHeadStore
from threadlog.checkpoint.backends.sqlite import SqliteHeadStore

__all__ = [
    "HeadStore",
    "MemoryHeadStore",
    "PostgresHeadStore",
    "SqliteHeadStore",
    "StoredWrite",
]
