"""Open tool calls inside a subgraph: recovered and repaired like at the top level.

A parent graph runs the weather agent as a node (a compiled subgraph sharing the
`messages` log); the agent's steps are stored in its own namespace (`checkpoint_ns` =
"agent:<task id>"). In the subgraph, Beijing's call finishes and is stored; Shanghai's
interrupts or raises. Then the user either resumes (`Command(resume=...)`, `invoke(None)`)
or sends a new message instead. A new message gives the parent a new step, so the
subgraph starts again in a *new* namespace: without `threadlog.checkpoint.finished_subgraphs`
the call, Beijing's stored result and everything else the first run stored were dropped.

Each case: SQLite and Postgres through `threadlog.checkpointer(url)`; async too.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

import threadlog
from tests.helpers.durability import (
    check_thread,
    read_effects,
    record_effect,
    user,
)
from tests.helpers.recovery import (
    CONFIG,
    INSTEAD,
    STOPS,
    SUB_STOPS,
    TWO_CITIES,
    afirst_turn,
    assert_recovered,
    first_turn,
    parent,
    parent_with,
    subgraph_results,
)
from threadlog.log.pairing import OUTCOME_UNKNOWN


@pytest.mark.parametrize("stop", list(SUB_STOPS))
def test_new_message_after_a_subgraph_stopped_mid_step_keeps_its_stored_work(
    backend: str, tmp_path: Path, stop: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    with threadlog.checkpointer(backend) as saver:
        graph = parent(saver, effects, SUB_STOPS[stop][0])
        first_turn(graph, stop)
        saved = subgraph_results(graph)
        # The parent shows the subgraph's step still to run; its work is the subgraph's.
        shown = graph.get_state(CONFIG)
        assert shown.next == ("agent",)
        assert [m.id for m in shown.values["messages"]] == ["u1"]
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        head = check_thread(graph, CONFIG, repaired_input_ok=True, repairing_nodes=("agent",))
    assert [m.id for m in head] == [m.id for m in out["messages"]]


async def test_new_message_after_a_subgraph_interrupt_keeps_its_stored_work_async(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    async with threadlog.acheckpointer(backend) as saver:
        graph = parent(saver, effects, STOPS["interrupt"][0])
        await afirst_turn(graph, "interrupt")
        snap = await graph.aget_state(CONFIG, subgraphs=True)
        saved = {
            m.tool_call_id: m
            for t in snap.tasks[0].state.tasks
            for m in (t.result or {}).get("messages", [])
            if isinstance(m, ToolMessage)
        }
        out = await graph.ainvoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        state = await graph.aget_state(CONFIG)
    assert [m.id for m in state.values["messages"]] == [m.id for m in out["messages"]]


@pytest.mark.parametrize("stop", list(SUB_STOPS))
def test_resuming_a_stopped_subgraph_runs_only_the_unfinished_call(
    backend: str, tmp_path: Path, stop: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    calls = {"n": 0}

    def once(saver: BaseCheckpointSaver[Any]) -> Any:
        inner = SUB_STOPS[stop][0](saver)

        def hook(city: str, call_id: str) -> None:
            if city == "Shanghai":
                calls["n"] += 1
                if calls["n"] == 1:
                    inner(city, call_id)

        return hook

    with threadlog.checkpointer(backend) as saver:
        graph = parent(saver, effects, once)
        first_turn(graph, stop)
        resume = Command(resume="yes") if stop == "interrupt" else None
        out = graph.invoke(resume, CONFIG)
        head = check_thread(graph, CONFIG)
    msgs = out["messages"]
    assert [m.id for m in head] == [m.id for m in msgs]
    results = [m for m in msgs if isinstance(m, ToolMessage)]
    assert [(r.status, r.content) for r in results] == [
        ("success", "Beijing: sunny, 21°C"), ("success", "Shanghai: sunny, 21°C")]
    assert isinstance(msgs[-1], AIMessage) and not msgs[-1].tool_calls
    # Each tool's side effect happened once: Beijing's stored result was not re-run.
    assert sorted(Counter(read_effects(effects)).values()) == [1, 1]


async def test_new_message_after_a_cancelled_run_inside_a_subgraph_keeps_its_stored_work(
    backend: str, tmp_path: Path
) -> None:
    """The run is cancelled (`asyncio` task cancel, as a server does when a client goes
    away) while Shanghai's call hangs and Beijing's result is stored; then a new message."""
    import asyncio

    effects = tmp_path / "effects.jsonl"

    @tool
    async def get_weather(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Today's weather for a city."""
        if city == "Shanghai":
            await asyncio.sleep(3600)  # hangs until the run is cancelled
        record_effect(effects, tool_call_id, city)
        return f"{city}: sunny, 21°C"

    async with threadlog.acheckpointer(backend) as saver:
        graph = parent_with(saver, get_weather)
        run = asyncio.create_task(graph.ainvoke({"messages": [user(TWO_CITIES, "u1")]}, CONFIG))
        saved: dict[str, ToolMessage] = {}
        for _ in range(3000):
            snap = await graph.aget_state(CONFIG, subgraphs=True)
            sub = snap.tasks[0].state if snap.tasks else None
            if sub is not None and sub.tasks:
                saved = {
                    m.tool_call_id: m
                    for t in sub.tasks
                    for m in (t.result or {}).get("messages", [])
                    if isinstance(m, ToolMessage)
                }
            if saved:
                break
            await asyncio.sleep(0.01)
        assert saved, "Beijing's result was never stored"
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        out = await graph.ainvoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
    # Shanghai's tool had started (its marker is in the subgraph's namespace) and never
    # reported back: its outcome is unknown, as at the root (issue 24 item 4).
    assert_recovered(out["messages"], saved, effects, OUTCOME_UNKNOWN)
