"""What a replayed model call sends, next to what the stored call sent
(`threadlog.checkpoint.calls` recorded it).

`RequestCapture` is a callback handler keeping each chat-model call's `Request` (messages,
tool names and schemas, model, parameters) in start order, and the ids of the replies.
`difference(recorded, now)` is None when both send the same thing, else the first part
that differs (`system_prompt`, `messages`, `tools`, `model`; the last two only when both
requests hold them), with a unified diff for a system prompt or tool schema. Messages are
compared by what the model reads, not by ids.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue

from threadlog.checkpoint.call_records import (
    PARAM_SKIP,
    fingerprint_of,
    model_name,
    plain,
    tool_name,
)
from threadlog.inspect.calls import content_text, shown_message

__all__ = ["Difference", "Request", "RequestCapture", "difference"]


@dataclass(frozen=True, slots=True)
class Request:
    """One model call's request: messages as dicts (`role`, `content`, …), tools, model."""

    messages: list[dict[str, Any]]
    tools: list[str] | None = None
    tool_schemas: list[Any] | None = None
    model: str | None = None
    params: dict[str, Any] | None = None

    @classmethod
    def from_wire(cls, wire: Any) -> Request:
        if isinstance(wire, PromptValue):
            sent = wire.to_messages()
        else:
            sent = convert_to_messages(wire if isinstance(wire, Sequence) else [wire])
        return cls([as_dict(m) for m in sent])


def as_dict(message: BaseMessage) -> dict[str, Any]:
    return shown_message(fingerprint_of(message))  # one shape for both


class RequestCapture(BaseCallbackHandler):
    """Keeps each chat-model call's request, in the order the calls start (module doc)."""

    raise_error = False
    run_inline = True
    ignore_chain = True
    ignore_agent = True
    ignore_retriever = True
    ignore_retry = True
    ignore_custom_event = True

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.replies: set[str] = set()  # the ids of the messages the calls produced
        self._lock = threading.Lock()

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> Any:
        gens = (g for row in getattr(response, "generations", None) or () for g in row)
        ids = {getattr(getattr(g, "message", None), "id", None) for g in gens}
        with self._lock:
            self.replies.update(str(i) for i in ids if i is not None)

    def add(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        # The same reading as `checkpoint.calls.CallsLayer.started`, so the two compare.
        meta = metadata or {}
        params = kwargs.get("invocation_params")
        params = params if isinstance(params, dict) else {}
        raw = {k: plain(v) for k, v in params.items() if k not in PARAM_SKIP}
        raw.update({k: plain(v) for k, v in meta.items() if k.startswith("ls_")})
        tools = params.get("tools") or []
        self.add(
            Request(
                [as_dict(m) for m in (messages[0] if messages else [])],
                [tool_name(t) for t in tools],
                plain(list(tools)) if tools else None,
                model_name(serialized, params, meta),
                raw,
            )
        )


@dataclass(frozen=True, slots=True)
class Difference:
    part: str  # `system_prompt`, `messages`, `tools` or `model`
    detail: str
    recorded: str | None
    replayed: str | None
    diff: str | None = None  # recorded → replayed, for a system prompt or tool schema


def _unified(recorded: str, replayed: str) -> str:
    lines = difflib.unified_diff(
        recorded.splitlines(), replayed.splitlines(), "recorded", "replayed", lineterm=""
    )
    return "\n".join(lines)


def _system(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    if messages and messages[0].get("role") in ("system", "developer"):
        return content_text(messages[0].get("content")), messages[1:]
    return None, messages


def _seen(m: Mapping[str, Any]) -> str:
    """What the model reads of one message (ids left out: a replay writes them anew)."""
    calls = m.get("tool_calls") or ()
    called = [(c.get("name"), c.get("args")) for c in calls if isinstance(c, Mapping)]
    status = m.get("status") if m.get("tool_call_id") is not None else None
    seen = [m.get("role"), m.get("content"), m.get("name"), called, status]
    return json.dumps(seen, sort_keys=True, default=str)


def _show(m: Mapping[str, Any]) -> str:
    text = content_text(m.get("content"))
    for c in m.get("tool_calls") or ():
        args = json.dumps(c.get("args"), ensure_ascii=False, default=str)
        text += f" [call {c.get('name')}({args})]"
    return f"{m.get('role')}: {text}"


def difference(recorded: Request, now: Request) -> Difference | None:
    """How `now` differs from `recorded`, the first part that does (module doc)."""
    old_prompt, old_rest = _system(recorded.messages)
    new_prompt, new_rest = _system(now.messages)
    if old_prompt != new_prompt:
        diff = None
        if old_prompt is None:
            detail = "a system prompt is sent that the stored call did not send"
        elif new_prompt is None:
            detail = "the stored call's system prompt is not sent"
        else:
            detail = "the system prompt sent differs from the recorded one"
            diff = _unified(old_prompt, new_prompt)
        return Difference("system_prompt", detail, old_prompt, new_prompt, diff)
    old_seen, new_seen = [_seen(m) for m in old_rest], [_seen(m) for m in new_rest]
    if old_seen != new_seen:
        offset = 0 if old_prompt is None else 1
        at = next(
            (i for i, (a, b) in enumerate(zip(old_seen, new_seen, strict=False)) if a != b),
            min(len(old_seen), len(new_seen)),
        )
        detail = f"message {at + offset + 1} sent differs from the recorded one"
        if len(old_seen) != len(new_seen):
            detail = (
                f"the model was sent another context: {len(new_rest) + offset} "
                f"message(s), recorded {len(old_rest) + offset}; the first that "
                f"differs is message {at + offset + 1}"
            )
        return Difference(
            "messages",
            detail,
            _show(old_rest[at]) if at < len(old_rest) else None,
            _show(new_rest[at]) if at < len(new_rest) else None,
        )
    if recorded.tools is not None and now.tools is not None:
        if recorded.tools != now.tools:
            gone = [t for t in recorded.tools if t not in now.tools]
            added = [t for t in now.tools if t not in recorded.tools]
            bits = [f"added {added}" if added else "", f"removed {gone}" if gone else ""]
            what = "; ".join(b for b in bits if b) or "their order changed"
            old, new = ", ".join(recorded.tools), ", ".join(now.tools)
            return Difference("tools", f"other tools are bound: {what}", old, new)
        if (recorded.tool_schemas or []) != (now.tool_schemas or []):
            old_by = dict(zip(recorded.tools, recorded.tool_schemas or [], strict=False))
            new_by = dict(zip(now.tools, now.tool_schemas or [], strict=False))
            changed = [t for t in now.tools if old_by.get(t) != new_by.get(t)]
            name = changed[0] if changed else now.tools[0]
            old = json.dumps(old_by.get(name), indent=1, sort_keys=True, ensure_ascii=False)
            new = json.dumps(new_by.get(name), indent=1, sort_keys=True, ensure_ascii=False)
            what = f"the schema of tool {name!r} differs from the recorded one"
            return Difference("tools", what, None, None, _unified(old, new))
    if recorded.params is not None and now.params is not None:
        if recorded.model != now.model:
            return Difference("model", "another model is called", recorded.model, now.model)
        if recorded.params != now.params:
            keys = sorted(set(recorded.params) | set(now.params))
            changed = [k for k in keys if recorded.params.get(k) != now.params.get(k)]
            old = ", ".join(f"{k}={recorded.params.get(k)!r}" for k in changed)
            new = ", ".join(f"{k}={now.params.get(k)!r}" for k in changed)
            return Difference(
                "model", f"the model's parameters differ: {', '.join(changed)}", old, new
            )
    return None
