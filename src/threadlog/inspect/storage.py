"""How many bytes each checkpoint of a thread occupies in its checkpointer's tables.

Contract: `stored_bytes(saver, thread_id, namespace="")` returns `{checkpoint_id: bytes}`
for one namespace (the root by default; a subgraph's `checkpoint_ns`), or `None` when the
saver keeps no measurable storage we know of. A checkpoint's bytes are what its rows hold:
the checkpoint and metadata row, the channel blobs whose version first appears in it
(Postgres stores values apart from the checkpoint), and the writes saved against it (the
writes of the step that runs *from* it, including those of a task that failed). Summing
every checkpoint gives the thread's total in the tables.

Only sizes are read (`length()`, `octet_length()`); values are never decoded here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from threadlog._upstream import postgres_cursor

__all__ = ["stored_bytes"]


def _unwrap(saver: Any) -> Any:
    # threadlog.checkpointer wraps the concrete saver (run guard, read cache) as `.inner`.
    seen = 0
    while "inner" in vars(saver) and seen < 10:
        saver, seen = vars(saver)["inner"], seen + 1
    return saver


def stored_bytes(
    saver: BaseCheckpointSaver[Any], thread_id: str, namespace: str = ""
) -> dict[str, int] | None:
    saver = _unwrap(saver)
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        return _sqlite(conn, thread_id, namespace)
    if isinstance(saver, InMemorySaver):
        return _memory(saver, thread_id, namespace)
    if type(saver).__module__.startswith("langgraph.checkpoint.postgres"):
        return _postgres(saver, thread_id, namespace)
    return None


def _add(out: dict[str, int], rows: Iterable[tuple[Any, Any]]) -> None:
    for cid, size in rows:
        if cid is not None:
            out[str(cid)] = out.get(str(cid), 0) + int(size or 0)


def _sqlite(conn: sqlite3.Connection, thread_id: str, ns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    _add(
        out,
        conn.execute(
            "SELECT checkpoint_id, length(checkpoint) + length(metadata) FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        ),
    )
    _add(
        out,
        conn.execute(
            "SELECT checkpoint_id, sum(length(value)) FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = ? GROUP BY checkpoint_id",
            (thread_id, ns),
        ),
    )
    return out


def _postgres(saver: Any, thread_id: str, ns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    with postgres_cursor(saver) as cur:  # the saver's own connection handling (pool or conn)
        cur.execute(
            "SELECT checkpoint_id, octet_length(checkpoint::text) + octet_length(metadata::text)"
            " AS n, checkpoint -> 'channel_versions' AS versions FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns = %s ORDER BY checkpoint_id",
            (thread_id, ns),
        )
        checkpoints = cur.fetchall()
        cur.execute(
            "SELECT channel, version, coalesce(octet_length(blob), 0) AS n "
            "FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s",
            (thread_id, ns),
        )
        blobs = {(r["channel"], r["version"]): r["n"] for r in cur.fetchall()}
        cur.execute(
            "SELECT checkpoint_id, sum(octet_length(blob)) AS n FROM checkpoint_writes "
            "WHERE thread_id = %s AND checkpoint_ns = %s GROUP BY checkpoint_id",
            (thread_id, ns),
        )
        writes = [(r["checkpoint_id"], r["n"]) for r in cur.fetchall()]
    _add(out, [(r["checkpoint_id"], r["n"]) for r in checkpoints])
    _attribute_blobs(out, [(r["checkpoint_id"], r["versions"] or {}) for r in checkpoints], blobs)
    _add(out, writes)
    return out


def _memory(saver: InMemorySaver, thread_id: str, ns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    versions: dict[str, Mapping[str, Any]] = {}
    for cid, (ckpt, meta, _parent) in saver.storage.get(thread_id, {}).get(ns, {}).items():
        out[cid] = len(ckpt[1]) + len(meta[1])
        # The saver's own serializer reads the checkpoint (for its channel versions).
        versions[cid] = saver.serde.loads_typed(ckpt).get("channel_versions") or {}
    blobs = {
        (ch, str(ver)): len(blob[1])
        for (tid, bns, ch, ver), blob in saver.blobs.items()
        if tid == thread_id and bns == ns
    }
    _attribute_blobs(out, [(cid, versions[cid]) for cid in sorted(versions)], blobs)
    for (tid, wns, cid), writes in saver.writes.items():
        if tid == thread_id and wns == ns:
            out[cid] = out.get(cid, 0) + sum(len(w[2][1]) for w in writes.values())
    return out


def _attribute_blobs(
    out: dict[str, int],
    checkpoints: Iterable[tuple[str, Mapping[str, Any]]],
    blobs: Mapping[tuple[str, str], int],
) -> None:
    # Oldest first: a blob belongs to the first checkpoint whose versions name it.
    counted: set[tuple[str, str]] = set()
    for cid, versions in checkpoints:
        for ch, ver in versions.items():
            key = (ch, str(ver))
            if key in blobs and key not in counted:
                counted.add(key)
                out[cid] = out.get(cid, 0) + int(blobs[key])
