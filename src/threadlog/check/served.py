"""`check` of the threads a LangGraph server (`langgraph dev`, LangGraph Platform) serves.

`check_served(server, profiles=, threads=None, all_checkpoints=False)` yields one
`ThreadCheck` per thread the server lists (paged, none kept) or per id of `threads` (an
unknown one raises `LookupError`): every key of the head state (or every state) holding
LangChain message dicts, `messages` first; the top-level namespace only. Problems carry
the format `server` and are not `repairable`. `check(source, …)` sends a server URL here,
anything else to `threadlog.check.database.check`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from threadlog.check.database import (
    CheckReport,
    ThreadCheck,
    add_findings,
    report_of,
    resolve_profiles,
)
from threadlog.check.database import check as check_database
from threadlog.inspect.keys import DEFAULT_KEY
from threadlog.inspect.readonly import describe, is_server_url
from threadlog.inspect.remote import Server, to_messages
from threadlog.providers.profiles import Profile

__all__ = ["SERVER_FORMAT", "ServedCheckReport", "check", "check_served", "message_lists"]

SERVER_FORMAT = "server"

# LangChain's message dict `type`s (`messages_from_dict`), chunks included.
_MESSAGE_TYPES = frozenset(
    {"human", "ai", "system", "tool", "function", "chat", "remove", "developer"}
) | {f"{t}MessageChunk" for t in ("AI", "Human", "System", "Tool", "Function", "Chat")}


def _is_message_list(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    return all(isinstance(m, Mapping) and m.get("type") in _MESSAGE_TYPES for m in value)


def message_lists(values: Any) -> list[tuple[str, list[Any]]]:
    """`(key, messages)` for every key of a served state holding messages, `messages` first."""
    if not isinstance(values, Mapping):
        return []
    keys = [k for k, v in values.items() if _is_message_list(v)]
    return [(k, to_messages(values[k])) for k in sorted(keys, key=lambda k: (k != DEFAULT_KEY, k))]


def _states(server: Server, thread_id: str, all_checkpoints: bool) -> Iterator[dict[str, Any]]:
    if all_checkpoints:
        for page in server.history_pages(thread_id):
            yield from page
        return
    state = server.state(thread_id)
    if (state.get("checkpoint") or {}).get("checkpoint_id"):
        yield state


def check_served(
    server: Server,
    *,
    profiles: Sequence[Profile],
    threads: Sequence[str] | None = None,
    all_checkpoints: bool = False,
    strict_first_turn: bool = False,
) -> Iterator[ThreadCheck]:
    """One `ThreadCheck` per thread `server` serves (module doc)."""
    if threads is not None:
        ids: Iterable[str] = list(dict.fromkeys(threads))
        for tid in ids:  # before any output, as a database does
            try:
                found = next(_states(server, tid, False), None) is not None
            except LookupError:
                found = False
            if not found:
                raise LookupError(
                    f"no thread {tid!r} with a checkpoint on {describe(server.url)} "
                    "(`threadlog threads --db URL` lists them)"
                )
    else:
        ids = server.thread_ids()
    for tid in ids:
        result = ThreadCheck(tid)
        try:
            for state in _states(server, tid, all_checkpoints):
                cid = str(state["checkpoint"]["checkpoint_id"])
                # The server says which step runs next (a database's `pending_steps`).
                pending = [str(n) for n in state.get("next") or ()]
                lists = [(k, SERVER_FORMAT, m) for k, m in message_lists(state.get("values"))]
                add_findings(
                    result, cid, lists, pending, profiles, strict_first_turn, writable=False
                )
                result.checkpoints += 1
        except Exception as exc:  # one unreadable thread must not hide the others
            result.error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if result.checkpoints or result.error is not None:
            yield result


class ServedCheckReport(CheckReport):
    """`CheckReport` of a server: its repair note says where a repair is written."""

    def notes(self) -> list[str]:
        if not self.tally.by_kind:
            return []
        return [
            "a server's threads are not repaired through its URL: threadlog check --db "
            "<its database> --repair (or answer the call with the server's update_state)"
        ]


def check(
    source: Any,
    *,
    profiles: Iterable[str | Profile] | None = None,
    threads: Sequence[str] | None = None,
    all_checkpoints: bool = False,
    strict_first_turn: bool = False,
) -> CheckReport:
    """Check the threads of `source` (a checkpointer, database URL or path, or server URL)."""
    options: Any = {
        "threads": threads,
        "all_checkpoints": all_checkpoints,
        "strict_first_turn": strict_first_turn,
    }
    if not (isinstance(source, str) and is_server_url(source)):
        return check_database(source, profiles=profiles, **options)
    chosen = resolve_profiles(profiles)
    with Server(source) as server:
        results = check_served(server, profiles=chosen, **options)
        return report_of(results, describe(source), chosen, ServedCheckReport)
