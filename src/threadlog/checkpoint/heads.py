"""Where the run guard reads a thread's head and takes its locks, one store per backend.

Contract. A `HeadStore` answers, for one thread and namespace: the newest checkpoint
id (`head`), whether a checkpoint already has a child (`has_child`), and the writes a
task stored (`writes`); and it holds two locks that span processes — a short `lock`
around each guarded write, and a run lock (`try_run_lock` / `run_unlock`) that
`GuardedSaver.exclusive` holds for a whole turn. Memory uses `threading` locks, SQLite
an `flock` on a file next to the database, Postgres advisory locks. Every lock dies
with its holder (a file descriptor or a database session), so a SIGKILLed worker never
blocks a thread. The stores read LangGraph's own tables; they never write.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from langgraph.checkpoint.memory import InMemorySaver

__all__ = [
    "HeadStore",
    "MemoryHeadStore",
    "PostgresHeadStore",
    "SqliteHeadStore",
    "StoredWrite",
]

StoredWrite = tuple[str, bytes]
"""(serializer type tag, blob) of one stored write."""


class HeadStore(Protocol):
    """What the guard needs to know about a thread, read under its lock."""

    def lock(self, thread_id: str) -> contextlib.AbstractContextManager[None]: ...

    def try_run_lock(self, thread_id: str, wait: bool) -> bool: ...

    def run_unlock(self, thread_id: str) -> None: ...

    def head(self, thread_id: str, ns: str) -> str | None: ...

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool: ...

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]: ...

    def write_keys(
        self, thread_id: str, ns: str, checkpoint_id: str
    ) -> frozenset[tuple[str, str]]: ...

    def close(self) -> None: ...


class _LocalRuns:
    """Which threads this process holds a run lock on (OS/database locks are per
    process or per session, so they cannot keep two threads of one process apart)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: set[str] = set()

    def acquire(self, thread_id: str, wait: bool) -> bool:
        with self._cond:
            while thread_id in self._held:
                if not wait:
                    return False
                self._cond.wait()
            self._held.add(thread_id)
            return True

    def release(self, thread_id: str) -> None:
        with self._cond:
            self._held.discard(thread_id)
            self._cond.notify_all()


class MemoryHeadStore:
    """Reads an `InMemorySaver`'s dicts; one process, so a thread lock is the mutex."""

    def __init__(self, saver: InMemorySaver) -> None:
        self.saver = saver
        self._lock = threading.Lock()
        self._runs = _LocalRuns()

    def try_run_lock(self, thread_id: str, wait: bool) -> bool:
        return self._runs.acquire(thread_id, wait)

    def run_unlock(self, thread_id: str) -> None:
        self._runs.release(thread_id)

    @contextlib.contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        with self._lock:
            yield

    def head(self, thread_id: str, ns: str) -> str | None:
        ids = self.saver.storage.get(thread_id, {}).get(ns, {})
        return max(ids) if ids else None

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        saved = self.saver.storage.get(thread_id, {}).get(ns, {})
        return any(entry[2] == checkpoint_id for entry in saved.values())

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        stored = self.saver.writes.get((thread_id, ns, checkpoint_id), {})
        return {idx: w[2] for (tid, idx), w in stored.items() if tid == task_id}

    def write_keys(self, thread_id: str, ns: str, checkpoint_id: str) -> frozenset[tuple[str, str]]:
        stored = self.saver.writes.get((thread_id, ns, checkpoint_id), {})
        return frozenset((tid, w[1]) for (tid, _), w in stored.items())

    def close(self) -> None:
        pass


class SqliteHeadStore:
    """Reads a SQLite checkpoint file through its own connection; `flock` across processes."""

    def __init__(self, path: str, conn: sqlite3.Connection | None = None) -> None:
        self.path = path
        self._thread_lock = threading.Lock()
        # ":memory:" is private to one connection, so that one is shared (`conn`).
        self._own = conn is None
        # Opened on first use: a process that only reads a database (get_state, the
        # inspector) must leave no lock file next to it.
        self._conn_: sqlite3.Connection | None = conn
        self._lock_fd: int | None = None
        self._runs = _LocalRuns()
        self._run_fds: dict[str, int] = {}
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

    def try_run_lock(self, thread_id: str, wait: bool) -> bool:
        if not self._runs.acquire(thread_id, wait):
            return False
        if self.path == ":memory:":
            return True
        # One lock file per thread in a directory next to the database.
        folder = self.path + ".threadlog-runs"
        os.makedirs(folder, exist_ok=True)
        name = hashlib.blake2b(thread_id.encode(), digest_size=12).hexdigest()
        fd = os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self._runs.release(thread_id)
            return False
        self._run_fds[thread_id] = fd
        return True

    def run_unlock(self, thread_id: str) -> None:
        fd = self._run_fds.pop(thread_id, None)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._runs.release(thread_id)

    @contextlib.contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        # One lock for the whole file: SQLite serializes writers anyway, and a
        # byte-range lock per thread would buy nothing but complexity.
        fd = self._lock_file()
        with self._thread_lock:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def _one(self, sql: str, args: tuple[Any, ...]) -> Any:
        try:
            row = self._conn.execute(sql, args).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None  # nothing stored yet
            raise
        return row

    def head(self, thread_id: str, ns: str) -> str | None:
        row = self._one(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ns),
        )
        return None if row is None else str(row[0])

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        row = self._one(
            "SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND parent_checkpoint_id = ? LIMIT 1",
            (thread_id, ns, checkpoint_id),
        )
        return row is not None

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        try:
            rows = self._conn.execute(
                "SELECT idx, type, value FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id = ? AND task_id = ?",
                (thread_id, ns, checkpoint_id, task_id),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
        return {int(idx): (str(typ), bytes(val)) for idx, typ, val in rows}

    def write_keys(self, thread_id: str, ns: str, checkpoint_id: str) -> frozenset[tuple[str, str]]:
        try:
            rows = self._conn.execute(
                "SELECT task_id, channel FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id = ?",
                (thread_id, ns, checkpoint_id),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return frozenset()
            raise
        return frozenset((str(t), str(c)) for t, c in rows)

    def close(self) -> None:
        if self._own and self._conn_ is not None:
            self._conn_.close()
            self._conn_ = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


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
        self._runs = _LocalRuns()
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
        row = self._conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ns),
        ).fetchone()
        return None if row is None else str(row[0])

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND parent_checkpoint_id = %s LIMIT 1",
            (thread_id, ns, checkpoint_id),
        ).fetchone()
        return row is not None

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        rows = self._conn.execute(
            "SELECT idx, type, blob FROM checkpoint_writes WHERE thread_id = %s "
            "AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s",
            (thread_id, ns, checkpoint_id, task_id),
        ).fetchall()
        return {int(idx): (str(typ), bytes(blob)) for idx, typ, blob in rows}

    def write_keys(self, thread_id: str, ns: str, checkpoint_id: str) -> frozenset[tuple[str, str]]:
        rows = self._conn.execute(
            "SELECT task_id, channel FROM checkpoint_writes WHERE thread_id = %s "
            "AND checkpoint_ns = %s AND checkpoint_id = %s",
            (thread_id, ns, checkpoint_id),
        ).fetchall()
        return frozenset((str(t), str(c)) for t, c in rows)

    def close(self) -> None:
        for conn in [*self._idle, *self._run_conns.values()]:
            conn.close()
        self._idle.clear()
        self._run_conns.clear()
        self._conn.close()
