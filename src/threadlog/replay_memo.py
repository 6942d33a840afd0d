"""A process-wide memo of rebuilt message logs, for savers without threadlog's history cache.

Why. A plain `SqliteSaver`/`PostgresSaver` (what LangGraph Server and `langgraph dev` bring)
hands `MessageLogChannel.replay_writes` the whole thread's writes on every load. Decoding
them is the saver's cost and cannot be avoided without wrapping it; re-indexing every
message through the log's rules each turn is ours, and this memo removes it: a warm
process re-applies only the writes it has not replayed before.

Contract:

* An entry maps the first write's task id (plus the seed it started from) to the task
  ids of the writes it replayed, and the `(MessageLog, version)` it rebuilt from them.
* A load reuses an entry only when the writes the saver returned *start with exactly
  those task ids*, and every `NULL_TASK_ID` write among them (writes that belong to no
  task share that one id) carries the same messages. A task's write row is never
  replaced once stored (both savers insert them with "do nothing on conflict"), and a
  task id names one task of one checkpoint, so equal ids mean equal writes. The remaining writes are
  replayed normally. The memo never supplies a message the saver did not return, so
  another process's writes, forks and edits are read exactly; it cannot be stale.
* Bounded: at most `max_messages` messages across entries, least recently used first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import PendingWrite

from threadlog._upstream import NULL_TASK_ID
from threadlog.log import flatten_write

if TYPE_CHECKING:
    from threadlog.log import MessageLog

__all__ = ["ReplayMemo", "replay_memo"]

DEFAULT_MAX_MESSAGES = 200_000

_Key = tuple[str, int]  # first write's task id, length of the seed (-1: none)
# task ids replayed, message ids of each NULL_TASK_ID write among them, log, version
_Entry = tuple[list[str], dict[int, list[Any]], "MessageLog", int]


class ReplayMemo:
    """First task id → (task ids replayed, log, version); see the module docstring."""

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
        ids, nulls, log, version = entry
        n = len(ids)
        if (
            n > len(writes)
            or any(writes[i][0] != ids[i] for i in range(n))
            or any(not _same_write(log, ids_i, writes[i][2]) for i, ids_i in nulls.items())
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
        ids = [w[0] for w in writes]
        nulls = {
            i: [getattr(m, "id", None) for m in flatten_write(w[2])]
            for i, w in enumerate(writes)
            if w[0] == NULL_TASK_ID
        }
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old[3]
            if version > self.max_messages:
                return
            self._entries[key] = (ids, nulls, log, version)
            self._size += version
            while self._size > self.max_messages:
                _, evicted = self._entries.popitem(last=False)
                self._size -= evicted[3]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0


def _same_write(log: MessageLog, ids: list[Any], value: Any) -> bool:
    """Whether a `NULL_TASK_ID` write (update_state's: they all share that task id) holds
    the same messages as the one replayed at this position: same ids, same content."""
    items = flatten_write(value)
    if [getattr(m, "id", None) for m in items] != ids:
        return False
    for item, mid in zip(items, ids, strict=True):
        held = log.get(mid) if isinstance(mid, str) else None
        if held is None or (held is not item and held != item):
            return False
    return True


replay_memo = ReplayMemo()
"""The process-wide memo `MessageLogChannel` uses (inspect `hits`, `clear()` it)."""
