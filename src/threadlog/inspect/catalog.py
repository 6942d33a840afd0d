"""Which threads a checkpointer holds: ids, checkpoint counts, first and newest checkpoint.

Contract: `thread_heads(saver)` returns one `Head` per thread of the root namespace, newest
head first, from one query over LangGraph's own tables for `SqliteSaver` / `PostgresSaver`
(so listing 1000 threads does not decode 1000 histories) and from `saver.list(None)` for
any other saver. `head_errors(saver, heads)` reads the `__error__` writes saved against
those heads (tasks that failed from the newest checkpoint), decoded by the saver's own
serializer. Like `storage.py`, this module knows the table names; nothing else here does.

Checkpoint ids are uuid6 (LangGraph's `uuid6`): they sort by creation time across
threads, and `id_time` reads the time back out of them without decoding any blob.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from threadlog._upstream import postgres_cursor

__all__ = ["Head", "checkpoint_ids", "head_errors", "id_time", "thread_heads", "unwrap_saver"]

_GREGORIAN_OFFSET = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01
_ERROR = "__error__"


@dataclass(frozen=True, slots=True)
class Head:
    thread_id: str
    head_id: str
    first_id: str
    checkpoints: int


def id_time(checkpoint_id: str) -> str:
    """The creation time a uuid6 checkpoint id carries, ISO 8601 UTC ("" if not uuid6)."""
    try:
        u = UUID(checkpoint_id)
    except ValueError:
        return ""
    if u.version != 6:
        return ""
    ticks = ((u.int >> 80) << 12) | ((u.int >> 64) & 0x0FFF)
    seconds = (ticks - _GREGORIAN_OFFSET) / 10_000_000
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def unwrap_saver(saver: Any) -> Any:
    for _ in range(8):  # threadlog's wrappers keep the saver they wrap as `.inner`
        inner = vars(saver).get("inner") if hasattr(saver, "__dict__") else None
        if inner is None:
            return saver
        saver = inner
    return saver


def thread_heads(saver: BaseCheckpointSaver[Any]) -> list[Head]:
    raw = unwrap_saver(saver)
    conn = getattr(raw, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        rows: Iterable[tuple[Any, ...]] = conn.execute(
            "SELECT thread_id, max(checkpoint_id), min(checkpoint_id), count(*) "
            "FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id"
        ).fetchall()
    elif type(raw).__module__.startswith("langgraph.checkpoint.postgres"):
        with postgres_cursor(raw) as cur:  # the saver's own connection handling
            cur.execute(
                "SELECT thread_id, max(checkpoint_id) AS h, min(checkpoint_id) AS f, "
                "count(*) AS n FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id"
            )
            rows = [(r["thread_id"], r["h"], r["f"], r["n"]) for r in cur.fetchall()]
    else:
        seen: dict[str, list[Any]] = {}
        for tup in saver.list(None):
            conf = tup.config["configurable"]
            if conf.get("checkpoint_ns", ""):
                continue
            tid, cid = str(conf["thread_id"]), str(conf["checkpoint_id"])
            entry = seen.setdefault(tid, [tid, cid, cid, 0])
            entry[1], entry[2], entry[3] = max(entry[1], cid), min(entry[2], cid), entry[3] + 1
        rows = [tuple(v) for v in seen.values()]
    heads = [Head(str(t), str(h), str(f), int(n)) for t, h, f, n in rows]
    heads.sort(key=lambda h: h.head_id, reverse=True)
    return heads


def head_errors(saver: BaseCheckpointSaver[Any], heads: list[Head]) -> dict[str, list[str]]:
    """`{thread_id: [error text, ...]}` for tasks that failed from each thread's head."""
    raw = unwrap_saver(saver)
    conn = getattr(raw, "conn", None)
    wanted = {(h.thread_id, h.head_id) for h in heads}
    found: list[tuple[str, str, Any]] = []
    if isinstance(conn, sqlite3.Connection):
        for tid, cid, typ, value in conn.execute(
            "SELECT thread_id, checkpoint_id, type, value FROM writes "
            "WHERE checkpoint_ns = '' AND channel = ?",
            (_ERROR,),
        ):
            if (tid, cid) in wanted:
                found.append((tid, cid, raw.serde.loads_typed((typ, value))))
    elif type(raw).__module__.startswith("langgraph.checkpoint.postgres"):
        with postgres_cursor(raw) as cur:
            cur.execute(
                "SELECT thread_id, checkpoint_id, type, blob FROM checkpoint_writes "
                "WHERE checkpoint_ns = '' AND channel = %s",
                (_ERROR,),
            )
            for r in cur.fetchall():
                if (r["thread_id"], r["checkpoint_id"]) in wanted:
                    value = raw.serde.loads_typed((r["type"], r["blob"]))
                    found.append((r["thread_id"], r["checkpoint_id"], value))
    else:
        for h in heads:
            conf = {"thread_id": h.thread_id, "checkpoint_ns": "", "checkpoint_id": h.head_id}
            tup = saver.get_tuple({"configurable": conf})
            for _, channel, value in (tup.pending_writes if tup else None) or ():
                if channel == _ERROR:
                    found.append((h.thread_id, h.head_id, value))
    out: dict[str, list[str]] = {}
    for tid, _, value in found:
        text = value if isinstance(value, str) else f"{type(value).__name__}: {value}"
        out.setdefault(tid, []).append(text)
    return out


def checkpoint_ids(
    saver: BaseCheckpointSaver[Any], thread_id: str, namespace: str = ""
) -> list[str]:
    """The ids of a thread's checkpoints in `namespace` (the root by default), oldest
    first (no blob decoded)."""
    raw = unwrap_saver(saver)
    conn = getattr(raw, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        rows = conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, namespace),
        ).fetchall()
        return sorted(str(r[0]) for r in rows)
    if type(raw).__module__.startswith("langgraph.checkpoint.postgres"):
        with postgres_cursor(raw) as cur:
            cur.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s "
                "AND checkpoint_ns = %s",
                (thread_id, namespace),
            )
            return sorted(str(r["checkpoint_id"]) for r in cur.fetchall())
    base: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}
    return sorted(str(t.config["configurable"]["checkpoint_id"]) for t in saver.list(base))
