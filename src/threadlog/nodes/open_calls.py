"""`OpenCalls`: the calls of a whole log that have no result, found without a full scan.

Why. `ModelNode` answers every open call before it calls the model — also calls its
context policy trimmed away (`[user, AI(call c1), user]` with `max_turns=1`): otherwise
the stored log keeps c1 open forever (issue 15, item 8). Scanning a 20,000-message log
every turn costs ~10 ms; the log only grows at its end in a normal turn, so the scan is
resumed where it stopped.

Contract:

* `OpenCalls.of(messages, key)` returns `{call id: its AIMessage}` for the calls of
  `messages` without a `ToolMessage` answering them, in log order — the same as
  `open_calls(messages)` (`threadlog.nodes.model`).
* With a `key` (the thread and namespace), it remembers how far it scanned and resumes
  there when the log still starts with what it saw (same length reached, same id at the
  last scanned position). Anything else — another branch, a result placed in the middle
  of the log (results go right after their request) — is a full scan. So the answer is
  always exact; only its cost varies.
* `scan(messages, key)` also returns every call id the log uses, those an edit
  superseded included (for re-keying a reply's colliding ids), resumed the same way.
* At most `max_threads` keys are remembered (least recently used forgotten).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.edits import EDIT_KEY, audit_call_ids
from threadlog.messages import calls_of

__all__ = ["OpenCalls"]


@dataclass
class _Scan:
    count: int = 0
    last_id: str | None = None
    open: dict[str, AIMessage] = field(default_factory=dict)
    # Where each request with open calls sits: an edit (`threadlog.Edit`) changes a
    # request's calls in place, which a resumed scan must notice.
    where: dict[int, AIMessage] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # every call id of the log
    # Whether `used` is this scan's alone: a resumed scan takes the set over instead of
    # copying it (a copy costs O(history) per call); a second resume from the same scan
    # then copies.
    owns_used: bool = True


def _advance(scan: _Scan, messages: Sequence[BaseMessage]) -> None:
    for i in range(scan.count, len(messages)):
        m = messages[i]
        if isinstance(m, ToolMessage):
            scan.open.pop(m.tool_call_id, None)
        elif isinstance(m, AIMessage):
            if m.tool_calls or m.invalid_tool_calls:
                for call in calls_of(m):
                    scan.open[call["id"] or ""] = m
                    scan.used.add(call["id"] or "")
                scan.where[i] = m
            if EDIT_KEY in m.response_metadata:
                # Ids an edit dropped stay taken: the audit record holds them.
                scan.used |= audit_call_ids(m)
    scan.count = len(messages)
    scan.last_id = messages[-1].id if messages else None
    live = {id(m) for m in scan.open.values()}
    scan.where = {i: m for i, m in scan.where.items() if id(m) in live}


def _unedited(scan: _Scan, messages: Sequence[BaseMessage]) -> bool:
    return all(
        messages[i] is m or calls_of(messages[i]) == calls_of(m) for i, m in scan.where.items()
    )


class OpenCalls:
    """Open calls of a log, scanned incrementally per key (module doc)."""

    def __init__(self, max_threads: int = 256) -> None:  # a forgotten key: one full scan
        self._scans: OrderedDict[Hashable, _Scan] = OrderedDict()
        self._max = max_threads
        self._lock = threading.Lock()

    def of(
        self, messages: Sequence[BaseMessage], key: Hashable | None = None
    ) -> dict[str, AIMessage]:
        return self.scan(messages, key)[0]

    def scan(
        self, messages: Sequence[BaseMessage], key: Hashable | None = None
    ) -> tuple[dict[str, AIMessage], set[str]]:
        """(`of(messages, key)`, every call id the log's assistant messages use — the
        same set as `threadlog.nodes.turns.call_ids(messages)`; read it at once, a later
        scan of the same key may add to it)."""
        scan = self._resume(messages, key)
        _advance(scan, messages)
        if key is not None:
            with self._lock:
                self._scans[key] = scan
                self._scans.move_to_end(key)
                while len(self._scans) > self._max:
                    self._scans.popitem(last=False)
        return dict(scan.open), scan.used

    def _resume(self, messages: Sequence[BaseMessage], key: Hashable | None) -> _Scan:
        with self._lock:
            old = self._scans.get(key) if key is not None else None
        if (
            old is not None
            and 0 < old.count <= len(messages)
            and messages[old.count - 1].id == old.last_id
            and _unedited(old, messages)
        ):
            with self._lock:
                used = old.used if old.owns_used else set(old.used)
                old.owns_used = False
            return _Scan(old.count, old.last_id, dict(old.open), dict(old.where), used)
        return _Scan()
