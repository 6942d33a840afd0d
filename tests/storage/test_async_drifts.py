"""The drifts the old sync/async copies of the saver had, each pinned by a test that failed
on them: the async path now runs the same flows as the sync one
(`threadlog.flows`), so these hold for both. Public API only, so the same file
runs against older code."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

import threadlog
from tests.helpers.echo import echo_graph as _echo_graph


def _cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


async def test_an_async_in_memory_sqlite_guard_reads_the_saver_s_own_database() -> None:
    # Was: the async head store opened a second, empty ":memory:" database, so every
    # head read of the guard returned None (the sync path shared the connection).
    async with threadlog.acheckpointer("sqlite:///:memory:") as saver:
        graph = _echo_graph(saver)
        await graph.ainvoke({"messages": [HumanMessage("hi", id="h1")]}, _cfg("mem"))
        state = await graph.aget_state(_cfg("mem"))
        head = await asyncio.to_thread(saver.store.head, "mem", "")
        assert head == state.config["configurable"]["checkpoint_id"]
        # ... so a put naming the head as its parent is stored (it was refused: the
        # guard saw no head at all).
        checkpoint = _empty_checkpoint()
        stored = await saver.aput(state.config, checkpoint, {"source": "loop", "step": 9}, {})
        assert stored["configurable"]["checkpoint_id"] == checkpoint["id"]


def _empty_checkpoint() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()


def _hold_setup_lock(url: str, seconds: float, held: threading.Event) -> None:
    import psycopg

    from threadlog.checkpoint.backends import PostgresHeadStore

    with psycopg.Connection.connect(url, autocommit=True) as conn:
        key = PostgresHeadStore.lock_key("__setup__")
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        held.set()
        time.sleep(seconds)
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


async def test_async_postgres_setup_waits_for_the_migration_lock_off_the_event_loop(
    pg_backend: str,
) -> None:
    # Was: `acheckpointer` took the setup advisory lock with a blocking call on the event
    # loop, so everything else on the loop stopped while another worker migrated.
    from threadlog.checkpoint import saver as saver_module

    saver_module._SET_UP.discard(pg_backend)
    held = threading.Event()
    holder = threading.Thread(target=_hold_setup_lock, args=(pg_backend, 0.6, held))
    holder.start()
    held.wait(10)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    async with threadlog.acheckpointer(pg_backend) as saver:
        waited = time.monotonic() - started
        graph = _echo_graph(saver)
        await graph.ainvoke({"messages": [HumanMessage("hi", id="h1")]}, _cfg("setup"))
    ticker.cancel()
    holder.join()
    assert waited >= 0.3  # it did wait for the other worker's migration lock ...
    assert ticks >= 10  # ... while the loop kept running


def _stoppable_graph(saver: Any) -> Any:
    """model -> tools (two calls: one stores its result, one interrupts)."""

    def model(state: threadlog.MessagesState) -> dict[str, Any]:
        turn = sum(isinstance(m, HumanMessage) for m in state["messages"])
        if isinstance(state["messages"][-1], HumanMessage):
            calls = [
                {"name": "weather", "args": {"city": c}, "id": f"c{turn}-{c}"}
                for c in ("rome", "oslo")
            ]
            return {"messages": [AIMessage("", tool_calls=calls, id=f"ai-{turn}")]}
        return {"messages": [AIMessage(f"done {turn}", id=f"done-{turn}")]}

    def tool(state: dict[str, Any]) -> dict[str, Any]:
        call = state["call"]
        if call["args"]["city"] == "oslo":
            interrupt("approve oslo")
        return {"messages": [ToolMessage("sunny", tool_call_id=call["id"], id="r-" + call["id"])]}

    from langgraph.types import Send

    def route(state: threadlog.MessagesState) -> Any:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [Send("tool", {"call": c}) for c in last.tool_calls]
        return END

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("model", model)
    builder.add_node("tool", tool)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tool", END])
    builder.add_edge("tool", "model")
    return builder.compile(checkpointer=saver)


def _ids(messages: Any) -> list[tuple[str, str]]:
    return [(type(m).__name__, str(m.content)) for m in messages]


def test_sync_and_async_head_reads_carry_the_same_stopped_work(tmp_path: Path) -> None:
    # Was: the async head read was a hand copy of the sync one (`aget_tuple`); now both
    # run one flow. The same stopped step, read sync and async, carries the same work.
    results = []
    for mode in ("sync", "async"):
        url = f"sqlite:///{tmp_path / (mode + '.db')}"
        first = {"messages": [HumanMessage("weather?", id="h1")]}
        second = {"messages": [HumanMessage("never mind", id="h2")]}
        if mode == "sync":
            with threadlog.checkpointer(url) as saver:
                graph = _stoppable_graph(saver)
                graph.invoke(first, _cfg("t"))
                graph.invoke(second, _cfg("t"))
                results.append(_ids(graph.get_state(_cfg("t")).values["messages"]))
        else:

            async def go(url: str = url, first: Any = first, second: Any = second) -> None:
                async with threadlog.acheckpointer(url) as saver:
                    graph = _stoppable_graph(saver)
                    await graph.ainvoke(first, _cfg("t"))
                    await graph.ainvoke(second, _cfg("t"))
                    state = await graph.aget_state(_cfg("t"))
                    results.append(_ids(state.values["messages"]))

            asyncio.run(go())
    assert results[0] == results[1]
    # The stored result was kept, the interrupted call answered once, before the message.
    kinds = [k for k, _ in results[0]]
    assert kinds[:4] == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage"]
    assert results[0][2][1] == "sunny" and "not completed" in results[0][3][1]
    assert results[0][4] == ("HumanMessage", "never mind")


async def test_concurrent_async_runs_on_postgres_never_wait_on_the_executor(
    pg_backend: str,
) -> None:
    # Was: a task's writes waited for their checkpoint's put (up to 30 s) parked in the
    # loop's default executor, whose few threads the awaited put itself needed: about 8
    # concurrent runs stalled each other for the whole 30 s. Two executor threads here, so
    # any such wait would hold the runs up past the limit below.
    from concurrent.futures import ThreadPoolExecutor

    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))
    async with threadlog.acheckpointer(pg_backend) as saver:
        graph = _echo_graph(saver)
        runs = [
            graph.ainvoke({"messages": [HumanMessage("hi", id=f"h{i}")]}, _cfg(f"c{i}"))
            for i in range(12)
        ]
        done = await asyncio.wait_for(asyncio.gather(*runs), timeout=25)
    assert [[m.id for m in out["messages"]] for out in done] == [
        [f"h{i}", "ai-1"] for i in range(12)
    ]
