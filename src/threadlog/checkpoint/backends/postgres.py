"""LangGraph's Postgres tables (`checkpoints`, `checkpoint_blobs`, `checkpoint_writes`):
every query threadlog runs on them, and its advisory locks.

The backends run on the saver's own public `conn` (a connection, or a pool that lends one)
with a cursor of their own (tuple rows, whatever the connection's row factory).
psycopg is imported only inside functions: `import threadlog` never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar

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
    attribute_blobs,
    collect_writes,
    histories,
    lock_bound,
    parse_rows,
    queries,
)
from threadlog.checkpoint.shared_records import SharedRecords
from threadlog.flows import Flow, Io, arun, run

__all__ = [
    "DEFAULT_LOCK_SESSIONS",
    "LOCK_APPLICATION_NAME",
    "TABLES",
    "AsyncPostgresBackend",
    "LockSessions",
    "PostgresBackend",
    "PostgresHeadStore",
    "table_columns",
    "vacuum_tables",
]

_DIALECT = Dialect("%s", "checkpoint_writes", "blob")


def vacuum_tables(url: str) -> None:
    """`VACUUM (ANALYZE)` LangGraph's tables: their dead rows' space becomes reusable
    (`threadlog prune --vacuum`; only `VACUUM FULL` would return it to the system)."""
    import psycopg

    with psycopg.Connection.connect(url, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(f'VACUUM (ANALYZE) "{table}"')  # our own table names


# The columns LangGraph's savers read.
TABLES = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                    "checkpoint", "metadata"},
    "checkpoint_blobs": {"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"},
    "checkpoint_writes": {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx",
                          "channel", "type", "blob"},
}


def table_columns(conn: Any) -> dict[str, set[str]]:
    """`{table: its columns}` of those of `TABLES` in the current schema (`open_readonly`'s
    shape check; a psycopg `Connection`; raises `psycopg.Error`)."""
    from psycopg.rows import tuple_row

    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
            (list(TABLES),),
        )
        out: dict[str, set[str]] = {}
        for table, column in cur.fetchall():
            out.setdefault(table, set()).add(column)
    return out


# Checkpoints from the target down to the cached id, whether each stores a channel's value.
_WALK_SQL = (
    "SELECT c.checkpoint_id, c.parent_checkpoint_id, c.inline, c.blob, "
    "w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob FROM ("
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


def walk_steps(
    saver: Any, thread_id: str, ns: str, channels: Sequence[str], target: str,
    cached_id: str, max_walk: int,
) -> Steps[Walk | None]:
    channels = list(channels)
    if target == cached_id:
        return {ch: [] for ch in channels}
    found = yield Query(
        _WALK_SQL,
        (channels, channels, thread_id, ns, target, cached_id, 4 * max_walk, channels),
    )
    rows: dict[str, Any] = {}
    writes: list[Any] = []
    for r in found:
        rows.setdefault(r[0], r)
        if r[4] is not None:
            writes.append(r)
    if target not in rows:
        return None
    chain: list[str] = []
    cid = rows[target][1]
    while True:
        row = rows.get(cid) if cid is not None else None
        if row is None or cid in chain or len(chain) >= max_walk:
            return None
        chain.append(cid)
        if cid == cached_id:
            break
        if row[2] or row[3]:
            return None  # a stored snapshot on the way: a fork; the saver reads
        cid = row[1]
    on_chain = set(chain)
    serde = saver.serde
    decoded = [
        (r[0], r[7], str(r[4]), r[6], r[5], serde.loads_typed((r[8], r[9])))
        for r in writes
        if r[0] in on_chain
    ]
    return collect_writes(channels, {ch: chain for ch in channels}, decoded)


# A page of checkpoints newest first: per channel its version, whether a blob is stored at
# that version, and its inline value (the probe of `PostgresSaver`'s own read).
_PAGE = 1024


def _page_sql(n: int, first: bool) -> str:
    cols = "".join(
        ", checkpoint -> 'channel_versions' ->> %s, EXISTS (SELECT 1 FROM checkpoint_blobs b "
        "WHERE b.thread_id = k.thread_id AND b.checkpoint_ns = k.checkpoint_ns "
        "AND b.channel = %s AND b.version = k.checkpoint -> 'channel_versions' ->> %s "
        "AND b.type <> 'empty'), checkpoint -> 'channel_values' -> %s"
        for _ in range(n)
    )
    after = "<=" if first else "<"
    return (
        f"SELECT checkpoint_id, parent_checkpoint_id{cols} FROM checkpoints k "
        f"WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id {after} %s "
        "ORDER BY checkpoint_id DESC LIMIT %s"
    )


# The channels' writes on their chains and their seeds' blobs, in one round trip.
_CHAIN_WRITES_SQL = (
    "SELECT checkpoint_id, channel, task_id, idx, task_path, type, blob, NULL "
    "FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND channel = ANY(%s::text[]) AND checkpoint_id = ANY(%s::text[]) "
    "UNION ALL SELECT NULL, channel, NULL, NULL, NULL, type, blob, version "
    "FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND (channel, version) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
)


def read_steps(
    saver: Any, thread_id: str, ns: str, channels: Sequence[str], target: str
) -> Steps[dict[str, DeltaChannelHistory] | None]:
    """`PostgresSaver.get_delta_channel_history`'s answer, with each checkpoint's place in
    the writes (`Stepped.states`). Two round trips (one more per `_PAGE` checkpoints)."""
    channels = list(channels)
    parents: dict[str, str | None] = {}
    held: dict[str, list[tuple[str | None, bool, Any]]] = {}
    chain_by_ch: dict[str, list[str]] = {ch: [] for ch in channels}
    seeds: dict[str, tuple[str | None, bool, Any]] = {}
    cursor: dict[str, str | None] = {}
    bound, first = target, True
    while True:
        params: list[Any] = [p for ch in channels for p in (ch, ch, ch, ch)]
        page = yield Query(
            _page_sql(len(channels), first), (*params, thread_id, ns, bound, _PAGE),
            lambda r: (r[0], r[1], [tuple(r[i:i + 3]) for i in range(2, len(r), 3)]),
        )
        for cid, parent, probes in page:
            parents[cid], held[cid] = parent, probes
        if first and target not in parents:
            return None
        first = False
        for i, ch in enumerate(channels):
            cid = cursor.get(ch, parents[target]) if ch not in seeds else None
            # (bounded by the rows read: a parent loop in stored rows ends the walk)
            while cid is not None and cid in parents and len(chain_by_ch[ch]) < len(parents):
                chain_by_ch[ch].append(cid)
                probe = held[cid][i]
                if probe[1] or probe[2] is not None:
                    seeds[ch] = probe
                    cid = None
                    break
                cid = parents[cid]
            cursor[ch] = cid
        if len(page) < _PAGE or all(cursor[ch] is None for ch in channels):
            break
        bound = page[-1][0]
    on_chain = {ch: set(chain) for ch, chain in chain_by_ch.items()}
    blobs = [(ch, str(s[0])) for ch, s in seeds.items() if s[1]]
    shared = SharedRecords(saver.serde)  # a message re-sent by several writes: decoded once

    def row(r: Any) -> Any:
        if r[0] is None:
            return ("seed", r[1], shared.loads((r[5], r[6])))
        if r[0] not in on_chain[r[1]]:
            return None
        return (r[0], r[1], str(r[2]), r[3], r[4], shared.loads((r[5], r[6])))

    found = yield Query(
        _CHAIN_WRITES_SQL,
        (thread_id, ns, channels, sorted(set().union(*on_chain.values())), thread_id, ns,
         [ch for ch, _ in blobs], [v for _, v in blobs]),
        row,
    )
    by_ch = collect_writes(channels, chain_by_ch, [f for f in found if f and f[0] != "seed"])
    inline = {ch: s[2] for ch, s in seeds.items() if not s[1]}
    return histories(by_ch, {**inline, **{f[1]: f[2] for f in found if f and f[0] == "seed"}})


_COPY_SQL = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "type, checkpoint, metadata) SELECT %s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "type, checkpoint, metadata FROM checkpoints WHERE thread_id = %s",
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
    "SELECT %s, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
    "WHERE thread_id = %s",
    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, "
    "idx, channel, type, blob) SELECT %s, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
    "channel, type, blob FROM checkpoint_writes WHERE thread_id = %s",
)
# A value no checkpoint of its namespace names any more (by channel and version).
_UNNAMED_BLOBS_SQL = (
    "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = %s "
    "AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
    "AND c.checkpoint_ns = b.checkpoint_ns "
    "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
)


_LINKS_SQL = (
    "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata ->> 'run_id' "
    "FROM checkpoints WHERE thread_id = %s"
)


def maintain_steps(saver: Any, plan: Plan) -> Steps[None]:
    from psycopg.types.json import Jsonb

    serde = saver.serde
    for src, dst in plan.copies:
        for sql in _COPY_SQL:
            yield Query(sql, (dst, src))
    for rw in plan.rewrites:
        key = (rw.thread_id, rw.ns, rw.checkpoint_id)
        rows = yield Query(
            "SELECT checkpoint, metadata FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            key,
        )
        if not rows:
            continue
        ckpt, meta = dict(rows[0][0]), rows[0][1] or {}
        if rw.snapshots:
            values = dict(ckpt.get("channel_values") or {})
            for ch, (version, value) in rw.snapshots.items():
                # As PostgresSaver.put stores a snapshot: the blob apart, a marker inline.
                type_tag, blob = serde.dumps_typed(value)
                yield Query(
                    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, "
                    "type, blob) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (thread_id, "
                    "checkpoint_ns, channel, version) DO UPDATE SET type = EXCLUDED.type, "
                    "blob = EXCLUDED.blob",
                    (rw.thread_id, rw.ns, ch, str(version), type_tag, blob),
                )
                values[ch] = True
            ckpt["channel_values"] = values
        yield Query(
            "UPDATE checkpoints SET parent_checkpoint_id = %s, checkpoint = %s, metadata = %s "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            (rw.parent_id, Jsonb(ckpt), Jsonb(rw.merged(meta)), *key),
        )
    for (tid, ns), ids in plan.drops_by_namespace().items():
        where = "thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)"
        yield Query(f"DELETE FROM checkpoint_writes WHERE {where}", (tid, ns, ids))
        yield Query(f"DELETE FROM checkpoints WHERE {where}", (tid, ns, ids))
        yield Query(_UNNAMED_BLOBS_SQL, (tid, ns))
    if plan.drop_threads:
        for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
            yield Query(f"DELETE FROM {table} WHERE thread_id = ANY(%s)", (plan.drop_threads,))


def _connection(conn: Any) -> Any:
    """The saver's public `conn` as a context: a connection itself, or one a pool lends."""
    import psycopg

    if isinstance(conn, (psycopg.Connection, psycopg.AsyncConnection)):
        return contextlib.nullcontext(conn)
    return conn.connection()


class PostgresBackend(SyncSteps, Backend):
    """A `PostgresSaver`: its connection (or pool) under its lock."""

    kind: ClassVar[str] = "postgres"
    dialect: ClassVar[Dialect] = _DIALECT
    links_sql: ClassVar[str] = _LINKS_SQL
    walk_steps = staticmethod(walk_steps)
    read_steps = staticmethod(read_steps)

    def _run(self, steps: Steps[Any], *, maintain: bool = False) -> Any:
        from psycopg.rows import tuple_row

        # Maintenance: one transaction of one-off statements, not worth preparing.
        with (
            self.saver.lock,
            _connection(self.saver.conn) as conn,
            conn.transaction() if maintain else contextlib.nullcontext(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):

            def execute(q: Query) -> list[Any]:
                cur.execute(q.sql, q.params, prepare=False if maintain else None)
                return parse_rows(q, cur.fetchall()) if cur.description else []

            return run(queries(steps, execute))

    def maintain(self, plan: Plan) -> None:
        self._run(maintain_steps(self.saver, plan), maintain=True)

    def head_store(self, location: str, max_lock_connections: int | None = None) -> HeadStore:
        return PostgresHeadStore(location, max_lock_connections)

    def stored_bytes(self, thread_id: str, ns: str) -> dict[str, int] | None:
        checkpoints = self._rows(
            "SELECT checkpoint_id, octet_length(checkpoint::text) + octet_length(metadata::text),"
            " checkpoint -> 'channel_versions' FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns = %s ORDER BY checkpoint_id",
            (thread_id, ns),
        )
        blobs = {
            (ch, ver): n
            for ch, ver, n in self._rows(
                "SELECT channel, version, coalesce(octet_length(blob), 0) "
                "FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s",
                (thread_id, ns),
            )
        }
        writes = self._rows(
            "SELECT checkpoint_id, sum(octet_length(blob)) FROM checkpoint_writes "
            "WHERE thread_id = %s AND checkpoint_ns = %s GROUP BY checkpoint_id",
            (thread_id, ns),
        )
        out: dict[str, int] = {}
        add_sizes(out, [(cid, n) for cid, n, _ in checkpoints])
        attribute_blobs(out, [(cid, versions or {}) for cid, _, versions in checkpoints], blobs)
        add_sizes(out, writes)
        return out


class AsyncPostgresBackend(AsyncSteps, Backend):
    """An `AsyncPostgresSaver`: its async connection (or pool) under its asyncio lock."""

    kind: ClassVar[str] = "postgres"
    links_sql: ClassVar[str] = _LINKS_SQL
    walk_steps = staticmethod(walk_steps)
    read_steps = staticmethod(read_steps)

    async def _arun(self, steps: Steps[Any], *, maintain: bool = False) -> Any:
        from psycopg.rows import tuple_row

        async with (
            self.saver.lock,
            _connection(self.saver.conn) as conn,
            conn.transaction() if maintain else contextlib.nullcontext(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):

            async def execute(q: Query) -> list[Any]:
                await cur.execute(q.sql, q.params, prepare=False if maintain else None)
                return parse_rows(q, await cur.fetchall()) if cur.description else []

            return await arun(queries(steps, aexecute=execute))

    async def amaintain(self, plan: Plan) -> None:
        await self._arun(maintain_steps(self.saver, plan), maintain=True)

    head_store = PostgresBackend.head_store


# -- the run guard's heads and locks ------------------------------------------------------

# Sessions one head store holds for its locks by default (`max_lock_connections`).
DEFAULT_LOCK_SESSIONS = 2
# What the lock sessions call themselves in `pg_stat_activity`.
LOCK_APPLICATION_NAME = "threadlog-locks"


class _Session:
    """One lock session, used by one statement at a time (`mutex`); an async one belongs
    to the event loop it was opened on (`loop`; None: a sync session)."""

    __slots__ = ("conn", "loop", "mutex")

    def __init__(self, conn: Any, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.conn = conn
        self.loop = loop
        self.mutex: Any = threading.Lock() if loop is None else asyncio.Lock()

    def grab(self) -> bool:
        return self.mutex.acquire(blocking=False)  # type: ignore[no-any-return]

    async def agrab(self) -> bool:
        if self.mutex.locked():
            return False
        return await self.mutex.acquire()  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.loop is None:
            self.conn.close()
        else:
            _finish(self.conn)


def _try_advisory_lock(conn: Any, key: int) -> Any:
    return conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()


async def _atry_advisory_lock(conn: Any, key: int) -> Any:
    cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
    return await cur.fetchone()


class LockSessions:
    """A bounded pool of Postgres sessions shared by every lock of one head store (at most
    `size` sync ones, and `size` per event loop for its async callers). An advisory lock is
    released on the session that took it (`_held`); from outside that session's loop the
    unlock is handed to the loop, or, the loop closed, the session is closed."""

    def __init__(self, url: str, size: int) -> None:
        self._url = url
        self.size = size
        self._turn = 0
        self._held: dict[int, _Session] = {}
        # Per event loop (None: sync callers): its sessions, and how many are being opened.
        self._pools: dict[asyncio.AbstractEventLoop | None, list[_Session]] = {}
        self._opening: dict[asyncio.AbstractEventLoop | None, int] = {}
        self._mutex = threading.Lock()  # guards the fields above; held for no I/O

    def take(self, key: int) -> bool:
        """`pg_try_advisory_lock(key)` on a session (True: taken, and held there); a session
        found dead is dropped and the attempt made once more on another."""
        return run(self._take_flow(key, None))

    async def atake(self, key: int) -> bool:
        return await arun(self._take_flow(key, asyncio.get_running_loop()))

    def _take_flow(self, key: int, loop: asyncio.AbstractEventLoop | None) -> Flow[bool]:
        import psycopg

        for retry in (True, False):
            session = yield from self._pick(loop)
            try:
                row = yield Io(_try_advisory_lock, _atry_advisory_lock, (session.conn, key))
            except psycopg.OperationalError:
                self._drop(session)
                if retry:
                    continue
                raise
            except BaseException:
                # Its state is unknown: closing it releases whatever it holds.
                self._drop(session)
                raise
            else:
                taken = bool(row and row[0])
                if taken:
                    with self._mutex:
                        self._held[key] = session
                return taken
            finally:
                session.mutex.release()
        raise AssertionError("unreachable")

    def give_back(self, key: int) -> None:
        """`pg_advisory_unlock(key)` on the session that holds it (a dead one: nothing)."""
        with self._mutex:
            session = self._held.pop(key, None)
        if session is None:
            return
        if session.loop is not None:
            self._unlock_on_its_loop(session, key)
            return
        self._unlock(session, key)

    async def agive_back(self, key: int) -> None:
        with self._mutex:
            session = self._held.pop(key, None)
        if session is None:
            return
        if session.loop is None:
            await asyncio.to_thread(self._unlock, session, key)
        elif session.loop is asyncio.get_running_loop():
            await self._aunlock(session, key)
        else:
            self._unlock_on_its_loop(session, key)

    def _unlock(self, session: _Session, key: int) -> None:
        with session.mutex:
            if session.conn.closed:
                return  # its locks went with it
            try:
                session.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except Exception:
                # A torn session: closing it is what releases whatever it still holds.
                self._drop(session)

    async def _aunlock(self, session: _Session, key: int) -> None:
        async with session.mutex:
            if session.conn.closed:
                return  # its locks went with it
            try:
                await session.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except BaseException:
                self._drop(session)  # closing it releases whatever it still holds
                raise

    def _unlock_on_its_loop(self, session: _Session, key: int) -> None:
        # Not waited for: that loop's thread may be the caller.
        assert session.loop is not None
        if not session.loop.is_closed():
            try:
                asyncio.run_coroutine_threadsafe(self._aunlock(session, key), session.loop)
                return
            except RuntimeError:
                pass  # closed meanwhile
        self._drop(session)

    def _pick(self, loop: asyncio.AbstractEventLoop | None) -> Flow[_Session]:
        """A session of `loop` whose mutex the caller now holds: a free one, else a new one
        while below the bound, else the next one in turn once its statement ends."""
        with self._mutex:
            dead = [s for lp, ss in self._pools.items() if lp and lp.is_closed() for s in ss]
        for session in dead:
            self._drop(session)
        while True:
            with self._mutex:
                sessions = list(self._pools.get(loop, ()))
                opening = self._opening.get(loop, 0)
                grow = len(sessions) + opening < self.size
                self._opening[loop] = opening + grow
            for session in sessions:
                if (yield Io(session.grab, session.agrab)):
                    if session.conn.closed:  # dropped meanwhile
                        session.mutex.release()
                        continue
                    self._opened(loop, grow, None)
                    return session
            if grow:
                try:
                    conn = yield Io(self._connect, self._aconnect)
                except BaseException as exc:
                    self._opened(loop, True, None)
                    if not sessions or not isinstance(exc, Exception):
                        raise  # no session at all: the server refuses this process
                else:
                    session = _Session(conn, loop)
                    yield Io(session.mutex.acquire, session.mutex.acquire)
                    self._opened(loop, True, session)
                    return session
            if not sessions:
                # The bound's sessions are being opened right now.
                yield Io(time.sleep, asyncio.sleep, (0.001,))
                continue
            with self._mutex:
                self._turn += 1
            session = sessions[self._turn % len(sessions)]
            # Bounded: the one statement running on it.
            yield Io(session.mutex.acquire, session.mutex.acquire)
            if not session.conn.closed:
                return session
            session.mutex.release()  # it died meanwhile: pick again

    def _opened(
        self, loop: asyncio.AbstractEventLoop | None, grew: bool, session: _Session | None
    ) -> None:
        with self._mutex:
            if grew:
                self._opening[loop] -= 1
            if session is not None:
                self._pools.setdefault(loop, []).append(session)

    def _connect(self) -> Any:
        import psycopg

        return psycopg.Connection.connect(
            self._url, autocommit=True, prepare_threshold=0, application_name=LOCK_APPLICATION_NAME
        )

    async def _aconnect(self) -> Any:
        import psycopg

        return await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, prepare_threshold=0, application_name=LOCK_APPLICATION_NAME
        )

    def _drop(self, session: _Session) -> None:
        with self._mutex:
            sessions = self._pools.get(session.loop, [])
            if session in sessions:
                sessions.remove(session)
            if not sessions:
                self._pools.pop(session.loop, None)
                if not self._opening.get(session.loop):
                    self._opening.pop(session.loop, None)
            for key in [k for k, s in self._held.items() if s is session]:
                del self._held[key]
        session.close()

    def sessions(self) -> int:
        """How many sessions are open now (sync and async)."""
        with self._mutex:
            return sum(len(ss) for ss in self._pools.values())

    def close(self) -> None:
        with self._mutex:
            sessions = [s for ss in self._pools.values() for s in ss]
            self._pools.clear()
            self._held.clear()
        for session in sessions:
            session.close()


def _finish(conn: Any) -> None:
    # An async connection closed from sync code (psycopg's `close()` is a coroutine).
    with contextlib.suppress(Exception):
        conn.pgconn.finish()


class PostgresHeadStore(HeadReads):
    """Reads through its own connection; two advisory locks per thread (run, write) on the
    store's `LockSessions`. Two runs of this process on one thread are kept apart in the
    process (`LocalRuns`): on one session Postgres would grant the same lock twice."""

    dialect: ClassVar[Dialect] = _DIALECT

    def __init__(self, url: str, max_lock_connections: int | None = None) -> None:
        import psycopg

        self._conn = psycopg.Connection.connect(url, autocommit=True, prepare_threshold=0)
        self.locks = LockSessions(url, lock_bound(max_lock_connections, DEFAULT_LOCK_SESSIONS))
        self._runs = LocalRuns()
        self._writers = LocalRuns()

    def try_run_lock(self, thread_id: str) -> bool:
        return run(self._try_flow(self._runs, "run:" + thread_id, thread_id))

    def run_unlock(self, thread_id: str) -> None:
        run(self._untake_flow(self._runs, "run:" + thread_id, thread_id))

    def try_lock(self, thread_id: str) -> bool:
        return run(self._try_flow(self._writers, thread_id, thread_id))

    def unlock(self, thread_id: str) -> None:
        run(self._untake_flow(self._writers, thread_id, thread_id))

    # The async twins `take_lock` / `release_lock` await, on the loop's lock sessions.

    async def atry_run_lock(self, thread_id: str) -> bool:
        return await arun(self._try_flow(self._runs, "run:" + thread_id, thread_id))

    async def arun_unlock(self, thread_id: str) -> None:
        await arun(self._untake_flow(self._runs, "run:" + thread_id, thread_id))

    async def atry_lock(self, thread_id: str) -> bool:
        return await arun(self._try_flow(self._writers, thread_id, thread_id))

    async def aunlock(self, thread_id: str) -> None:
        await arun(self._untake_flow(self._writers, thread_id, thread_id))

    # This process's own claim on the thread first, then the session lock.

    def _try_flow(self, local: LocalRuns, name: str, thread_id: str) -> Flow[bool]:
        if not local.acquire(thread_id):
            return False
        key = self.lock_key(name)
        try:
            taken: bool = yield Io(self.locks.take, self.locks.atake, (key,))
        except BaseException:
            local.release(thread_id)
            raise
        if not taken:
            local.release(thread_id)
        return taken

    def _untake_flow(self, local: LocalRuns, name: str, thread_id: str) -> Flow[None]:
        try:
            yield Io(self.locks.give_back, self.locks.agive_back, (self.lock_key(name),))
        finally:
            local.release(thread_id)

    @staticmethod
    def lock_key(thread_id: str) -> int:
        # A stable signed 64-bit key; "threadlog:" keeps us off other apps' lock keys.
        digest = hashlib.blake2b(f"threadlog:{thread_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    def _all(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        self.locks.close()
        self._conn.close()
