"""The strict checkpoint serializer: only known types are rebuilt from a stored blob.

LangGraph's `JsonPlusSerializer` stores objects as msgpack "constructor" records
(module, class, arguments) and, by default, imports and calls whatever a record names
(`LANGGRAPH_STRICT_MSGPACK` defaults to false). A blob written by anyone who can reach
the database could therefore run code on load.

`strict_serializer()` passes an explicit `allowed_msgpack_modules`, which switches the
allowlist on whatever the environment says: LangGraph's own safe set
(`SAFE_MSGPACK_TYPES`: messages, datetimes, `Send`, `Interrupt`, …) plus the types in
`THREADLOG_TYPES` and any `extra` a caller names. A record naming anything else is not
imported or called; LangGraph logs "Blocked deserialization of …" and returns the
record's raw arguments as inert data. threadlog's own state (the message log and the
`compactions` events) is messages and plain dicts, so it needs nothing beyond the safe
set; pickle fallback stays off.
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["THREADLOG_TYPES", "strict_serializer"]

THREADLOG_TYPES: tuple[tuple[str, str], ...] = ()
"""(module, name) pairs threadlog adds to LangGraph's safe set: none today, because
the log and compaction events are messages and plain dicts (kept as the one place to add
some)."""


def strict_serializer(extra: Iterable[tuple[str, str] | type] = ()) -> JsonPlusSerializer:
    """A `JsonPlusSerializer` with the msgpack allowlist on (see module doc).

    `extra`: more types your state stores, as classes or `(module, name)` pairs.
    """
    allowed: list[tuple[str, str]] = list(THREADLOG_TYPES)
    for item in extra:
        if isinstance(item, type):
            allowed.append((item.__module__, item.__name__))
        else:
            allowed.append((item[0], item[1]))
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=tuple(allowed))
