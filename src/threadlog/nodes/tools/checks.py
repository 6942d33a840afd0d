"""What a tool call turns into: exactly one result for its own call, as data.

Contract:

* Every failure is an **error result** (a `ToolMessage` with the call's id, the tool's
  name, `status="error"` and a short text saying what to fix) or, with
  `handle_tool_errors=False`, a raised `ToolCallError` with that text;
  `response_metadata["threadlog_error"]` names the kind (`ErrorKind`).
* A tool's return value is checked before it reaches the log (`normalize_response`): a
  result answering another call's id is refused, a `Command` writing a system or
  developer message is refused (tool output is data), and a `Command` for this graph must
  carry this call's result.
* `cut_content` shortens oversized text with a visible marker and keeps the full output
  as the artifact (in the log, never sent to a model)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, cast

from langchain_core.messages import (
    BaseMessage,
    InvalidToolCall,
    ToolCall,
    ToolMessage,
    convert_to_messages,
)
from langgraph.prebuilt.tool_node import msg_content_output
from langgraph.types import Command

from threadlog.errors import MessageLogError
from threadlog.log.messages import role_of

__all__ = ["ErrorKind", "InputType", "Output", "cut_content", "error_result", "normalize_response"]

ErrorKind = Literal[
    "raised",
    "timeout",
    "unknown_tool",
    "invalid_args",
    "malformed_args",
    "forged",
    "instruction",
    "bad_return",
    "artifact",
    "rejected",
]

ERROR_KEY = "threadlog_error"
# How the node was called: a state dict, a list of messages, or tool calls (LangGraph's).
InputType = Literal["list", "dict", "tool_calls"]
Output = ToolMessage | Command[Any] | list[ToolMessage | Command[Any]]


def error_result(call: ToolCall | InvalidToolCall, kind: ErrorKind, text: str) -> ToolMessage:
    return ToolMessage(
        content=text,
        name=call.get("name") or "unknown",
        tool_call_id=call.get("id") or "",
        status="error",
        response_metadata={ERROR_KEY: kind},
    )


def cut_content(message: ToolMessage, limit: int | None) -> ToolMessage:
    """`message` with text above `limit` characters cut, the full output in its artifact."""
    if limit is None:
        return message
    content = message.content
    total = (
        len(content)
        if isinstance(content, str)
        else sum(len(_block_text(b) or "") for b in content)
    )
    if total <= limit:
        return message
    marker = (
        f"\n[threadlog: output cut at {limit} of {total} characters; "
        "the full output is kept in this result's artifact]"
    )
    if isinstance(content, str):
        cut: str | list[str | dict[Any, Any]] = content[:limit] + marker
    else:
        cut = _cut_blocks(content, limit, marker)
    artifact = message.artifact
    full = content if artifact is None else {"content": content, "artifact": artifact}
    return message.model_copy(update={"content": cut, "artifact": full})


def _block_text(block: str | dict[Any, Any]) -> str | None:
    if isinstance(block, str):
        return block
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return cast(str, block["text"])
    return None


def _cut_blocks(
    blocks: list[str | dict[Any, Any]], limit: int, marker: str
) -> list[str | dict[Any, Any]]:
    # Text blocks share the budget in order; non-text blocks (images…) are kept as is.
    out: list[str | dict[Any, Any]] = []
    left = limit
    for b in blocks:
        text = _block_text(b)
        if text is None:
            out.append(b)
            continue
        if left <= 0:
            continue
        piece = text[:left]
        left -= len(piece)
        out.append(piece if isinstance(b, str) else {**b, "text": piece})
    out.append({"type": "text", "text": marker})
    return out


def normalize_response(
    response: Any,
    call: ToolCall,
    messages_key: str,
    input_type: InputType = "dict",
    stored: Mapping[str, BaseMessage] | None = None,
) -> Output:
    """Check a tool's return value for `call`, or raise `Refused`; `stored` messages a
    `Command` re-sends unchanged are not judged again."""
    stored = stored or {}
    if isinstance(response, ToolMessage):
        return _own_result(response, call)
    if isinstance(response, Command):
        return _checked_command(
            response, call, messages_key, input_type, stored, require_result=True
        )
    if (
        isinstance(response, list)
        and response
        and all(isinstance(r, (ToolMessage, Command)) for r in response)
    ):
        return _checked_list(response, call, messages_key, input_type, stored)
    raise Refused(
        "bad_return",
        f"Error: tool {call['name']!r} returned a {type(response).__name__}; a tool "
        "returns content, a ToolMessage or a Command. This is a bug in the tool.",
    )


class Refused(Exception):
    """A tool's return value that must become an error result."""

    def __init__(self, kind: ErrorKind, text: str) -> None:
        self.kind = kind
        self.text = text
        super().__init__(text)


def _own_result(message: ToolMessage, call: ToolCall) -> ToolMessage:
    if message.tool_call_id != call["id"]:
        raise Refused(
            "forged",
            f"Error: tool {call['name']!r} returned a result for call "
            f"{message.tool_call_id!r}, not for its own call {call['id']!r}; the "
            "result was discarded. A tool may only answer its own call.",
        )
    content = msg_content_output(message.content)
    if content is not message.content or message.name != call["name"]:
        message = message.model_copy(update={"content": content, "name": call["name"]})
    return message


def _checked_list(
    items: list[ToolMessage | Command[Any]],
    call: ToolCall,
    messages_key: str,
    input_type: InputType,
    stored: Mapping[str, BaseMessage],
) -> list[ToolMessage | Command[Any]]:
    out: list[ToolMessage | Command[Any]] = []
    own = 0
    for item in items:
        if isinstance(item, ToolMessage):
            out.append(_own_result(item, call))
            own += 1
        else:
            checked = _checked_command(
                item, call, messages_key, input_type, stored, require_result=False
            )
            own += _own_results_in(checked, call, messages_key)
            out.append(checked)
    if own != 1:
        raise Refused(
            "bad_return",
            f"Error: tool {call['name']!r} returned a list with {own} messages bound to "
            f"tool_call_id {call['id']!r}; it must return exactly one result for its "
            "call. This is a bug in the tool.",
        )
    return out


def _own_results_in(command: Command[Any], call: ToolCall, messages_key: str) -> int:
    if command.graph is not None:
        return 0
    update = command.update
    found = update.get(messages_key, ()) if isinstance(update, Mapping) else update
    if not isinstance(found, (list, tuple)):
        return 0
    return sum(isinstance(m, ToolMessage) and m.tool_call_id == call["id"] for m in found)


def _update_messages(
    update: Any, call: ToolCall, messages_key: str, input_type: InputType
) -> Sequence[Any]:
    """What a tool's `Command.update` writes to the message key, by the node's input shape."""
    if update is None:
        return ()
    elif isinstance(update, Mapping):
        if input_type == "list":
            raise Refused(
                "bad_return",
                f"Error: tool {call['name']!r} returned a Command whose update is a dict, "
                "but this node was given a list of messages; return "
                "Command(update=[ToolMessage(..., tool_call_id=<own id>)]) instead.",
            )
        value = update.get(messages_key, ())
        return value if isinstance(value, (list, tuple)) else [value]
    elif isinstance(update, (list, tuple)):
        if input_type != "list":
            raise Refused(
                "bad_return",
                f"Error: tool {call['name']!r} returned a Command whose update is a list, "
                f"but this node was given a state; use a dict such as "
                f'{{"{messages_key}": [ToolMessage(..., tool_call_id=<own id>)]}}.',
            )
        return update
    else:
        raise Refused(
            "bad_return",
            f"Error: tool {call['name']!r} returned a Command whose update is a "
            f"{type(update).__name__}; use a dict such as "
            '{"messages": [ToolMessage(..., tool_call_id=<own id>)]}.',
        )


def _checked_command(
    command: Command[Any],
    call: ToolCall,
    messages_key: str,
    input_type: InputType,
    stored: Mapping[str, BaseMessage],
    *,
    require_result: bool,
) -> Command[Any]:
    update = command.update
    raw = _update_messages(update, call, messages_key, input_type)
    try:
        messages: list[BaseMessage] = convert_to_messages(list(raw))
    except Exception as e:
        raise Refused(
            "bad_return",
            f"Error: tool {call['name']!r} returned a Command with messages that are not "
            f"messages ({e}).",
        ) from e
    own = 0
    fixed: list[BaseMessage] = []
    for m in messages:
        if m.id is not None and stored.get(m.id) == m:
            fixed.append(m)  # already in the log, re-sent unchanged
            continue
        try:
            role = role_of(m)
        except MessageLogError as e:  # RemoveMessage and the like: the log would refuse it
            raise Refused(
                "bad_return",
                f"Error: tool {call['name']!r} returned a Command the message log refuses "
                f"({e.problem}). The update was discarded.",
            ) from e
        if role in ("system", "developer"):
            raise Refused(
                "instruction",
                f"Error: tool {call['name']!r} tried to add a {role} message; tool output "
                "is data and cannot become instructions. The update was discarded.",
            )
        if isinstance(m, ToolMessage):
            m = _own_result(m, call)
            own += 1
        fixed.append(m)
    if require_result and command.graph is None and own != 1:
        raise Refused(
            "bad_return",
            f"Error: tool {call['name']!r} returned a Command with {own} results for its "
            f"call {call['id']!r}; it needs exactly one ToolMessage with that "
            "tool_call_id in update['messages']. This is a bug in the tool.",
        )
    if not messages:
        return command
    if isinstance(update, Mapping):
        return replace(command, update={**update, messages_key: fixed})
    return replace(command, update=fixed)
