"""The run guard's locks under load: many concurrent runs in one process share a bounded
set of lock connections (`checkpointer(url, max_lock_connections=N)`), queue past it
instead of failing, and lose, duplicate or fail no turn. Untimed.

* Postgres: every run lock and write lock is an advisory lock on one of at most N lock
  sessions (`application_name` `threadlog-locks`), counted in `pg_stat_activity` while
  all runs hold their threads at once;
* SQLite: a held run lock is an open file, so at most N runs are inside a turn at once;
  the others wait for a file and then run;
* the async path waits by polling: a cancelled run gives its thread back, and a lock an
  attempt took for a cancelled waiter is given back too.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

import threadlog
from threadlog.checkpoint.backends import LOCK_APPLICATION_NAME, take_lock
from threadlog.flows import arun


def _cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


@tool
async def get_weather(city: str) -> str:
    """Today's weather for a city."""
    await asyncio.sleep(0)
    return f"{city}: sunny"


def _agent(saver: Any) -> Any:
    return threadlog.create_agent(threadlog.OfflineChatModel(), [get_weather],
                                  checkpointer=saver)


def _turn(thread: int, turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"Weather in Shanghai? ({thread}/{turn})",
                                      id=f"h{thread}-{turn}")]}


def _lost_and_duplicated(messages: list[Any], turns: int) -> tuple[int, int]:
    """Turns missing or unanswered, and message ids stored twice or extra user turns."""
    ids = [m.id for m in messages]
    humans = [k for k, m in enumerate(messages) if isinstance(m, HumanMessage)]
    duplicated = len(ids) - len(set(ids)) + max(0, len(humans) - turns)
    lost = max(0, turns - len(humans))
    for k, start in enumerate(humans):
        end = humans[k + 1] if k + 1 < len(humans) else len(messages)
        turn = messages[start + 1:end]
        answered = bool(turn) and isinstance(turn[-1], AIMessage) and not turn[-1].tool_calls
        ran_tool = any(isinstance(m, ToolMessage) and "sunny" in str(m.content) for m in turn)
        lost += not (answered and ran_tool)
    return lost, duplicated


async def test_64_concurrent_async_runs_on_postgres_lose_duplicate_and_fail_nothing(
    pg_backend: str,
) -> None:
    threads, turns = 64, 2
    async with threadlog.acheckpointer(pg_backend) as saver:
        graph = _agent(saver)

        async def drive(i: int) -> None:
            for turn in range(turns):
                await graph.ainvoke(_turn(i, turn), _cfg(f"t{i}"))

        outcomes = await asyncio.gather(*(drive(i) for i in range(threads)),
                                        return_exceptions=True)
    errors = [repr(o) for o in outcomes if isinstance(o, BaseException)]
    lost = duplicated = 0
    async with threadlog.acheckpointer(pg_backend) as fresh:  # a reader of its own
        reader = _agent(fresh)
        for i in range(threads):
            state = await reader.aget_state(_cfg(f"t{i}"))
            got = _lost_and_duplicated(list(state.values.get("messages", ())), turns)
            lost, duplicated = lost + got[0], duplicated + got[1]
    assert (errors, lost, duplicated) == ([], 0, 0)


def _held_graph(saver: Any, inside: asyncio.Barrier, go: asyncio.Event) -> Any:
    """One node that waits until every run is inside its turn, then for `go`."""

    async def hold(state: threadlog.MessagesState) -> dict[str, Any]:
        await asyncio.wait_for(inside.wait(), 60)
        await asyncio.wait_for(go.wait(), 60)
        n = len(state["messages"])
        return {"messages": [AIMessage(f"done {n}", id=f"ai-{state['messages'][0].id}")]}

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("hold", hold)
    builder.add_edge(START, "hold")
    builder.add_edge("hold", END)
    return builder.compile(checkpointer=saver)


async def _sessions(conn: Any) -> tuple[int, int]:
    """(threadlog's lock sessions, all other sessions) on this database, this one aside."""
    cur = await conn.execute(
        "SELECT count(*) FILTER (WHERE application_name = %s), count(*) "
        "FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()",
        (LOCK_APPLICATION_NAME,),
    )
    row = await cur.fetchone()
    return int(row[0]), int(row[1])


async def test_more_concurrent_runs_than_lock_sessions_hold_their_threads_within_the_bound(
    pg_backend: str,
) -> None:
    # Was: a session of its own per held run lock, so N concurrent runs opened N + 2
    # connections, and 120 runs against a 100-connection server failed "too many clients".
    import psycopg

    runs, bound = 10, 2
    inside, go = asyncio.Barrier(runs + 1), asyncio.Event()
    async with (
        await psycopg.AsyncConnection.connect(pg_backend, autocommit=True) as watcher,
        threadlog.acheckpointer(pg_backend, max_lock_connections=bound) as saver,
    ):
        graph = _held_graph(saver, inside, go)
        started = [
            asyncio.create_task(
                graph.ainvoke({"messages": [HumanMessage("hi", id=f"h{i}")]}, _cfg(f"q{i}"))
            )
            for i in range(runs)
        ]
        await asyncio.wait_for(inside.wait(), 60)  # every run holds its thread now
        locks, total = await _sessions(watcher)
        # Each thread is held: a run on one of them is refused ("reject"), here as well as
        # in any other process (the lock is the database's).
        with pytest.raises(threadlog.ConcurrentRunError):
            await graph.ainvoke(
                {"messages": [HumanMessage("again", id="again")]},
                {"configurable": {"thread_id": "q3", "multitask_strategy": "reject"}},
            )
        go.set()
        done = await asyncio.gather(*started)
    assert [out["messages"][-1].id for out in done] == [f"ai-h{i}" for i in range(runs)]
    assert 1 <= locks <= bound
    # the saver's own connection, the guard's reads, the lock sessions
    assert total <= 2 + bound


async def test_past_the_lock_file_bound_sqlite_runs_queue_and_all_complete(
    sqlite_url: str,
) -> None:
    runs, bound = 10, 2
    now = peak = 0

    async def count(state: threadlog.MessagesState) -> dict[str, Any]:
        nonlocal now, peak
        now += 1
        peak = max(peak, now)
        await asyncio.sleep(0.05)
        now -= 1
        return {"messages": [AIMessage("done", id=f"ai-{state['messages'][0].id}")]}

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("count", count)
    builder.add_edge(START, "count")
    builder.add_edge("count", END)
    async with threadlog.acheckpointer(sqlite_url, max_lock_connections=bound) as saver:
        graph = builder.compile(checkpointer=saver)
        done = await asyncio.gather(*(
            graph.ainvoke({"messages": [HumanMessage("hi", id=f"h{i}")]}, _cfg(f"s{i}"))
            for i in range(runs)
        ))
    assert [out["messages"][-1].id for out in done] == [f"ai-h{i}" for i in range(runs)]
    assert peak == bound  # they queued for the two lock files, and used both


def test_a_lock_bound_that_is_not_a_positive_int_is_refused_before_anything_opens(
    tmp_path: Any,
) -> None:
    url = f"sqlite:///{tmp_path / 'never.db'}"
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_lock_connections"):
            with threadlog.checkpointer(url, max_lock_connections=bad):
                pass
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_cancelled_async_run_gives_its_thread_back(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "pg_backend")
    started = asyncio.Event()

    async def step(state: threadlog.MessagesState) -> dict[str, Any]:
        if state["messages"][-1].content == "wait":
            started.set()
            await asyncio.sleep(60)
        return {"messages": [AIMessage("ok", id=f"ok-{state['messages'][-1].id}")]}

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    async with threadlog.acheckpointer(url, multitask_strategy="reject") as saver:
        graph = builder.compile(checkpointer=saver)
        first = asyncio.create_task(
            graph.ainvoke({"messages": [HumanMessage("wait", id="w")]}, _cfg("c"))
        )
        await asyncio.wait_for(started.wait(), 30)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        # The thread is free again at once: a "reject" run on it is not refused.
        out = await graph.ainvoke({"messages": [HumanMessage("again", id="a")]}, _cfg("c"))
    assert out["messages"][-1].id == "ok-a"


async def test_a_lock_an_attempt_took_for_a_cancelled_waiter_is_given_back() -> None:
    # The attempt runs in a worker thread and cannot be stopped once it runs: if it takes
    # the lock after its waiter was cancelled, nobody would ever release it.
    entered, finish = threading.Event(), threading.Event()
    given_back: list[str] = []

    def try_lock(name: str) -> bool:
        entered.set()
        finish.wait(10)
        return True

    waiter = asyncio.create_task(arun(take_lock(try_lock, given_back.append, "t1", True)))
    await asyncio.to_thread(entered.wait, 10)
    await _cancel_then_let_the_attempt_finish(waiter, finish, given_back)
    assert given_back == ["t1"]


def test_a_lock_session_the_server_ended_is_replaced_and_runs_go_on(pg_backend: str) -> None:
    import psycopg

    def reply(state: threadlog.MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("ok", id=f"ok-{state['messages'][-1].id}")]}

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    with threadlog.checkpointer(pg_backend) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("one", id="m1")]}, _cfg("r1"))
        with psycopg.connect(pg_backend, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                (LOCK_APPLICATION_NAME,),
            ).fetchone()
        assert ended is not None and ended[0] >= 1
        out = graph.invoke({"messages": [HumanMessage("two", id="m2")]}, _cfg("r2"))
    assert out["messages"][-1].id == "ok-m2"


# -- async savers' locks on their event loop (issue 24: no worker thread per statement) --


async def test_an_async_saver_takes_and_releases_its_run_locks_on_the_event_loop(
    pg_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadlog.checkpoint.backends.postgres import LockSessions

    used: list[str] = []
    for name in ("take", "give_back", "atake", "agive_back"):
        real = getattr(LockSessions, name)

        def counted(self: Any, key: int, _real: Any = real, _name: str = name) -> Any:
            used.append(_name)
            return _real(self, key)

        monkeypatch.setattr(LockSessions, name, counted)
    async with threadlog.acheckpointer(pg_backend) as saver:
        graph = _agent(saver)
        for turn in range(2):
            await graph.ainvoke(_turn(0, turn), _cfg("loop"))
    # (the schema setup's lock, once per process and URL, is not a run's)
    runs = [u for u in used if u in ("atake", "agive_back")]
    assert runs and runs.count("atake") == runs.count("agive_back")
    assert "take" not in used and "give_back" not in used


async def test_a_lock_an_async_session_holds_is_released_from_another_thread(
    pg_backend: str,
) -> None:
    from threadlog.checkpoint.backends.postgres import PostgresHeadStore

    mine, other = PostgresHeadStore(pg_backend), PostgresHeadStore(pg_backend)
    try:
        assert await mine.atry_run_lock("x") is True
        assert await asyncio.to_thread(other.try_run_lock, "x") is False  # another session
        await asyncio.to_thread(mine.run_unlock, "x")  # a sync exit, a finalizer's thread
        for _ in range(500):  # handed to this loop: done once it runs
            if await asyncio.to_thread(other.try_run_lock, "x"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the lock was never released")
        other.run_unlock("x")
        # ... and from this loop's own thread outside a coroutine's await (a GC finalizer)
        assert await mine.atry_run_lock("y") is True
        mine.run_unlock("y")
        for _ in range(500):
            if await asyncio.to_thread(other.try_run_lock, "y"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the lock was never released")
        other.run_unlock("y")
    finally:
        mine.close()
        other.close()


def test_the_lock_sessions_of_a_closed_event_loop_are_closed_releasing_their_locks(
    pg_backend: str,
) -> None:
    from threadlog.checkpoint.backends.postgres import PostgresHeadStore

    mine, other = PostgresHeadStore(pg_backend), PostgresHeadStore(pg_backend)
    try:
        assert asyncio.run(mine.atry_run_lock("z")) is True  # its loop is closed now
        assert other.try_run_lock("z") is False  # its session still holds it
        assert mine.locks.sessions() == 1
        mine.run_unlock("z")  # no loop to hand it to: the session is closed
        assert mine.locks.sessions() == 0
        for _ in range(500):  # the server ends the session once it sees it closed
            if other.try_run_lock("z"):
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the closed session's lock was never released")
        other.run_unlock("z")
    finally:
        mine.close()
        other.close()


async def test_a_lock_an_async_attempt_took_for_a_cancelled_waiter_is_given_back() -> None:
    entered, finish = asyncio.Event(), asyncio.Event()
    given_back: list[str] = []

    class Store:
        def try_lock(self, name: str) -> bool:
            raise AssertionError("the async twin is used under asyncio")

        def unlock(self, name: str) -> None:
            raise AssertionError("the async twin is used under asyncio")

        async def atry_lock(self, name: str) -> bool:
            entered.set()
            await finish.wait()
            return True

        async def aunlock(self, name: str) -> None:
            given_back.append(name)

    store = Store()
    waiter = asyncio.create_task(arun(take_lock(store.try_lock, store.unlock, "t2", True)))
    await asyncio.wait_for(entered.wait(), 10)
    await _cancel_then_let_the_attempt_finish(waiter, finish, given_back)
    assert given_back == ["t2"]


async def _cancel_then_let_the_attempt_finish(
    waiter: asyncio.Task[Any], finish: threading.Event | asyncio.Event, given_back: list[str]
) -> None:
    """Cancel a waiter whose lock attempt is under way, then let the attempt take the lock:
    nothing is given back before it has it; wait (up to 10 s) until it is given back."""
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert given_back == []
    finish.set()
    for _ in range(1000):
        if given_back:
            break
        await asyncio.sleep(0.01)
