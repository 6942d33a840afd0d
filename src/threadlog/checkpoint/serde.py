"""The strict checkpoint serializer: only allowed types are rebuilt from a stored blob.

* `strict_serializer()`: LangGraph's safe set plus `THREADLOG_TYPES` and `extra`; a record
  naming anything else is neither imported nor called, and reading it raises
  `StoredDataError` naming the type. Pickle stays off. Only code widens the list
  (`allow_types`, `allow_state_types`, a reader's `--allow-type` / `THREADLOG_ALLOW_TYPES`).
* A reader's (`placeholders=True`) reads a blocked record as an `UndecodedValue`, or, shaped
  like a LangChain message, as a message of its stored `type` with placeholder content, its
  ids and call ids kept, marked `additional_kwargs["threadlog_undecoded"]`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ormsgpack
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)

from threadlog._upstream import msgpack_ext_hook, msgpack_rebuilds
from threadlog.checkpoint.shared_records import shared_for, stored_message
from threadlog.errors import StoredDataError

__all__ = [
    "ALLOW_TYPES_ENV",
    "THREADLOG_TYPES",
    "StrictSerializer",
    "UndecodedValue",
    "allow_types",
    "parse_type_names",
    "strict_serializer",
]

ALLOW_TYPES_ENV = "THREADLOG_ALLOW_TYPES"  # a reader's extra types: `module:Class`, ...
# What threadlog adds to LangGraph's safe set: none, its state is messages and plain dicts.
THREADLOG_TYPES: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class UndecodedValue:
    """A stored value a reader was not allowed to rebuild: only its type's name is read."""

    type: str  # `module.Class` as the record names it (stored text: show it escaped)

    def __repr__(self) -> str:
        return f"<not decoded: {self.type}>"

    __str__ = __repr__


_PLACEHOLDER_KEY = (UndecodedValue.__module__, UndecodedValue.__name__)


def strict_serializer(
    extra: Iterable[tuple[str, str] | type] = (), *, placeholders: bool = False
) -> JsonPlusSerializer:
    """A `JsonPlusSerializer` with the allowlist on; `extra`: classes or `(module, name)`."""
    allowed = (*THREADLOG_TYPES, *_keys(extra))
    serde = StrictSerializer(pickle_fallback=False, allowed_msgpack_modules=allowed)
    serde.placeholders = placeholders
    return serde


def _keys(types: Iterable[tuple[str, ...] | type]) -> list[tuple[str, str]]:
    return [(t.__module__, t.__name__) if isinstance(t, type) else (t[0], t[1]) for t in types]


def parse_type_names(text: str) -> list[tuple[str, str]]:
    """`module:Class` names, comma-separated (`--allow-type`, `THREADLOG_ALLOW_TYPES`);
    ValueError naming an item that is not one."""
    out: list[tuple[str, str]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        module, sep, name = item.partition(":")
        if not sep or not module.strip() or not name.strip() or ":" in name:
            raise ValueError(f"{item!r} is not a type name: write module:Class (app.mod:Profile)")
        out.append((module.strip(), name.strip()))
    return out


def allow_types(serde: Any, types: Iterable[tuple[str, ...] | type]) -> bool:
    """Add `types` to a strict serializer's allowlist in place; whether it changed."""
    if isinstance(serde, EncryptedSerializer):
        return allow_types(serde.serde, types)
    if not isinstance(serde, JsonPlusSerializer):
        return False
    wider = serde.with_msgpack_allowlist(_keys(types))
    if wider is serde:
        return False
    vars(serde).update(vars(wider))
    return True


_loading = threading.local()
_listening = threading.Lock()
_listener_on: list[bool] = []


class _QuietInReaders(logging.Filter):
    """Drops LangGraph's "Blocked deserialization" warning inside a reader's load."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            getattr(_loading, "quiet", False) and str(record.msg).startswith("Blocked deserial")
        )


logging.getLogger("langgraph.checkpoint.serde.jsonplus").addFilter(_QuietInReaders())


@contextmanager
def _loads(blocked: list[str] | None, *, quiet: bool) -> Iterator[None]:
    """This thread's load state (`blocked`: where blocked records are reported) meanwhile."""
    outer = getattr(_loading, "blocked", None), getattr(_loading, "quiet", False)
    _loading.blocked, _loading.quiet = blocked, quiet
    try:
        yield
    finally:
        _loading.blocked, _loading.quiet = outer


def _on_serde_event(event: SerdeEvent) -> None:
    blocked = getattr(_loading, "blocked", None)
    if blocked is not None and event["kind"] in ("msgpack_blocked", "msgpack_method_blocked"):
        name = f"{event['module']}.{event['name']}"
        blocked.append(f"{name}.{event['method']}" if "method" in event else name)


class StrictSerializer(JsonPlusSerializer):
    """LangGraph's serializer refusing blocked records, or reading them as placeholders."""

    placeholders: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with _listening:  # one process-wide listener; it only acts inside our loads
            if not _listener_on:
                register_serde_event_listener(_on_serde_event)
                _listener_on.append(True)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        shared = shared_for(self) if data[0] == "msgpack" else None
        if shared is not None:  # one read's writes: one object per distinct message
            return shared.loads(data)
        return self._strict_loads(data)

    def loads_shared(self, blob: bytes, seen: dict[tuple[int, bytes], Any]) -> Any:
        """A msgpack blob as `loads_typed` reads it, each message record shared through `seen`."""
        hook = msgpack_ext_hook(self)
        if hook is None:
            return self._strict_loads(("msgpack", blob))
        blocked: list[str] = []

        def record(code: int, payload: bytes) -> Any:
            key = (code, payload)
            if (hit := seen.get(key)) is not None:
                return hit
            before = len(blocked)
            value = stored_message(code, payload, record)
            if value is None:
                value = hook(code, payload)
            if len(blocked) == before and isinstance(value, BaseMessage):
                seen[key] = value
            return value

        # Not `_loads`: this runs once per stored write of a cold read, a generator each adds up.
        outer = getattr(_loading, "blocked", None), getattr(_loading, "quiet", False)
        _loading.blocked, _loading.quiet = blocked, True  # reported by the read below
        try:
            value = ormsgpack.unpackb(blob, ext_hook=record, option=_OPT)
        finally:
            _loading.blocked, _loading.quiet = outer
        return self._strict_loads(("msgpack", blob)) if blocked else value

    def _strict_loads(self, data: tuple[str, bytes]) -> Any:
        blocked: list[str] = []
        with _loads(blocked, quiet=self.placeholders):
            value = super().loads_typed(data)
        if not blocked:
            return value
        if self.placeholders:
            return _placeholders(self, data)
        names = sorted(set(blocked))
        raise StoredDataError(
            f"a stored record names {', '.join(names)}: not an allowed type, so threadlog "
            "did not rebuild it (nor read its fields back as data). If your "
            "state stores this type, allow your graph's state types with "
            "threadlog.allow_state_types(graph) (or checkpointer(url, allowed_types=[...])); "
            f"the threadlog command reads it with --allow-type {_flag(names[0])} or "
            f"{ALLOW_TYPES_ENV}. Otherwise the database holds a record your app did not write"
        )


def _flag(name: str) -> str:
    module, _, cls = name.rpartition(".")
    return f"{module}:{cls}" if module else name


_KW_RECORDS = (EXT_PYDANTIC_V2, EXT_PYDANTIC_V1, EXT_CONSTRUCTOR_KW_ARGS)
_CONSTRUCTORS = {
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_METHOD_SINGLE_ARG,
    *_KW_RECORDS,
}
_OPT = ormsgpack.OPT_NON_STR_KEYS


def _placeholders(serde: StrictSerializer, data: tuple[str, bytes]) -> Any:
    """`data` with each blocked record rewritten as an `UndecodedValue`, then read."""
    kind, blob = data
    allowed = msgpack_rebuilds(serde)
    if kind != "msgpack" or allowed is None:
        return JsonPlusSerializer.loads_typed(serde, data)

    def rewrite(code: int, payload: bytes) -> ormsgpack.Ext:
        if code in _CONSTRUCTORS:
            tup = ormsgpack.unpackb(payload, ext_hook=rewrite, option=_OPT)
            key = (tup[0], tup[1], tup[3]) if code == EXT_METHOD_SINGLE_ARG else (tup[0], tup[1])
            if not allowed(key):
                name = ".".join(str(k) for k in key)
                as_message = _message_placeholder(code, tup, name)
                if as_message is not None:
                    return as_message
                record = [*_PLACEHOLDER_KEY, name]
                return ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(record))
            return ormsgpack.Ext(code, ormsgpack.packb(tup, option=_OPT))
        if code == EXT_DELTA_SNAPSHOT:
            inner = ormsgpack.unpackb(payload, ext_hook=rewrite, option=_OPT)
            return ormsgpack.Ext(code, ormsgpack.packb(inner, option=_OPT))
        return ormsgpack.Ext(code, payload)

    clean = ormsgpack.packb(ormsgpack.unpackb(blob, ext_hook=rewrite, option=_OPT), option=_OPT)
    reader = serde.with_msgpack_allowlist([_PLACEHOLDER_KEY])
    with _loads(getattr(_loading, "blocked", None), quiet=True):
        return JsonPlusSerializer.loads_typed(reader, ("msgpack", clean))


# A blocked record of these stored `type`s reads as this LangChain class (module doc).
_MESSAGE_CLASSES: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
}
_KEPT_FIELDS = {"ai": ("tool_calls",), "tool": ("tool_call_id", "status")}


def _message_placeholder(code: int, tup: list[Any], name: str) -> ormsgpack.Ext | None:
    fields = tup[2] if code in _KW_RECORDS else None
    if not isinstance(fields, Mapping) or "content" not in fields:
        return None
    kind = str(fields.get("type"))
    if (cls := _MESSAGE_CLASSES.get(kind)) is None:
        return None
    msg: dict[str, Any] = {
        "content": f"<not decoded: {name}>",
        "additional_kwargs": {"threadlog_undecoded": name},
    }
    if isinstance(fields.get("id"), str):
        msg["id"] = fields["id"]
    msg.update({key: fields[key] for key in _KEPT_FIELDS.get(kind, ()) if key in fields})
    record = [cls.__module__, cls.__name__, msg]
    return ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb(record, option=_OPT))
