"""A checkpointer's storage as threadlog reads it: one `Backend` per saver kind.

`backend_of(saver)` is the one place that looks at a saver's class; a saver module that is
not loaded cannot have an instance, so nothing is imported to decide. Nothing outside this
package knows a table name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from threadlog.checkpoint.backends.base import (
    Backend,
    HeadRow,
    HeadStore,
    Link,
    Plan,
    Rewrite,
    StoredWrite,
    Walk,
    lock_bound,
    release_lock,
    take_lock,
    unwrap,
)
from threadlog.checkpoint.backends.memory import MemoryBackend, MemoryHeadStore
from threadlog.checkpoint.backends.postgres import (
    LOCK_APPLICATION_NAME,
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
    "LOCK_APPLICATION_NAME",
    "AsyncPostgresBackend",
    "AsyncSqliteBackend",
    "Backend",
    "HeadRow",
    "HeadStore",
    "Link",
    "MemoryBackend",
    "MemoryHeadStore",
    "Plan",
    "PostgresBackend",
    "PostgresHeadStore",
    "Rewrite",
    "SqliteBackend",
    "SqliteHeadStore",
    "StoredWrite",
    "Walk",
    "backend_of",
    "lock_bound",
    "release_lock",
    "take_lock",
    "unwrap",
]


# (module, class): the saver classes whose storage threadlog reads. Subclasses (the
# capabilities threadlog mixes into a saver's class) count; `ShallowPostgresSaver`'s
# tables have another shape, so it is "any other saver".
_KNOWN: tuple[tuple[str, str, Callable[[Any, Any], Backend]], ...] = (
    ("langgraph.checkpoint.memory", "InMemorySaver", MemoryBackend),
    ("langgraph.checkpoint.sqlite", "SqliteSaver", SqliteBackend),
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", AsyncSqliteBackend),
    ("langgraph.checkpoint.postgres", "PostgresSaver", PostgresBackend),
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", AsyncPostgresBackend),
)


def backend_of(saver: Any) -> Backend:
    """The `Backend` of `saver` (any other saver's is the base `Backend`: its API)."""
    raw = unwrap(saver)
    for module, name, make in _KNOWN:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(raw, cls):
            return make(raw, saver)
    return Backend(raw, saver)
