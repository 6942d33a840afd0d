"""The tool node's "started" marker, and the two repairs it tells apart (issue 24, item 4).

Before a tool runs, the node stores a marker through the run's checkpointer (one pending
write of its own task id on the step's checkpoint); a tool that raised or paused gets a
"stopped" marker. `recover` reads the newest marker per call into `Recovered.started`,
and `repair_open_calls` answers those calls "outcome unknown" and the others exactly as
before ("not completed": same text, id, format). The scenarios over real storage (cancel,
SIGKILL, timeouts) are in tests/storage/test_outcome_unknown.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime
from langgraph.types import interrupt

import threadlog
from tests.helpers.tools import by_call, call, request, scripted_graph, start
from threadlog import ToolNode, ToolPairingError
from threadlog.checkpoint.recover import (
    STARTED_CHANNEL,
    MarkerEvent,
    recover_results,
    started_marker,
)
from threadlog.log.pairing import (
    NOT_COMPLETED,
    OUTCOME_UNKNOWN,
    Recovered,
    not_completed,
    outcome_unknown,
    repair_kind,
    repair_open_calls,
)
from threadlog.nodes.tools.started import note_flow

CFG: dict[str, Any] = {"configurable": {"thread_id": "t"}}
ROME = request(call("lookup", {"city": "Rome"}, "c1"))


def _markers(saver: Any, config: dict[str, Any] = CFG) -> list[dict[str, Any]]:
    """Every marker stored on the thread, oldest first."""
    out = []
    for tup in saver.list(config):
        out += [v for _, ch, v in tup.pending_writes or () if ch == STARTED_CHANNEL]
    return sorted(out, key=lambda v: v["at"])


# -- the marker is stored before the tool runs -------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_started_marker_is_stored_before_the_tool_body_runs(mode: str) -> None:
    seen: list[list[dict[str, Any]]] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        seen.append(_markers(saver))  # read from storage, inside the tool
        return city

    with threadlog.checkpointer("memory://") as saver:
        graph = scripted_graph(ToolNode([lookup]), [ROME], checkpointer=saver)
        # "sync": the step's checkpoint is stored before its tasks run, so the read
        # inside the tool finds it (LangGraph's "async" stores it meanwhile).
        if mode == "sync":
            out = graph.invoke(start(), CFG, durability="sync")
        else:
            out = await graph.ainvoke(start(), CFG, durability="sync")
        assert [(m["call_id"], m["event"]) for m in seen[0]] == [("c1", "started")]
        # The marker changes no state: the log is the turn's, the result the tool's.
        assert by_call(out["messages"])["c1"].content == "Rome"
        assert isinstance(out["messages"][-1], AIMessage) and not graph.get_state(CFG).next
        assert _markers(saver) == seen[0]  # nothing more for a call that returned


def test_a_tool_that_pauses_or_raises_is_noted_stopped() -> None:
    saver = InMemorySaver()

    @tool
    def ask(city: str) -> str:
        """Ask before looking up; fails for Oslo."""
        if city == "Oslo":
            raise ConnectionError("down")
        return str(interrupt(city))

    node = ToolNode([ask], max_concurrency=1, handle_errors=False)
    paused = scripted_graph(
        node, [request(call("ask", {"city": "Rome"}, "c1"))], checkpointer=saver
    )
    assert paused.invoke(start(), CFG)["__interrupt__"]
    assert [(m["call_id"], m["event"]) for m in _markers(saver)] == [
        ("c1", "started"), ("c1", "stopped")]
    raised_cfg: dict[str, Any] = {"configurable": {"thread_id": "raised"}}
    raised = scripted_graph(
        node, [request(call("ask", {"city": "Oslo"}, "c2"))], checkpointer=saver
    )
    with pytest.raises(ConnectionError):
        raised.invoke(start(), raised_cfg)
    assert [(m["call_id"], m["event"]) for m in _markers(saver, raised_cfg)] == [
        ("c2", "started"), ("c2", "stopped")]


def test_no_marker_is_stored_with_durability_exit_or_outside_a_checkpointed_run() -> None:
    saver = InMemorySaver()

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    node = ToolNode([lookup])
    graph = scripted_graph(node, [ROME], checkpointer=saver)
    graph.invoke(start(), CFG, durability="exit")
    assert _markers(saver) == []
    # Called directly (no checkpointer): the tool runs, nothing is noted.
    out = node.invoke({"messages": [request(call("lookup", {"city": "Oslo"}, "c2"))]})
    assert out["messages"][0].content == "Oslo"
    assert list(note_flow({}, call("lookup", {}, "c3"), "started")) == []


# -- reading the markers back ------------------------------------------------------------


def _stored(saver: InMemorySaver, *markers: tuple[str, MarkerEvent]) -> Any:
    """A checkpoint holding one request of three calls, and `markers` on it, in order."""
    ai = request(call("book", {}, "a"), call("book", {}, "b"), call("book", {}, "c"))
    thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    head = saver.put(thread, empty_checkpoint(), {"source": "loop", "step": 1}, {})
    saver.put_writes(head, [("messages", [ai])], "model-task")
    for cid, event in markers:
        task_id, writes = started_marker(cid, event)
        saver.put_writes(head, writes, task_id)
        time.sleep(0.001)
    return head


def test_the_newest_marker_of_each_call_decides_and_a_stored_result_wins() -> None:
    saver = InMemorySaver()
    head = _stored(
        saver,
        ("a", "started"),
        ("b", "started"), ("b", "stopped"),
        ("c", "started"), ("c", "stopped"), ("c", "started"),
    )
    found = recover_results(saver, head, ["a", "b", "c"], requests=["ai-1"])
    assert isinstance(found, Recovered) and found == {}
    assert found.started == {"a", "c"}
    result = ToolMessage("booked", tool_call_id="a", id="r-a")
    saver.put_writes(head, [("messages", [result])], "tools-task")
    found = recover_results(saver, head, ["a", "b", "c"], requests=["ai-1"])
    assert found == {"a": result} and found.started == {"c"}


# -- the two repairs -----------------------------------------------------------------------


def test_a_call_that_never_started_keeps_the_not_completed_result_threads_already_hold() -> None:
    ai = request(call("book", {"city": "Rome"}, "c1"))
    _, (repaired,) = repair_open_calls([ai])
    # Exactly the message threads written before this stored.
    digest = hashlib.blake2b(b"c1", digest_size=10).hexdigest()
    assert repaired.model_dump() == ToolMessage(
        content="Error: call was not completed (the run stopped before its result was recorded)",
        tool_call_id="c1",
        name="book",
        status="error",
        id=f"tl-repair-{digest}",
    ).model_dump()
    assert repaired == not_completed(ai.tool_calls[0]) and repaired.content == NOT_COMPLETED
    assert repair_kind(repaired) == "not_completed"


def test_a_call_whose_tool_started_is_answered_outcome_unknown() -> None:
    ai = request(call("book", {"city": "Rome"}, "c1"), call("book", {"city": "Oslo"}, "c2"))
    context, (rome, oslo) = repair_open_calls([ai], recovered=Recovered({}, ["c1"]))
    assert [m.id for m in context] == [ai.id, rome.id, oslo.id]  # call order
    assert rome == outcome_unknown(ai.tool_calls[0])
    assert (rome.status, rome.content, rome.response_metadata) == (
        "error", OUTCOME_UNKNOWN, {"threadlog_error": "outcome_unknown"})
    assert "Do not assume it did not happen" in OUTCOME_UNKNOWN
    assert "do not repeat it blindly" in OUTCOME_UNKNOWN
    assert rome.id == not_completed(ai.tool_calls[0]).id  # one repair id per call
    assert oslo == not_completed(ai.tool_calls[1])
    assert [repair_kind(m) for m in (rome, oslo)] == ["outcome_unknown", "not_completed"]
    # A tool's own results are no repair, not even an error one.
    assert repair_kind(ToolMessage("x", tool_call_id="c1", status="error", id="r1")) is None


def test_a_stored_result_wins_over_the_marker_and_refuse_names_the_unknown_outcome() -> None:
    ai = request(call("book", {"city": "Rome"}, "c1"))
    stored = ToolMessage("booked", tool_call_id="c1", id="r1")
    _, (r,) = repair_open_calls([ai], recovered=Recovered({"c1": stored}, ["c1"]))
    assert r is stored
    with pytest.raises(ToolPairingError, match="its tool started, so its outcome is unknown"):
        repair_open_calls([ai], repair="refuse", recovered=Recovered({}, ["c1"]))


# -- the tool node's own timeout: the call started, so its outcome is unknown -------------


def test_a_timed_out_sync_tool_is_still_running_and_its_result_says_so() -> None:
    finished = threading.Event()

    @tool
    def slow(ms: int) -> str:
        """Sleep, then finish."""
        time.sleep(ms / 1000)
        finished.set()
        return "done"

    ai = request(call("slow", {"ms": 400}, "c1"))
    out = ToolNode([slow], timeout=0.1).invoke({"messages": [ai]})
    text = str(out["messages"][0].content)
    assert text.startswith("Error: slow did not finish within 0.1 s")
    assert "still running in the background" in text and "outcome is unknown" in text
    assert "Do not assume it did not happen" in text
    assert finished.wait(5)  # it did finish: the text was right not to say it stopped


async def test_a_timed_out_async_tool_was_cancelled_and_its_result_says_so() -> None:
    @tool
    async def aslow(ms: int) -> str:
        """Sleep (asyncio), then finish."""
        await asyncio.sleep(ms / 1000)
        return "done"

    node = ToolNode([aslow], timeout=0.1)
    out = await node.ainvoke({"messages": [request(call("aslow", {"ms": 400}, "c1"))]})
    text = str(out["messages"][0].content)
    assert "was cancelled, possibly after it had taken effect" in text
    assert "outcome is unknown" in text
    assert out["messages"][0].response_metadata["threadlog_error"] == "timeout"


async def test_a_timed_out_sync_tool_under_ainvoke_does_not_hold_up_the_next_call() -> None:
    """With `max_concurrency=1`, the second call starts once the first timed out, in a
    thread of its own, not behind the first's (still running) one."""
    ran: list[str] = []

    @tool
    def nap(ms: int, name: str) -> str:
        """Sleep `ms`, then note `name`."""
        time.sleep(ms / 1000)
        ran.append(name)
        return name

    node = ToolNode([nap], max_concurrency=1, timeout=0.2)
    ai = request(call("nap", {"ms": 600, "name": "slow"}, "c1"),
                 call("nap", {"ms": 0, "name": "quick"}, "c2"))
    res = by_call((await node.ainvoke({"messages": [ai]}))["messages"])
    assert res["c1"].response_metadata["threadlog_error"] == "timeout"
    assert (res["c2"].status, res["c2"].content) == ("success", "quick")


# -- the call id as an idempotency key (docs/tools.md) -------------------------------------


def test_a_tool_reads_its_call_id_as_an_idempotency_key_either_way_docs_show() -> None:
    keys: dict[str, str] = {}

    @tool
    def book(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Book a trip."""
        keys[city] = tool_call_id
        return "booked"

    @tool
    def pay(amount: int, runtime: ToolRuntime) -> str:
        """Pay an amount."""
        keys[str(amount)] = runtime.tool_call_id or ""
        return "paid"

    assert set(pay.tool_call_schema.model_json_schema()["properties"]) == {"amount"}
    ai = request(call("book", {"city": "Rome"}, "c-book"), call("pay", {"amount": 5}, "c-pay"))
    out = by_call(ToolNode([book, pay]).invoke({"messages": [ai]})["messages"])
    assert keys == {"Rome": "c-book", "5": "c-pay"}
    assert set(out) == {"c-book", "c-pay"}  # the key is the id the result answers
