"""New, empty Postgres databases for the tests, one per test (the fixtures are in conftest).

* `fresh_database(url)`: a new database on the server at `url`, made now.
* `Databases(url)`: new databases made ahead in a thread (`take()` hands out one).
"""

from __future__ import annotations

import queue
import threading
import uuid
from urllib.parse import urlsplit, urlunsplit


def with_database(url: str, dbname: str) -> str:
    """`url` pointing at database `dbname` instead (query, e.g. a socket host, kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


def fresh_database(postgres_url: str) -> str:
    import psycopg

    name = "tl_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(postgres_url, name)


class Databases:
    """New, empty databases on the server at `url`, made `ahead` at a time in a thread.

    `CREATE DATABASE` copies a template (~0.25 s, the server's work): made ahead, it runs
    while the previous tests do and a test's setup only takes a name. Each database is
    still used by exactly one test. The ones left at the end are dropped."""

    def __init__(self, url: str, ahead: int = 8) -> None:
        self.url = url
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, name="pg-databases", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self._stop.is_set():
                    name = "tl_" + uuid.uuid4().hex[:12]
                    conn.execute(f'CREATE DATABASE "{name}"')
                    self._offer(name)
        except BaseException as exc:  # handed to the test that takes the next one
            self._offer(exc)

    def _offer(self, item: str | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def take(self) -> str:
        item = self._ready.get(timeout=120)
        if isinstance(item, BaseException):
            raise RuntimeError(f"could not create a test database on {self.url}") from item
        return with_database(self.url, item)

    def close(self) -> None:
        import psycopg

        self._stop.set()
        self._thread.join(timeout=30)
        left = []
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if isinstance(item, str):
                left.append(item)
        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in left:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
