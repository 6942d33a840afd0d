"""A process-wide memo of rebuilt message logs, for savers without threadlog's history cache.

Why. A plain `SqliteSaver`/`PostgresSaver` (what LangGraph Server and `langgraph dev`
bring) hands `MessageLogChannel.replay_writes` the whole thread's writes on every load.
Decoding them is the saver's cost and cannot be avoided without wrapping it; re-applying
every message through the log's rules each turn is ours, and this memo removes most of
it: a warm process checks the writes it has replayed before instead of re-applying them.

Contract:

* An entry maps the first write's task id (plus the length of the seed it started from)
  to what it replayed — per write, its task id and its messages' ids — and the
  `(MessageLog, version)` it rebuilt from them.
* A load reuses an entry only when the writes the saver returned *start with exactly
  those writes*: the same task ids, the same message ids in the same order, and each
  message equal (`==`) to the one the log holds under that id. Nothing is assumed about
  ids being unique or rows immutable, so a history other than the one the saver
  returned is never served: other processes' writes, forks and edits are read exactly.
  The rest of the writes are replayed normally.
* Bounded: at most `max_messages` messages across entries, least recently used first.
* Cost: one comparison per stored message per load (a few µs), instead of re-applying it
  through the log's indexes and rules.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import PendingWrite

from threadlog.log import flatten_write

if TYPE_CHECKING:
    from threadlog.log import MessageLog

__all__ = ["ReplayMemo", "replay_memo"]

DEFAULT_MAX_MESSAGES = 200_000

_Key = tuple[str, int]  # first write's task id, length of the seed (-1: none)
_Write = tuple[str, tuple[Any, ...]]  # a replayed write: task id, its messages' ids
_Entry = tuple[list[_Write], "MessageLog", int]


class ReplayMemo:
    """First task id → (writes replayed, log, version); see the module docstring."""

    def __init__(self, *, max_messages: int = DEFAULT_MAX_MESSAGES) -> None:
        self.max_messages = max_messages
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(
        self, writes: Sequence[PendingWrite], seed_len: int
    ) -> tuple[MessageLog, int, int] | None:
        """`(log, version, n)`: the log after the first `n` writes, if known."""
        if not writes:
            return None
        key = (writes[0][0], seed_len)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            self.misses += 1
            return None
        done, log, version = entry
        n = len(done)
        if n > len(writes) or not all(
            _same_write(log, done[i], writes[i]) for i in range(n)
        ):
            self.misses += 1
            return None
        self.hits += 1
        return log, version, n

    def store(
        self, writes: Sequence[PendingWrite], seed_len: int, log: MessageLog, version: int
    ) -> None:
        if not writes:
            return
        key = (writes[0][0], seed_len)
        done = [(w[0], tuple(_ids(w[2]))) for w in writes]
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old[2]
            if version > self.max_messages:
                return
            self._entries[key] = (done, log, version)
            self._size += version
            while self._size > self.max_messages:
                _, evicted = self._entries.popitem(last=False)
                self._size -= evicted[2]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0


def _ids(value: Any) -> list[Any]:
    return [getattr(m, "id", None) for m in flatten_write(value)]


def _same_write(log: MessageLog, done: _Write, write: PendingWrite) -> bool:
    """Whether `write` is the write replayed as `done`: same task id, same message ids in
    order, and each message equal to the one the log holds under its id (every id of a
    replayed write is in the log: it was committed then, or was a replay of an earlier
    message with the same id)."""
    task_id, ids = done
    if write[0] != task_id:
        return False
    items = flatten_write(write[2])
    if len(items) != len(ids):
        return False
    for item, mid in zip(items, ids, strict=True):
        held = log.get(mid) if isinstance(mid, str) else None
        if held is None or getattr(item, "id", None) != mid:
            return False
        if held is not item and held != item:
            return False
    return True


replay_memo = ReplayMemo()
"""The process-wide memo `MessageLogChannel` uses (inspect `hits`, `clear()` it)."""
