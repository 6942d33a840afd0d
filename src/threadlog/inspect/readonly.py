"""Opening someone else's checkpoint database to read it, and nothing else.

`open_readonly(source)` yields LangGraph's own saver for a SQLite path / `sqlite:///` URL or
a `postgresql://` URL, opened so that reading cannot write: SQLite through a `mode=ro` URI,
Postgres in read-only transactions whose lock waits last at most `LOCK_TIMEOUT` seconds;
`setup()` is never called. A source that is not a LangGraph database raises `SourceError`,
one line naming it (its password as `***`). Values are decoded by the strict serializer
(widened by `THREADLOG_ALLOW_TYPES` and `reading_types`).

`remember_large(serde)`: a blob of `LARGE` bytes or more, equal to one of the last `KEEP`,
returns its decoded value again in a fresh top-level dict (LangGraph reads the newest
checkpoint twice). Writing is refused.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from langgraph.checkpoint.base import BaseCheckpointSaver

from threadlog._upstream import saver_task_path
from threadlog.checkpoint.backends import postgres as postgres_tables
from threadlog.checkpoint.backends import sqlite as sqlite_tables

__all__ = [
    "KEEP",
    "LARGE",
    "LOCK_TIMEOUT",
    "SourceError",
    "describe",
    "is_server_url",
    "local_saver",
    "lock_wait_error",
    "one_line",
    "open_readonly",
    "reading_types",
    "remember_large",
    "sqlite_path",
    "waiting_at_most",
]

LOCK_TIMEOUT = 10.0
LARGE = 256 * 1024
KEEP = 4
_WAIT: contextvars.ContextVar[float] = contextvars.ContextVar(
    "threadlog_lock_timeout", default=LOCK_TIMEOUT
)

_READING: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar(
    "threadlog_reading_types", default=()
)


class SourceError(ValueError):
    """A source the inspector cannot read; the message is one line saying why."""


def is_server_url(source: str) -> bool:
    return source.lower().startswith(("http://", "https://"))


def describe(source: str) -> str:
    """`source` with the password of a URL as `***`."""
    if "://" not in source:
        return source
    parts = urlsplit(source)
    if parts.password is None:
        return source
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def sqlite_path(source: str) -> str | None:
    """The file a SQLite source names (`sqlite:///p` or a plain path), else None."""
    if source.lower().startswith("sqlite:///"):
        return source[len("sqlite:///") :]
    return None if "://" in source else source


@contextlib.contextmanager
def open_readonly(source: str) -> Iterator[BaseCheckpointSaver[Any]]:
    path = sqlite_path(source)
    if path is None and urlsplit(source).scheme.lower() not in ("postgresql", "postgres"):
        raise SourceError(
            f"cannot read {describe(source)!r}: use a SQLite file (path or sqlite:///path), "
            "a postgresql:// URL, or a LangGraph server URL (http://host:port)"
        )
    with _sqlite(path) if path is not None else _postgres(source) as saver:
        yield saver


@contextlib.contextmanager
def local_saver(source: Any, refusal: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """`source` itself when it is a saver, else the database it names opened read-only;
    else `TypeError(refusal)`, its `{}` naming the type."""
    if isinstance(source, BaseCheckpointSaver):
        yield source
    elif isinstance(source, str):
        with open_readonly(source) as saver:
            yield saver
    else:
        raise TypeError(refusal.format(type(source).__name__))


@contextlib.contextmanager
def _set(var: contextvars.ContextVar[Any], value: Any) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def waiting_at_most(seconds: float) -> contextlib.AbstractContextManager[None]:
    """Postgres sources opened inside the block wait for a lock at most `seconds`."""
    return _set(_WAIT, seconds)


def lock_wait_error(exc: BaseException) -> SourceError | None:
    """A `SourceError` saying a read waited out its lock timeout, if `exc` is that."""
    text = " ".join(str(exc).split())
    if "lock timeout" not in text and "statement timeout" not in text:
        return None
    return SourceError(
        f"another connection holds a lock on the checkpoint tables; gave up after "
        f"{_WAIT.get():g}s ({text}); nothing was read or written"
    )


def reading_types(types: Iterable[tuple[str, str]]) -> contextlib.AbstractContextManager[None]:
    """Sources opened inside the block also rebuild these `(module, class)` types."""
    return _set(_READING, (*_READING.get(), *types))


def _serde() -> Any:
    from threadlog.checkpoint.serde import ALLOW_TYPES_ENV, parse_type_names, strict_serializer

    try:
        from_env = parse_type_names(os.environ.get(ALLOW_TYPES_ENV, ""))
    except ValueError as exc:
        raise SourceError(f"{ALLOW_TYPES_ENV}: {exc}") from None
    return strict_serializer([*from_env, *_READING.get()], placeholders=True)


@contextlib.contextmanager
def _sqlite(path: str) -> Iterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    if path in ("", ":memory:"):
        raise SourceError(f"{path or 'an empty path'} holds no threads to read; give a file")
    if not os.path.exists(path):  # opening would create an empty database
        raise SourceError(f"no database at {path!r}")
    if os.path.isdir(path):
        raise SourceError(f"{path!r} is a directory, not a SQLite database file")
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=5)
    except sqlite3.Error as exc:
        raise SourceError(f"cannot open {path!r}: {one_line(exc)}") from None
    try:
        columns = _checked_columns(
            path,
            sqlite_tables,
            conn,
            sqlite3.DatabaseError,
            lambda e: f"{path!r} is not a SQLite database ({e})",
        )
        saver = SqliteSaver(conn, serde=remember_large(_serde()))
        saver.is_setup = True  # setup() creates tables: a reader must not
        saver_task_path(saver, "task_path" in (columns.get("writes") or set()))
        yield saver
    finally:
        conn.close()


def _checked_columns(
    where: str,
    tables: Any,
    conn: Any,
    errors: type[Exception],
    unreadable: Callable[[str], str],
) -> dict[str, set[str]]:
    """The columns of LangGraph's tables in `conn` (`tables`: the backend module), each
    table checked; `unreadable` words a driver error."""
    try:
        columns: dict[str, set[str]] = tables.table_columns(conn)
    except errors as exc:
        raise SourceError(unreadable(one_line(exc))) from None
    for table, needed in tables.TABLES.items():
        _check_table(where, table, columns.get(table), needed)
    return columns


def _check_table(where: str, table: str, have: set[str] | None, needed: set[str]) -> None:
    if have is None:
        raise SourceError(
            f"{describe(where)} is not a LangGraph checkpoint database: it has no {table!r} "
            "table (threads are stored by a LangGraph checkpointer, e.g. threadlog.checkpointer)"
        )
    missing = sorted(needed - have)
    if missing:
        raise SourceError(
            f"{describe(where)} is not a LangGraph checkpoint database: its {table!r} table "
            f"lacks the column(s) {', '.join(missing)} (another application's table?)"
        )


@contextlib.contextmanager
def _postgres(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
    except ImportError:
        raise SourceError(
            f"reading {describe(url)} needs the postgres extra: pip install 'threadlog[postgres]'"
        ) from None
    try:
        conn = psycopg.Connection.connect(
            url,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            connect_timeout=10,
            options="-c default_transaction_read_only=on "
            f"-c lock_timeout={max(int(_WAIT.get() * 1000), 1)}",
        )
    except psycopg.Error as exc:
        raise SourceError(f"cannot connect to {describe(url)}: {one_line(exc)}") from None
    with conn:
        _checked_columns(
            url, postgres_tables, conn, psycopg.Error, lambda e: f"cannot read {describe(url)}: {e}"
        )
        try:
            yield PostgresSaver(conn, serde=remember_large(_serde()))
        except psycopg.errors.LockNotAvailable as exc:
            raise (lock_wait_error(exc) or exc) from None


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class _RememberLarge:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._seen: OrderedDict[tuple[str, int, bytes], Any] = OrderedDict()

    def __getattr__(self, name: str) -> Any:  # the wrapped serializer's settings
        return getattr(self._inner, name)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise TypeError("a reader's serializer does not write")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, blob = data
        if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) < LARGE:
            return self._inner.loads_typed(data)
        raw = bytes(blob)
        key = (tag, len(raw), raw[:64] + raw[-64:])
        hit = self._seen.get(key)
        if hit is not None and hit[0] == raw:
            self._seen.move_to_end(key)
            return _fresh(hit[1])
        value = self._inner.loads_typed(data)
        self._seen[key] = (raw, value)
        while len(self._seen) > KEEP:
            self._seen.popitem(last=False)
        return _fresh(value)


def _fresh(value: Any) -> Any:
    if isinstance(value, dict):
        out = dict(value)
        if isinstance(out.get("channel_values"), dict):
            out["channel_values"] = dict(out["channel_values"])
        return out
    return value


def remember_large(serde: Any) -> Any:
    return _RememberLarge(serde)
