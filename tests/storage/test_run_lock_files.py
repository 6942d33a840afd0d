"""SQLite run locks leave nothing in the user's folder once runs end, and removing a
lock file never lets two runs hold one thread (`backends/sqlite.py`, `_flock_run_file`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import START, StateGraph

import threadlog
from threadlog.checkpoint.backends import sqlite as sqlite_backend
from threadlog.checkpoint.backends.sqlite import SqliteHeadStore


def answer(state: threadlog.MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage("hello", id=f"ai-{len(state['messages'])}")]}


def test_an_app_s_finished_runs_leave_no_run_lock_folder_next_to_its_database(
    tmp_path: Path,
) -> None:
    db = tmp_path / "app.db"
    b: StateGraph[Any, Any, Any, Any] = StateGraph(threadlog.MessagesState)
    b.add_node("answer", answer)
    b.add_edge(START, "answer")
    with threadlog.checkpointer(f"sqlite:///{db}") as saver:
        graph = b.compile(checkpointer=saver)
        for tid in ("a", "b"):
            for q in ("hi", "again"):
                graph.invoke({"messages": [("user", q)]}, {"configurable": {"thread_id": tid}})
        assert not (tmp_path / "app.db.threadlog-runs").exists()
    assert not any(p.name.endswith(".threadlog-runs") for p in tmp_path.iterdir())


def test_an_async_app_s_runs_leave_no_run_lock_folder_either(tmp_path: Path) -> None:
    import asyncio

    db = tmp_path / "app.db"
    b: StateGraph[Any, Any, Any, Any] = StateGraph(threadlog.MessagesState)
    b.add_node("answer", answer)
    b.add_edge(START, "answer")

    async def main() -> None:
        async with threadlog.acheckpointer(f"sqlite:///{db}") as saver:
            graph = b.compile(checkpointer=saver)
            turns = [
                graph.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": t}})
                for t in ("a", "b", "c")
            ]
            await asyncio.gather(*turns)

    asyncio.run(main())
    assert not (tmp_path / "app.db.threadlog-runs").exists()


def test_while_a_run_holds_its_thread_no_second_store_gets_it_and_it_is_freed_after(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "app.db")
    one, two = SqliteHeadStore(db), SqliteHeadStore(db)  # two processes' stores
    assert one.try_run_lock("t") is True
    assert os.listdir(db + ".threadlog-runs")  # held: its file exists
    assert two.try_run_lock("t") is False
    assert two.try_run_lock("other") is True  # another thread is free
    two.run_unlock("other")
    one.run_unlock("t")
    assert not os.path.exists(db + ".threadlog-runs")
    assert two.try_run_lock("t") is True
    two.run_unlock("t")


def test_a_waiter_that_locks_a_removed_file_does_not_become_a_second_holder(
    tmp_path: Path, monkeypatch: Any
) -> None:
    db = str(tmp_path / "app.db")
    first, waiter, third = SqliteHeadStore(db), SqliteHeadStore(db), SqliteHeadStore(db)
    assert first.try_run_lock("t") is True
    path = first._run_path("t")
    stale = os.open(path, os.O_RDWR)  # the waiter opened the file before its release…
    first.run_unlock("t")  # …which removed it
    assert third.try_run_lock("t") is True  # a new run locks the path's new file
    opened = iter([stale])
    real_open = os.open

    def open_stale_first(p: str, flags: int, mode: int = 0o777) -> int:
        return next(opened, None) or real_open(p, flags, mode)

    monkeypatch.setattr(sqlite_backend.os, "open", open_stale_first)
    # The waiter's flock on the removed file succeeds, but that file is not the path's:
    # it tries again and finds the thread held.
    assert waiter.try_run_lock("t") is False
    third.run_unlock("t")
    assert waiter.try_run_lock("t") is True
    waiter.run_unlock("t")
