"""A call whose tool started and never reported back is answered "outcome unknown"; a call
that never started keeps "not completed" (issue 24, item 4).

The tool node stores a "started" marker through the run's checkpointer before a tool runs
(`threadlog.nodes.tools.started`). When the run then stops while the tool runs — the
`ainvoke` task is cancelled, the worker is SIGKILLed, the step times out — and new input
arrives, the repair answers that call "outcome unknown" (the tool may have finished its
side effect after the stop: here it does), and its siblings that never started "not
completed", exactly as before (same text, id and format). A tool that reported back —
it raised, or paused in `interrupt()` — is "not completed"; so is a call paused for
approval before any tool ran. The inspector's tool pairs and the export mark the unknown
one. The graph's model node does not repair (the checkpointer's new-input repair
answers the calls), and the tool node runs one call at a time (`max_concurrency=1`), so
which call started is certain. SQLite and Postgres (`backend`).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command, interrupt

import threadlog
import threadlog.inspect
from tests.helpers.tools import by_call, call, request, scripted_graph, start
from threadlog import ToolCallError, ToolNode
from threadlog.inspect.export import dumps, loads, messages_at
from threadlog.log.pairing import NOT_COMPLETED, OUTCOME_UNKNOWN, not_completed, repair_kind

ROME = call("book", {"city": "Rome"}, "c-rome")
OSLO = call("book", {"city": "Oslo"}, "c-oslo")
TWO_BOOKINGS = request(ROME, OSLO)
INSTEAD = {"messages": [HumanMessage("never mind", id="h-2")]}


def _cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _record(effects: Path, call_id: str) -> None:
    fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(call_id) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _effects(effects: Path) -> list[str]:
    if not effects.exists():
        return []
    return [json.loads(line) for line in effects.read_text().splitlines() if line]


def _booking_tool(effects: Path, hook: Callable[[str], None]) -> Any:
    @tool
    def book(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Book a trip to a city (a side effect: one line in the effects file)."""
        hook(city)
        _record(effects, tool_call_id)
        return f"booked {city}"

    return book


def _wait_for(effects: Path, call_id: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while call_id not in _effects(effects):
        assert time.monotonic() < deadline, f"{call_id}'s side effect never happened"
        time.sleep(0.01)


def assert_answered(
    messages: list[BaseMessage], *, unknown: list[dict[str, Any]], not_done: list[dict[str, Any]]
) -> None:
    """Each call of the first request is answered once, before the new message: the
    ones whose tool started "outcome unknown", the others exactly `not_completed(call)`
    — the text, id and format threads stored before this hold."""
    threadlog.validate(messages, allow_pending_calls=False)
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), ids
    results = by_call(messages)
    for c in unknown:
        r = results[c["id"]]
        assert (r.status, r.content) == ("error", OUTCOME_UNKNOWN)
        assert repair_kind(r) == "outcome_unknown"
        assert r.response_metadata == {"threadlog_error": "outcome_unknown"}
        assert r.id == not_completed(c).id  # one repair id per call, whichever the kind
        assert ids.index(r.id) < ids.index("h-2")
    for c in not_done:
        r = results[c["id"]]
        assert r.model_dump() == not_completed(c).model_dump()
        assert r.content == NOT_COMPLETED and repair_kind(r) == "not_completed"
        assert ids.index(r.id) < ids.index("h-2")


def assert_inspector_marks(url: str, thread_id: str, call_id: str) -> None:
    """The tool pairs show the call as "outcome unknown"; the export keeps the mark."""
    pairs = threadlog.inspect.thread(url, thread_id).pairs()
    row, shown = next(
        (r, d) for r, d in zip(pairs.rows(), pairs.display_rows(), strict=True)
        if r["call_id"] == call_id
    )
    assert (row["status"], row["repair"]) == ("error", "outcome_unknown")
    assert str(shown["result"]).startswith("⚠ outcome unknown: ")
    assert any("outcome unknown" in n for n in pairs.notes())
    messages, _ = messages_at(url, thread_id)
    back = {m.tool_call_id: m for m in loads(dumps(messages)) if isinstance(m, ToolMessage)}
    assert repair_kind(back[call_id]) == "outcome_unknown"


# -- a cancelled run: asyncio cancellation of `ainvoke` while a sync tool sleeps -----------


async def test_a_cancelled_run_answers_the_running_call_outcome_unknown_and_the_waiting_one_not_completed(  # noqa: E501
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    running = threading.Event()

    def slow_rome(city: str) -> None:
        if city == "Rome":
            running.set()
            time.sleep(0.6)  # a thread: the cancel does not stop it

    node = ToolNode([_booking_tool(effects, slow_rome)], max_concurrency=1)
    async with threadlog.acheckpointer(backend) as saver:
        graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
        run = asyncio.create_task(graph.ainvoke(start(), _cfg("cancel")))
        assert await asyncio.to_thread(running.wait, 30)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.to_thread(_wait_for, effects, "c-rome")  # Rome's booking happened
        out = await graph.ainvoke(INSTEAD, _cfg("cancel"))
    assert_answered(out["messages"], unknown=[ROME], not_done=[OSLO])
    assert _effects(effects) == ["c-rome"]  # once; Oslo's never ran
    assert_inspector_marks(backend, "cancel", "c-rome")


# -- a killed worker: SIGKILL while the tool runs --------------------------------------------


def _killed_in_rome(url: str, effects: str) -> None:
    """A forked worker: runs the first turn and SIGKILLs itself inside Rome's tool."""
    code = 1
    try:

        def kill_in_rome(city: str) -> None:
            if city == "Rome":
                os.kill(os.getpid(), signal.SIGKILL)

        node = ToolNode([_booking_tool(Path(effects), kill_in_rome)], max_concurrency=1)
        with threadlog.checkpointer(url) as saver:
            graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
            graph.invoke(start(), _cfg("kill"), durability="sync")
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)  # the parent's atexit hooks (pytest, pgserver) are not the child's


def test_a_worker_killed_while_a_tool_runs_answers_that_call_outcome_unknown(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    worker = multiprocessing.get_context("fork").Process(
        target=_killed_in_rome, args=(backend, str(effects))
    )
    worker.start()
    worker.join(60)
    assert worker.exitcode == -signal.SIGKILL, "the worker was not killed in Rome's tool"
    node = ToolNode([_booking_tool(effects, lambda city: None)], max_concurrency=1)
    with threadlog.checkpointer(backend) as saver:
        graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
        out = graph.invoke(INSTEAD, _cfg("kill"))
    assert_answered(out["messages"], unknown=[ROME], not_done=[OSLO])
    assert _effects(effects) == []  # neither tool ran again
    assert_inspector_marks(backend, "kill", "c-rome")


# -- timeouts: the step's, and the tool node's own ----------------------------------------


async def test_a_step_timeout_answers_the_running_call_outcome_unknown_and_the_waiting_one_not_completed(  # noqa: E501
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"

    def slow_rome(city: str) -> None:
        if city == "Rome":
            time.sleep(0.8)

    node = ToolNode([_booking_tool(effects, slow_rome)], max_concurrency=1)
    async with threadlog.acheckpointer(backend) as saver:
        graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
        graph.step_timeout = 0.3
        with pytest.raises(TimeoutError):
            await graph.ainvoke(start(), _cfg("step"))
        await asyncio.to_thread(_wait_for, effects, "c-rome")
        graph.step_timeout = None
        out = await graph.ainvoke(INSTEAD, _cfg("step"))
    assert_answered(out["messages"], unknown=[ROME], not_done=[OSLO])
    assert _effects(effects) == ["c-rome"]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_call_past_the_tool_nodes_timeout_that_raises_is_answered_outcome_unknown(
    backend: str, tmp_path: Path, mode: str
) -> None:
    """`handle_tool_errors=False`: the timed-out call raises `ToolCallError` (once every
    call of the step has run), and no result of the step is stored. Both calls had
    started, so new input answers both "outcome unknown": Rome's tool finishes in the
    background, Oslo's booking ran after it — neither "did not happen"."""
    effects = tmp_path / "effects.jsonl"

    def slow_rome(city: str) -> None:
        if city == "Rome":
            time.sleep(0.5)

    node = ToolNode(
        [_booking_tool(effects, slow_rome)], max_concurrency=1, timeout=0.1, handle_errors=False
    )
    if mode == "sync":
        with threadlog.checkpointer(backend) as saver:
            graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
            with pytest.raises(ToolCallError, match="did not finish"):
                graph.invoke(start(), _cfg("timeout"))
            out = graph.invoke(INSTEAD, _cfg("timeout"))
    else:
        async with threadlog.acheckpointer(backend) as saver:
            graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
            with pytest.raises(ToolCallError, match="did not finish"):
                await graph.ainvoke(start(), _cfg("timeout"))
            out = await graph.ainvoke(INSTEAD, _cfg("timeout"))
    assert_answered(out["messages"], unknown=[ROME, OSLO], not_done=[])
    await asyncio.to_thread(_wait_for, effects, "c-rome")
    assert sorted(_effects(effects)) == ["c-oslo", "c-rome"]


def test_a_timed_out_result_is_stored_and_says_the_outcome_is_unknown(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"

    def slow_rome(city: str) -> None:
        if city == "Rome":
            time.sleep(0.5)

    node = ToolNode([_booking_tool(effects, slow_rome)], max_concurrency=1, timeout=0.2)
    with threadlog.checkpointer(backend) as saver:
        graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
        out = graph.invoke(start(), _cfg("stored"))
    results = by_call(out["messages"])
    rome = results["c-rome"]
    assert rome.response_metadata["threadlog_error"] == "timeout"
    assert "still running in the background" in str(rome.content)
    assert "outcome is unknown" in str(rome.content)
    assert results["c-oslo"].content == "booked Oslo"
    _wait_for(effects, "c-rome")  # the model was right not to assume it did not happen


# -- calls that reported back, or never started: "not completed" ---------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_one_node_step_stopped_by_an_interrupt_answers_the_finished_sibling_outcome_unknown(
    backend: str, tmp_path: Path, mode: str
) -> None:
    """Rome's tool finishes, Oslo's pauses in `interrupt()`: in one-node mode the step's
    results are written together, so Rome's is never stored, though its booking happened.
    New input instead of the resume: Rome "outcome unknown", Oslo (it reported back by
    pausing; a resume re-runs it from the start) "not completed"."""
    effects = tmp_path / "effects.jsonl"

    def ask_in_oslo(city: str) -> None:
        if city == "Oslo":
            interrupt({"confirm": city})

    node = ToolNode([_booking_tool(effects, ask_in_oslo)], max_concurrency=1)
    if mode == "sync":
        with threadlog.checkpointer(backend) as saver:
            graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
            assert graph.invoke(start(), _cfg("i"))["__interrupt__"]
            out = graph.invoke(INSTEAD, _cfg("i"))
    else:
        async with threadlog.acheckpointer(backend) as saver:
            graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
            assert (await graph.ainvoke(start(), _cfg("i")))["__interrupt__"]
            out = await graph.ainvoke(INSTEAD, _cfg("i"))
    assert_answered(out["messages"], unknown=[ROME], not_done=[OSLO])
    assert _effects(effects) == ["c-rome"]


def test_a_tool_that_raised_is_answered_not_completed(backend: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"

    def oslo_is_down(city: str) -> None:
        if city == "Oslo":
            raise ConnectionError("Oslo's booking service is down")

    node = ToolNode([_booking_tool(effects, oslo_is_down)], max_concurrency=1, handle_errors=False)
    with threadlog.checkpointer(backend) as saver:
        graph = scripted_graph(node, [request(OSLO)], checkpointer=saver)
        with pytest.raises(ConnectionError):
            graph.invoke(start(), _cfg("raise"))
        out = graph.invoke(INSTEAD, _cfg("raise"))
    assert_answered(out["messages"], unknown=[], not_done=[OSLO])


def test_calls_paused_for_approval_before_any_tool_ran_are_answered_not_completed(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    node = ToolNode([_booking_tool(effects, lambda city: None)], requires_approval=["book"])
    with threadlog.checkpointer(backend) as saver:
        graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
        assert graph.invoke(start(), _cfg("approval"))["__interrupt__"]
        out = graph.invoke(INSTEAD, _cfg("approval"))
    assert_answered(out["messages"], unknown=[], not_done=[ROME, OSLO])
    assert _effects(effects) == []


def test_a_resumed_call_that_then_finishes_keeps_its_own_result(
    backend: str, tmp_path: Path
) -> None:
    """Markers never override a result: Oslo pauses, is resumed and books; its result
    is the tool's, and nothing is repaired."""
    effects = tmp_path / "effects.jsonl"

    def ask_in_oslo(city: str) -> None:
        if city == "Oslo":
            assert interrupt({"confirm": city}) == "yes"

    node = ToolNode([_booking_tool(effects, ask_in_oslo)], max_concurrency=1)
    with threadlog.checkpointer(backend) as saver:
        graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
        graph.invoke(start(), _cfg("resume"))
        out = graph.invoke(Command(resume="yes"), _cfg("resume"))
    results = by_call(out["messages"])
    assert [results[c].content for c in ("c-rome", "c-oslo")] == ["booked Rome", "booked Oslo"]
    assert all(repair_kind(r) is None for r in results.values())
    assert isinstance(out["messages"][-1], AIMessage)


# -- a plain LangGraph saver: the model node's own repair reads the markers ---------------


async def test_with_a_plain_saver_the_model_node_answers_a_started_call_outcome_unknown(
    tmp_path: Path,
) -> None:
    """No threadlog layer answers the abandoned calls here: LangGraph drops the stopped
    step, and `ModelNode` repairs them before it calls the model, reading the stored
    markers itself (`recover_for_node`)."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph

    effects = tmp_path / "effects.jsonl"
    running = threading.Event()

    def slow_beijing(city: str) -> None:
        if city == "Beijing":
            running.set()
            time.sleep(0.6)

    book = _booking_tool(effects, slow_beijing)
    g = StateGraph(threadlog.AgentState)
    g.add_node("model", threadlog.ModelNode(threadlog.OfflineChatModel(), [book]))
    g.add_node("tools", ToolNode([book], max_concurrency=1))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", threadlog.tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "plain.sqlite")) as saver:
        graph = g.compile(checkpointer=saver)
        first = {"messages": [HumanMessage("Book Beijing and Shanghai", id="h-1")]}
        run = asyncio.create_task(graph.ainvoke(first, _cfg("plain")))
        assert await asyncio.to_thread(running.wait, 30)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        out = await graph.ainvoke(INSTEAD, _cfg("plain"))
    messages = out["messages"]
    request_ = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    beijing, shanghai = request_.tool_calls
    assert_answered(messages, unknown=[beijing], not_done=[shanghai])
    await asyncio.to_thread(_wait_for, effects, str(beijing["id"]))


# -- inside a subgraph: the markers live in the subgraph's namespace ------------------------


def _in_a_subgraph(node: ToolNode, checkpointer: Any) -> Any:
    """The scripted model ⇄ tools graph as the only node (`team`) of a parent graph
    sharing `messages`: its tool step, and its markers, are in the namespace `team:<t>`."""
    from langgraph.graph import START as FIRST
    from langgraph.graph import StateGraph

    parent = StateGraph(threadlog.MessagesState)
    parent.add_node("team", scripted_graph(node, [TWO_BOOKINGS]))
    parent.add_edge(FIRST, "team")
    return parent.compile(checkpointer=checkpointer)


async def test_a_run_cancelled_inside_a_subgraph_answers_the_running_call_outcome_unknown(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    running = threading.Event()

    def slow_rome(city: str) -> None:
        if city == "Rome":
            running.set()
            time.sleep(0.6)

    node = ToolNode([_booking_tool(effects, slow_rome)], max_concurrency=1)
    async with threadlog.acheckpointer(backend) as saver:
        graph = _in_a_subgraph(node, saver)
        run = asyncio.create_task(graph.ainvoke(start(), _cfg("sub-cancel")))
        assert await asyncio.to_thread(running.wait, 30)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.to_thread(_wait_for, effects, "c-rome")
        out = await graph.ainvoke(INSTEAD, _cfg("sub-cancel"))
    assert_answered(out["messages"], unknown=[ROME], not_done=[OSLO])
    assert _effects(effects) == ["c-rome"]


def _killed_in_rome_in_a_subgraph(url: str, effects: str) -> None:
    code = 1
    try:

        def kill_in_rome(city: str) -> None:
            if city == "Rome":
                os.kill(os.getpid(), signal.SIGKILL)

        node = ToolNode([_booking_tool(Path(effects), kill_in_rome)], max_concurrency=1)
        with threadlog.checkpointer(url) as saver:
            graph = _in_a_subgraph(node, saver)
            graph.invoke(start(), _cfg("sub-kill"), durability="sync")
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def test_a_worker_killed_while_a_subgraphs_tool_runs_answers_that_call_outcome_unknown(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    worker = multiprocessing.get_context("fork").Process(
        target=_killed_in_rome_in_a_subgraph, args=(backend, str(effects))
    )
    worker.start()
    worker.join(60)
    assert worker.exitcode == -signal.SIGKILL, "the worker was not killed in Rome's tool"
    node = ToolNode([_booking_tool(effects, lambda city: None)], max_concurrency=1)
    with threadlog.checkpointer(backend) as saver:
        out = _in_a_subgraph(node, saver).invoke(INSTEAD, _cfg("sub-kill"))
    assert_answered(out["messages"], unknown=[ROME], not_done=[OSLO])
    assert _effects(effects) == []
    assert_inspector_marks(backend, "sub-kill", "c-rome")


# -- a documented limit: LangGraph's prebuilt ToolNode stores no marker ---------------------


async def test_a_call_run_by_langgraphs_prebuilt_tool_node_has_no_marker_and_reads_not_completed(
    backend: str, tmp_path: Path
) -> None:
    """docs/tools.md: only `threadlog.ToolNode` stores the "started" marker. The same
    cancel with `langgraph.prebuilt.ToolNode` (what LangChain's `create_agent` runs):
    Rome's booking happens, and new input still answers it "not completed"."""
    from langgraph.prebuilt import ToolNode as PrebuiltToolNode

    effects = tmp_path / "effects.jsonl"
    running = threading.Event()

    def slow_rome(city: str) -> None:
        if city == "Rome":
            running.set()
            time.sleep(0.6)

    node = PrebuiltToolNode([_booking_tool(effects, slow_rome)])
    async with threadlog.acheckpointer(backend) as saver:
        graph = scripted_graph(node, [request(ROME)], checkpointer=saver)  # type: ignore[arg-type]
        run = asyncio.create_task(graph.ainvoke(start(), _cfg("prebuilt")))
        assert await asyncio.to_thread(running.wait, 30)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.to_thread(_wait_for, effects, "c-rome")  # Rome's booking happened
        out = await graph.ainvoke(INSTEAD, _cfg("prebuilt"))
    assert_answered(out["messages"], unknown=[], not_done=[ROME])
    assert _effects(effects) == ["c-rome"]


# -- "async" durability: the step's checkpoint is stored in the background -----------------


def _killed_in_rome_with_slow_puts(url: str, effects: str) -> None:
    """A forked worker under LangGraph's default durability whose checkpoint puts take
    0.3 s each: the tool step's tasks start while its checkpoint is still being stored.
    SIGKILLs itself inside Rome's tool."""
    code = 1
    try:
        from scripts.kill_harness import Journal

        class SlowPuts(Journal):
            def put(self, *args: Any) -> Any:
                time.sleep(0.3)
                return super().put(*args)

        def kill_in_rome(city: str) -> None:
            if city == "Rome":
                os.kill(os.getpid(), signal.SIGKILL)

        def slow(saver: Any) -> Any:
            return SlowPuts(saver, Path(effects).with_name("stored.jsonl"), None)

        node = ToolNode([_booking_tool(Path(effects), kill_in_rome)], max_concurrency=1)
        with threadlog.checkpointer(url, wrap=slow) as saver:
            graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
            graph.invoke(start(), _cfg("async-kill"), durability="async")
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def test_under_async_durability_a_kill_in_a_tool_before_its_checkpoint_is_stored_reads_outcome_unknown(  # noqa: E501
    backend: str, tmp_path: Path
) -> None:
    # The marker waits for the checkpoint it hangs on, so the tool starts only once both
    # are stored. Without the wait the kill lands before the background puts: no
    # checkpoint of the turn is stored, the marker hangs on none, and the new input ran
    # Rome's booking a second time (its result "booked Rome", not "outcome unknown").
    effects = tmp_path / "effects.jsonl"
    worker = multiprocessing.get_context("fork").Process(
        target=_killed_in_rome_with_slow_puts, args=(backend, str(effects))
    )
    worker.start()
    worker.join(60)
    assert worker.exitcode == -signal.SIGKILL, "the worker was not killed in Rome's tool"
    node = ToolNode([_booking_tool(effects, lambda city: None)], max_concurrency=1)
    with threadlog.checkpointer(backend) as saver:
        graph = scripted_graph(node, [TWO_BOOKINGS], checkpointer=saver)
        out = graph.invoke(INSTEAD, _cfg("async-kill"))
    assert_answered(out["messages"], unknown=[ROME], not_done=[OSLO])
    assert _effects(effects) == []
