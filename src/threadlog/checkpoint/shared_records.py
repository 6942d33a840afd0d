"""One read of a thread's stored writes decodes each distinct stored message once.

Contract:

* `SharedRecords(serde).loads((type_tag, blob))` reads one stored write exactly as
  `serde.loads_typed` does, except that within one read, records with identical bytes
  that decode to a LangChain message decode to *one* object.
* Each record is decoded by the serializer's own loader (threadlog's
  `StrictSerializer.loads_shared` in one pass; another `JsonPlusSerializer`'s
  `loads_typed` per record), so blocked records are refused or become placeholders as
  usual, and a message built around a blocked record is never shared. Anything but a
  `JsonPlusSerializer`'s msgpack goes to `serde.loads_typed` unchanged.
* A safe message record holding exactly its class's fields is built without validating
  them again (`stored_message`, `_upstream.built_message`).
* A saver's own read of the writes gets the same inside `sharing(serde)` (a context
  variable: one thread's or task's read), which `StrictSerializer.loads_typed` consults
  (`shared_for`).
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
