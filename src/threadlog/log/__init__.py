"""The message log and its events: the append-only `MessageLog`, its reducer, and the rules
it applies (message values and ids, edits, removals, call pairing, call-id re-keying).

| module | one idea |
|---|---|
| `message_log` | `MessageLog`, `append_messages`, `flatten_write` |
| `messages` | coercion, roles, digests, deterministic ids |
| `message_values` | what a message may carry |
| `edits` | edits of an AIMessage's calls as events |
| `removals` | deletions as events |
| `events` | writes holding events, applied all or nothing |
| `refusals` | the errors a refused write raises |
| `pairing` | which calls are open, where a result goes, the "not completed" result |
| `call_ids` | re-keying call ids a reply cannot keep; `LoggedCall` |
"""

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
