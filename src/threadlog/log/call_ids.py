"""The one rule for call ids a reply cannot keep: re-keying. Before an AIMessage is logged,
each call whose id is

* empty (`None` or `""`),
* repeated within the message, or
* already used by a call of *another* message in the log's view,

gets `call_<blake2b(message id, call index, old id)>`: deterministic, so a replay
re-keys the same way. The replaced ids are kept in
`response_metadata["threadlog_call_ids_rekeyed"]` (`REKEYED_KEY`, new id -> old id)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import AIMessage

from threadlog.log.messages import calls_of

__all__ = ["REKEYED_KEY", "LoggedCall", "needs_rekey", "rekey_calls"]

REKEYED_KEY = "threadlog_call_ids_rekeyed"


@dataclass(slots=True)
class LoggedCall:
    """One call of an AIMessage in a log: `calls_of(ai)[index]`, and its result once logged."""

    ai_id: str
    index: int
    name: str | None
    result_id: str | None = None


def needs_rekey(reply: AIMessage, taken: Callable[[str], bool]) -> bool:
    """Whether any call of `reply` has an empty, repeated or `taken` id."""
    return rekey_calls(reply, taken) is not reply


def rekey_calls(reply: AIMessage, used: set[str] | Callable[[str], bool]) -> AIMessage:
    """`reply` with every empty, `used` or repeated call id replaced (`reply` if none)."""
    taken = used.__contains__ if isinstance(used, set) else used
    calls = calls_of(reply)
    seen: set[str] = set()
    renamed: dict[int, str] = {}
    for i, c in enumerate(calls):
        cid = c["id"] or ""
        if not cid or taken(cid) or cid in seen:
            renamed[i] = _fresh(reply, i, cid, lambda x: taken(x) or x in seen)
        seen.add(renamed.get(i, cid))
    if not renamed:
        return reply
    new = [{**c, "id": renamed.get(i, c["id"])} for i, c in enumerate(calls)]
    n = len(reply.tool_calls)
    was = {renamed[i]: calls[i]["id"] for i in renamed}
    return reply.model_copy(
        update={
            "tool_calls": new[:n],
            "invalid_tool_calls": new[n:],
            "response_metadata": {**reply.response_metadata, REKEYED_KEY: was},
        }
    )


def _fresh(reply: AIMessage, index: int, old: str, taken: Callable[[str], bool]) -> str:
    # Derived from the reply's id so a replayed step re-keys identically.
    seed = f"{reply.id}:{index}:{old}"
    for attempt in range(100):
        digest = hashlib.blake2b(f"{seed}:{attempt}".encode(), digest_size=12).hexdigest()
        candidate = f"call_{digest}"
        if not taken(candidate):
            return candidate
    raise AssertionError("unreachable: 100 colliding 96-bit ids")
