"""Receipts of idempotent tools on SQLite and Postgres: stored in the saver's database as
the tool returns, served to a resume, and following the thread's lifecycle — a copy
serves them, `prune("keep_latest")` keeps the head's, `prune("delete")` and a rollback
(`delete_for_runs`) remove them with their checkpoints.

A step "dies" as in tests/nodes/test_idempotent_tools.py: a sibling raises
`KeyboardInterrupt` after the marked tool returned, so the step's own writes are never
stored and only the receipt says the tool ran.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

import threadlog
from tests.helpers.tools import by_call, call, request
from threadlog import ToolNode
from threadlog.checkpoint.receipts import RECEIPT_CHANNEL

PAY = call("pay", {"amount": 7}, "c-pay")
BOOM = call("boom", {}, "c-boom")


class _World:
    def __init__(self) -> None:
        self.charges: list[str] = []
        self.die = True


def _graph(world: _World, saver: Any) -> Any:
    @tool
    def pay(amount: int) -> str:
        """Charge an amount."""
        world.charges.append(threadlog.idempotency_key())
        return f"charge #{len(world.charges)} of {amount}"

    @tool
    def boom() -> str:
        """Dies with the process on its first run."""
        if world.die:
            raise KeyboardInterrupt("killed")
        return "fine"

    def model(state: threadlog.MessagesState) -> dict[str, Any]:
        if any(isinstance(m, AIMessage) for m in state["messages"]):
            return {"messages": [AIMessage("done", id=f"ai-{len(state['messages'])}")]}
        return {"messages": [request(PAY, BOOM)]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_node(
        "tools",
        ToolNode([pay, boom], idempotent=["pay"], max_concurrency=1, handle_tool_errors=False),
    )
    g.add_edge(START, "model")
    g.add_conditional_edges(
        "model",
        lambda s: "tools" if getattr(s["messages"][-1], "tool_calls", None) else END,
        ["tools", END],
    )
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


def _die(graph: Any, thread: str, **kw: Any) -> None:
    cfg = {"configurable": {"thread_id": thread}, **kw}
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg)


def _receipts(saver: Any, thread: str) -> list[Any]:
    found = []
    for tup in saver.list({"configurable": {"thread_id": thread}}):
        found += [w for w in tup.pending_writes or () if w[1] == RECEIPT_CHANNEL]
    return found


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_receipt_is_stored_in_the_savers_database_and_served_to_a_resume(
    backend: str, durability: str
) -> None:
    world = _World()
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(world, saver)
        cfg = {"configurable": {"thread_id": "t"}, "durability": durability}
        with pytest.raises(KeyboardInterrupt):
            graph.invoke({"messages": [HumanMessage("go", id="h-1")]}, cfg, durability=durability)
    with threadlog.checkpointer(backend) as saver:  # a fresh process's saver
        (receipt,) = _receipts(saver, "t")
        assert receipt[2]["call_id"] == "c-pay" and receipt[2]["key"] == world.charges[0]
        world.die = False
        out = _graph(world, saver).invoke(None, {"configurable": {"thread_id": "t"}})
    assert world.charges == [world.charges[0]]
    assert by_call(out["messages"])["c-pay"].content == "charge #1 of 7"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_copied_thread_serves_the_receipts_it_was_copied_with(backend: str) -> None:
    world = _World()
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(world, saver)
        _die(graph, "source")
        saver.copy_thread("source", "copy")
        assert len(_receipts(saver, "copy")) == 1
        world.die = False
        out = graph.invoke(None, {"configurable": {"thread_id": "copy"}})
        assert by_call(out["messages"])["c-pay"].content == "charge #1 of 7"
        out = graph.invoke(None, {"configurable": {"thread_id": "source"}})
        assert by_call(out["messages"])["c-pay"].content == "charge #1 of 7"
    assert len(world.charges) == 1  # neither the copy nor the source charged again


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_prune_keeps_the_heads_receipts_and_delete_removes_them(backend: str) -> None:
    world = _World()
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(world, saver)
        _die(graph, "kept")
        _die(graph, "gone")
        saver.prune(["kept"], strategy="keep_latest")
        assert len(_receipts(saver, "kept")) == 1
        saver.prune(["gone"], strategy="delete")
        assert _receipts(saver, "gone") == []
        world.die = False
        out = graph.invoke(None, {"configurable": {"thread_id": "kept"}})
    assert by_call(out["messages"])["c-pay"].content == "charge #1 of 7"
    assert len(world.charges) == 2  # one per thread, none after the prune


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_rollback_removes_the_receipts_of_the_run_it_removes(backend: str) -> None:
    world = _World()
    run_id = str(uuid.uuid4())
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(world, saver)
        _die(graph, "t", metadata={"run_id": run_id})  # as LangGraph Server stamps runs
        assert len(_receipts(saver, "t")) == 1
        saver.delete_for_runs([run_id])
        assert _receipts(saver, "t") == []


def test_on_the_in_memory_saver_receipts_are_served_copied_kept_and_removed_with_the_thread() -> (
    None
):
    world = _World()
    run_id = str(uuid.uuid4())
    with threadlog.checkpointer("memory://") as saver:
        graph = _graph(world, saver)
        for thread in ("t", "kept", "gone"):
            _die(graph, thread)
        _die(graph, "rolled", metadata={"run_id": run_id})
        assert all(len(_receipts(saver, t)) == 1 for t in ("t", "kept", "gone", "rolled"))
        saver.copy_thread("t", "copy")
        saver.prune(["kept"], strategy="keep_latest")
        saver.prune(["gone"], strategy="delete")
        saver.delete_for_runs([run_id])
        assert len(_receipts(saver, "copy")) == 1 and len(_receipts(saver, "kept")) == 1
        assert _receipts(saver, "gone") == [] and _receipts(saver, "rolled") == []
        world.die = False
        for thread in ("t", "copy", "kept"):
            out = graph.invoke(None, {"configurable": {"thread_id": thread}})
            assert by_call(out["messages"])["c-pay"].content.startswith("charge #")
    # One charge per thread that died (t, kept, gone, rolled); resumes and the copy: none.
    assert len(world.charges) == 4


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("strategy", ["--keep-latest", "--older-than"])
def test_prune_archive_keeps_the_receipts_and_a_resume_from_the_archive_serves_them(
    backend: str, strategy: str, tmp_path: Any
) -> None:
    from threadlog.cli import main

    world = _World()
    with threadlog.checkpointer(backend) as saver:
        _die(_graph(world, saver), "t")
        (receipt,) = _receipts(saver, "t")
    archive = tmp_path / "archive.sqlite"
    args = ["--keep-latest"] if strategy == "--keep-latest" else ["--older-than", "1s"]
    if strategy == "--older-than":
        time.sleep(1.1)
    assert main(["prune", "--db", backend, *args, "--thread", "t", "--archive", str(archive)]) == 0
    world.die = False
    # The archive holds the thread whole, its receipt with it; the database keeps the
    # head's receipt (--keep-latest) or loses it with the thread (--older-than).
    with threadlog.checkpointer(f"sqlite:///{archive}") as saver:
        assert [w[2] for w in _receipts(saver, "t")] == [receipt[2]]
        out = _graph(world, saver).invoke(None, {"configurable": {"thread_id": "t"}})
        assert by_call(out["messages"])["c-pay"].content == "charge #1 of 7"
    with threadlog.checkpointer(backend) as saver:
        left = _receipts(saver, "t")
        if strategy == "--keep-latest":
            assert [w[2] for w in left] == [receipt[2]]
            out = _graph(world, saver).invoke(None, {"configurable": {"thread_id": "t"}})
            assert by_call(out["messages"])["c-pay"].content == "charge #1 of 7"
        else:
            assert left == [] and not list(saver.list({"configurable": {"thread_id": "t"}}))
    assert len(world.charges) == 1  # neither the archive's resume nor the kept head's charged
