"""A checkpointer's storage as threadlog reads it: one `Backend` per saver kind.

`backend_of(saver)` (the one place that unwraps a saver and looks at its class) gives the
saver's `Backend`: the run guard's `head_store(location)`, the history cache's walks
(`walk` / `awalk`, `read` / `aread`), the inspector's listings and sizes. `base` holds the
protocol and the sans-IO query steps; `memory`, `sqlite`, `postgres` hold every SQL
statement and lock threadlog uses on LangGraph's tables. Nothing outside this package
knows a table name.
"""

from __future__ import annotations

from threadlog.checkpoint.backends.base import (
    Backend,
    HeadRow,
    HeadStore,
    StoredWrite,
    Walk,
    backend_of,
    unwrap,
)
from threadlog.checkpoint.backends.memory import MemoryBackend, MemoryHeadStore
from threadlog.checkpoint.backends.postgres import (
    AsyncPostgresBackend,
    PostgresBackend,
    PostgresHeadStore,
)
from threadlog.checkpoint.backends.sqlite import (
    AsyncSqliteBackend,
    SqliteBackend,
    SqliteHeadStore,
)

__all__ = [
    "AsyncPostgresBackend",
    "AsyncSqliteBackend",
    "Backend",
    "HeadRow",
    "HeadStore",
    "MemoryBackend",
    "MemoryHeadStore",
    "PostgresBackend",
    "PostgresHeadStore",
    "SqliteBackend",
    "SqliteHeadStore",
    "StoredWrite",
    "Walk",
    "backend_of",
    "unwrap",
]
