"""Reading a thread's ancestor writes straight from LangGraph's SQLite/Postgres tables.

Why. `HistoryCache` needs "the checkpoints between the cached one and the target, and
this channel's writes on them" — one or two queries. The savers' own
`get_delta_channel_history` answers a different question (everything back to the last
snapshot) and, on SQLite, deserializes every ancestor checkpoint to answer it. These
readers use only the savers' own SQL, tables and serializer; under any other saver
`underlying` finds nothing and the cache walks with `get_tuple` instead.
"""

from __future__ import annotations

import sys
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, writes_sort_key

from threadlog._upstream import (
    DELTA_STAGE1_SQL,
    build_delta_channels_writes_history,
    build_delta_stage2_sql,
    postgres_cursor,
    saver_has_task_path,
)

__all__ = [
    "postgres_saver_class",
    "postgres_walk",
    "sqlite_read",
    "sqlite_saver_class",
    "sqlite_walk",
    "underlying",
]

_Slot = tuple[str, str, str]  # thread_id, checkpoint_ns, channel

try:  # SqliteSaver: walk ids with the saver's own SQL, fetch only this channel's writes
    from langgraph.checkpoint.sqlite import SqliteSaver as sqlite_saver_class
except ImportError:  # pragma: no cover - sqlite saver not installed
    sqlite_saver_class = None  # type: ignore[assignment,misc]


def postgres_saver_class() -> type[Any] | None:
    """PostgresSaver, if its module is already loaded: a saver instance implies it is, and
    SQLite users then never import psycopg (`import threadlog` stays light)."""
    module = sys.modules.get("langgraph.checkpoint.postgres")
    return getattr(module, "PostgresSaver", None)


def underlying(saver: Any, cls: type[Any] | None) -> Any:
    """The `cls` saver under `saver` and its wrappers' `.inner` chain, if there is one."""
    for _ in range(8):
        if cls is None or saver is None:
            return None
        if isinstance(saver, cls):
            return saver
        saver = saver.__dict__.get("inner")
    return None


# Newest-first checkpoints from the target down to the cached id, each with whether it
# stores a value for any of the channels (inline, or a blob at its version: the probe
# of PostgresSaver's own walk) and its writes to them — one round trip. Ids only order
# checkpoints of one process; a parent outside the window just ends the walk (then the
# saver reads).
_PG_WALK_SQL = (
    "SELECT c.checkpoint_id, c.parent_checkpoint_id, c.inline, c.blob, "
    "w.task_id, w.task_path, w.idx, w.channel, w.type AS wtype, w.blob AS wblob FROM ("
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "(checkpoint -> 'channel_values') ?| %s AS inline, "
    "EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = k.thread_id "
    "AND b.checkpoint_ns = k.checkpoint_ns AND b.channel = ANY(%s) "
    "AND b.version = k.checkpoint -> 'channel_versions' ->> b.channel "
    "AND b.type <> 'empty') AS blob "
    "FROM checkpoints k WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND checkpoint_id <= %s AND checkpoint_id >= %s "
    "ORDER BY checkpoint_id DESC LIMIT %s) c "
    "LEFT JOIN checkpoint_writes w ON w.thread_id = c.thread_id "
    "AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id "
    "AND w.channel = ANY(%s)"
)


def postgres_walk(
    saver: Any,
    thread_id: str,
    ns: str,
    channels: list[str],
    target: str,
    cached_id: str,
    max_walk: int,
) -> dict[str, list[PendingWrite]] | None:
    """Each channel's writes from `cached_id` up to `target`, or None (not reached)."""
    with postgres_cursor(saver) as cur:
        cur.execute(
            _PG_WALK_SQL,
            (channels, channels, thread_id, ns, target, cached_id, 4 * max_walk, channels),
        )
        found = cur.fetchall()
    rows: dict[str, Any] = {}
    writes: dict[str, list[Any]] = {}
    for r in found:
        rows.setdefault(r["checkpoint_id"], r)
        if r["task_id"] is not None:
            writes.setdefault(r["checkpoint_id"], []).append(r)
    if target not in rows:
        return None
    chain: list[str] = []
    cid = rows[target]["parent_checkpoint_id"]
    while True:
        row = rows.get(cid) if cid is not None else None
        if row is None or cid in chain or len(chain) >= max_walk:
            return None
        chain.append(cid)
        if cid == cached_id:
            break
        if row["inline"] or row["blob"]:
            return None  # a stored snapshot on the way: a fork; the saver reads
        cid = row["parent_checkpoint_id"]
    out: dict[str, list[PendingWrite]] = {ch: [] for ch in channels}
    for cid in reversed(chain):  # oldest first, like the saver's own history
        for r in sorted(
            writes.get(cid, ()),
            key=lambda r: writes_sort_key(r["task_path"] or "", r["task_id"], r["idx"]),
        ):
            value = saver.serde.loads_typed((r["wtype"], r["wblob"]))
            out[r["channel"]].append((str(r["task_id"]), r["channel"], value))
    return out


def sqlite_walk(
    saver: Any,
    thread_id: str,
    ns: str,
    channels: list[str],
    target: str,
    cached_id: str,
    max_walk: int,
) -> dict[str, list[PendingWrite]] | None:
    """Each channel's writes from `cached_id` up to `target`, or None (not reached).

    Same walk as `SqliteSaver.get_delta_channel_history`, stopped at the cached id
    instead of at a stored snapshot; a snapshot on the way means a fork (None).
    """
    chain: list[str] = []
    with saver.cursor(transaction=False) as cur:
        cur.execute(DELTA_STAGE1_SQL, (thread_id, ns, target, thread_id, ns))
        found = False
        for cid, type_tag, blob in cur:
            if cid == target and not chain:
                continue
            if cid in chain or len(chain) >= max_walk:
                return None
            chain.append(cid)
            if cid == cached_id:
                found = True
                break
            values = _value_keys(saver.serde, type_tag, blob)
            if any(ch in values for ch in channels):
                return None
        if not found:
            return None
        cur.execute(
            build_delta_stage2_sql(
                has_task_path=saver_has_task_path(saver), chain_lens=[len(chain)] * len(channels)
            ),
            [p for ch in channels for p in (thread_id, ns, ch, *chain)],
        )
        rows = cur.fetchall()
    history = build_delta_channels_writes_history(
        channels=channels,
        chain_by_ch={ch: chain for ch in channels},
        seed_val_by_ch={},
        seeded=set(),
        stage2_rows=rows,
        serde=saver.serde,
    )
    return {ch: list(history[ch]["writes"]) for ch in channels}


def sqlite_read(
    saver: Any, thread_id: str, ns: str, channels: list[str], target: str
) -> dict[str, DeltaChannelHistory] | None:
    """`SqliteSaver.get_delta_channel_history`, for a cold read of a long thread.

    Same result; it differs in cost only. The saver's walk runs a recursive query and
    fully deserializes every ancestor checkpoint to look for a snapshot, which costs
    several times the messages' own decoding. Here: one scan of the thread's
    checkpoint rows, a structural msgpack read (no object construction) to see which
    hold a snapshot, and one query for the channels' writes. None: not found here.
    """
    wanted = set(channels)
    with saver.cursor(transaction=False) as cur:
        cur.execute(
            "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        )
        # Per checkpoint: its parent and which wanted channels it holds a value for.
        # Blobs are not kept: a long thread's checkpoints would cost memory.
        rows: dict[str, tuple[str | None, list[str]]] = {
            cid: (parent, [ch for ch in _value_keys(saver.serde, t, blob) if ch in wanted])
            for cid, parent, t, blob in cur
        }
        if target not in rows:
            return None
        chain_by_ch: dict[str, list[str]] = {ch: [] for ch in channels}
        seeds: dict[str, Any] = {}
        active = set(channels)
        walked = {target}
        cid = rows[target][0]
        while cid is not None and active and cid in rows and cid not in walked:
            walked.add(cid)
            parent, holds = rows[cid]
            for ch in active:
                chain_by_ch[ch].append(cid)
            held = [ch for ch in holds if ch in active]
            if held:
                cur.execute(
                    "SELECT type, checkpoint FROM checkpoints "
                    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (thread_id, ns, cid),
                )
                t, blob = cur.fetchone()
                values = saver.serde.loads_typed((t, blob)).get("channel_values") or {}
                for ch in held:
                    seeds[ch] = values[ch]
                    active.discard(ch)
            cid = parent
        del rows
        marks = ",".join("?" * len(channels))
        task_path = "task_path" if saver_has_task_path(saver) else "''"
        cur.execute(
            f"SELECT checkpoint_id, channel, task_id, idx, type, value, {task_path} "
            f"FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND channel IN ({marks})",
            (thread_id, ns, *channels),
        )
        on_chain = {ch: set(chain) for ch, chain in chain_by_ch.items()}
        writes = [r for r in cur if r[0] in on_chain[r[1]]]
    return build_delta_channels_writes_history(
        channels=channels,
        chain_by_ch=chain_by_ch,
        seed_val_by_ch=seeds,
        seeded=set(seeds),
        stage2_rows=writes,
        serde=saver.serde,
    )


def _value_keys(serde: Any, type_tag: str, blob: bytes) -> Any:
    """The keys of a stored checkpoint's `channel_values`, cheaply when it is msgpack."""
    if type_tag == "msgpack":
        try:
            ckpt = ormsgpack.unpackb(blob, ext_hook=_skip_ext)
        except ormsgpack.MsgpackDecodeError:
            ckpt = None
        if isinstance(ckpt, dict):
            return ckpt.get("channel_values") or {}
    return serde.loads_typed((type_tag, blob)).get("channel_values") or {}


def _skip_ext(code: int, data: bytes) -> None:
    return None  # values are not needed, only which channels have one
