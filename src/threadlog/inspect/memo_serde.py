"""A reader's serializer that decodes a large blob once per read.

Contract: `remember_large(serde)` wraps a read-only saver's serializer: `loads_typed` of
a blob of `LARGE` bytes or more (once inflated) returns the value decoded for the same
bytes, if one of the last `KEEP` large blobs was those bytes (LangGraph reads the newest
checkpoint twice).
The value is a fresh top-level dict around the same decoded values. Writing is refused.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from threadlog.checkpoint.compression import unpack

__all__ = ["KEEP", "LARGE", "remember_large"]

LARGE = 256 * 1024
KEEP = 4


class _RememberLarge:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._seen: OrderedDict[tuple[str, int, bytes], Any] = OrderedDict()

    def __getattr__(self, name: str) -> Any:  # the wrapped serializer's settings
        return getattr(self._inner, name)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise TypeError("a reader's serializer does not write")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        data = unpack(*data)  # large by its msgpack's size, deflated or not
        tag, blob = data
        if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) < LARGE:
            return self._inner.loads_typed(data)
        raw = bytes(blob)
        key = (tag, len(raw), raw[:64] + raw[-64:])
        hit = self._seen.get(key)
        if hit is not None and hit[0] == raw:
            self._seen.move_to_end(key)
            return _fresh(hit[1])
        value = self._inner.loads_typed(data)
        self._seen[key] = (raw, value)
        while len(self._seen) > KEEP:
            self._seen.popitem(last=False)
        return _fresh(value)


def _fresh(value: Any) -> Any:
    if isinstance(value, dict):
        out = dict(value)
        if isinstance(out.get("channel_values"), dict):
            out["channel_values"] = dict(out["channel_values"])
        return out
    return value


def remember_large(serde: Any) -> Any:
    return _RememberLarge(serde)
