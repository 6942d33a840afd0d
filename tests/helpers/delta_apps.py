"""Apps whose delta channels are not threadlog's, run turn by turn on a saver: LangGraph's
own savers and threadlog's are driven the same way, so a test compares what each stored.

* `langgraph_saver(url, is_async)`: LangGraph's own saver for a `backend` URL (tables set
  up), sync or async, no threadlog in the way.
* `threadlog_saver(url, is_async)`: `threadlog.checkpointer` / `acheckpointer`.
* `run_turns(app, inputs, thread_id, is_async)`: each input as a turn; what the app's
  state holds after each turn, and every checkpoint of the history at the end.
* `stored_bytes(url)`: bytes every checkpoint, value and write takes in storage;
  `bytes_per_turn(app, url, inputs, thread_id)`: what each turn added to it.
* `reference_saver(url, tmp_path, request)`: LangGraph's own sync saver on a fresh database
  of `url`'s kind, the reference a test compares threadlog's reads with.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

import threadlog

Saver = BaseCheckpointSaver[Any]


@contextlib.asynccontextmanager
async def langgraph_saver(url: str, is_async: bool) -> AsyncIterator[Saver]:
    """LangGraph's own saver for `url`, tables set up."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if is_async:
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            async with AsyncSqliteSaver.from_conn_string(path) as saver:
                await saver.setup()
                yield saver
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            with SqliteSaver.from_conn_string(path) as sync_saver:
                sync_saver.setup()
                yield sync_saver
    elif is_async:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as sync_saver:
            sync_saver.setup()
            yield sync_saver


@contextlib.asynccontextmanager
async def threadlog_saver(url: str, is_async: bool) -> AsyncIterator[Saver]:
    if is_async:
        async with threadlog.acheckpointer(url) as saver:
            yield saver
    else:
        with threadlog.checkpointer(url) as sync_saver:
            yield sync_saver


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


async def run_turns(
    app: Any,
    inputs: Sequence[Any],
    thread_id: str,
    is_async: bool,
    *,
    read: Callable[[dict[str, Any]], Any],
) -> tuple[list[Any], list[Any]]:
    """(`read(state)` after each turn, `read(values)` of every checkpoint newest first).
    The sync lane runs in a worker thread: the test's event loop stays free."""
    if is_async:
        after = []
        for value in inputs:
            await app.ainvoke(value, cfg(thread_id))
            after.append(read((await app.aget_state(cfg(thread_id))).values))
        history = [read(s.values) async for s in app.aget_state_history(cfg(thread_id))]
        return after, history

    def sync() -> tuple[list[Any], list[Any]]:
        after = []
        for value in inputs:
            app.invoke(value, cfg(thread_id))
            after.append(read(app.get_state(cfg(thread_id)).values))
        history = [read(s.values) for s in app.get_state_history(cfg(thread_id))]
        return after, history

    return await asyncio.to_thread(sync)


def message_rows(messages: Any, *, ids: bool = True) -> list[tuple[Any, ...]]:
    """A message list as comparable rows: type, id (unless `ids=False`), text, calls."""
    rows = []
    for m in messages or ():
        calls = tuple((c["name"], c["id"]) for c in getattr(m, "tool_calls", None) or ())
        row = (m.type, m.id if ids else None, m.content, calls, getattr(m, "tool_call_id", None))
        rows.append(row)
    return rows



def stored_bytes(url: str) -> int:
    """Bytes a database's threads take in storage: every checkpoint, value and write,
    every namespace."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url[len("sqlite:///") :])) as con:
            row = con.execute(
                "SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
                "FROM checkpoints) + (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes)"
            ).fetchone()
    else:
        import psycopg

        with psycopg.connect(url) as con:
            row = con.execute(
                "SELECT (SELECT COALESCE(SUM(pg_column_size(checkpoint) "
                "+ pg_column_size(metadata)), 0) FROM checkpoints) "
                "+ (SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM checkpoint_blobs) "
                "+ (SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM checkpoint_writes)"
            ).fetchone()
    assert row is not None
    return int(row[0])


def bytes_per_turn(app: Any, url: str, inputs: Sequence[Any], thread_id: str) -> list[int]:
    """The bytes each input's turn added to `url`'s storage (module doc)."""
    per_turn = []
    before = stored_bytes(url)
    for turn in inputs:
        app.invoke(turn, cfg(thread_id))
        now = stored_bytes(url)
        per_turn.append(now - before)
        before = now
    return per_turn


@contextlib.contextmanager
def reference_saver(url: str, tmp_path: Any, request: Any) -> Iterator[Saver]:
    """LangGraph's own saver on a fresh database of `url`'s kind (module doc)."""
    from tests.helpers.poisoned import plain_saver

    ref = (
        f"sqlite:///{tmp_path / 'langgraph.sqlite'}"
        if url.startswith("sqlite:///")
        else request.getfixturevalue("pg_databases").take()
    )
    with plain_saver(ref) as saver:
        yield saver
