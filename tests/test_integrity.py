"""A writes row deleted or swapped in the middle of a thread is a loud error on read
(`threadlog.checkpoint.integrity`), on SQLite; an untouched thread and a thread written
before the chain existed read as before."""

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


def _thread(db: Path) -> list[Any]:
    with threadlog.checkpointer(f"sqlite:///{db}") as saver:
        app = _agent(saver)
        for i, q in enumerate(QUESTIONS):
            app.invoke({"messages": [{"role": "user", "content": q, "id": f"u{i}"}]}, CONFIG)
        return list(app.get_state(CONFIG).values["messages"])


def _message_rows(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT rowid, checkpoint_id FROM writes WHERE channel = 'messages' "
            "ORDER BY checkpoint_id, task_id, idx"
        ).fetchall()


def _read(db: Path) -> list[Any]:
    with threadlog.checkpointer(f"sqlite:///{db}") as saver:
        app = _agent(saver)
        messages = list(app.get_state(CONFIG).values["messages"])
        list(app.get_state_history(CONFIG))
        return messages


def test_an_untouched_thread_reads_back_and_every_checkpoint_has_a_chain(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    written = _thread(db)
    assert [m.id for m in _read(db)] == [m.id for m in written]
    with threadlog.checkpointer(f"sqlite:///{db}") as saver:
        metas = [t.metadata for t in saver.list(CONFIG)]
    assert metas and all(CHAIN_KEY in (m or {}) for m in metas)


def test_a_deleted_writes_row_in_the_middle_is_a_loud_error(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    _thread(db)
    rows = _message_rows(db)
    victim = rows[len(rows) // 2][0]
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM writes WHERE rowid = ?", (victim,))
    with pytest.raises(threadlog.StoredDataError, match="rows read"):
        _read(db)


def test_two_swapped_writes_rows_are_a_loud_error(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    _thread(db)
    rows = _message_rows(db)
    # the first user message's row and the last answer's row: different checkpoints
    (a, _), (b, _) = rows[1], rows[-2]
    with sqlite3.connect(db) as conn:
        va = conn.execute("SELECT type, value FROM writes WHERE rowid = ?", (a,)).fetchone()
        vb = conn.execute("SELECT type, value FROM writes WHERE rowid = ?", (b,)).fetchone()
        conn.execute("UPDATE writes SET type = ?, value = ? WHERE rowid = ?", (*vb, a))
        conn.execute("UPDATE writes SET type = ?, value = ? WHERE rowid = ?", (*va, b))
    with pytest.raises(threadlog.StoredDataError, match=r"other values|rows read"):
        _read(db)


def test_a_thread_written_before_the_chain_reads_and_continues(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    plain = _agent(SqliteSaver(conn))  # no chain: as threads written by earlier versions
    plain.invoke({"messages": [{"role": "user", "content": "Beijing?", "id": "u0"}]}, CONFIG)
    conn.close()
    with threadlog.checkpointer(f"sqlite:///{db}") as saver:
        app = _agent(saver)
        app.invoke({"messages": [{"role": "user", "content": "Tokyo?", "id": "u1"}]}, CONFIG)
    messages = _read(db)
    assert [m.id for m in messages if m.type == "human"] == ["u0", "u1"]
