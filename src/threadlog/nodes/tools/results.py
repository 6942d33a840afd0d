"""From what happened to a call to the result the log gets: `Outcome` and `classify`.

Contract: `classify` turns one call's `Outcome` (a return value, a raised exception, or a
ready error) into exactly one `ToolMessage` for the call (inside a `Command` when the tool
returned one), or raises:

* always: LangGraph's interrupts (`GraphBubbleUp`) and invalid resume values;
* what `handle_tool_errors` does not handle (`handling`): the tool's own exception, a
  schema failure as `ToolInvocationError`, or (with `False`) a `ToolCallError`.

On the way it checks the return value, asks the checkpointer's serializer whether the
result can be stored (`storage_check`), cuts oversized content, and records in
`response_metadata` a reviewer's edit (`threadlog_approval`) and, when asked, the
duration (`threadlog_duration_ms`); a successful result otherwise equals LangGraph's."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from langchain_core.messages import BaseMessage, InvalidToolCall, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.types import Command
from pydantic import ValidationError

from threadlog._upstream import filter_validation_errors
from threadlog.errors import ToolCallError
from threadlog.log.edits import APPROVAL_KEY
from threadlog.nodes.tools.approval import Decision
from threadlog.nodes.tools.checks import (
    ErrorKind,
    InputType,
    Output,
    Refused,
    cut_content,
    error_result,
    normalize_response,
)
from threadlog.nodes.tools.handling import ErrorHandling
from threadlog.nodes.tools.routing import messages_of
from threadlog.nodes.tools.storage_check import change_warning, check_storage, serializer_for

try:
    from langgraph.errors import is_invalid_resume
except ImportError:  # older langgraph never marks resume errors

    def is_invalid_resume(error: BaseException) -> bool:
        return False


__all__ = ["Outcome", "classify", "from_error", "refuse_or_raise"]

_log = logging.getLogger("threadlog.tools")

DURATION_KEY = "threadlog_duration_ms"
_MAX_WARNED = 1024  # (tool, change) pairs a node remembers having warned about
_WARNED_LOCK = threading.Lock()
_MAX_DETAIL = 300  # characters of an exception's text shown to the model


@dataclass(slots=True)
class Outcome:
    """What happened to one call: a return value, an exception, or a ready error result."""

    response: Any = None
    error: Exception | None = None
    message: ToolMessage | None = None
    kind: ErrorKind | None = None
    duration_ms: float | None = None  # how long the tool ran, for `threadlog inspect`

    @classmethod
    def ready(cls, call: ToolCall | InvalidToolCall, kind: ErrorKind, text: str) -> Outcome:
        return cls(message=error_result(call, kind, text), kind=kind)

    @classmethod
    def timed_out(cls, call: ToolCall, seconds: float, *, still_running: bool) -> Outcome:
        # The call started: its effect may have happened, so the model is not told otherwise.
        how = (
            "is still running in the background, where it may yet complete"
            if still_running
            else "was cancelled, possibly after it had taken effect"
        )
        return cls.ready(
            call,
            "timeout",
            f"Error: {call['name']} did not finish within {seconds:g} s and {how}, so its "
            "outcome is unknown. Do not assume it did not happen, and do not repeat it "
            "blindly: check its effect first, or go on without this result.",
        )

    @classmethod
    def timed_out_keyed(cls, call: ToolCall, seconds: float, attempts: int, key: str) -> Outcome:
        # Every attempt carried the same key; a new call would get another, so not invited.
        return cls.ready(
            call,
            "timeout",
            f"Error: {call['name']} did not finish within {seconds:g} s in {attempts} "
            f"attempt(s), all with idempotency key {key}, so its outcome is unknown. "
            "Running this call again with that key is safe (a service that honours the "
            "key returns the first attempt's result), but a new call gets a new key: do "
            "not repeat it blindly; check its effect first, or go on without this result.",
        )

    @classmethod
    def unknown(cls, call: ToolCall, names: list[str]) -> Outcome:
        return cls.ready(
            call,
            "unknown_tool",
            f"Error: there is no tool named {call['name']!r}. Available tools: "
            f"{', '.join(names) or 'none'}. Call one of these instead.",
        )

    @classmethod
    def malformed(cls, call: InvalidToolCall) -> Outcome:
        name = call.get("name") or "the tool"
        raw = str(call.get("args") or "")
        shown = raw if len(raw) <= 80 else raw[:80] + "…"
        why = f" ({call['error']})" if call.get("error") else ""
        return cls.ready(
            call,
            "malformed_args",
            f"Error: the arguments of this {name} call are not valid JSON{why}: "
            f"{shown!r}. Call {name} again with a JSON object as its arguments.",
        )

    @classmethod
    def rejected(cls, call: ToolCall, reason: str | None) -> Outcome:
        because = f": {reason}" if reason else ""
        return cls.ready(
            call,
            "rejected",
            f"Error: a reviewer rejected this call of {call['name']}{because}. It was not "
            "run. Do not repeat it unchanged; ask the user how to proceed.",
        )


def refuse_or_raise(outcome: Outcome, raises: bool) -> ToolMessage:
    """A ready error result, or (`raises`) its `ToolCallError`; a rejection is a result."""
    message = outcome.message
    assert message is not None and outcome.kind is not None
    if raises and outcome.kind != "rejected":
        raise ToolCallError(
            outcome.kind,
            str(message.content),
            call_id=message.tool_call_id,
            tool=message.name or "",
        )
    return message


def classify(
    outcome: Outcome,
    call: ToolCall,
    *,
    injected: Any,  # upstream ToolNode's injected-argument map, for its error filter
    decision: Decision | None,
    messages_key: str,
    handling: ErrorHandling,
    max_content_chars: int | None,
    config: RunnableConfig,
    input_type: InputType,
    record_duration: bool,
    state: Any,
    warned: set[tuple[str, str]],
    meta: Mapping[str, Any],
) -> Output:
    """The output for `call` (module doc); `meta` goes in each result's `response_metadata`."""
    output: Output
    if outcome.message is not None:
        output = refuse_or_raise(outcome, handling.raises_refusals)
    elif outcome.error is not None:
        output = from_error(outcome.error, call, injected, handling)
    else:
        try:
            stored = _stored(state, messages_key, outcome.response)
            response = normalize_response(outcome.response, call, messages_key, input_type, stored)
            output = _each_result(
                response,
                call,
                messages_key,
                lambda m: _finish_result(m, call, decision, max_content_chars, config, warned),
            )
        except Refused as r:
            if handling.raises_refusals:
                raise ToolCallError(
                    r.kind, r.text, call_id=call["id"] or "", tool=call["name"]
                ) from r
            output = error_result(call, r.kind, r.text)
    extra = dict(meta)
    if outcome.duration_ms is not None and record_duration:
        extra[DURATION_KEY] = round(outcome.duration_ms, 3)
    if not extra:
        return output
    return _each_result(output, call, messages_key, lambda m: _with_meta(m, extra))


def from_error(
    e: Exception,
    call: ToolCall,
    injected: Any,  # upstream ToolNode's injected-argument map, for its error filter
    handling: ErrorHandling,
    *,
    filter_types: bool = True,
) -> ToolMessage:
    """The error result for an exception a tool (or interceptor) raised, or raise it."""
    if isinstance(e, GraphBubbleUp) or is_invalid_resume(e):
        raise e
    name = call["name"]
    source = e
    if isinstance(source, ValidationError):
        filtered = filter_validation_errors(source, injected)
        e = ToolInvocationError(name, source, call["args"], filtered)
    handled = handling.handles(e) if filter_types else handling.flag is not False
    if not handled:
        if e is source:
            raise e
        raise e from source
    text = handling.custom_text(e)
    if text is not None:
        return ToolMessage(content=text, name=name, tool_call_id=call["id"], status="error")
    if isinstance(source, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ())) or 'arguments'}: {err.get('msg')}"
            for err in filter_validation_errors(source, injected)
        )
        return error_result(
            call,
            "invalid_args",
            f"Error: the arguments for {name} do not fit its parameters ({problems}). "
            f"Call {name} again with arguments that match its schema.",
        )
    detail = str(e)
    if len(detail) > _MAX_DETAIL:
        detail = detail[:_MAX_DETAIL] + "…"
    return error_result(
        call,
        "raised",
        f"Error: {name} failed with {type(e).__name__}: {detail}. Check the arguments "
        "and try again, or go on without this result.",
    )


def _finish_result(
    message: ToolMessage,
    call: ToolCall,
    decision: Decision | None,
    max_content_chars: int | None,
    config: RunnableConfig,
    warned: set[tuple[str, str]],
) -> ToolMessage:
    check = check_storage(message, serializer_for(config))
    if check.problem is not None:
        raise Refused(
            "artifact",
            f"Error: tool {call['name']!r} returned a result the checkpointer cannot "
            f"store: {check.problem}. The result was discarded; the tool must return plain "
            "data (str, numbers, lists, dicts) as content and artifact.",
        )
    if check.change is not None:
        key = (call["name"], check.change)
        with _WARNED_LOCK:  # a step's calls finish in parallel threads: check and add as one
            first = key not in warned
            if first and len(warned) < _MAX_WARNED:
                warned.add(key)
        if first:
            _log.warning(change_warning(call["name"], check.change))
    message = cut_content(message, max_content_chars)
    if decision is not None and decision.action == "edit":
        edit = {"action": "edit", "args": decision.args}
        message = _with_meta(message, {APPROVAL_KEY: edit})
    return message


def _with_meta(message: ToolMessage, meta: Mapping[str, Any]) -> ToolMessage:
    return message.model_copy(update={"response_metadata": {**message.response_metadata, **meta}})


def _each_result(output: Output, call: ToolCall, messages_key: str, fn: Any) -> Output:
    if isinstance(output, list):
        return [_one(o, call, messages_key, fn) for o in output]
    return _one(output, call, messages_key, fn)


def _one(
    item: ToolMessage | Command[Any], call: ToolCall, messages_key: str, fn: Any
) -> ToolMessage | Command[Any]:
    if isinstance(item, ToolMessage):
        return cast(ToolMessage, fn(item))

    def mine(messages: list[Any]) -> list[Any]:
        return [
            fn(m) if isinstance(m, ToolMessage) and m.tool_call_id == call["id"] else m
            for m in messages
        ]

    update = item.update
    if isinstance(update, list):  # list-of-messages input: the update is the messages
        return replace(item, update=mine(update))
    if not isinstance(update, dict) or messages_key not in update:
        return item
    return replace(item, update={**update, messages_key: mine(update[messages_key])})


def _stored(state: Any, messages_key: str, response: Any) -> dict[str, BaseMessage]:
    """The state's messages by id (what a `Command` may re-send unchanged)."""
    if not isinstance(response, (Command, list)):
        return {}
    try:
        messages = messages_of(state, messages_key)
    except ValueError:
        return {}
    return {m.id: m for m in messages if isinstance(m, BaseMessage) and m.id is not None}
