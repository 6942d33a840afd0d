"""LangGraph's SQLite tables (`checkpoints`, `writes`): every query threadlog runs on them.

The cold read (`read_steps`) differs from `SqliteSaver.get_delta_channel_history` in cost
only: checkpoint rows are read newest first from the target, `_WINDOW` at a time, until the
walk meets a snapshot of each channel, seen by a structural msgpack read (nothing decoded).
`SqliteHeadStore` locks with `flock`s on files next to the database.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar

import ormsgpack
from langgraph.checkpoint.base import DeltaChannelHistory

from threadlog.checkpoint.backends.base import (
    AsyncSteps,
    Backend,
    Dialect,
    HeadReads,
    HeadStore,
    LocalRuns,
    Plan,
    Query,
    Steps,
    SyncSteps,
    Walk,
    add_sizes,
    collect_writes,
    histories,
    lock_bound,
    parse_rows,
    queries,
)
from threadlog.checkpoint.shared_records import SharedRecords
from threadlog.flows import arun, run

__all__ = [
    "DEFAULT_LOCK_FILES",
    "TABLES",
    "AsyncSqliteBackend",
    "SqliteBackend",
    "SqliteHeadStore",
    "file_weight",
    "table_columns",
    "vacuum_file",
]

# The columns LangGraph's savers read; `task_path` is newer and optional.
TABLES = {
    "checkpoints": {
        "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type",
        "checkpoint", "metadata",
    },
    "writes": {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel",
               "type", "value"},
}


_DIALECT = Dialect("?", "writes", "value")


def file_weight(path: str) -> tuple[int, int]:
    """A SQLite file's bytes on disk (with its WAL) and the bytes its used pages hold —
    about what it weighs after `VACUUM`. Read-only."""
    from urllib.parse import quote

    on_disk = sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))
    conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return on_disk, (pages - free) * size


def vacuum_file(path: str) -> None:
    """`VACUUM` the file, then fold its WAL back, so it shrinks to what it holds."""
    conn = sqlite3.connect(path, timeout=30)
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def table_columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """`{table: its columns}` of those of `TABLES` the database has (`open_readonly`'s
    shape check; raises `sqlite3.DatabaseError` when the file is not a database)."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {
        n: {r[1] for r in conn.execute(f"PRAGMA table_info({n!r})")}
        for n in names
        if n in TABLES
    }


# Savers whose `writes` table has `task_path` (only a yes is kept: a migration may add it).
_TASK_PATH: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _task_path(saver: Any) -> Steps[str]:
    if saver not in _TASK_PATH:
        found = yield Query("SELECT 1 FROM pragma_table_info('writes') WHERE name = 'task_path'")
        if not found:
            return "''"
        _TASK_PATH[saver] = True
    return "task_path"


# The target's ancestors, stopped after the cached id and `max_walk` rows (CROSS JOIN: each
# step one key lookup).
_CHAIN_SQL = (
    "WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, type, checkpoint, depth) AS ("
    "SELECT c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, 1 "
    "FROM checkpoints t CROSS JOIN checkpoints c ON c.checkpoint_id = t.parent_checkpoint_id "
    "WHERE t.thread_id = ? AND t.checkpoint_ns = ? AND t.checkpoint_id = ? "
    "AND c.thread_id = t.thread_id AND c.checkpoint_ns = t.checkpoint_ns "
    "UNION ALL "
    "SELECT c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, a.depth + 1 "
    "FROM chain a CROSS JOIN checkpoints c ON c.checkpoint_id = a.parent_checkpoint_id "
    "WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND a.checkpoint_id <> ? AND a.depth < ?"
    ") SELECT checkpoint_id, type, checkpoint FROM chain"
)


def _writes_sql(task_path: str, channels: int, chain: int = 0) -> str:
    on_chain = f"AND checkpoint_id IN ({_marks(chain)}) " if chain else ""
    return (
        f"SELECT checkpoint_id, channel, task_id, idx, {task_path}, type, value FROM writes "
        f"WHERE thread_id = ? AND checkpoint_ns = ? {on_chain}AND channel IN ({_marks(channels)})"
    )


def _marks(n: int) -> str:
    return ",".join("?" * n)


def walk_steps(
    saver: Any, thread_id: str, ns: str, channels: Sequence[str], target: str,
    cached_id: str, max_walk: int,
) -> Steps[Walk | None]:
    channels = list(channels)
    if target == cached_id:
        return {ch: [] for ch in channels}
    serde = saver.serde
    task_path = yield from _task_path(saver)
    rows = yield Query(
        _CHAIN_SQL,
        (thread_id, ns, target, thread_id, ns, cached_id, max_walk),
        lambda r: (r[0], any(ch in _value_keys(serde, r[1], r[2]) for ch in channels)),
    )
    chain: list[str] = []
    for cid, holds in rows:
        if cid in chain:
            return None  # a loop
        chain.append(cid)
        if cid != cached_id and holds:
            return None  # a stored snapshot on the way: a fork; the saver reads
    if not chain or chain[-1] != cached_id:
        return None
    shared = SharedRecords(serde)  # a message re-sent by several writes: decoded once
    writes = yield Query(
        _writes_sql(task_path, len(channels), len(chain)),
        (thread_id, ns, *chain, *channels),
        lambda r: (*r[:5], shared.loads((r[5], r[6]))),
    )
    return collect_writes(channels, {ch: chain for ch in channels}, writes)


_THREAD_CHECKPOINTS_SQL = (
    "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ?"
)
# The checkpoints at or before `checkpoint_id`, newest first, one window at a time.
_WINDOW = 2000
_WINDOW_SQL = (
    "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id <= ? "
    "ORDER BY checkpoint_id DESC LIMIT ?"
)
_ONE_CHECKPOINT_SQL = (
    "SELECT type, checkpoint FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)


def read_steps(
    saver: Any, thread_id: str, ns: str, channels: Sequence[str], target: str
) -> Steps[dict[str, DeltaChannelHistory] | None]:
    channels = list(channels)
    serde = saver.serde
    wanted = set(channels)
    task_path = yield from _task_path(saver)
    # Per checkpoint: its parent and which wanted channels it holds a value for (no blobs).
    rows: dict[str, tuple[str | None, list[str]]] = {}

    def keys_of(r: Any) -> tuple[str, str | None, list[str]]:
        return r[0], r[1], [ch for ch in _value_keys(serde, r[2], r[3]) if ch in wanted]

    bound, exhausted, whole = target, False, False

    def reach(wanted_id: str | None) -> Steps[None]:
        # Read windows (then, if need be, the rest) until `wanted_id` is loaded.
        nonlocal bound, exhausted, whole
        while wanted_id is not None and wanted_id not in rows and not whole:
            sql, params = (
                (_THREAD_CHECKPOINTS_SQL, (thread_id, ns))
                if exhausted
                else (_WINDOW_SQL, (thread_id, ns, bound, _WINDOW))
            )
            found = yield Query(sql, params, keys_of)
            rows.update({c: (p, h) for c, p, h in found if c not in rows})
            whole = exhausted
            if len(found) < _WINDOW:
                exhausted = True
            elif found:
                bound = found[-1][0]

    yield from reach(target)
    if target not in rows:
        return None
    chain_by_ch: dict[str, list[str]] = {ch: [] for ch in channels}
    seeds: dict[str, Any] = {}
    active = set(channels)
    walked = {target}
    cid = rows[target][0]
    yield from reach(cid)
    while cid is not None and active and cid in rows and cid not in walked:
        walked.add(cid)
        parent, holds = rows[cid]
        for ch in active:
            chain_by_ch[ch].append(cid)
        held = [ch for ch in holds if ch in active]
        if held:
            (values,) = yield Query(
                _ONE_CHECKPOINT_SQL,
                (thread_id, ns, cid),
                lambda r: serde.loads_typed((r[0], r[1])).get("channel_values") or {},
            )
            for ch in held:
                seeds[ch] = values[ch]
                active.discard(ch)
        cid = parent
        if active:
            yield from reach(cid)
    rows.clear()
    on_chain = {ch: set(chain) for ch, chain in chain_by_ch.items()}
    shared = SharedRecords(serde)  # a message re-sent by several writes: decoded once
    writes = yield Query(
        _writes_sql(task_path, len(channels)),
        (thread_id, ns, *channels),
        # Only the chain's writes are decoded.
        lambda r: (*r[:5], shared.loads((r[5], r[6]))) if r[0] in on_chain[r[1]] else None,
    )
    return histories(collect_writes(channels, chain_by_ch, [w for w in writes if w]), seeds)


def _value_keys(serde: Any, type_tag: str, blob: bytes) -> Any:
    # The keys of a stored checkpoint's `channel_values`, without building its values.
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


# Drops go in batches: SQLite allows 32766 parameters per statement.
_BATCH = 500


_LINKS_SQL = (
    "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "json_extract(CAST(metadata AS TEXT), '$.run_id') FROM checkpoints WHERE thread_id = ?"
)


def maintain_steps(saver: Any, plan: Plan) -> Steps[None]:
    serde = saver.serde
    task_path = yield from _task_path(saver)
    write_cols = "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value" + (
        ", task_path" if task_path == "task_path" else ""
    )
    for src, dst in plan.copies:
        yield Query(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, type, checkpoint, metadata) SELECT ?, checkpoint_ns, "
            "checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints "
            "WHERE thread_id = ?",
            (dst, src),
        )
        yield Query(
            f"INSERT INTO writes (thread_id, {write_cols}) SELECT ?, {write_cols} FROM writes "
            "WHERE thread_id = ?",
            (dst, src),
        )
    for rw in plan.rewrites:
        key = (rw.thread_id, rw.ns, rw.checkpoint_id)
        rows = yield Query(
            "SELECT type, checkpoint, metadata FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            key,
        )
        if not rows:
            continue
        type_tag, blob, meta = rows[0]
        if rw.snapshots:
            ckpt = serde.loads_typed((type_tag, blob))
            values = dict(ckpt.get("channel_values") or {})
            values.update({ch: value for ch, (_, value) in rw.snapshots.items()})
            ckpt["channel_values"] = values
            type_tag, blob = serde.dumps_typed(ckpt)
        if rw.metadata:
            loaded = rw.merged(json.loads(meta) if meta else {})
            meta = json.dumps(loaded, ensure_ascii=False).encode("utf-8", "ignore")
        yield Query(
            "UPDATE checkpoints SET parent_checkpoint_id = ?, type = ?, checkpoint = ?, "
            "metadata = ? WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (rw.parent_id, type_tag, blob, meta, *key),
        )
    for (tid, ns), ids in plan.drops_by_namespace().items():
        for at in range(0, len(ids), _BATCH):
            batch = ids[at : at + _BATCH]
            where = (
                f"thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN ({_marks(len(batch))})"
            )
            yield Query(f"DELETE FROM writes WHERE {where}", (tid, ns, *batch))
            yield Query(f"DELETE FROM checkpoints WHERE {where}", (tid, ns, *batch))
    for tid in plan.drop_threads:
        yield Query("DELETE FROM writes WHERE thread_id = ?", (tid,))
        yield Query("DELETE FROM checkpoints WHERE thread_id = ?", (tid,))


class SqliteBackend(SyncSteps, Backend):
    """A `SqliteSaver`: its connection under its lock."""

    kind: ClassVar[str] = "sqlite"
    dialect: ClassVar[Dialect] = _DIALECT
    links_sql: ClassVar[str] = _LINKS_SQL
    walk_steps = staticmethod(walk_steps)
    read_steps = staticmethod(read_steps)

    def _run(self, steps: Steps[Any], *, maintain: bool = False) -> Any:
        # Maintenance is one IMMEDIATE transaction: a process killed inside it leaves the
        # file as it was (the saver commits its own statements: nothing is pending).
        conn = self.saver.conn
        with self.saver.lock, contextlib.closing(conn.cursor()) as cur:
            if maintain:
                conn.commit()
                cur.execute("BEGIN IMMEDIATE")
            try:
                out = run(queries(steps, lambda q: parse_rows(q, cur.execute(q.sql, q.params))))
                if maintain:
                    cur.execute("COMMIT")
                return out
            except BaseException:
                if maintain and conn.in_transaction:
                    conn.rollback()
                raise

    def maintain(self, plan: Plan) -> None:
        self._run(maintain_steps(self.saver, plan), maintain=True)

    def head_store(self, location: str, max_lock_connections: int | None = None) -> HeadStore:
        # ":memory:" is private to one connection: the guard reads the saver's own.
        shared = self.saver.conn if location == ":memory:" else None
        return SqliteHeadStore(location, shared, max_lock_connections)

    def stored_bytes(self, thread_id: str, ns: str) -> dict[str, int] | None:
        out: dict[str, int] = {}
        add_sizes(out, self._rows(
            "SELECT checkpoint_id, length(checkpoint) + length(metadata) FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        ))
        add_sizes(out, self._rows(
            "SELECT checkpoint_id, sum(length(value)) FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = ? GROUP BY checkpoint_id",
            (thread_id, ns),
        ))
        return out


class AsyncSqliteBackend(AsyncSteps, Backend):
    """An `AsyncSqliteSaver`: its aiosqlite connection under its asyncio lock."""

    kind: ClassVar[str] = "sqlite"
    links_sql: ClassVar[str] = _LINKS_SQL
    walk_steps = staticmethod(walk_steps)
    read_steps = staticmethod(read_steps)

    async def _execute(self, q: Query) -> list[Any]:
        async with self.saver.conn.execute(q.sql, q.params) as cur:
            return [r if q.row is None else q.row(r) async for r in cur]

    async def _arun(self, steps: Steps[Any]) -> Any:
        async with self.saver.lock:
            return await arun(queries(steps, aexecute=self._execute))

    def head_store(self, location: str, max_lock_connections: int | None = None) -> HeadStore:
        # aiosqlite runs its sqlite3 connection on its own thread (`_conn`: no public name).
        shared = self.saver.conn._conn if location == ":memory:" else None
        return SqliteHeadStore(location, shared, max_lock_connections)

    async def amaintain(self, plan: Plan) -> None:
        conn = self.saver.conn
        async with self.saver.lock:
            if conn.in_transaction:
                await conn.commit()
            await conn.execute("BEGIN IMMEDIATE")
            try:
                await arun(queries(maintain_steps(self.saver, plan), aexecute=self._execute))
                await conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    await conn.rollback()
                raise


# -- the run guard's heads and locks ------------------------------------------------------

# Far below a process's usual 1024 descriptors, far above the runs one SQLite file serves.
DEFAULT_LOCK_FILES = 256


def _flock_run_file(path: str) -> int | None:
    """An exclusive `flock` on the file `path` names once it is held (a holder removes its
    file on release): its open descriptor, or None when another holder has it."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the folder was just removed by a releasing holder
            os.makedirs(os.path.dirname(path), exist_ok=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except BlockingIOError:
            os.close(fd)
            return None
        except FileNotFoundError:  # removed after we opened it
            same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            return fd
        os.close(fd)  # locked a file its holder had removed: take the path's current one


class SqliteHeadStore(HeadReads):
    """Reads a SQLite checkpoint file through its own connection; `flock` across processes:
    a run lock is an open file in `<db>.threadlog-runs/` (at most `max_lock_connections`;
    past that `try_run_lock` answers None), the write lock one file, `<db>.threadlog-lock`."""

    dialect: ClassVar[Dialect] = _DIALECT

    def __init__(
        self,
        path: str,
        conn: sqlite3.Connection | None = None,
        max_lock_connections: int | None = None,
    ) -> None:
        self.path = path
        self._thread_lock = threading.Lock()
        # ":memory:" is private to one connection, so that one is shared (`conn`).
        self._own = conn is None
        # Opened on first use: a process that only reads leaves no lock file behind.
        self._conn_: sqlite3.Connection | None = conn
        self._lock_fd: int | None = None
        self._runs = LocalRuns()
        self._run_fds: dict[str, int] = {}
        self._files = threading.BoundedSemaphore(
            lock_bound(max_lock_connections, DEFAULT_LOCK_FILES)
        )
        self._open_lock = threading.Lock()

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._conn_ is None:
            with self._open_lock:
                if self._conn_ is None:
                    self._conn_ = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        return self._conn_

    def _lock_file(self) -> int | None:
        if self.path == ":memory:":
            return None
        if self._lock_fd is None:
            with self._open_lock:
                if self._lock_fd is None:
                    self._lock_fd = os.open(
                        self.path + ".threadlog-lock", os.O_RDWR | os.O_CREAT, 0o644
                    )
        return self._lock_fd

    def try_run_lock(self, thread_id: str) -> bool | None:
        if not self._runs.acquire(thread_id):
            return False
        if self.path == ":memory:":
            return True
        if not self._files.acquire(blocking=False):
            self._runs.release(thread_id)
            return None  # every lock file this store may hold open is in use: queue
        fd = None
        try:
            fd = _flock_run_file(self._run_path(thread_id))
        finally:
            if fd is None:
                self._files.release()
                self._runs.release(thread_id)
        if fd is None:
            return False
        self._run_fds[thread_id] = fd
        return True

    def _run_path(self, thread_id: str) -> str:
        name = hashlib.blake2b(thread_id.encode(), digest_size=12).hexdigest()
        return os.path.join(self.path + ".threadlog-runs", name)

    def run_unlock(self, thread_id: str) -> None:
        fd = self._run_fds.pop(thread_id, None)
        if fd is not None:
            try:
                path = self._run_path(thread_id)
                # Removed while held: a waiter that then locks it sees the path changed.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                with contextlib.suppress(OSError):  # not empty: another run holds a lock
                    os.rmdir(os.path.dirname(path))
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
                self._files.release()
        self._runs.release(thread_id)

    def try_lock(self, thread_id: str) -> bool:
        # One lock for the whole file: SQLite serializes writers anyway.
        if not self._thread_lock.acquire(blocking=False):
            return False
        fd = self._lock_file()
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BaseException as exc:
                self._thread_lock.release()
                if isinstance(exc, BlockingIOError):
                    return False
                raise
        return True

    def unlock(self, thread_id: str) -> None:
        try:
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    def _all(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []  # nothing stored yet
            raise

    def close(self) -> None:
        if self._own and self._conn_ is not None:
            self._conn_.close()
            self._conn_ = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
