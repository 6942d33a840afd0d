"""`threadlog.inspect.threads`: finding a thread, on SQLite, Postgres and plain LangGraph data.

Every read here goes through `open_readonly`; the last tests prove a reader changes nothing
in the database it reads (no tables, no lock files, not one byte of the file).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.inspect import ScriptedAgent, raw_saver, run_two_turns
from threadlog import inspect
from threadlog.inspect.readonly import SourceError


def write_three_threads(url: str) -> None:
    """done-1 (two turns), failed-2 (a tool step that failed: open calls, an error), new-3."""
    with raw_saver(url) as saver:
        graph = ScriptedAgent().build(saver)
        run_two_turns(graph)  # thread t-1 …
        graph.invoke({"messages": [("user", "hello there")]}, {"configurable": {"thread_id": "x"}})
        failing = ScriptedAgent(failing={"Rome"}).build(saver)
        with pytest.raises(RuntimeError, match="weather service down for Rome"):
            failing.invoke(
                {"messages": [("user", "Weather in Paris and Rome?")]},
                {"configurable": {"thread_id": "failed-2"}},
            )
        graph.invoke(
            {"messages": [("user", "Any news from Berlin?")]},
            {"configurable": {"thread_id": "new-3"}},
        )


def by_id(items: list[Any]) -> dict[str, Any]:
    return {s.thread_id: s for s in items}


def test_lists_threads_newest_first_with_turns_open_calls_and_errors(backend: str) -> None:
    write_three_threads(backend)

    listing = inspect.threads(backend, limit=0)

    assert [s.thread_id for s in listing.items] == ["new-3", "failed-2", "x", "t-1"]
    found = by_id(listing.items)
    assert (found["t-1"].turns, found["t-1"].messages) == (2, 7)
    assert found["t-1"].last_user == "thanks"
    assert found["t-1"].open_calls == [] and found["t-1"].errors == []
    failed = found["failed-2"]
    assert failed.open_calls == ["c-paris", "c-rome"]  # the step failed: no result stored
    assert len(failed.errors) == 1 and "weather service down for Rome" in failed.errors[0]
    assert failed.created_at <= failed.updated_at
    assert found["new-3"].updated_at >= found["t-1"].updated_at
    assert found["t-1"].checkpoints >= 6
    text = str(listing)
    assert "failed-2" in text and "Any news from Berlin?" in text


def test_the_listing_rebuilds_the_newest_20_heads_unless_told_otherwise(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.graph import START, StateGraph

    import threadlog
    from threadlog.cli import main

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("echo", lambda state: {"messages": [("ai", "hello")]})
    builder.add_edge(START, "echo")
    with raw_saver(sqlite_url) as saver:
        graph = builder.compile(checkpointer=saver)
        for i in range(21):
            graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": f"t{i}"}})
    listing = inspect.threads(sqlite_url)
    assert len(listing.items) == 20 and listing.more
    assert "t0" not in {s.thread_id for s in listing.items}  # the oldest is left out
    assert main(["threads", "--db", sqlite_url, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 20
    assert main(["threads", "--db", sqlite_url, "--json", "--limit", "0"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 21


def test_limit_and_search_narrow_the_listing(sqlite_url: str) -> None:
    write_three_threads(sqlite_url)

    assert [s.thread_id for s in inspect.threads(sqlite_url, limit=2).items] == [
        "new-3",
        "failed-2",
    ]
    assert inspect.threads(sqlite_url, limit=2).more
    # Any message text (questions, answers, tool calls and results), any case.
    assert [s.thread_id for s in inspect.threads(sqlite_url, search="BERLIN").items] == ["new-3"]
    assert [s.thread_id for s in inspect.threads(sqlite_url, search="Thanks").items] == ["t-1"]
    assert [s.thread_id for s in inspect.threads(sqlite_url, search="rome", limit=3).items] == [
        "new-3",
        "failed-2",
        "x",
    ]
    assert [s.thread_id for s in inspect.threads(sqlite_url, search="new-").items] == ["new-3"]
    assert inspect.threads(sqlite_url, search="no such text").items == []


def test_lists_a_thread_written_by_plain_langgraph_add_messages(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}

    path = tmp_path / "plain.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        b: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
        b.add_node("reply", reply)
        b.add_edge(START, "reply")
        graph = b.compile(checkpointer=saver)
        for q in ("first question", "second question"):
            graph.invoke({"messages": [("user", q)]}, {"configurable": {"thread_id": "plain"}})

    (s,) = inspect.threads(str(path)).items  # a plain path works like sqlite:///path
    assert (s.thread_id, s.turns, s.messages, s.last_user) == ("plain", 2, 4, "second question")


def file_state(path: Path) -> tuple[str, list[str], list[str]]:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master"))
    conn.close()
    # SQLite's own -wal/-shm companions may appear while a WAL database is read.
    files = sorted(f for f in os.listdir(path.parent) if not f.endswith(("-wal", "-shm")))
    return digest, tables, files


def test_reading_a_sqlite_database_changes_nothing_in_it(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    write_three_threads(f"sqlite:///{path}")
    before = file_state(path)

    inspect.threads(str(path), limit=0)
    inspect.thread(f"sqlite:///{path}", "t-1")
    inspect.export.messages_at(str(path), "t-1")

    assert file_state(path) == before  # same bytes, same tables, no lock file


def test_another_apps_sqlite_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, note TEXT)")
        conn.execute("INSERT INTO checkpoints (note) VALUES ('not langgraph')")
    conn.close()
    before = file_state(path)

    with pytest.raises(SourceError, match="its 'checkpoints' table lacks the column"):
        inspect.threads(str(path))
    with pytest.raises(SourceError, match="not a LangGraph checkpoint database"):
        inspect.thread(f"sqlite:///{path}", "t-1")

    assert file_state(path) == before


def test_an_empty_postgres_database_is_refused_without_creating_tables(pg_backend: str) -> None:
    import psycopg

    with pytest.raises(SourceError, match="no 'checkpoints' table"):
        inspect.threads(pg_backend)
    with pytest.raises(SourceError, match="no 'checkpoints' table"):
        inspect.thread(pg_backend, "t-1")

    with psycopg.connect(pg_backend) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    assert tables == []


def test_a_thread_read_oldest_first_matches_langgraphs_own_history(backend: str) -> None:
    from tests.helpers.inspect import write_thread
    from threadlog.inspect.source import quiet_stand_in, stand_in

    write_thread(backend)  # two turns and a fork: the cached walk meets another branch
    t = inspect.thread(backend, "t-1")

    with raw_saver(backend) as saver, quiet_stand_in(True):
        history = stand_in(saver, None).get_state_history({"configurable": {"thread_id": "t-1"}})
        expected = {
            s.config["configurable"]["checkpoint_id"]: [(m.id, m.content) for m in
                                                        s.values["messages"]]
            for s in history
        }
    assert {r.checkpoint_id: [(m.id, m.content) for m in r.messages] for r in t.records} == (
        expected
    )
    assert len(t.forks().branches) == 2
