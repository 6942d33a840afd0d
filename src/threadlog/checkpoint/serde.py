"""The strict checkpoint serializer: only known types are rebuilt from a stored blob.

LangGraph's `JsonPlusSerializer` stores objects as msgpack "constructor" records
(module, class, arguments) and, by default, imports and calls whatever a record names
(`LANGGRAPH_STRICT_MSGPACK` defaults to false). A blob written by anyone who can reach
the database could therefore run code on load.

`strict_serializer()` passes an explicit `allowed_msgpack_modules`, which switches the
allowlist on whatever the environment says: LangGraph's own safe set
(`SAFE_MSGPACK_TYPES`: messages, datetimes, `Send`, `Interrupt`, …) plus the types in
`THREADLOG_TYPES` and any `extra` a caller names. A record naming anything else is not
imported or called. LangGraph would then hand back the record's raw arguments as inert
data — a record naming `os.system` with argument `"rm -rf /"` would read back as the
string, which the message log takes as a user message. `strict_serializer()` refuses
instead: reading such a blob raises `threadlog.StoredDataError` naming the type (it
listens to LangGraph's serde events for the blocked record). threadlog's own state (the
message log and the `compactions` events) is messages and plain dicts, so it needs
nothing beyond the safe set; pickle fallback stays off.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadlog.errors import StoredDataError

__all__ = ["THREADLOG_TYPES", "StrictSerializer", "strict_serializer"]

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
    return StrictSerializer(pickle_fallback=False, allowed_msgpack_modules=tuple(allowed))


_loading = threading.local()
_listening = threading.Lock()
_listener_on: list[bool] = []


def _on_serde_event(event: SerdeEvent) -> None:
    blocked = getattr(_loading, "blocked", None)
    if blocked is not None and event["kind"] in ("msgpack_blocked", "msgpack_method_blocked"):
        name = f"{event['module']}.{event['name']}"
        blocked.append(f"{name}.{event['method']}" if "method" in event else name)


class StrictSerializer(JsonPlusSerializer):
    """LangGraph's serializer with the allowlist on, refusing blocked records loudly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with _listening:  # one process-wide listener; it only acts inside our loads
            if not _listener_on:
                register_serde_event_listener(_on_serde_event)
                _listener_on.append(True)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        outer = getattr(_loading, "blocked", None)
        blocked: list[str] = []
        _loading.blocked = blocked
        try:
            value = super().loads_typed(data)
        finally:
            _loading.blocked = outer
        if blocked:
            raise StoredDataError(
                f"a stored record names {', '.join(sorted(set(blocked)))}, which is not an "
                "allowed type: it was not imported or called, and it is not read back as "
                "data either. If your state stores this type, pass it to "
                "threadlog.checkpointer(url, allowed_types=[...]); otherwise the database "
                "holds a record threadlog did not write"
            )
        return value
