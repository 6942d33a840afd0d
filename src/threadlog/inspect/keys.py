"""Which state keys hold conversations, and what the other keys hold at each step.

A message key's channel is a `MessageLogChannel` or an `add_messages` aggregate, or its value
a non-empty list of messages; `messages` comes first, then by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage

__all__ = [
    "DEFAULT_KEY",
    "MISSING",
    "is_message_list",
    "message_keys",
    "pick_key",
    "value_changes",
    "value_text",
]

DEFAULT_KEY = "messages"


class _Missing:
    def __repr__(self) -> str:
        return "(unset)"


MISSING: Any = _Missing()


def is_message_list(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(m, BaseMessage) for m in value)
    )


def _message_channel(channel: Any) -> bool:
    from threadlog.channel import MessageLogChannel

    if isinstance(channel, MessageLogChannel):
        return True
    operator = getattr(channel, "operator", None)
    return getattr(operator, "__name__", "") in ("add_messages", "_add_messages")


def message_keys(
    values: Iterable[Mapping[str, Any]], channels: Mapping[str, Any] | None = None
) -> list[str]:
    found = {k for k, ch in (channels or {}).items() if _message_channel(ch)}
    for state in values:
        found.update(k for k, v in state.items() if k not in found and is_message_list(v))
    rest = sorted(found - {DEFAULT_KEY})
    return [DEFAULT_KEY, *rest] if DEFAULT_KEY in found else rest


def pick_key(keys: list[str], key: str | None) -> str:
    if key is None:
        return keys[0] if keys else DEFAULT_KEY
    if key not in keys:
        raise ValueError(
            f"key {key!r} is not a message key of this thread; its message keys: "
            f"{', '.join(keys) or 'none'}"
        )
    return key


def value_changes(
    values: Mapping[str, Any], before: Mapping[str, Any] | None, skip: Iterable[str]
) -> list[tuple[str, Any, Any]]:
    """The keys (not in `skip`) whose value differs from `before`'s, in name order."""
    prior = before or {}
    keys = sorted((set(values) | set(prior)) - set(skip))
    pairs = ((k, prior.get(k, MISSING), values.get(k, MISSING)) for k in keys)
    return [(k, a, b) for k, a, b in pairs if not _same(a, b)]


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an app's value whose __eq__ fails: compare what is shown
        return repr(a) == repr(b)


def value_text(value: Any) -> str:
    """A value on one line (its repr, whitespace runs as one space)."""
    try:
        text = repr(value)
    except Exception as exc:  # an app's __repr__ that fails still leaves the view readable
        text = f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"
    return " ".join(text.split())


def _messages(values: Mapping[str, Any], key: str) -> list[BaseMessage]:
    return [m for m in values.get(key) or [] if isinstance(m, BaseMessage)]


def other_appended(
    values: Mapping[str, Any],
    before: Mapping[str, Any] | None,
    keys: Iterable[str],
) -> dict[str, list[BaseMessage]]:
    """`{key: messages appended by the step}` for the message keys `keys` that have any."""
    out: dict[str, list[BaseMessage]] = {}
    for key in keys:
        seen = {m.id for m in _messages(before or {}, key)}
        new = [m for m in _messages(values, key) if m.id not in seen]
        if new:
            out[key] = new
    return out


def state_lines(
    changes: list[tuple[str, Any, Any]], others: Mapping[str, list[BaseMessage]]
) -> list[str]:
    """`• key = value` per changed value, `↳ key: role id: text` per other key's message."""
    from threadlog.inspect.steps import message_line

    lines = [f"• {k} unset" if b is MISSING else f"• {k} = {value_text(b)}" for k, _, b in changes]
    for key, msgs in others.items():
        lines.extend(f"↳ {key}: {message_line(m)}" for m in msgs)
    return lines
