"""Turning user input into LangChain messages, and what a message *means* to a model.

* `coerce_message`: LangChain messages, OpenAI-style dicts, `(role, content)` tuples and
  strings (converted by langchain-core's `convert_to_messages` after a check, so an error
  names the field); anything else refused.
* `role_of`: system, developer, user, assistant, tool. A developer message is a
  `SystemMessage` with `additional_kwargs["__openai_role__"] == "developer"`, as
  `convert_to_messages` builds it.
* `calls_of`: an AIMessage's `tool_calls` then `invalid_tool_calls` (both need a result).
* `fingerprint` / `digest`: the model-visible content (role, content, name, tool calls,
  tool_call_id, status). One id with equal digests is a replay, else a conflict."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    InvalidToolCall,
    RemoveMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from threadlog._upstream import is_overwrite
from threadlog.errors import AppendOnlyError, InvalidMessageError
from threadlog.log.message_values import check_dict_values, check_message_values

__all__ = [
    "ROLES",
    "Role",
    "calls_of",
    "coerce_message",
    "derive_id",
    "digest",
    "fingerprint",
    "is_developer",
    "is_pair",
    "preview",
    "role_of",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "developer", "user", "assistant", "tool")

# Accepted spellings of a role (OpenAI roles plus LangChain's message types).
_ROLE_ALIASES: dict[str, Role] = {**{r: r for r in ROLES}, "human": "user", "ai": "assistant"}
DEVELOPER_KWARG = "__openai_role__"

_REMOVE_HINT = (
    "threadlog's message log is append-only: write RemoveMessage(id=...) or "
    "RemoveMessage(id=REMOVE_ALL_MESSAGES) to a threadlog.Messages key (recorded as a "
    "removal event: the state no longer shows the messages, the log keeps them), or use "
    "threadlog.ContextPolicy (trimming and summaries are recorded as compaction "
    "events; the full history stays in the log)"
)


def is_developer(message: BaseMessage) -> bool:
    return (
        isinstance(message, SystemMessage)
        and message.additional_kwargs.get(DEVELOPER_KWARG) == "developer"
    )


def role_of(message: BaseMessage) -> Role:
    """The design's role of a stored message (raises for types the log refuses)."""
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, SystemMessage):
        return "developer" if is_developer(message) else "system"
    raise InvalidMessageError(
        f"{type(message).__name__} has no role in the message log",
        message_id=getattr(message, "id", None),
        fix="use one of system, developer, user, assistant or tool",
    )


def coerce_message(
    value: Any, *, position: int | None = None, rekeyable: bool = False
) -> BaseMessage:
    """Turn one message-like input into a checked LangChain message.

    Raises `InvalidMessageError` naming the field, `AppendOnlyError` for `RemoveMessage` and
    `Overwrite`. `rekeyable=True` lets calls without an id or repeating one through."""
    if isinstance(value, RemoveMessage):
        _refuse_remove(value.id, position)
    if is_overwrite(value):
        raise AppendOnlyError(
            "Overwrite would replace the whole message history",
            position=position,
            fix=_REMOVE_HINT,
        )
    if isinstance(value, BaseMessageChunk):
        # Streaming leaves chunks behind; the log stores whole messages.
        value = message_chunk_to_message(value)
    if isinstance(value, BaseMessage):
        message = value
    elif isinstance(value, str):
        message = HumanMessage(content=value)
    elif isinstance(value, (tuple, list)):  # a pair; a list after a checkpoint
        message = _from_tuple(tuple(value), position)
    elif isinstance(value, Mapping):
        message = _from_dict(value, position, rekeyable)
    else:
        raise InvalidMessageError(
            f"{type(value).__name__} is not a message",
            position=position,
            fix="write LangChain messages, OpenAI-style dicts with 'role' and "
            "'content', (role, content) tuples, or strings",
        )
    _check_fields(message, position, rekeyable)
    return message


# Exact types `coerce_message` returns unchanged once checked: a log's own messages.
_STORED_TYPES = frozenset({AIMessage, HumanMessage, SystemMessage, ToolMessage})


def is_stored_form(value: Any) -> bool:
    return type(value) in _STORED_TYPES and bool(value.id)


def is_pair(value: Any) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and isinstance(value[0], str)
        and value[0] in _ROLE_ALIASES
    )


def _refuse_remove(message_id: Any, position: int | None) -> None:
    what = (
        "RemoveMessage(id=REMOVE_ALL_MESSAGES) would delete the whole history"
        if message_id == REMOVE_ALL_MESSAGES
        else "RemoveMessage would delete history"
    )
    raise AppendOnlyError(
        what, message_id=message_id, role="remove", position=position, fix=_REMOVE_HINT
    )


# LangChain's own dict form, rebuilt by its class: fields convert_to_messages does not know
# (invalid_tool_calls, usage_metadata, artifact…) survive.
_LC_TYPES: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
}


def _role_from(raw: Any, *, field: str, message_id: Any, position: int | None) -> Role:
    role = _ROLE_ALIASES.get(raw) if isinstance(raw, str) else None
    if role is None:
        raise InvalidMessageError(
            f"unknown {field} {raw!r}",
            message_id=message_id,
            role=str(raw),
            position=position,
            fix="use one of system, developer, user, assistant, tool (or LangChain's human, ai)",
        )
    return role


def _from_tuple(value: tuple[Any, ...], position: int | None) -> BaseMessage:
    if len(value) != 2:
        raise InvalidMessageError(
            f"a tuple message needs exactly (role, content), got {len(value)} items",
            position=position,
            fix="write ('user', 'text') or a dict with role and content",
        )
    role = _role_from(value[0], field="role", message_id=None, position=position)
    if role == "tool":
        raise InvalidMessageError(
            "a tool result cannot be a (role, content) tuple: it has no tool_call_id",
            role="tool",
            position=position,
            fix="write a ToolMessage or a dict with 'tool_call_id'",
        )
    return _convert({"role": role, "content": value[1]}, position)


def _from_dict(
    value: Mapping[str, Any], position: int | None, rekeyable: bool = False
) -> BaseMessage:
    mid = value.get("id")
    kind = value.get("role", value.get("type"))
    if kind == "remove":
        _refuse_remove(mid, position)
    if value.get("type") == "constructor" and "role" not in value:
        # langchain's serialized envelope {"lc": 1, "type": "constructor", ...}
        return _convert(value, position)

    def bad(problem: str, fix: str, role: str | None = None) -> InvalidMessageError:
        return InvalidMessageError(problem, message_id=mid, role=role, position=position, fix=fix)

    field = "role" if "role" in value else "type" if "type" in value else None
    if field is None:
        raise bad(
            "a message dict needs a 'role' (or LangChain 'type') field",
            "add 'role': one of system, developer, user, assistant, tool",
        )
    role = _role_from(value[field], field=field, message_id=mid, position=position)
    if "content" not in value and not value.get("tool_calls"):
        fix = "add 'content' (a string or a list of content blocks)"
        raise bad("a message dict needs a 'content' field", fix, role)
    if role == "tool" and not value.get("tool_call_id"):
        fix = "set tool_call_id to the id of the AIMessage tool call it answers"
        raise bad("a tool message needs a non-empty 'tool_call_id'", fix, role)
    _check_content_type(value, mid, role, position)
    check_dict_values(value, role, position)
    _check_calls(value, mid, role, position, rekeyable)
    if "role" not in value and value["type"] in _LC_TYPES and "content" in value:
        try:
            return _LC_TYPES[value["type"]].model_validate(dict(value))
        except (ValueError, TypeError):  # not quite model_dump(); convert_to_messages may cope
            pass
    data = {k: v for k, v in value.items() if k not in ("type",)}
    data["role"] = role
    if rekeyable and isinstance(data.get("tool_calls"), list):
        # convert_to_messages needs the key; the log gives the call an id (call_ids).
        data["tool_calls"] = [{"id": None, **c} for c in data["tool_calls"]]
    data.setdefault("content", "")
    return _convert(data, position)


def _check_content_type(
    value: Mapping[str, Any], mid: Any, role: Role, position: int | None
) -> None:
    # The classes silently turn None into "" and bytes into text; None is meant only
    # beside tool calls.
    if "content" not in value:
        return
    content = value["content"]
    if isinstance(content, (str, list)):
        return
    if content is None and role == "assistant" and value.get("tool_calls"):
        return
    raise InvalidMessageError(
        f"'content' must be a string or a list of content blocks, got {type(content).__name__}",
        message_id=mid,
        role=role,
        position=position,
        fix="send text as a str (decode bytes first); non-text parts as content blocks",
    )


_NEEDS_ID = "every tool call needs an id so its result can be paired"


def _check_calls(
    value: Mapping[str, Any], mid: Any, role: Role, position: int | None, rekeyable: bool
) -> None:
    # convert_to_messages fails on these with an error that names no field.
    def bad(problem: str, fix: str | None = None) -> InvalidMessageError:
        return InvalidMessageError(problem, message_id=mid, role=role, position=position, fix=fix)

    calls = value.get("tool_calls") or []
    if not isinstance(calls, list):
        raise bad(f"'tool_calls' must be a list, got {type(calls).__name__}")
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise bad(f"tool_calls[{i}] must be a dict, got {type(call).__name__}")
        fn = call.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else call.get("name")
        if not call.get("id") and not rekeyable:
            raise bad(f"tool_calls[{i}] ({name!r}) has no id", _NEEDS_ID)
        if isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
            try:
                json.loads(fn["arguments"], strict=False)
            except ValueError as exc:
                raise bad(
                    f"tool_calls[{i}].function.arguments ({name!r}) is not JSON: {exc}",
                    "send arguments as a JSON object string, or store the call "
                    "as an AIMessage with invalid_tool_calls",
                ) from exc


def _convert(data: Mapping[str, Any], position: int | None) -> BaseMessage:
    try:
        return convert_to_messages([dict(data)])[0]
    except Exception as exc:  # langchain-core raises KeyError/ValueError/pydantic errors
        raise InvalidMessageError(
            f"cannot build a message from {dict(data)!r}: {exc}",
            message_id=data.get("id"),
            role=str(data.get("role")),
            position=position,
        ) from exc


def _check_fields(message: BaseMessage, position: int | None, rekeyable: bool = False) -> None:
    role = role_of(message)

    def bad(problem: str, fix: str) -> InvalidMessageError:
        mid = message.id
        return InvalidMessageError(problem, message_id=mid, role=role, position=position, fix=fix)

    if message.id is not None and (not isinstance(message.id, str) or not message.id):
        raise InvalidMessageError(
            f"message id must be a non-empty string, got {message.id!r}",
            role=role,
            position=position,
        )
    if isinstance(message, ToolMessage) and not message.tool_call_id:
        fix = "set tool_call_id to the id of the AIMessage tool call it answers"
        raise bad("a ToolMessage needs a non-empty tool_call_id", fix)
    if isinstance(message, AIMessage) and not rekeyable:
        seen: set[str] = set()
        for i, call in enumerate(calls_of(message)):
            cid = call.get("id")
            n = len(message.tool_calls)
            field = f"tool_calls[{i}]" if i < n else f"invalid_tool_calls[{i - n}]"
            if not cid:
                raise bad(f"{field} ({call.get('name')!r}) has no id", _NEEDS_ID)
            if cid in seen:
                fix = "give each call of one AIMessage its own id"
                raise bad(f"{field} repeats the call id {cid!r}", fix)
            seen.add(cid)
    check_message_values(message, position)


def calls_of(message: BaseMessage) -> list[ToolCall | InvalidToolCall]:
    """An AIMessage's calls that each need a result: `tool_calls`, then `invalid_tool_calls`."""
    if not isinstance(message, AIMessage):
        return []
    if not message.invalid_tool_calls:
        return list(message.tool_calls)
    return [*message.tool_calls, *message.invalid_tool_calls]


def fingerprint(message: BaseMessage) -> dict[str, Any]:
    """The model-visible content of a message: what decides replay versus conflict."""
    fp: dict[str, Any] = {"role": role_of(message), "content": message.content}
    if message.name is not None:
        fp["name"] = message.name
    if isinstance(message, AIMessage):
        for key, calls in (
            ("tool_calls", message.tool_calls),
            ("invalid_tool_calls", message.invalid_tool_calls),
        ):
            if calls:
                fp[key] = [[c.get("id"), c.get("name"), c.get("args")] for c in calls]
    if isinstance(message, ToolMessage):
        fp["tool_call_id"] = message.tool_call_id
        fp["status"] = message.status
    return fp


def digest(message: BaseMessage) -> str:
    blob = json.dumps(fingerprint(message), sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(blob.encode("utf-8"), digest_size=16).hexdigest()


def derive_id(count: int, anchor: str | None, message: BaseMessage) -> str:
    """A deterministic id for a message without one: content, position, preceding anchor."""
    seed = f"{count}\x00{anchor or ''}\x00{digest(message)}"
    return "tl-" + hashlib.blake2b(seed.encode("utf-8"), digest_size=12).hexdigest()


def preview(message: BaseMessage, width: int = 60) -> str:
    """A one-line, width-limited rendering of a message's text for errors and tables."""
    text = message.text if isinstance(message.content, list) else str(message.content)
    text = " ".join(text.split())
    if isinstance(message, AIMessage) and message.tool_calls and not text:
        text = "calls " + ", ".join(f"{c['name']}({c.get('id')})" for c in message.tool_calls)
    return text if len(text) <= width else text[: width - 1] + "…"
