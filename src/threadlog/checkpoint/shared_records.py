"""One read of a thread's stored writes decodes each distinct stored message once.

Why. A multi-agent thread's writes hold the same message more than once: a handoff's
update and the agent's output both carry the messages the parent log did not have when
the turn began (stored as what they add, `threadlog.checkpoint.resent`, each against
that same starting point). A cold read decoded every copy (a pydantic construction
each) and the log then hashed both copies to see that the second is a replay — twice
the work of the messages it returns.

Contract:

* `SharedRecords(serde).loads((type_tag, blob))` reads one stored write exactly as
  `serde.loads_typed` does, except that within one `SharedRecords` (one read), stored
  records with identical bytes (same ext code, same payload) that decode to a LangChain
  message decode to *one* object. Identical bytes are an identical record, so the value
  is the one `loads_typed` gives; only the number of objects differs.
* Each record is decoded by the serializer's own loader: threadlog's
  `StrictSerializer.loads_shared` reads the blob in one pass with its msgpack record
  loader, and a blob in which a record was blocked is read again by `loads_typed`'s
  rules (refused with `StoredDataError`, or a reader's placeholders), nothing of it
  kept; a message built while a record inside it was blocked is never shared. Another
  `JsonPlusSerializer` has each record read by `serde.loads_typed` itself (re-wrapped as
  a one-record blob). Anything but a `JsonPlusSerializer`'s msgpack (another serializer,
  an encrypted blob) goes to `serde.loads_typed` unchanged.
* A stored LangChain message record (one of LangGraph's safe message types, holding
  exactly its class's fields) is built without validating its fields again
  (`stored_message`, `_upstream.built_message`): they were validated when the message
  was made, and LangGraph's own loader builds a record that fails validation
  unvalidated anyway. Anything else goes to the serializer's loader.
* The log takes an item that *is* the logged object as a replay without hashing it
  (`MessageLog._stage`, `edits.changed_in_place`), so a re-sent copy costs a dict
  lookup. Nothing outside one read shares these objects: each read has its own.
* A saver whose own code reads the writes (Postgres: LangGraph's
  `get_delta_channel_history`) is given the same through its serializer: inside
  `sharing(serde)` (a context variable: one thread's or one task's read, never another's),
  threadlog's `StrictSerializer.loads_typed` reads msgpack through that read's
  `SharedRecords` (`shared_for`). The history cache's cold read runs the saver's read
  inside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import ormsgpack
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.jsonplus import EXT_PYDANTIC_V2, JsonPlusSerializer

from threadlog._upstream import built_message

__all__ = ["SharedRecords", "shared_for", "sharing", "stored_message"]

_OPT = ormsgpack.OPT_NON_STR_KEYS
_MESSAGES_PREFIX = b"langchain_core.messages."


def stored_message(code: int, payload: bytes, hook: Callable[[int, bytes], Any]) -> Any:
    """The stored message record `(code, payload)` built without re-validation (module
    doc), its nested records read by `hook`; None for any other record."""
    if code != EXT_PYDANTIC_V2 or _MESSAGES_PREFIX not in payload[:40]:
        return None
    tup = ormsgpack.unpackb(payload, ext_hook=hook, option=_OPT)
    if not isinstance(tup, list) or len(tup) < 3 or type(tup[2]) is not dict:
        return None
    return built_message(tup[0], tup[1], tup[2])


class SharedRecords:
    """`loads_typed` for the writes of one read, one object per distinct stored message."""

    def __init__(self, serde: Any) -> None:
        self.serde = serde
        self.shared = isinstance(serde, JsonPlusSerializer)
        self._seen: dict[tuple[int, bytes], Any] = {}
        self._inside = False  # decoding one record: `shared_for` must not route it here

    def loads(self, data: tuple[str, bytes]) -> Any:
        type_tag, blob = data
        if not self.shared or type_tag != "msgpack":
            return self.serde.loads_typed(data)
        fast = getattr(self.serde, "loads_shared", None)
        if fast is not None:  # threadlog's strict serializer: the records in one pass
            return fast(blob, self._seen)
        failed: list[BaseException] = []

        def record(code: int, payload: bytes) -> Any:
            key = (code, payload)
            hit = self._seen.get(key)
            if hit is not None:
                return hit
            try:
                one = ormsgpack.packb(ormsgpack.Ext(code, payload))
                self._inside = True
                try:
                    value = self.serde.loads_typed(("msgpack", one))
                finally:
                    self._inside = False
            except BaseException as exc:  # ormsgpack would hide it behind a ValueError
                failed.append(exc)
                raise
            if isinstance(value, BaseMessage):
                self._seen[key] = value
            return value

        try:
            return ormsgpack.unpackb(blob, ext_hook=record, option=_OPT)
        except ValueError:
            if failed:
                raise failed[0] from None
            raise


_SHARING: ContextVar[SharedRecords | None] = ContextVar("threadlog_shared_records", default=None)


@contextlib.contextmanager
def sharing(serde: Any) -> Iterator[SharedRecords]:
    """Within the block, `serde`'s msgpack loads share one `SharedRecords` (module doc)."""
    previous = _SHARING.get()
    shared = SharedRecords(serde)
    _SHARING.set(shared)
    try:
        yield shared
    finally:
        # `set`, not `reset`: a flow may be closed from another context.
        _SHARING.set(previous)


def shared_for(serde: Any) -> SharedRecords | None:
    """The `SharedRecords` a load by `serde` goes through now, if any."""
    shared = _SHARING.get()
    if shared is None or shared.serde is not serde or shared._inside:
        return None
    return shared
