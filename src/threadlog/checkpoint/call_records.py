"""The stored form of a recorded model call (`checkpoint/calls.py` writes it,
`inspect/calls.py` reads it): the reserved channel, the digests that address messages,
tool schemas and parameters, and how a call's messages become references and slices.

One write on `CALLS_CHANNEL` holds `{"v": FORMAT, "calls": [record, ...], "blobs": {digest:
blob}}`. A record: `run_id`, `t` (when the call started), `ns` (the task's
`langgraph_checkpoint_ns`), `step`, `model`, `params` (a digest), `messages`, `tools` and
`tools_d` (a digest) when tools were bound, `node` when the namespace does not name it,
`reply_id` (the first generation's message), `others` when the call made more than one
generation (`n>1`: the rest, in order, each `{"d"[, "id"]}`, its content in `blobs[d]`),
`error`. Each of `messages` is `{"id", "d", "ref": true}` (a message the thread
stores: by id and digest), `{"d", "ref": true}` (a copy sent without id: by content),
`{"d"[, "id"]}` (its content in `blobs[d]`) or `{"slice": [run id, start, end]}` (those
messages of an earlier stored call). A blob is `{"k": "message", role, content, …}`,
`{"k": "tools", "value": schemas}`, `{"k": "params", "value": params}` or `{"k":
"store_value", "value": a store item's value}`.

When the graph has a store, the write also holds `"store": [record, ...]`: the `BaseStore`
operations of the task (`store_ops`), each record `run_id` (`store-…`), `t`, `ns`,
`step`, `node`, `ops`: `{"op": "get", "namespace", "key", "found"[, "value": digest]}`,
`{"op": "search", "namespace", "query"?, "filter"?, "items": [[namespace, key, value
digest], ...]}`, `{"op": "put" | "delete", "namespace", "key"[, "value": digest]}`,
`{"op": "list_namespaces", "count"}`. A value's content is in `blobs`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import BaseMessage

from threadlog.log.messages import digest, fingerprint

__all__ = [
    "CALLS_CHANNEL",
    "CALLS_TASK_PREFIX",
    "FORMAT",
    "PARAM_SKIP",
    "Key",
    "blob_digest",
    "compress",
    "fingerprint_of",
    "messages_in",
    "model_name",
    "plain",
    "stored_digests",
    "tool_name",
    "unnamed_digest",
]


CALLS_CHANNEL = "__threadlog_calls__"
"""The reserved channel a step's recorded model calls are stored under."""
CALLS_TASK_PREFIX = "threadlog-calls:"
"""How the task id of a calls write starts (never a task's own id)."""
FORMAT = 1


def blob_digest(value: Any) -> str:
    """A stable digest of a JSON-like value (tool schemas, call parameters)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON-like data (what the strict serializer stores without an allowlist)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 12:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if hasattr(value, "model_dump"):
        try:
            return plain(value.model_dump(), depth + 1)
        except Exception:
            return repr(value)
    return repr(value)


def stored_digests(message: BaseMessage) -> list[str]:
    """The digests a copy of a stored message may have when sent: its own and, for a
    message with a `name`, the same without it (a provider's wire form may drop it)."""
    try:
        own = digest(message)
    except Exception:  # a message the log has no role for: found by id only
        return []
    if message.name is None:
        return [own]
    return [own, unnamed_digest(message)]


def unnamed_digest(message: BaseMessage) -> str:
    """The digest of a named message's copy without its `name` (`stored_digests`)."""
    fp = fingerprint(message)
    fp.pop("name", None)
    return blob_digest(fp)


def fingerprint_of(message: BaseMessage) -> dict[str, Any]:
    try:
        return fingerprint(message)
    except Exception:  # a message the log has no role for (a ChatMessage's own role)
        role = getattr(message, "role", None) or type(message).__name__
        return {"role": str(role), "content": message.content}


def tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        fn = tool.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return str(fn["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
        return str(tool.get("type") or "?")
    return str(getattr(tool, "name", None) or type(tool).__name__)


PARAM_SKIP = frozenset({"tools", "_type", "stop", "messages", "functions"})


def messages_in(value: Any, depth: int = 0, *, lists: int = 2) -> Iterable[BaseMessage]:
    """The message objects one stored write holds (a message, a list, an input dict):
    lists nested up to `lists` deep, dicts one level less."""
    if isinstance(value, BaseMessage):
        yield value
    elif depth < lists and isinstance(value, (list, tuple)):
        for item in value:
            yield from messages_in(item, depth + 1, lists=lists)
    elif depth < lists - 1 and isinstance(value, dict):
        for item in value.values():
            yield from messages_in(item, depth + 1, lists=lists)


Key = tuple[str | None, str]  # a sent message: (id, digest)


def compress(
    entries: list[dict[str, Any]], keys: list[Key], prev: tuple[str, list[Key]] | None
) -> list[dict[str, Any]]:
    """`entries` with each run of two or more messages that a stored earlier call also
    sent, in the same order, as `{"slice": [its run id, start, end]}`: a call sends its
    agent's previous context again plus what is new, so a record stores what is new."""
    if prev is None:
        return entries
    run_id, before = prev
    where: dict[Key, int] = {}
    for pos, key in enumerate(before):
        where.setdefault(key, pos)
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(keys):
        found = where.get(keys[i])
        if found is None:
            out.append(entries[i])
            i += 1
            continue
        j = found
        n = 0
        while i + n < len(keys) and j + n < len(before) and keys[i + n] == before[j + n]:
            n += 1
        if n < 2:
            out.append(entries[i])
        else:
            out.append({"slice": [run_id, j, j + n]})
        i += max(n, 1)
    return out


def model_name(serialized: dict[str, Any], params: Any, metadata: dict[str, Any]) -> str:
    params = params if isinstance(params, dict) else {}
    serialized = serialized if isinstance(serialized, dict) else {}
    names = (metadata.get("ls_model_name"), params.get("model"), params.get("model_name"))
    for value in (*names, serialized.get("name")):
        if isinstance(value, str) and value:
            return value
    ids = serialized.get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else "?"
