"""The compaction event list as an append-only `DeltaChannel` (each step's new events stored).

Contract (a node's write, a replay of stored writes, a migration from a plain list):

* An event is a dict with at least `id`, `kind` (`trim` | `summary`) and `cut_to`;
  anything else raises `InvalidMessageError` naming its position.
* Append-only. An event whose `id` is present is a replay when its content is the same
  (`ts` not compared), else `ConflictingIdError`. `Overwrite` raises `AppendOnlyError`.
* Batching-invariant: `append(append(s, xs), ys) == append(s, xs + ys)`.
* A failed batch changes nothing.

Cost: the value is an `(EventLog, version)` view, shared like the message log's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import PendingWrite
from langgraph.errors import EmptyChannelError

from threadlog._upstream import is_overwrite
from threadlog.channel import KeyedWrites, LogChannel
from threadlog.errors import AppendOnlyError, ConflictingIdError, InvalidMessageError

__all__ = ["CompactionsChannel", "EventLog", "append_events"]

KINDS = ("trim", "summary")
_UNCOMPARED = frozenset({"ts"})


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in (a.keys() | b.keys()) - _UNCOMPARED if a.get(k) != b.get(k))


def _checked(event: Any, position: int) -> dict[str, Any]:
    if not isinstance(event, Mapping) or not {"id", "kind", "cut_to"} <= event.keys():
        raise InvalidMessageError(
            f"compactions[{position}] is not a compaction event: {event!r}",
            position=position,
            fix="write events made by threadlog.ContextNode / ModelNode "
            "(dicts with id, kind, cut_to); the event list is append-only",
        )
    if event["kind"] not in KINDS:
        raise InvalidMessageError(
            f"compactions[{position}] has unknown kind {event['kind']!r}",
            position=position,
            fix="kind is 'trim' or 'summary'",
        )
    return dict(event)  # our own copy: the writer's dict may change later


class EventLog:
    """Committed events in order and their index by id; `version` is how many."""

    __slots__ = ("_by_id", "events")

    def __init__(self, events: Sequence[Mapping[str, Any]] = ()) -> None:
        # Stored events are trusted, like stored messages; new writes go through `extend`.
        self.events: list[dict[str, Any]] = []
        self._by_id: dict[Any, int] = {}
        for e in events:
            d = dict(e)
            self._by_id.setdefault(d.get("id"), len(self.events))
            self.events.append(d)

    @property
    def version(self) -> int:
        return len(self.events)

    def at(self, version: int) -> EventLog:
        return EventLog(self.events[:version])

    def extend(self, items: Sequence[Any], start: int = 0) -> None:
        """Append a batch, all or nothing; replays dropped, conflicts refused."""
        staged: list[dict[str, Any]] = []
        staged_ids: dict[Any, dict[str, Any]] = {}
        for i, raw in enumerate(items):
            event = _checked(raw, start + i)
            eid = event["id"]
            at = self._by_id.get(eid)
            known = self.events[at] if at is not None else staged_ids.get(eid)
            if known is not None:
                diff = _differing(known, event)
                if not diff:
                    continue
                raise ConflictingIdError(
                    f"compaction event id {eid!r} is already recorded with different "
                    f"{', '.join(diff)}",
                    message_id=str(eid),
                    position=start + i,
                    fix="a compaction event is never rewritten; a new cut is a new event",
                )
            staged_ids[eid] = event
            staged.append(event)
        for event in staged:
            self._by_id[event["id"]] = len(self.events)
            self.events.append(event)

    def fast_forward(self, version: int, items: Sequence[Any]) -> int | None:
        """The version after `items` if they are exactly the next committed events."""
        v = version
        for item in items:
            if v >= len(self.events) or not isinstance(item, Mapping):
                return None
            held = self.events[v]
            if held.get("id") != item.get("id") or _differing(held, item):
                return None
            v += 1
        return v


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _refuse_overwrite(value: Any) -> None:
    if is_overwrite(value):
        raise AppendOnlyError(
            "Overwrite would replace the compaction events",
            fix="compaction events are append-only; a new cut is a new event",
        )


def append_events(left: Sequence[Mapping[str, Any]] | None, right: Any) -> list[dict[str, Any]]:
    """The pure reducer of the event list (same rules as the channel)."""
    log = EventLog(left or ())
    log.extend(_items(right), start=len(log.events))
    return log.events


_WRITE_LOCK = threading.Lock()


def _batch_reducer(state: list[dict[str, Any]], writes: Sequence[Any]) -> list[dict[str, Any]]:
    out = state
    for w in writes:
        out = append_events(out, w)
    return out


class CompactionsChannel(LogChannel):
    """The `compactions` state key: append-only events, stored per step."""

    __slots__ = ()
    _reduce = staticmethod(_batch_reducer)
    _log: EventLog | None

    @staticmethod
    def _load(items: Any) -> EventLog:
        return EventLog(items)

    @staticmethod
    def _items_of(log: EventLog) -> list[dict[str, Any]]:
        return log.events

    def _write(self, items: list[Any]) -> None:
        log = self._log
        if log is None:
            log = EventLog()
            log.extend(items)
            self._set(log)
            return
        with _WRITE_LOCK:
            if self._ver == log.version:
                log.extend(items, start=self._ver)
                self._ver = log.version
                return
            ver = log.fast_forward(self._ver, items)
            if ver is not None:  # another reader of this history wrote exactly these
                self._ver = ver
                return
        own = log.at(self._ver)
        own.extend(items, start=self._ver)
        self._set(own)

    def replay_writes(self, writes: Sequence[PendingWrite]) -> None:
        self._loaded_by(writes)
        if self._log is None:
            self._set(EventLog())
        for _, _, value in writes:
            _refuse_overwrite(value)
            self._write(_items(value))
        if isinstance(writes, KeyedWrites) and self._log is not None:
            writes.register(self._log, self._ver)  # the history cache keeps it

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        for v in values:
            _refuse_overwrite(v)
        self._write([e for v in values for e in _items(v)])
        return True

    def get(self) -> list[dict[str, Any]]:
        if self._log is None:
            raise EmptyChannelError()
        return self._log.events[: self._ver]
