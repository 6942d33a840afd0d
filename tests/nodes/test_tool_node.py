"""The tool node's core promises: parallel, one result per call in call order, errors as
results the run goes on with, sync and async alike (issue 3, points 1-3, 10)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END
from langgraph.prebuilt import ToolNode as LangGraphToolNode
from langgraph.prebuilt.tool_node import ToolInvocationError
from pydantic import ValidationError

from tests.helpers.tools import (
    FINAL,
    bad_call,
    by_call,
    call,
    request,
    results,
    scripted_graph,
    start,
)
from threadlog import ToolCallError, ToolNode, send_tool_calls, tools_condition, validate

MODES = ["sync", "async"]


async def run(graph: Any, inp: Any, mode: str, config: Any = None) -> dict[str, Any]:
    if mode == "sync":
        out: dict[str, Any] = graph.invoke(inp, config)
    else:
        out = await graph.ainvoke(inp, config)
    return out


@tool
def nap(ms: int) -> str:
    """Sleep `ms` milliseconds (a thread), then say so."""
    time.sleep(ms / 1000)
    return f"slept {ms}"


@tool
async def anap(ms: int) -> str:
    """Sleep `ms` milliseconds (asyncio), then say so."""
    await asyncio.sleep(ms / 1000)
    return f"slept {ms}"


@tool
def explode(why: str) -> str:
    """Always fails."""
    raise RuntimeError(f"disk full while {why}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("napper", [nap, anap], ids=["sync-tool", "async-tool"])
async def test_results_come_one_per_call_in_call_order_whatever_finishes_first(
    mode: str, napper: Any
) -> None:
    # The first call sleeps longest, so completion order is the reverse of call order.
    ms = [120, 80, 40, 0]
    ai = request(*(call(napper.name, {"ms": m}, f"c{i}") for i, m in enumerate(ms)))
    out = await run(ToolNode([napper]), {"messages": [HumanMessage("go", id="h"), ai]}, mode)
    got = out["messages"]
    assert [m.tool_call_id for m in got] == ["c0", "c1", "c2", "c3"]
    assert [m.content for m in got] == [f"slept {m}" for m in ms]
    assert {(m.name, m.status) for m in got} == {(napper.name, "success")}


@pytest.mark.parametrize("mode", MODES)
async def test_sync_tools_run_in_parallel_threads(mode: str) -> None:
    # Eight calls meet at one barrier: run one after another they would break it.
    barrier = threading.Barrier(8, timeout=10)

    @tool
    def meet(i: int) -> str:
        """Wait until all eight calls are running."""
        barrier.wait()
        return f"met {i}"

    ai = request(*(call("meet", {"i": i}, f"c{i}") for i in range(8)))
    out = await run(ToolNode([meet]), {"messages": [ai]}, mode)
    assert [m.content for m in out["messages"]] == [f"met {i}" for i in range(8)]


async def test_async_tools_run_concurrently_on_the_event_loop() -> None:
    arrived = 0
    everyone = asyncio.Event()

    @tool
    async def gather_up(i: int) -> str:
        """Wait until all six calls are running."""
        nonlocal arrived
        arrived += 1
        if arrived == 6:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), timeout=10)
        return f"ok {i}"

    ai = request(*(call("gather_up", {"i": i}, f"c{i}") for i in range(6)))
    out = await ToolNode([gather_up]).ainvoke({"messages": [ai]})
    assert [m.status for m in out["messages"]] == ["success"] * 6


@pytest.mark.parametrize("mode", MODES)
async def test_max_concurrency_caps_the_calls_running_at_once(mode: str) -> None:
    lock = threading.Lock()
    running = peak = 0
    pairs = threading.Barrier(2, timeout=10)  # makes sure two do overlap

    @tool
    def busy(i: int) -> str:
        """Count how many calls run at once."""
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        pairs.wait()
        time.sleep(0.02)
        with lock:
            running -= 1
        return str(i)

    ai = request(*(call("busy", {"i": i}, f"c{i}") for i in range(6)))
    out = await run(ToolNode([busy], max_concurrency=2), {"messages": [ai]}, mode)
    assert [m.content for m in out["messages"]] == [str(i) for i in range(6)]
    assert peak == 2


async def test_max_concurrency_caps_async_tools_too() -> None:
    running = peak = 0

    @tool
    async def abusy(i: int) -> str:
        """Count how many calls run at once."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)  # yields, so every admitted call is running here
        running -= 1
        return str(i)

    ai = request(*(call("abusy", {"i": i}, f"c{i}") for i in range(6)))
    out = await ToolNode([abusy], max_concurrency=2).ainvoke({"messages": [ai]})
    assert [m.content for m in out["messages"]] == [str(i) for i in range(6)]
    assert peak == 2


@pytest.mark.parametrize("mode", MODES)
async def test_every_kind_of_failure_becomes_an_error_result_and_the_run_goes_on(
    mode: str,
) -> None:
    @tool
    def stuck(ms: int) -> str:
        """Takes too long."""
        time.sleep(ms / 1000)
        return "late"

    @tool
    async def astuck(ms: int) -> str:
        """Takes too long, asynchronously."""
        await asyncio.sleep(ms / 1000)
        return "late"

    ai = request(
        call("nap", {"ms": 1}, "ok"),
        call("explode", {"why": "saving"}, "raised"),
        call("stuck", {"ms": 1000}, "timeout"),
        call("astuck", {"ms": 1000}, "atimeout"),
        call("teleport", {"to": "Mars"}, "unknown"),
        call("nap", {"ms": "soon"}, "schema"),
        bad_call("nap", '{"ms": 1', "malformed"),
    )
    graph = scripted_graph(ToolNode([nap, explode, stuck, astuck], timeout=0.3), [ai])
    out = await run(graph, start(), mode)
    msgs = out["messages"]
    assert msgs[-1] == FINAL  # the model got its turn after the tool step
    validate(msgs, allow_pending_calls=False)  # every call answered, provider-valid
    res = by_call(msgs)
    assert [m.tool_call_id for m in results(msgs)] == [
        "ok", "raised", "timeout", "atimeout", "unknown", "schema", "malformed",
    ]  # fmt: skip
    assert res["ok"].status == "success"
    for cid in ["raised", "timeout", "atimeout", "unknown", "schema", "malformed"]:
        assert res[cid].status == "error", cid
        assert (
            res[cid].response_metadata["threadlog_error"]
            == {
                "raised": "raised",
                "timeout": "timeout",
                "atimeout": "timeout",
                "unknown": "unknown_tool",
                "schema": "invalid_args",
                "malformed": "malformed_args",
            }[cid]
        )
    assert "RuntimeError: disk full while saving" in res["raised"].content
    assert "0.3 s" in res["timeout"].content
    assert (
        "'teleport'" in res["unknown"].content
        and "astuck, explode, nap, stuck" in res["unknown"].content
    )
    assert "ms:" in res["schema"].content and "integer" in res["schema"].content
    assert "not valid JSON" in res["malformed"].content
    assert res["unknown"].name == "teleport" and res["malformed"].name == "nap"


@pytest.mark.parametrize("mode", MODES)
async def test_handle_errors_false_raises_the_tools_own_exception(mode: str) -> None:
    ai = request(call("explode", {"why": "x"}, "c1"))
    with pytest.raises(RuntimeError, match="disk full while x"):
        await run(ToolNode([explode], handle_errors=False), {"messages": [ai]}, mode)


@pytest.mark.parametrize("mode", MODES)
async def test_handle_errors_false_raises_schema_failures_answers_unknown_tools(
    mode: str,
) -> None:
    node = ToolNode([nap], handle_errors=False)
    # LangGraph's meaning: a schema failure raises its ToolInvocationError, the
    # pydantic error as the cause.
    with pytest.raises(ToolInvocationError) as schema:
        await run(node, {"messages": [request(call("nap", {"ms": "x"}, "c1"))]}, mode)
    assert isinstance(schema.value.__cause__, ValidationError)
    # An unknown tool is always a result, as in LangGraph: the model can fix the name.
    out = await run(node, {"messages": [request(call("fly", {}, "c1"))]}, mode)
    assert out["messages"][0].response_metadata["threadlog_error"] == "unknown_tool"


@pytest.mark.parametrize("mode", MODES)
async def test_handle_errors_false_raises_on_timeout(mode: str) -> None:
    ai = request(call("nap", {"ms": 1000}, "c1"))
    with pytest.raises(ToolCallError, match=r"did not finish within 0\.1 s") as e:
        await run(ToolNode([nap], timeout=0.1, handle_errors=False), {"messages": [ai]}, mode)
    assert e.value.kind == "timeout"


def test_a_timeout_per_tool_applies_only_to_that_tool() -> None:
    @tool
    def quick_but_slow(ms: int) -> str:
        """Allowed to take its time (no timeout of its own)."""
        time.sleep(ms / 1000)
        return "finished"

    ai = request(call("nap", {"ms": 400}, "c1"), call("quick_but_slow", {"ms": 400}, "c2"))
    node = ToolNode([nap, quick_but_slow], timeout={"nap": 0.1})
    res = by_call(node.invoke({"messages": [ai]})["messages"])
    assert res["c1"].response_metadata["threadlog_error"] == "timeout"
    assert res["c2"].content == "finished" and res["c2"].status == "success"


def test_a_list_of_messages_in_gives_a_list_of_results_out() -> None:
    ai = request(call("nap", {"ms": 0}, "c1"), call("nap", {"ms": 0}, "c2"))
    out = ToolNode([nap]).invoke([HumanMessage("go"), ai])
    assert [m.tool_call_id for m in out] == ["c1", "c2"]


def test_tools_condition_routes_malformed_calls_to_the_tool_node() -> None:
    only_bad = request(bad_call("nap", "{", "c1"))
    assert tools_condition({"messages": [only_bad]}) == "tools"
    assert tools_condition({"messages": [request(call("nap", {"ms": 1}, "c1"))]}) == "tools"
    assert tools_condition({"messages": [AIMessage("hi")]}) == END
    assert tools_condition({"messages": [only_bad, ToolMessage("x", tool_call_id="c1")]}) == END


def test_a_reply_with_only_malformed_calls_is_answered_and_the_model_goes_again() -> None:
    ai = request(bad_call("nap", '{"ms": ', "c1"))
    msgs = scripted_graph(ToolNode([nap]), [ai]).invoke(start())["messages"]
    assert [type(m).__name__ for m in msgs] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert msgs[2].tool_call_id == "c1" and msgs[2].status == "error"
    assert msgs[-1] == FINAL
    validate(msgs, allow_pending_calls=False)


def test_send_tool_calls_makes_one_send_per_open_call() -> None:
    ai = request(call("nap", {"ms": 1}, "c1"), bad_call("nap", "{", "c2"))
    sends = send_tool_calls({"messages": [ai]}, node="run_tools")
    assert [s.node for s in sends] == ["run_tools", "run_tools"]
    assert [s.arg[0]["id"] for s in sends] == ["c1", "c2"]
    assert send_tool_calls({"messages": [AIMessage("no calls")]}) == []


def test_a_call_that_already_has_a_result_is_not_run_again() -> None:
    ran: list[int] = []

    @tool
    def note(i: int) -> str:
        """Record a run."""
        ran.append(i)
        return str(i)

    ai = request(call("note", {"i": 1}, "c1"), call("note", {"i": 2}, "c2"))
    done = ToolMessage("1", tool_call_id="c1", name="note")
    out = ToolNode([note]).invoke({"messages": [ai, done]})
    assert ran == [2]
    assert [m.tool_call_id for m in out["messages"]] == ["c2"]


def test_bad_settings_are_refused_with_the_setting_named() -> None:
    with pytest.raises(ValueError, match="max_concurrency=0"):
        ToolNode([nap], max_concurrency=0)
    with pytest.raises(ValueError, match=r"requires_approval names \['fly'\]"):
        ToolNode([nap], requires_approval=["fly"])
    with pytest.raises(ValueError, match=r"timeout names \['fly'\]"):
        ToolNode([nap], timeout={"fly": 1})
    with pytest.raises(ValueError, match=r"timeout\['nap'\]=-1"):
        ToolNode([nap], timeout={"nap": -1})


def test_results_record_how_long_the_tool_ran_when_asked() -> None:
    ai = request(call("nap", {"ms": 30}, "c1"))
    out = ToolNode([nap], record_durations=True).invoke({"messages": [ai]})
    assert out["messages"][0].response_metadata["threadlog_duration_ms"] >= 30


def test_a_successful_result_equals_langgraphs_own() -> None:
    # No threadlog key in response_metadata by default: user tests comparing messages
    # see the same ToolMessage LangGraph's ToolNode returns.
    from langgraph.graph import MessagesState as LangGraphState
    from langgraph.graph import StateGraph

    ai = request(call("nap", {"ms": 1}, "c1"))
    ours = ToolNode([nap]).invoke({"messages": [ai]})["messages"]
    g = StateGraph(LangGraphState).add_node("tools", LangGraphToolNode([nap]))
    out = g.set_entry_point("tools").compile().invoke({"messages": [ai]})
    theirs = [m.model_copy(update={"id": None}) for m in out["messages"][1:]]  # graph's ids
    assert ours == theirs and ours[0].response_metadata == {}


def test_a_step_without_open_calls_writes_nothing() -> None:
    out = ToolNode([nap]).invoke({"messages": [HumanMessage("hi")]})
    assert out == {"messages": []}
