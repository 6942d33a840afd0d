"""LangGraph's Postgres tables (`checkpoints`, `checkpoint_blobs`, `checkpoint_writes`):
every query threadlog runs on them, and its advisory locks.

Contract:

* `PostgresBackend` (`PostgresSaver`, psycopg `Connection`) and `AsyncPostgresBackend`
  (`AsyncPostgresSaver`, `AsyncConnection`) run the same step generators, under the
  saver's own `lock`, on the saver's own public `conn` — a connection, or a pool that
  lends one — with a cursor of their own (tuple rows, whatever the connection's row
  factory). So the async saver's walk never blocks its event loop.
  - `walk` / `awalk`: one query: the checkpoints from the target down to the cached id,
    each with whether it stores a value of the channels (inline, or a blob at its
    version: the probe of `PostgresSaver`'s own walk) and its writes to them. Ids only
    order checkpoints of one process; a parent outside that window ends the walk (None:
    the saver reads), as does a stored snapshot on the way (a fork).
  - `read`: None — the saver's own delta read is already two queries.
* `PostgresBackend` also answers the inspector's listings and sizes (`octet_length()`
  only: no value is decoded for a size).
* `PostgresHeadStore`: the run guard's heads on a session of its own, and a session
  advisory lock per thread — released by Postgres itself when its holder dies.
* `table_columns(conn)` / `TABLES`: the shape check of `open_readonly`.

psycopg is imported only inside functions: `import threadlog` never loads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from typing import Any, ClassVar

from threadlog.checkpoint.backends.base import (
    ERROR_CHANNEL,
    Backend,
    HeadRow,
    HeadStore,
    LocalRuns,
    Query,
    Steps,
    StoredWrite,
    Walk,
    add_sizes,
    adrive,
    attribute_blobs,
    collect_writes,
    drive,
    parse_rows,
)

__all__ = [
    "TABLES",
    "AsyncPostgresBackend",
    "PostgresBackend",
    "PostgresHeadStore",
    "table_columns",
]

# The columns LangGraph's savers read.
TABLES = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                    "checkpoint", "metadata"},
    "checkpoint_blobs": {"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"},
    "checkpoint_writes": {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx",
                          "channel", "type", "blob"},
}


def table_columns(conn: Any) -> dict[str, set[str]]:
    """`{table: its columns}` for those of `TABLES` in the current schema (a psycopg
    `Connection`; raises `psycopg.Error`)."""
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


# -- the history walk (sans-IO) -------------------------------------------------------------

# Newest-first checkpoints from the target down to the cached id, each with whether it
# stores a value for any of the channels and its writes to them — one round trip.
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
    """The walk of `Backend.walk`, as one query."""
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


def _one(query: Query) -> Steps[list[Any]]:
    rows = yield query
    return rows


# -- the saver's connection ---------------------------------------------------------------


@contextlib.contextmanager
def _connection(conn: Any) -> Iterator[Any]:
    import psycopg

    # The saver's public `conn` is a Connection or a ConnectionPool (which lends one).
    if isinstance(conn, psycopg.Connection):
        yield conn
    else:
        with conn.connection() as lent:
            yield lent


@contextlib.asynccontextmanager
async def _aconnection(conn: Any) -> AsyncIterator[Any]:
    import psycopg

    # The saver's public `conn` is an AsyncConnection or an AsyncConnectionPool.
    if isinstance(conn, psycopg.AsyncConnection):
        yield conn
    else:
        async with conn.connection() as lent:
            yield lent


# -- the backends ---------------------------------------------------------------------------


class PostgresBackend(Backend):
    """A `PostgresSaver`: its connection (or pool) under its lock."""

    kind: ClassVar[str] = "postgres"

    def _run(self, steps: Steps[Any]) -> Any:
        from psycopg.rows import tuple_row

        with (
            self.saver.lock,
            _connection(self.saver.conn) as conn,
            conn.cursor(row_factory=tuple_row) as cur,
        ):

            def execute(q: Query) -> list[Any]:
                cur.execute(q.sql, q.params)
                return parse_rows(q, cur.fetchall())

            return drive(steps, execute)

    def head_store(self, location: str) -> HeadStore:
        return PostgresHeadStore(location)

    def walk(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str, cached_id: str,
        max_walk: int,
    ) -> Walk | None:
        steps = walk_steps(self.saver, thread_id, ns, channels, target, cached_id, max_walk)
        return self._run(steps)  # type: ignore[no-any-return]

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._run(_one(Query(sql, params)))  # type: ignore[no-any-return]

    def thread_heads(self) -> list[HeadRow]:
        return [
            (str(t), str(h), str(f), int(n))
            for t, h, f, n in self._rows(
                "SELECT thread_id, max(checkpoint_id), min(checkpoint_id), count(*) "
                "FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id"
            )
        ]

    def head_errors(self, heads: Collection[tuple[str, str]]) -> list[tuple[str, str, Any]]:
        wanted = set(heads)
        rows = self._rows(
            "SELECT thread_id, checkpoint_id, type, blob FROM checkpoint_writes "
            "WHERE checkpoint_ns = '' AND channel = %s",
            (ERROR_CHANNEL,),
        )
        serde = self.saver.serde
        return [
            (tid, cid, serde.loads_typed((typ, blob)))
            for tid, cid, typ, blob in rows
            if (tid, cid) in wanted
        ]

    def checkpoint_ids(self, thread_id: str, ns: str) -> list[str]:
        rows = self._rows(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s",
            (thread_id, ns),
        )
        return sorted(str(r[0]) for r in rows)

    def namespace_counts(self, thread_id: str) -> list[tuple[str, int, str]]:
        rows = self._rows(
            "SELECT checkpoint_ns, count(*), max(checkpoint_id) FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns != '' GROUP BY checkpoint_ns",
            (thread_id,),
        )
        return [(str(ns), int(n), str(h)) for ns, n, h in rows]

    def subgraph_counts(self) -> dict[str, int]:
        rows = self._rows(
            "SELECT thread_id, count(DISTINCT checkpoint_ns) FROM checkpoints "
            "WHERE checkpoint_ns != '' GROUP BY thread_id"
        )
        return {str(t): int(n) for t, n in rows}

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


class AsyncPostgresBackend(Backend):
    """An `AsyncPostgresSaver`: its async connection (or pool) under its asyncio lock. The
    sync listings are the saver's API (the base class)."""

    kind: ClassVar[str] = "postgres"

    async def _arun(self, steps: Steps[Any]) -> Any:
        from psycopg.rows import tuple_row

        async with (
            self.saver.lock,
            _aconnection(self.saver.conn) as conn,
            conn.cursor(row_factory=tuple_row) as cur,
        ):

            async def execute(q: Query) -> list[Any]:
                await cur.execute(q.sql, q.params)
                return parse_rows(q, await cur.fetchall())

            return await adrive(steps, execute)

    def head_store(self, location: str) -> HeadStore:
        return PostgresHeadStore(location)

    async def awalk(
        self, thread_id: str, ns: str, channels: Sequence[str], target: str, cached_id: str,
        max_walk: int,
    ) -> Walk | None:
        steps = walk_steps(self.saver, thread_id, ns, channels, target, cached_id, max_walk)
        return await self._arun(steps)  # type: ignore[no-any-return]


# -- the run guard's heads and locks ------------------------------------------------------

_HEAD_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_HAS_CHILD_SQL = (
    "SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND parent_checkpoint_id = %s LIMIT 1"
)
_TASK_WRITES_SQL = (
    "SELECT idx, type, blob FROM checkpoint_writes WHERE thread_id = %s "
    "AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s"
)
_WRITE_KEYS_SQL = (
    "SELECT task_id, channel FROM checkpoint_writes WHERE thread_id = %s "
    "AND checkpoint_ns = %s AND checkpoint_id = %s"
)


class PostgresHeadStore:
    """Reads through its own connection; a session advisory lock per thread.

    The lock lives on this store's connection, so it is released by Postgres itself
    when the holder's process dies.
    """

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.Connection.connect(url, autocommit=True, prepare_threshold=0)
        self._thread_lock = threading.Lock()
        self._url = url
        self._runs = LocalRuns()
        self._run_conns: dict[str, Any] = {}
        self._idle: list[Any] = []

    def try_run_lock(self, thread_id: str, wait: bool) -> bool:
        import psycopg

        if not self._runs.acquire(thread_id, wait):
            return False
        # A session per held run lock: a blocking wait must not hold up the
        # write-guard queries of this process's other runs. Sessions are reused (a
        # run lock is taken for every run), at most a few kept idle.
        try:
            conn = self._idle.pop() if self._idle else psycopg.Connection.connect(
                self._url, autocommit=True, prepare_threshold=0
            )
            key = self.lock_key("run:" + thread_id)
            if wait:
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            else:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                if not (row and row[0]):
                    self._park(conn)
                    self._runs.release(thread_id)
                    return False
        except BaseException:
            self._runs.release(thread_id)
            raise
        self._run_conns[thread_id] = conn
        return True

    def run_unlock(self, thread_id: str) -> None:
        conn = self._run_conns.pop(thread_id, None)
        if conn is not None:
            try:
                conn.execute(
                    "SELECT pg_advisory_unlock(%s)", (self.lock_key("run:" + thread_id),)
                )
            except Exception:
                conn.close()  # closing the session releases its advisory locks
            else:
                self._park(conn)
        self._runs.release(thread_id)

    def _park(self, conn: Any) -> None:
        if len(self._idle) < 4 and not conn.closed:
            self._idle.append(conn)
        else:
            conn.close()

    @staticmethod
    def lock_key(thread_id: str) -> int:
        # A stable signed 64-bit key; "threadlog:" keeps us off other apps' lock keys.
        digest = hashlib.blake2b(f"threadlog:{thread_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    @contextlib.contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        key = self.lock_key(thread_id)
        with self._thread_lock:
            self._conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                yield
            finally:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def head(self, thread_id: str, ns: str) -> str | None:
        row = self._conn.execute(_HEAD_SQL, (thread_id, ns)).fetchone()
        return None if row is None else str(row[0])

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        row = self._conn.execute(_HAS_CHILD_SQL, (thread_id, ns, checkpoint_id)).fetchone()
        return row is not None

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        args = (thread_id, ns, checkpoint_id, task_id)
        rows = self._conn.execute(_TASK_WRITES_SQL, args).fetchall()
        return {int(idx): (str(typ), bytes(blob)) for idx, typ, blob in rows}

    def write_keys(self, thread_id: str, ns: str, checkpoint_id: str) -> frozenset[tuple[str, str]]:
        rows = self._conn.execute(_WRITE_KEYS_SQL, (thread_id, ns, checkpoint_id)).fetchall()
        return frozenset((str(t), str(c)) for t, c in rows)

    def close(self) -> None:
        for conn in [*self._idle, *self._run_conns.values()]:
            conn.close()
        self._idle.clear()
        self._run_conns.clear()
        self._conn.close()
