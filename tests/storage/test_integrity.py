"""A writes row deleted or swapped in the middle of a thread is a loud error on read
(`threadlog.checkpoint.integrity`); an untouched thread and a thread written
before the chain existed read as before.
The tampering tests run on SQLite and Postgres."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

import threadlog
from threadlog.checkpoint.integrity import CHAIN_KEY


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"{city}: sunny"


CONFIG: Any = {"configurable": {"thread_id": "t"}}
QUESTIONS = ["Beijing?", "Shanghai?", "Chengdu?"]


def _agent(saver: Any) -> Any:
    return threadlog.create_agent(threadlog.OfflineChatModel(), [get_weather], checkpointer=saver)


def _thread(url: str) -> list[Any]:
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver)
        for i, q in enumerate(QUESTIONS):
            app.invoke({"messages": [{"role": "user", "content": q, "id": f"u{i}"}]}, CONFIG)
        return list(app.get_state(CONFIG).values["messages"])


class _Rows:
    """The message writes rows of one backend, addressed by (checkpoint, task, idx)."""

    def __init__(self, url: str) -> None:
        self.pg = url.startswith("postgresql")
        self.table, self.value = ("checkpoint_writes", "blob") if self.pg else ("writes", "value")
        if self.pg:
            import psycopg

            self.conn: Any = psycopg.connect(url, autocommit=True)
        else:
            self.conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.pg else sql

    def keys(self) -> list[tuple[str, str, int]]:
        return [
            tuple(r)
            for r in self.conn.execute(
                self._sql(
                    f"SELECT checkpoint_id, task_id, idx FROM {self.table} "
                    "WHERE channel = 'messages' ORDER BY checkpoint_id, task_id, idx"
                )
            ).fetchall()
        ]

    def delete(self, key: tuple[str, str, int]) -> None:
        where = "checkpoint_id = ? AND task_id = ? AND idx = ?"
        self.conn.execute(self._sql(f"DELETE FROM {self.table} WHERE {where}"), key)

    def swap(self, a: tuple[str, str, int], b: tuple[str, str, int]) -> None:
        where = "checkpoint_id = ? AND task_id = ? AND idx = ?"
        get = self._sql(f"SELECT type, {self.value} FROM {self.table} WHERE {where}")
        put = self._sql(f"UPDATE {self.table} SET type = ?, {self.value} = ? WHERE {where}")
        va = self.conn.execute(get, a).fetchone()
        vb = self.conn.execute(get, b).fetchone()
        self.conn.execute(put, (*vb, *a))
        self.conn.execute(put, (*va, *b))

    def close(self) -> None:
        self.conn.close()


def _tamper(url: str, change: Any) -> None:
    rows = _Rows(url)
    try:
        change(rows, rows.keys())
    finally:
        rows.close()


def _read(url: str) -> list[Any]:
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver)
        messages = list(app.get_state(CONFIG).values["messages"])
        list(app.get_state_history(CONFIG))
        return messages


def test_an_untouched_thread_reads_back_and_every_checkpoint_has_a_chain(backend: str) -> None:
    written = _thread(backend)
    assert [m.id for m in _read(backend)] == [m.id for m in written]
    with threadlog.checkpointer(backend) as saver:
        metas = [t.metadata for t in saver.list(CONFIG)]
    assert metas and all(CHAIN_KEY in (m or {}) for m in metas)


def test_a_deleted_writes_row_in_the_middle_is_a_loud_error(backend: str) -> None:
    _thread(backend)
    _tamper(backend, lambda rows, keys: rows.delete(keys[len(keys) // 2]))
    with pytest.raises(threadlog.StoredDataError, match="rows read"):
        _read(backend)


def test_two_swapped_writes_rows_are_a_loud_error(backend: str) -> None:
    _thread(backend)
    # the first user message's row and the last answer's row: different checkpoints
    _tamper(backend, lambda rows, keys: rows.swap(keys[1], keys[-2]))
    with pytest.raises(threadlog.StoredDataError, match=r"other values|rows read"):
        _read(backend)


def test_a_thread_written_before_the_chain_reads_and_continues(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    plain = _agent(SqliteSaver(conn))  # no chain: as threads written by earlier versions
    plain.invoke({"messages": [{"role": "user", "content": "Beijing?", "id": "u0"}]}, CONFIG)
    conn.close()
    url = f"sqlite:///{db}"
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver)
        app.invoke({"messages": [{"role": "user", "content": "Tokyo?", "id": "u1"}]}, CONFIG)
    messages = _read(url)
    assert [m.id for m in messages if m.type == "human"] == ["u0", "u1"]
