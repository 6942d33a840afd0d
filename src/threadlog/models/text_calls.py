"""A tool call a model wrote as text (no `tool_calls`, so an agent ends the turn on it):
`call_in_text(text, tool_names)` recognises it, so a caller can say why.

Recognised: ```` ``` ```` / ```` ```json ```` fenced blocks, `<tool_call>` tags, or the
whole text, holding `{"name": T, "arguments": {...}}` (or `"parameters"`) with T one of
`tool_names`. Anything else is None."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["TextCall", "call_in_text"]

_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.S)
_TAGGED = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)


@dataclass(frozen=True, slots=True)
class TextCall:
    """A call found in text: the tool's `name`, its `arguments`, and the `form` it had."""

    name: str
    arguments: dict[str, Any]
    form: str  # e.g. "a ```json fenced block", "<tool_call> tags", "bare JSON"


def call_in_text(text: str, tool_names: Collection[str]) -> TextCall | None:
    """The first call to one of `tool_names` written in `text` (see the module), or None."""
    if not text or not tool_names:
        return None
    candidates = [(m.group(2), f"a ```{m.group(1)} fenced block") for m in _FENCED.finditer(text)]
    candidates += [(m.group(1), "<tool_call> tags") for m in _TAGGED.finditer(text)]
    candidates.append((text, "bare JSON"))
    for body, form in candidates:
        call = _as_call(body.strip(), tool_names)
        if call is not None:
            return TextCall(call[0], call[1], form)
    return None


def _as_call(body: str, tool_names: Collection[str]) -> tuple[str, dict[str, Any]] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, dict):
            continue
        name = item.get("name")
        args = item.get("arguments", item.get("parameters"))
        if isinstance(args, str):  # OpenAI's own form: arguments as a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if isinstance(name, str) and name in tool_names and isinstance(args, dict):
            return name, args
    return None
