"""Can the checkpointer store (and load back) what a tool returned? Asked at the tool node.

LangGraph serializes a node's writes only when it saves the step, so an artifact the
serializer cannot encode fails later with "Type is not msgpack serializable: ToolMessage",
naming neither the tool nor the type. `storage_problem` asks the run's own serializer
(the checkpointer's `serde`, else LangGraph's default `JsonPlusSerializer`) up front,
on the whole `ToolMessage` as it will be stored (pydantic's `model_dump`, which turns
dataclasses and models inside the artifact into dicts):

* encoding fails → the offending type, found by walking the value;
* encoding works but a strict msgpack allowlist (`allowed_msgpack_modules`, or
  `LANGGRAPH_STRICT_MSGPACK=true`) would refuse to rebuild a type on load → that type,
  because the thread would read back something other than what the tool returned.

It returns a short description of the problem, or None when the value round-trips.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ormsgpack
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.constants import CONFIG_KEY_CHECKPOINTER

from threadlog._upstream import msgpack_rebuilds

__all__ = ["serializer_for", "storage_problem"]

_DEFAULT = JsonPlusSerializer()
# Ext codes whose payload starts with (module, name, ...) — see jsonplus._msgpack_default.
_CONSTRUCTOR_CODES = {0, 1, 2, 4, 5}
_METHOD_CODE = 3
_NESTED_CODES = {6, 7}  # numpy arrays and delta snapshots: no user type inside to check


def serializer_for(config: RunnableConfig | None) -> SerializerProtocol:
    """The serializer the running graph's checkpointer will use for this write."""
    saver = (config or {}).get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)
    serde = getattr(saver, "serde", None)
    return serde if serde is not None else _DEFAULT


def storage_problem(message: ToolMessage, serde: SerializerProtocol) -> str | None:
    """Why `serde` cannot store `message` and load it back as written, or None."""
    try:
        kind, data = serde.dumps_typed(message)
    except Exception:
        # The message is stored as its model_dump(), so look for the culprit there.
        culprit = message.model_dump().get("artifact")
        return f"type {_unencodable_type(culprit, serde)} cannot be serialized"
    if kind != "msgpack":
        return None
    rebuilds = msgpack_rebuilds(serde)
    if rebuilds is None:
        return None
    blocked: list[str] = []
    _walk(data, rebuilds, blocked)
    if blocked:
        return (
            f"type {blocked[0]} is not in the checkpointer's allowed_msgpack_modules, "
            "so it would not load back"
        )
    return None


def _walk(data: bytes, rebuilds: Callable[[tuple[str, ...]], bool], blocked: list[str]) -> None:
    def hook(code: int, payload: bytes) -> Any:
        if code in _NESTED_CODES:
            return None
        tup = ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        key: tuple[str, ...]
        if code in _CONSTRUCTOR_CODES:
            key = (tup[0], tup[1])
        elif code == _METHOD_CODE:
            key = (tup[0], tup[1], tup[3])
        else:
            return None
        if not rebuilds(key):
            blocked.append(f"{key[0]}.{key[1]}")
        return None

    ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)


def _unencodable_type(value: Any, serde: SerializerProtocol) -> str:
    """The innermost part of `value` that does not encode, as a qualified type name."""
    seen: set[int] = set()
    node = value
    while id(node) not in seen:
        seen.add(id(node))
        children: list[Any]
        if isinstance(node, dict):
            children = [*node.keys(), *node.values()]
        elif isinstance(node, (list, tuple, set, frozenset)):
            children = list(node)
        else:
            break
        bad = next((c for c in children if not _encodes(c, serde)), None)
        if bad is None:
            break
        node = bad
    t = type(node)
    return f"{t.__module__}.{t.__qualname__}"


def _encodes(value: Any, serde: SerializerProtocol) -> bool:
    try:
        serde.dumps_typed(value)
    except Exception:
        return False
    return True
