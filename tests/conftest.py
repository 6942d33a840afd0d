"""Shared fixtures: a real Postgres for the session, and a `backend` URL per test.

* `postgres_url` (session): `THREADLOG_TEST_POSTGRES_URL` when set, else a throwaway
  server from the `pgserver` package (it ships its own binaries) in a temporary dir,
  stopped and deleted at the end. When the tests run as root, pgserver runs the server
  as a system user it creates (`pgserver`) and makes the temp dir traversable.
* `backend` (function, parametrized `sqlite` / `postgres`): a checkpointer URL for
  `threadlog.checkpointer(url)` pointing at fresh storage — a new SQLite file, or a
  new Postgres database — so tests never see each other's threads.
* `sqlite_url`, `pg_backend`: the two halves on their own.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    env = os.environ.get("THREADLOG_TEST_POSTGRES_URL")
    if env:
        yield env
        return
    import pgserver

    # Not under pytest's basetemp: another pytest session resets that tree to mode
    # 0700, which locks out the server's own user when the tests run as root. Short,
    # too: the server's unix socket path must fit in ~100 characters.
    pgdata = tempfile.mkdtemp(prefix="threadlog-pg-")
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


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


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'checkpoints.sqlite'}"


@pytest.fixture
def pg_backend(postgres_url: str) -> str:
    return fresh_database(postgres_url)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'checkpoints.sqlite'}"
    return fresh_database(request.getfixturevalue("postgres_url"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures the durability scenarios gathered (kill points, races…)."""
    counts = sys.modules.get("helpers_durability")
    if counts is not None and counts.COUNTS:
        line = ", ".join(f"{k}: {v}" for k, v in sorted(counts.COUNTS.items()))
        terminalreporter.write_line(f"durability counts — {line}")
