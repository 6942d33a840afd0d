"""Stored msgpack values compressed: the serializer's bytes as raw deflate with a preset
dictionary, under a type tag of their own.

Why: a stored row of threadlog's is mostly one message or a small record, well under the
size at which Postgres compresses a row (about 2 KB), and every such value spells out the
same field and class names. Deflate with those names as a preset dictionary stores it in
about half the bytes, on SQLite and Postgres alike.

Contract:

* `pack(kind, data)`: `("msgpack-z1", deflated)` when `kind` is `"msgpack"` and that is
  shorter; anything else unchanged (so a value stays readable by the serializer that
  wrote it: an unknown tag is never produced for a non-msgpack value).
* `unpack(kind, data)`: the inverse; any other tag (rows written before this format, or
  by another serializer) unchanged. The tag has no `+`: LangGraph's
  `EncryptedSerializer` splits its cipher name off at the first one.
* `DICTIONARY` is part of the stored format: changing it needs a new tag (`-z2`), with
  this one still read.
"""

from __future__ import annotations

import zlib

from threadlog.errors import StoredDataError

__all__ = ["DICTIONARY", "TAG", "pack", "unpack"]

TAG = "msgpack-z1"
# Names every stored message and call record repeats; frozen (module doc).
DICTIONARY = (
    b"tool_call_idartifactstatussuccesserror"
    b"langchain_core.messages.toolToolMessagelangchain_core.messages.humanHumanMessage"
    b"langchain_core.messages.systemSystemMessageresentitemsrun_idreply_idslicerefparams"
    b"blobscallsstepmodelnsmessagestools_dnodeothersstarted_atlatency_msstep_ms"
    b"context_messagessystem_prompt\xa4type\xa2ai\xa4name\xc0\xa2id\xd9.lc_run--"
    b"\xaatool_calls\x90\xb2invalid_tool_calls\x90\xaeusage_metadata\xc0\xb3model_validate_json"
    b"\x94\xbalangchain_core.messages.ai\xa9AIMessage\x89\xa7content"
    b"\xb1additional_kwargs\x80\xb1response_metadata\x81\xa9threadlog"
)
_LEVEL = 6


def pack(kind: str, data: bytes) -> tuple[str, bytes]:
    if kind != "msgpack" or len(data) < 64:
        return kind, data
    z = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15, zdict=DICTIONARY)
    out = z.compress(data) + z.flush()
    return (TAG, out) if len(out) < len(data) else (kind, data)


def unpack(kind: str, data: bytes) -> tuple[str, bytes]:
    if kind != TAG:
        return kind, data
    try:
        z = zlib.decompressobj(-15, zdict=DICTIONARY)
        return "msgpack", z.decompress(data) + z.flush()
    except zlib.error as e:
        raise StoredDataError(f"a stored {TAG} value does not inflate ({e})") from None
