"""The tool node's "started" marker waits for its step's checkpoint on threadlog's saver
by being woken when that put ends (`GuardLayer.stored_flow`), not by reading the database
until it appears: under LangGraph's default `durability="async"` hundreds of concurrent
runs made those reads the part of a turn that grew with the number of runs (issue 24)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

import threadlog
from tests.helpers.tools import by_call, call, request, scripted_graph, start
from threadlog import ToolNode
from threadlog.checkpoint import guard as guard_module
from threadlog.checkpoint.guard import GuardLayer
from threadlog.checkpoint.layered import layer_of
from threadlog.checkpoint.recover import STARTED_CHANNEL, node_checkpoint
from threadlog.flows import arun, run

CFG: dict[str, Any] = {"configurable": {"thread_id": "t"}}
SLOW_PUT = 0.3  # the backend's put, slowed: the step's checkpoint is still being stored


def _slow_puts_and_counted_reads(saver: Any) -> list[str]:
    """Slow the backend's puts; return the ids of every checkpoint read by id from it."""
    backend = saver.inner
    reads: list[str] = []
    put, aput = backend.put, backend.aput
    get_tuple, aget_tuple = backend.get_tuple, backend.aget_tuple

    def slow_put(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SLOW_PUT)
        return put(*args, **kwargs)

    async def slow_aput(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(SLOW_PUT)
        return await aput(*args, **kwargs)

    def note(config: Any) -> None:
        if config["configurable"].get("checkpoint_id"):
            reads.append(config["configurable"]["checkpoint_id"])

    def counted(config: Any) -> Any:
        note(config)
        return get_tuple(config)

    async def acounted(config: Any) -> Any:
        note(config)
        return await aget_tuple(config)

    backend.put, backend.aput = slow_put, slow_aput
    backend.get_tuple, backend.aget_tuple = counted, acounted
    return reads


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_under_async_durability_a_tool_starts_after_its_checkpoint_with_no_polling(
    sqlite_url: str, mode: str
) -> None:
    seen: dict[str, Any] = {}

    @tool
    def lookup(city: str, config: RunnableConfig) -> str:
        """Look a city up."""
        # Inside the tool: the checkpoint the marker hangs on is in storage, with it.
        found = node_checkpoint(config)
        assert found is not None
        with threadlog.checkpointer(sqlite_url) as other:
            tup = other.get_tuple(found[1])
        seen["checkpoint_stored"] = tup is not None
        seen["markers"] = [
            v["event"] for _, ch, v in (tup.pending_writes if tup else ()) if ch == STARTED_CHANNEL
        ]
        seen["at"] = found[1]["configurable"]["checkpoint_id"]
        return city

    rome = request(call("lookup", {"city": "Rome"}, "c1"))
    if mode == "invoke":
        with threadlog.checkpointer(sqlite_url) as saver:
            reads = _slow_puts_and_counted_reads(saver)
            graph = scripted_graph(ToolNode([lookup]), [rome], checkpointer=saver)
            out = graph.invoke(start(), CFG)  # LangGraph's default durability: "async"
    else:
        async with threadlog.acheckpointer(sqlite_url) as saver:
            reads = _slow_puts_and_counted_reads(saver)
            graph = scripted_graph(ToolNode([lookup]), [rome], checkpointer=saver)
            out = await graph.ainvoke(start(), CFG)
    assert seen["checkpoint_stored"] is True
    assert seen["markers"] == ["started"]
    assert by_call(out["messages"])["c1"].content == "Rome"
    # The marker's wait read nothing: the step's checkpoint was never looked up by id.
    assert seen["at"] not in reads


def test_a_waiter_is_woken_by_a_put_that_had_not_begun_when_it_started_waiting(
    sqlite_url: str,
) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        guard = layer_of(saver, GuardLayer)
        assert guard is not None
        checkpoint = empty_checkpoint()
        at = {
            "configurable": {
                "thread_id": "w",
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint["id"],
            }
        }
        result: list[bool] = []
        t0 = time.monotonic()
        waiter = threading.Thread(
            target=lambda: result.append(run(guard.stored_flow(saver, at, 5.0)))
        )
        waiter.start()
        time.sleep(0.1)
        assert not result  # still waiting: nothing stored yet
        saver.put({"configurable": {"thread_id": "w", "checkpoint_ns": ""}}, checkpoint, {}, {})
        waiter.join(timeout=5)
        assert result == [True]
        assert time.monotonic() - t0 < 1.0  # woken by the put, not by a database recheck
        assert not guard._expected  # nothing left behind


async def test_a_checkpoint_this_saver_never_saw_is_found_in_the_database(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard_module, "_STORED_RECHECK", 0.05)
    checkpoint = empty_checkpoint()
    with threadlog.checkpointer(sqlite_url) as other:  # another process's saver, say
        stored = other.put(
            {"configurable": {"thread_id": "n", "checkpoint_ns": ""}}, checkpoint, {}, {}
        )
    async with threadlog.acheckpointer(sqlite_url) as saver:
        guard = layer_of(saver, GuardLayer)
        assert guard is not None
        assert await arun(guard.stored_flow(saver, stored, 5.0)) is True
        assert not guard._expected


def test_a_checkpoint_that_never_comes_gives_up_at_the_timeout_and_leaves_nothing(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard_module, "_STORED_RECHECK", 0.05)
    with threadlog.checkpointer(sqlite_url) as saver:
        guard = layer_of(saver, GuardLayer)
        assert guard is not None
        missing = {"configurable": {"thread_id": "m", "checkpoint_ns": "", "checkpoint_id": "nope"}}
        t0 = time.monotonic()
        assert run(guard.stored_flow(saver, missing, 0.3)) is False
        assert 0.3 <= time.monotonic() - t0 < 2.0
        assert not guard._expected


async def test_on_a_plain_saver_the_marker_polls_until_its_checkpoint_is_stored() -> None:
    seen: dict[str, Any] = {}

    class SlowSaver(InMemorySaver):
        async def aput(self, *args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(SLOW_PUT)  # the step's checkpoint is still being stored
            return self.put(*args, **kwargs)

    saver = SlowSaver()

    @tool
    def lookup(city: str, config: RunnableConfig) -> str:
        """Look a city up."""
        found = node_checkpoint(config)
        assert found is not None
        tup = saver.get_tuple(found[1])
        seen["markers"] = [
            v["event"] for _, ch, v in (tup.pending_writes if tup else ()) if ch == STARTED_CHANNEL
        ]
        return city

    rome = request(call("lookup", {"city": "Rome"}, "c1"))
    graph = scripted_graph(ToolNode([lookup]), [rome], checkpointer=saver)
    out = await graph.ainvoke(start(), CFG)  # LangGraph's default durability: "async"
    assert seen["markers"] == ["started"]  # its checkpoint was there, with the marker on it
    assert by_call(out["messages"])["c1"].content == "Rome"
