"""The message log and its events: the append-only `MessageLog`, its reducer, and the rules
it applies (the module map is in docs/ARCHITECTURE.md)."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadlog.log.message_log import MessageLog, append_messages, flatten_write

# Resolved on first use so `threadlog.log.messages` loads without the whole log.
_LAZY = ("MessageLog", "append_messages", "flatten_write")


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'threadlog.log' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module("threadlog.log.message_log"), name)


__all__ = ["MessageLog", "append_messages", "flatten_write"]
