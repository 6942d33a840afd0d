"""Idempotent tools: marking, the key, and receipts that keep a returned tool from running
again, under threadlog's and LangGraph's tool nodes and every `durability` mode.

A step "dies" here the way a killed process leaves it: a sibling call raises
`KeyboardInterrupt` (not an `Exception`, so no node turns it into a result), so the step's
task writes are never stored, while the marked tool has already returned. The graph then
resumes (`invoke(None)`) or gets new input, as after a kill. SQLite through
`threadlog.checkpointer`; the SIGKILL version is tests/storage/test_kill_payments.py.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import InjectedState
from langgraph.prebuilt import ToolNode as LangGraphToolNode

import threadlog
from scripts.kill_payments import charge, charges_by_call
from tests.helpers.tools import by_call, call, request
from threadlog import IdempotencyError, ToolNode
from threadlog.checkpoint.receipts import KEY_METADATA, RECEIPT_CHANNEL
from threadlog.inspect.pairs import ToolPairs
from threadlog.log.pairing import NOT_COMPLETED, OUTCOME_UNKNOWN
from threadlog.nodes.tools.idempotent import call_key, is_idempotent

PAY = call("pay", {"amount": 5}, "c-pay")
BOOM = call("boom", {}, "c-boom")


class Effects:
    """How often each tool body ran, and the keys it saw."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.boom_runs = 0
        self.die = True
        self.lock = threading.Lock()


def _tools(fx: Effects) -> tuple[BaseTool, BaseTool]:
    @tool
    def pay(amount: int) -> str:
        """Charge an amount (the side effect: the key is recorded)."""
        key = threadlog.idempotency_key()
        with fx.lock:
            fx.keys.append(key)
        return f"charged {amount} ({key})"

    @tool
    def boom() -> str:
        """A sibling whose first run dies with the process."""
        fx.boom_runs += 1
        if fx.die:
            raise KeyboardInterrupt("the process dies here")
        return "fine"

    return pay, boom


def _route(s: threadlog.MessagesState) -> str:
    return "tools" if getattr(s["messages"][-1], "tool_calls", None) else END


def _graph(node: Any, checkpointer: Any, reply: AIMessage) -> Any:
    def model(state: threadlog.MessagesState) -> dict[str, Any]:
        if any(isinstance(m, AIMessage) for m in state["messages"]):
            return {"messages": [AIMessage("done", id=f"ai-done-{len(state['messages'])}")]}
        return {"messages": [reply]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_node("tools", node)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", _route, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


def _node(kind: str, fx: Effects) -> Any:
    pay, boom = _tools(fx)
    if kind == "threadlog":
        return ToolNode(
            [pay, boom], idempotent=["pay"], max_concurrency=1, handle_tool_errors=False
        )
    # LangGraph's own node: the tool is marked by object, the only way it knows.
    return LangGraphToolNode([threadlog.idempotent(pay), boom])


def _cfg(thread: str) -> dict[str, Any]:
    # One call at a time (LangGraph's node honours the config's limit): the marked call
    # has returned, receipt stored, before its sibling dies.
    return {"configurable": {"thread_id": thread}, "max_concurrency": 1}


@pytest.fixture
def saver(tmp_path: Path) -> Any:
    with threadlog.checkpointer(f"sqlite:///{tmp_path}/t.db") as cp:
        yield cp


# -- the key --------------------------------------------------------------------------


def test_the_key_is_the_same_on_every_attempt_of_a_call_and_differs_for_any_other() -> None:
    fx = Effects()
    pay, _ = _tools(fx)
    pay = threadlog.idempotent(pay)

    def retry_twice(req: Any, execute: Any) -> Any:
        execute(req)
        return execute(req)

    node = ToolNode([pay], wrap_tool_call=retry_twice)
    for thread in ("t-1", "t-1", "t-2"):
        node.invoke({"messages": [request(PAY)]}, {"configurable": {"thread_id": thread}})
    node.invoke(
        {"messages": [request(call("pay", {"amount": 5}, "c-other"))]},
        {"configurable": {"thread_id": "t-1"}},
    )
    a1, a2, b1, b2, c1, c2, d1, d2 = fx.keys
    assert a1 == a2 == b1 == b2  # retries, and the same call run again, share the key
    assert c1 == c2 != a1  # another thread
    assert d1 == d2 not in (a1, c1)  # another call id
    assert a1 == call_key("t-1", "", "c-pay")


def test_the_key_ignores_task_ids_in_the_namespace() -> None:
    assert call_key("t", "tools:1f2e|pay:aa", "c") == call_key("t", "tools:9c3b|pay:bb", "c")
    assert call_key("t", "tools:1f2e", "c") != call_key("t", "other:1f2e", "c")


def test_the_key_outside_a_marked_tools_call_is_one_clear_error() -> None:
    with pytest.raises(IdempotencyError, match="outside the run of a tool marked"):
        threadlog.idempotency_key()
    fx = Effects()
    pay, _ = _tools(fx)
    threadlog.idempotent(pay)
    with pytest.raises(IdempotencyError, match="outside the run"):
        pay.invoke({"amount": 1})  # not a tool call: no call id, no key


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
def test_both_tool_nodes_give_a_marked_tool_its_key(kind: str) -> None:
    fx = Effects()
    fx.die = False
    graph = _graph(_node(kind, fx), None, request(PAY))
    out = graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, _cfg("t"))
    # The tool's namespace is its task's ("tools:<task id>"), without the task id.
    assert fx.keys == [call_key("t", "tools", "c-pay")]
    assert by_call(out["messages"])["c-pay"].content == f"charged 5 ({fx.keys[0]})"


# -- marking --------------------------------------------------------------------------


def test_marking_returns_the_same_tool_and_marking_twice_is_marking_once() -> None:
    fx = Effects()
    pay, _ = _tools(fx)
    assert threadlog.idempotent(pay) is pay
    func = pay.func
    assert threadlog.idempotent(pay) is pay and pay.func is func
    assert is_idempotent(pay)


def test_a_plain_function_and_a_basetool_subclass_can_be_marked() -> None:
    seen: list[str] = []

    def refund(order: str) -> str:
        """Refund an order."""
        seen.append(threadlog.idempotency_key())
        return f"refunded {order}"

    class Ship(BaseTool):
        name: str = "ship"
        description: str = "Ship an order."

        def _run(self, order: str) -> str:
            seen.append(threadlog.idempotency_key())
            return f"shipped {order}"

    node = ToolNode([threadlog.idempotent(refund), threadlog.idempotent(Ship())])
    node.invoke(
        {
            "messages": [
                request(call("refund", {"order": "o"}, "c1"), call("ship", {"order": "o"}, "c2"))
            ]
        },
        {"configurable": {"thread_id": "t"}},
    )
    assert sorted(seen) == sorted([call_key("t", "", "c1"), call_key("t", "", "c2")])


@pytest.mark.parametrize("thing", [42, "pay", None, int])
def test_marking_something_that_is_not_a_tool_is_one_error_naming_it(thing: Any) -> None:
    with pytest.raises(IdempotencyError, match="takes a tool") as e:
        threadlog.idempotent(thing)
    assert type(thing).__name__ in str(e.value)


def test_two_tools_with_one_name_where_one_is_marked_are_refused_naming_it() -> None:
    fx = Effects()
    pay, _ = _tools(fx)
    other, _ = _tools(Effects())
    with pytest.raises(IdempotencyError, match="2 tools are named 'pay'"):
        ToolNode([threadlog.idempotent(pay), other])
    with pytest.raises(IdempotencyError, match="2 tools are named 'pay'"):
        ToolNode([_tools(Effects())[0], _tools(Effects())[0]], idempotent=["pay"])


def test_a_name_that_is_no_tool_is_refused_naming_it() -> None:
    pay, boom = _tools(Effects())
    with pytest.raises(IdempotencyError, match=r"names \['refund'\] that are not tools"):
        ToolNode([pay, boom], idempotent=["refund"])
    with pytest.raises(IdempotencyError, match=r"names \['refund'\]"):
        threadlog.create_agent(threadlog.OfflineChatModel(), [pay], idempotent=["refund"])


def test_create_agent_marks_its_named_tools() -> None:
    pay, boom = _tools(Effects())
    threadlog.create_agent(threadlog.OfflineChatModel(), [pay, boom], idempotent=["pay"])
    assert is_idempotent(pay) and not is_idempotent(boom)


# -- a tool that returned never runs again ----------------------------------------------


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_resume_serves_the_receipt_of_a_marked_tool_that_returned_before_its_step_died(
    saver: Any, kind: str, durability: str
) -> None:
    fx = Effects()
    graph = _graph(_node(kind, fx), saver, request(PAY, BOOM))
    cfg = _cfg(f"{kind}-{durability}")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg, durability=durability)
    fx.die = False
    out = graph.invoke(None, cfg, durability=durability)
    results = by_call(out["messages"])
    assert len(fx.keys) == 1  # the tool ran once: the resume was served its receipt
    assert results["c-pay"].content == f"charged 5 ({fx.keys[0]})"
    assert results["c-boom"].content == "fine" and fx.boom_runs == 2  # unmarked: re-run


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_new_input_logs_the_receipt_of_a_marked_tool_that_returned_as_its_real_result(
    saver: Any, kind: str, durability: str
) -> None:
    fx = Effects()
    graph = _graph(_node(kind, fx), saver, request(PAY, BOOM))
    cfg = _cfg(f"new-{kind}-{durability}")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg, durability=durability)
    fx.die = False
    out = graph.invoke(
        {"messages": [HumanMessage("and now?", id="h-2")]}, cfg, durability=durability
    )
    results = by_call(out["messages"])
    assert len(fx.keys) == 1
    assert results["c-pay"].content == f"charged 5 ({fx.keys[0]})"
    assert results["c-pay"].status == "success"
    assert results["c-pay"].response_metadata[KEY_METADATA] == fx.keys[0]
    # The unmarked sibling keeps today's answer (started, never reported back).
    assert results["c-boom"].content in (OUTCOME_UNKNOWN, NOT_COMPLETED)
    assert fx.boom_runs == 1


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
@pytest.mark.parametrize("recovery", ["resume", "new input"])
def test_exit_durability_stores_no_receipt_and_the_rerun_charges_once_with_the_same_key(
    saver: Any, kind: str, recovery: str, tmp_path: Path
) -> None:
    # With "exit" nothing of a killed run is stored, receipts included: the tool runs
    # again, with the same key, and the payment service (scripts/kill_payments.py: a
    # unique key column) answers the second request with the first charge.
    service = tmp_path / "payments.sqlite"
    keys: list[str] = []
    fx = Effects()

    @tool
    def pay(amount: int) -> str:
        """Charge an amount through the payment service, with the call's key."""
        keys.append(threadlog.idempotency_key())
        return f"charge {charge(service, keys[-1], 'c-pay', amount)}"

    _, boom = _tools(fx)
    node = (
        ToolNode([pay, boom], idempotent=["pay"], max_concurrency=1, handle_tool_errors=False)
        if kind == "threadlog"
        else LangGraphToolNode([threadlog.idempotent(pay), boom])
    )
    graph = _graph(node, saver, request(PAY, BOOM))
    cfg = _cfg(f"exit-{kind}-{recovery}")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg, durability="exit")
    assert keys and charges_by_call(service)["c-pay"]  # it charged before the step died
    stored = [w for t in saver.list(cfg) for w in t.pending_writes or ()]
    assert not [w for w in stored if w[1] == RECEIPT_CHANNEL]
    fx.die = False
    given = None if recovery == "resume" else {"messages": [HumanMessage("and?", id="h-2")]}
    out = graph.invoke(given, cfg, durability="exit")
    assert len(keys) == 2 and len(set(keys)) == 1  # run again, with the same key
    (rid,) = charges_by_call(service)["c-pay"]
    result = by_call(out["messages"])["c-pay"]
    assert result.content == f"charge {rid}" and result.status == "success"


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_marked_call_whose_step_was_stored_never_runs_again(
    saver: Any, kind: str, durability: str
) -> None:
    # The crash comes after the tool step's checkpoint: in the next model step.
    fx = Effects()
    fx.die = False
    pay, _ = _tools(fx)
    node = (
        ToolNode([pay], idempotent=["pay"])
        if kind == "threadlog"
        else LangGraphToolNode([threadlog.idempotent(pay)])
    )
    state = {"dies": True}

    def model(s: threadlog.MessagesState) -> dict[str, Any]:
        if not any(isinstance(m, ToolMessage) for m in s["messages"]):
            return {"messages": [request(PAY)]}
        if state["dies"]:
            raise KeyboardInterrupt("killed in the next model step")
        return {"messages": [AIMessage("done", id=f"ai-done-{len(s['messages'])}")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_node("tools", node)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", _route, ["tools", END])
    g.add_edge("tools", "model")
    graph = g.compile(checkpointer=saver)
    cfg = _cfg(f"after-{kind}-{durability}")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg, durability=durability)
    state["dies"] = False
    if durability == "exit":
        # Nothing of the run was stored: the whole turn runs again, with the same key.
        out = graph.invoke(None, cfg, durability=durability)
        assert len(set(fx.keys)) == 1
    else:
        out = graph.invoke(None, cfg, durability=durability)
        assert len(fx.keys) == 1
        out = graph.invoke({"messages": [HumanMessage("again", id="h-2")]}, cfg)
        assert len(fx.keys) == 1
    assert by_call(out["messages"])["c-pay"].content == f"charged 5 ({fx.keys[0]})"


def test_inspect_shows_the_key_next_to_the_call(saver: Any) -> None:
    fx = Effects()
    fx.die = False
    graph = _graph(_node("threadlog", fx), saver, request(PAY, BOOM))
    graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, _cfg("inspect"))
    pairs = ToolPairs(threadlog.inspect.thread(saver, "inspect"))
    rows = {r["call_id"]: r for r in pairs.rows()}
    assert rows["c-pay"]["idempotency_key"] == fx.keys[0]
    assert rows["c-boom"]["idempotency_key"] is None
    shown = [r["call"] for r in pairs.html_rows()]
    assert ["c-pay", f"key {fx.keys[0]}"] in shown and "c-boom" in shown
    assert any("idempotency key" in n for n in pairs.notes())


# -- a marked tool that never reported back: run again, same key -------------------------


def _dying_pay(fx: Effects) -> BaseTool:
    @tool
    def pay(amount: int) -> str:
        """Charge an amount; the first attempt dies inside the tool, after the charge."""
        key = threadlog.idempotency_key()
        with fx.lock:
            fx.keys.append(key)
        if fx.die:
            raise KeyboardInterrupt("the process dies inside the tool")
        return f"charged {amount} ({key})"

    return pay


@pytest.mark.parametrize("kind", ["threadlog", "langgraph"])
@pytest.mark.parametrize("recovery", ["resume", "new input"])
def test_a_marked_call_killed_inside_its_tool_runs_again_with_the_same_key(
    saver: Any, kind: str, recovery: str
) -> None:
    fx = Effects()
    pay = _dying_pay(fx)
    node = (
        ToolNode([pay], idempotent=["pay"], handle_tool_errors=False)
        if kind == "threadlog"
        else LangGraphToolNode([threadlog.idempotent(pay)])
    )
    graph = _graph(node, saver, request(PAY))
    cfg = _cfg(f"inside-{kind}-{recovery}")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg)
    fx.die = False
    given = None if recovery == "resume" else {"messages": [HumanMessage("and?", id="h-2")]}
    out = graph.invoke(given, cfg)
    assert len(fx.keys) == 2 and len(set(fx.keys)) == 1  # run again, with the same key
    result = by_call(out["messages"])["c-pay"]
    assert result.content == f"charged 5 ({fx.keys[0]})" and result.status == "success"
    # Answered once, and never again by later turns.
    out = graph.invoke({"messages": [HumanMessage("more", id="h-3")]}, cfg)
    assert len(fx.keys) == 2
    assert [m.tool_call_id for m in out["messages"] if isinstance(m, ToolMessage)] == ["c-pay"]


def test_an_unmarked_call_killed_inside_its_tool_is_still_outcome_unknown_on_new_input(
    saver: Any,
) -> None:
    runs: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Charge an amount (no key: not marked); the first attempt dies inside."""
        runs.append(amount)
        if len(runs) == 1:
            raise KeyboardInterrupt("the process dies inside the tool")
        return "charged"

    graph = _graph(ToolNode([pay], handle_tool_errors=False), saver, request(PAY))
    cfg = _cfg("inside-unmarked")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg)
    out = graph.invoke({"messages": [HumanMessage("and?", id="h-2")]}, cfg)
    assert runs == [5]  # not run again
    assert by_call(out["messages"])["c-pay"].content == OUTCOME_UNKNOWN


async def test_a_cancelled_run_resumes_a_marked_async_tool_with_the_same_key(
    tmp_path: Path,
) -> None:
    import asyncio

    keys: list[str] = []
    started = asyncio.Event()

    @tool
    async def pay(amount: int) -> str:
        """Charge an amount, slowly."""
        keys.append(threadlog.idempotency_key())
        started.set()
        if len(keys) == 1:
            await asyncio.sleep(30)
        return f"charged {amount} ({keys[-1]})"

    async with threadlog.acheckpointer(f"sqlite:///{tmp_path}/async.db") as cp:
        graph = _graph(ToolNode([pay], idempotent=["pay"]), cp, request(PAY))
        cfg = _cfg("cancelled")
        task = asyncio.ensure_future(
            graph.ainvoke({"messages": [HumanMessage("go", id="h-1")]}, cfg)
        )
        await asyncio.wait_for(started.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        out = await graph.ainvoke(None, cfg)
    assert len(keys) == 2 and keys[0] == keys[1]
    assert by_call(out["messages"])["c-pay"].content == f"charged 5 ({keys[0]})"


def test_check_repair_leaves_a_died_step_to_its_resume_which_serves_the_receipt(
    tmp_path: Path, saver: Any
) -> None:
    # A step that died with its tool step pending reads as a pause (docs/check-and-replay.md):
    # `check --repair` answers none of its calls; the resume serves the marked call's receipt.
    from threadlog.cli import main

    fx = Effects()
    graph = _graph(_node("threadlog", fx), saver, request(PAY, BOOM))
    cfg = _cfg("repair")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg)
    before = graph.get_state(cfg).config
    assert main(["check", "--db", f"sqlite:///{tmp_path}/t.db", "--repair"]) == 0
    assert graph.get_state(cfg).config == before  # nothing written
    fx.die = False
    results = by_call(graph.invoke(None, cfg)["messages"])
    assert results["c-pay"].content == f"charged 5 ({fx.keys[0]})"
    assert results["c-pay"].response_metadata[KEY_METADATA] == fx.keys[0]
    assert results["c-boom"].content == "fine"  # unmarked: run again
    assert len(fx.keys) == 1


def test_a_marked_call_that_cannot_run_again_on_new_input_is_outcome_unknown(
    saver: Any,
) -> None:
    # It needs the graph state, which only its node injects: the re-run fails, and as
    # no "started" marker is stored for a marked tool, the honest answer is "unknown".
    runs: list[str] = []

    @tool
    def pay(amount: int, state: Annotated[dict, InjectedState]) -> str:
        """Charge an amount, reading the state."""
        runs.append(threadlog.idempotency_key())
        if len(runs) == 1:
            raise KeyboardInterrupt("the process dies inside the tool")
        return f"charged {amount}"

    graph = _graph(
        ToolNode([pay], idempotent=["pay"], handle_tool_errors=False), saver, request(PAY)
    )
    cfg = _cfg("cannot-rerun")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg)
    out = graph.invoke({"messages": [HumanMessage("and?", id="h-2")]}, cfg)
    assert len(runs) == 1
    assert by_call(out["messages"])["c-pay"].content == OUTCOME_UNKNOWN


def test_new_input_re_runs_a_marked_call_a_subgraphs_tool_node_made_with_its_key(
    saver: Any,
) -> None:
    fx = Effects()
    pay = _dying_pay(fx)
    inner = _graph(
        ToolNode([pay], idempotent=["pay"], handle_tool_errors=False), None, request(PAY)
    )
    outer = StateGraph(threadlog.MessagesState)
    outer.add_node("agent", inner)
    outer.add_edge(START, "agent")
    outer.add_edge("agent", END)
    graph = outer.compile(checkpointer=saver)
    cfg = _cfg("subgraph")
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg)
    fx.die = False
    out = graph.invoke({"messages": [HumanMessage("and?", id="h-2")]}, cfg)
    assert len(fx.keys) == 2 and len(set(fx.keys)) == 1
    assert fx.keys[0] == call_key("subgraph", "agent|tools", "c-pay")
    assert by_call(out["messages"])["c-pay"].content == f"charged 5 ({fx.keys[0]})"
