"""Under `ainvoke` the tool node makes its worker threads only when a call needs one: a
step of async tools starts no pool (hundreds of concurrent runs each made one per step,
issue 24), and a sync tool beside them still runs in the node's own threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langchain_core.tools import tool

from tests.helpers.tools import by_call, call, request, scripted_graph, start
from threadlog import ToolNode
from threadlog.nodes.tools import node, running


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[ContextThreadPoolExecutor]:
    made: list[ContextThreadPoolExecutor] = []

    class Counted(ContextThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(running, "ContextThreadPoolExecutor", Counted)
    monkeypatch.setattr(node, "ContextThreadPoolExecutor", Counted)
    return made


@tool
async def forecast(city: str) -> str:
    """The forecast for a city."""
    await asyncio.sleep(0)
    return f"sunny in {city}"


@tool
def census(city: str) -> str:
    """How many live in a city (a sync tool: it runs in a thread)."""
    return f"{city} on {threading.current_thread().name}"


async def test_a_step_of_async_tools_starts_no_thread_pool(
    pools: list[ContextThreadPoolExecutor],
) -> None:
    step = request(
        call("forecast", {"city": "Rome"}, "c1"), call("forecast", {"city": "Oslo"}, "c2")
    )
    graph = scripted_graph(ToolNode([forecast]), [step])
    out = await graph.ainvoke(start())
    got = by_call(out["messages"])
    assert (got["c1"].content, got["c2"].content) == ("sunny in Rome", "sunny in Oslo")
    assert pools == []


async def test_a_sync_tool_beside_async_ones_runs_in_the_nodes_own_pool_which_is_shut_down(
    pools: list[ContextThreadPoolExecutor],
) -> None:
    step = request(call("forecast", {"city": "Rome"}, "c1"), call("census", {"city": "Oslo"}, "c2"))
    graph = scripted_graph(ToolNode([forecast, census]), [step])
    out = await graph.ainvoke(start())
    got = by_call(out["messages"])
    assert got["c1"].content == "sunny in Rome"
    assert str(got["c2"].content).startswith("Oslo on ")
    assert "MainThread" not in str(got["c2"].content)  # not on the event loop's thread
    assert len(pools) == 1 and pools[0]._shutdown
