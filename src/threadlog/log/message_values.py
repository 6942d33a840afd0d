"""What a message may carry: text that is valid Unicode, bounded nesting, storable values.
Each violation is refused with `InvalidMessageError` naming the message and the field path.

Contract: `check_message_values(message, position)` raises for

* `content` that is not a string or a list (None, bytes, numbers…);
* a string anywhere in `content`, `name`, the tool calls, `additional_kwargs` or
  `response_metadata` that is not valid Unicode (a lone surrogate);
* nesting deeper than `MAX_DEPTH` levels in any of those fields;
* a value in `additional_kwargs` / `response_metadata` / tool arguments that LangGraph's
  serializer cannot store (JSON-like data and the types its msgpack encoder knows pass).

`check_dict_values(value, ...)` runs the same walk over a message dict before conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from threadlog.errors import InvalidMessageError

__all__ = ["MAX_DEPTH", "check_dict_values", "check_message_values"]

MAX_DEPTH = 100  # deepest nesting accepted in any message field

_PLAIN = (str, int, float, bool, type(None))


class _Refused(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path, problem)
        self.path = path
        self.problem = problem


def _text_ok(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Refused(
            path,
            f"holds a lone surrogate ({text[exc.start]!r} at character {exc.start}), "
            "which is not valid Unicode and cannot be stored as sent",
        ) from None


def _walk(value: Any, path: str, depth: int, *, storable: bool) -> None:
    if depth > MAX_DEPTH:
        raise _Refused(path, f"is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        _text_ok(value, path)
    elif isinstance(value, _PLAIN):
        return
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                _text_ok(k, f"{path} key")
            _walk(v, f"{path}[{k!r}]", depth + 1, storable=storable)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _walk(v, f"{path}[{i}]", depth + 1, storable=storable)
    elif storable:
        _storable(value, path)


_SERDE: list[Any] = []


def _storable(value: Any, path: str) -> None:
    if not _SERDE:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        _SERDE.append(JsonPlusSerializer())
    try:
        _SERDE[0].dumps_typed(value)
    except Exception as exc:
        raise _Refused(
            path,
            f"is a {type(value).__name__}, which the checkpointer cannot store ({exc})",
        ) from None


def _refuse(err: _Refused, message_id: Any, role: str | None, position: int | None) -> None:
    path = err.path if len(err.path) <= 60 else err.path[:60] + "…"
    raise InvalidMessageError(
        f"{path} {err.problem}",
        message_id=message_id if isinstance(message_id, str) else None,
        role=role,
        position=position,
        fix="send text as valid Unicode strings and extra fields as JSON-like data "
        "(strings, numbers, booleans, lists, dicts)",
    )


def check_message_values(message: BaseMessage, position: int | None) -> None:
    """Refuse what a stored message cannot hold (module doc)."""
    role = message.type
    content = message.content
    if not isinstance(content, (str, list)):
        raise InvalidMessageError(
            f"content must be a string or a list of content blocks, got {type(content).__name__}",
            message_id=message.id,
            role=role,
            position=position,
            fix="send text as a str (decode bytes first); non-text parts as content blocks",
        )
    try:
        _walk(content, "content", 1, storable=False)
        if message.name is not None:
            _walk(message.name, "name", 1, storable=False)
        if isinstance(message, AIMessage):
            for i, call in enumerate(message.tool_calls):
                _walk(call.get("name"), f"tool_calls[{i}].name", 1, storable=False)
                _walk(call.get("args"), f"tool_calls[{i}].args", 1, storable=True)
        _walk(message.additional_kwargs, "additional_kwargs", 1, storable=True)
        _walk(message.response_metadata, "response_metadata", 1, storable=True)
    except _Refused as err:
        _refuse(err, message.id, role, position)


def check_dict_values(value: Mapping[str, Any], role: str | None, position: int | None) -> None:
    """The depth and Unicode checks on a message dict, before it is converted."""
    try:
        for key in ("content", "name", "tool_calls", "additional_kwargs"):
            if key in value:
                _walk(value[key], key, 1, storable=False)
    except _Refused as err:
        _refuse(err, value.get("id"), role, position)
