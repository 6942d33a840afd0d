"""Idempotent tools past a timeout: the tool node's own per-call `timeout` runs a marked
call again with its key (bounded by `timeout_retries`), and a step timeout
(`graph.step_timeout`) leaves the call to its recovery, which serves the receipt or runs
it again with the same key. The tool charges the local payment service of
scripts/kill_payments.py (a SQLite table with a unique key); SQLite checkpointer."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode as LangGraphToolNode

import threadlog
from scripts.kill_payments import charge, charges_by_call
from tests.helpers.tools import by_call, call, request
from threadlog import ToolNode
from threadlog.checkpoint.receipts import KEY_METADATA

PAY = call("pay", {"amount": 5}, "c-pay")
SLOW = 0.8  # the first attempt's stall, seconds
TIMEOUT = 0.25


class Service:
    """The payment service, and what each attempt of `pay` saw."""

    def __init__(self, root: Path, where: str = "after", slow_attempts: int = 1) -> None:
        self.path = root / "payments.sqlite"
        self.where = where  # stall "before" or "after" the charge
        self.slow_attempts = slow_attempts
        self.keys: list[str] = []
        self.first_done = threading.Event()  # the first attempt's body ended
        self.lock = threading.Lock()

    def _attempt(self) -> tuple[str, int]:
        key = threadlog.idempotency_key()
        with self.lock:
            self.keys.append(key)
            return key, len(self.keys)

    def sync_tool(self, *, marked: bool = True) -> BaseTool:
        @tool
        def pay(amount: int) -> str:
            """Charge an amount through the payment service, with the call's key."""
            key, n = self._attempt() if marked else (None, 0)
            try:
                slow = n <= self.slow_attempts
                if slow and self.where == "before":
                    time.sleep(SLOW)
                rid = charge(self.path, key, "c-pay", amount)
                if slow and self.where == "after":
                    time.sleep(SLOW)
                return f"charge {rid}"
            finally:
                if n == 1:
                    self.first_done.set()

        return pay

    def async_tool(self, *, marked: bool = True) -> BaseTool:
        @tool
        async def pay(amount: int) -> str:
            """Charge an amount through the payment service, with the call's key."""
            key, n = self._attempt() if marked else (None, 1)
            try:
                slow = n <= self.slow_attempts
                if slow and self.where == "before":
                    await asyncio.sleep(SLOW)
                rid = charge(self.path, key, "c-pay", amount)
                if slow and self.where == "after":
                    await asyncio.sleep(SLOW)
                return f"charge {rid}"
            finally:
                if n == 1:
                    self.first_done.set()

        return pay

    def charges(self) -> list[int]:
        return charges_by_call(self.path).get("c-pay", [])


def _graph(node: Any, saver: Any) -> Any:
    def model(state: threadlog.MessagesState) -> dict[str, Any]:
        if any(isinstance(m, AIMessage) for m in state["messages"]):
            return {"messages": [AIMessage("done", id=f"ai-done-{len(state['messages'])}")]}
        return {"messages": [request(PAY)]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_node("tools", node)
    g.add_edge(START, "model")
    g.add_conditional_edges(
        "model",
        lambda s: "tools" if getattr(s["messages"][-1], "tool_calls", None) else END,
        ["tools", END],
    )
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


def _node(kind: str, pay: BaseTool) -> Any:
    if kind == "threadlog":
        return ToolNode([pay], idempotent=["pay"])
    return LangGraphToolNode([threadlog.idempotent(pay)])


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


GO = {"messages": [HumanMessage("pay", id="h-1")]}
MORE = {"messages": [HumanMessage("and?", id="h-2")]}


def _results(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# -- the node's own timeout -------------------------------------------------------------


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_marked_sync_call_past_its_timeout_runs_again_with_its_key_and_logs_its_one_charge(
    tmp_path: Path, where: str
) -> None:
    svc = Service(tmp_path, where)
    with threadlog.checkpointer(f"sqlite:///{tmp_path}/t.db") as saver:
        node = ToolNode([svc.sync_tool()], idempotent=["pay"], timeout=TIMEOUT)
        graph = _graph(node, saver)
        out = graph.invoke(GO, _cfg("t"))
        # The abandoned first attempt goes on in its thread; once it ended, still one charge.
        assert svc.first_done.wait(10)
        (rid,) = svc.charges()
        result = by_call(out["messages"])["c-pay"]
        assert result.content == f"charge {rid}" and result.status == "success"
        assert len(svc.keys) == 2 and len(set(svc.keys)) == 1
        assert result.response_metadata[KEY_METADATA] == svc.keys[0]
        # Answered once; later turns never run it again.
        out = graph.invoke(MORE, _cfg("t"))
    assert len(svc.keys) == 2 and svc.charges() == [rid]
    assert [m.tool_call_id for m in _results(out["messages"])] == ["c-pay"]


@pytest.mark.parametrize("where", ["before", "after"])
async def test_a_marked_async_call_past_its_timeout_is_cancelled_and_run_again_with_its_key(
    tmp_path: Path, where: str
) -> None:
    svc = Service(tmp_path, where)
    async with threadlog.acheckpointer(f"sqlite:///{tmp_path}/t.db") as saver:
        node = ToolNode([svc.async_tool()], idempotent=["pay"], timeout=TIMEOUT)
        out = await _graph(node, saver).ainvoke(GO, _cfg("t"))
    (rid,) = svc.charges()
    result = by_call(out["messages"])["c-pay"]
    assert result.content == f"charge {rid}" and result.status == "success"
    assert len(svc.keys) == 2 and len(set(svc.keys)) == 1


async def test_a_marked_call_past_its_timeout_on_every_attempt_is_an_error_naming_its_key(
    tmp_path: Path,
) -> None:
    svc = Service(tmp_path, "before", slow_attempts=99)
    async with threadlog.acheckpointer(f"sqlite:///{tmp_path}/t.db") as saver:
        node = ToolNode([svc.async_tool()], idempotent=["pay"], timeout=0.1, timeout_retries=1)
        out = await _graph(node, saver).ainvoke(GO, _cfg("t"))
    result = by_call(out["messages"])["c-pay"]
    assert len(svc.keys) == 2 and len(set(svc.keys)) == 1  # 1 + timeout_retries attempts
    assert result.status == "error" and svc.charges() == []  # each cancelled before it
    text = str(result.content)
    assert "did not finish within 0.1 s in 2 attempt(s)" in text
    assert f"idempotency key {svc.keys[0]}" in text and "again with that key is safe" in text
    assert result.response_metadata[KEY_METADATA] == svc.keys[0]


async def test_timeout_retries_zero_answers_a_marked_call_after_one_attempt(
    tmp_path: Path,
) -> None:
    svc = Service(tmp_path, "before")
    async with threadlog.acheckpointer(f"sqlite:///{tmp_path}/t.db") as saver:
        node = ToolNode([svc.async_tool()], idempotent=["pay"], timeout=0.1, timeout_retries=0)
        out = await _graph(node, saver).ainvoke(GO, _cfg("t"))
    assert len(svc.keys) == 1
    assert "in 1 attempt(s)" in str(by_call(out["messages"])["c-pay"].content)


async def test_an_unmarked_call_past_its_timeout_is_not_run_again(tmp_path: Path) -> None:
    svc = Service(tmp_path, "after")
    async with threadlog.acheckpointer(f"sqlite:///{tmp_path}/t.db") as saver:
        node = ToolNode([svc.async_tool(marked=False)], timeout=TIMEOUT)
        out = await _graph(node, saver).ainvoke(GO, _cfg("t"))
    result = by_call(out["messages"])["c-pay"]
    assert len(svc.charges()) == 1  # it charged once, and nothing ran it again
    assert result.status == "error" and "did not finish within" in str(result.content)
    assert KEY_METADATA not in result.response_metadata


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_timeout_retries_must_be_a_whole_number_of_at_least_zero(
    tmp_path: Path, bad: Any
) -> None:
    with pytest.raises(ValueError, match=r"ToolNode\(timeout_retries=.*whole number >= 0"):
        ToolNode([Service(tmp_path).sync_tool()], timeout_retries=bad)


# -- a step timeout (LangGraph's `step_timeout`) ------------------------------------------
# The run first pauses before the tool step, so the step timeout strikes in the tool's
# step: one that strikes as the model's step ends can store the model's message without
# its edge (LangGraph's own savers and nodes do the same), a head with nothing to resume.


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
@pytest.mark.parametrize("recovery", ["resume", "new input"])
def test_a_step_timeout_under_invoke_ends_after_the_marked_tool_whose_receipt_recovery_serves(
    tmp_path: Path, recovery: str, kind: str
) -> None:
    # Under `invoke` LangGraph raises the step's TimeoutError only once its running tasks
    # ended (its executor waits for them): the tool returned and stored its receipt.
    svc = Service(tmp_path, "after")
    with threadlog.checkpointer(f"sqlite:///{tmp_path}/t.db") as saver:
        graph = _graph(_node(kind, svc.sync_tool()), saver)
        graph.invoke(GO, _cfg("t"), interrupt_before=["tools"])  # the timeout: the tool's step
        graph.step_timeout = TIMEOUT
        with pytest.raises(TimeoutError):
            graph.invoke(None, _cfg("t"))
        graph.step_timeout = None
        out = graph.invoke(None if recovery == "resume" else MORE, _cfg("t"))
    (rid,) = svc.charges()
    assert len(svc.keys) == 1  # served the receipt: the tool did not run again
    result = by_call(out["messages"])["c-pay"]
    assert result.content == f"charge {rid}" and result.status == "success"
    assert [m.tool_call_id for m in _results(out["messages"])] == ["c-pay"]


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
@pytest.mark.parametrize("recovery", ["resume", "new input"])
@pytest.mark.parametrize("where", ["before", "after"])
async def test_a_step_timeout_under_ainvoke_cancels_the_marked_tool_and_recovery_reruns_its_key(
    tmp_path: Path, recovery: str, where: str, kind: str
) -> None:
    svc = Service(tmp_path, where)
    async with threadlog.acheckpointer(f"sqlite:///{tmp_path}/t.db") as saver:
        graph = _graph(_node(kind, svc.async_tool()), saver)
        await graph.ainvoke(GO, _cfg("t"), interrupt_before=["tools"])
        graph.step_timeout = TIMEOUT
        with pytest.raises(TimeoutError):
            await graph.ainvoke(None, _cfg("t"))
        graph.step_timeout = None
        out = await graph.ainvoke(None if recovery == "resume" else MORE, _cfg("t"))
    (rid,) = svc.charges()
    assert len(svc.keys) == 2 and len(set(svc.keys)) == 1  # run again, with the same key
    result = by_call(out["messages"])["c-pay"]
    assert result.content == f"charge {rid}" and result.status == "success"
    assert [m.tool_call_id for m in _results(out["messages"])] == ["c-pay"]
