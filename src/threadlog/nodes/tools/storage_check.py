"""Can the checkpointer store (and load back) what a tool returned? `check_storage` asks
the run's own serializer up front, on the whole `ToolMessage` as it will be stored:

* encoding fails → the offending type, found by walking the value;
* a strict msgpack allowlist would refuse to rebuild a type on load → that type;
* it loads back as other types (a tuple as a list, a model as a dict) → a *change*: the
  result is kept as returned, and the node logs a warning (`change_warning`).

The round trip is made only when something could change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ormsgpack
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.constants import CONFIG_KEY_CHECKPOINTER

from threadlog._upstream import msgpack_rebuilds

__all__ = ["StorageCheck", "change_warning", "check_storage", "serializer_for", "storage_problem"]

_DEFAULT = JsonPlusSerializer()
# Ext codes whose payload starts with (module, name, ...) — see jsonplus._msgpack_default.
_CONSTRUCTOR_CODES = {0, 1, 2, 4, 5}
_METHOD_CODE = 3
_NESTED_CODES = {6, 7}  # numpy arrays and delta snapshots: no user type inside to check


def serializer_for(config: RunnableConfig | None) -> SerializerProtocol:
    saver = (config or {}).get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)
    serde = getattr(saver, "serde", None)
    return serde if serde is not None else _DEFAULT


@dataclass(frozen=True, slots=True)
class StorageCheck:
    problem: str | None = None
    change: str | None = None


def storage_problem(message: ToolMessage, serde: SerializerProtocol) -> str | None:
    """Why `serde` cannot store `message` and load it back as written, or None."""
    return check_storage(message, serde).problem


def check_storage(message: ToolMessage, serde: SerializerProtocol) -> StorageCheck:
    try:
        kind, data = serde.dumps_typed(message)
    except Exception:
        # The message is stored as its model_dump(), so look for the culprit there.
        culprit = message.model_dump().get("artifact")
        return StorageCheck(f"type {_unencodable_type(culprit, serde)} cannot be serialized")
    if kind == "msgpack" and (rebuilds := msgpack_rebuilds(serde)) is not None:
        blocked: list[str] = []
        _walk(data, rebuilds, blocked)
        if blocked:
            return StorageCheck(
                f"type {blocked[0]} is not in the checkpointer's allowed_msgpack_modules, "
                "so it would not load back"
            )
    if message.artifact is None and isinstance(message.content, str):
        return StorageCheck()  # nothing in it can change type
    try:
        back = serde.loads_typed((kind, data))
    except Exception as e:
        return StorageCheck(f"it would not load back ({type(e).__name__}: {e})")
    for field in ("content", "artifact"):
        before = getattr(message, field)
        after = getattr(back, field, back.get(field) if isinstance(back, dict) else None)
        change = _changed(before, after, field)
        if change is not None:
            return StorageCheck(change=change)
    return StorageCheck()


def change_warning(tool: str, change: str) -> str:
    return (
        f"threadlog: tool {tool!r} returned a result the checkpointer stores as other "
        f"types: {change}. The result is kept as returned, but every later read of the "
        "thread (a resume, get_state, another process) holds the stored form; return "
        "plain data (lists, dicts, str, numbers) to make the two the same."
    )


def _same(before: Any, after: Any) -> bool:
    try:
        return bool(type(before) is type(after) and before == after)
    except Exception:  # an == without a truth value (numpy arrays): compare the parts
        return False


def _changed(before: Any, after: Any, where: str) -> str | None:
    """The first place where `after` (read back) has another type than `before`, or None."""
    if _same(before, after):
        return None
    stack: list[tuple[Any, Any, str]] = [(before, after, where)]
    while stack:
        b, a, path = stack.pop()
        if _same(b, a):
            continue
        if type(b) is not type(a):
            return f"{path} is a {_type_name(b)} and reads back as a {_type_name(a)}"
        pairs: list[tuple[Any, Any, str]] = []
        if isinstance(b, dict):
            pairs = [(v, a[k], f"{path}[{k!r}]") for k, v in b.items() if k in a]
        elif isinstance(b, (list, tuple)):
            pairs = [(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(b, a, strict=False))]
        stack.extend(reversed(pairs))  # depth first, in order: the first change is named
    return None


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


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
