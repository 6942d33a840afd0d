"""Open tool calls two subgraph levels down: new input keeps what they stored.

The parent graph runs `team` (a compiled subgraph) whose only node is `agent`, the
weather agent as a compiled sub-subgraph; all three share the `messages` log. The
agent's steps are stored in namespace "team:<task>|agent:<task>". Beijing's call
finishes and is stored there; Shanghai's interrupts or raises. A new user message on the
parent thread then keeps Beijing's stored result (same id, tool not re-run), answers
Shanghai's open call once with "not completed", and loses or duplicates nothing.

SQLite and Postgres (the `backend` fixture), through `threadlog.checkpointer(url)`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

import threadlog
from tests.helpers.durability import check_thread, user
from tests.helpers.recovery import (
    CONFIG,
    INSTEAD,
    SUB_STOPS,
    afirst_turn,
    assert_recovered,
    first_turn,
    nested,
    nested_results,
)


@pytest.mark.parametrize("stop", list(SUB_STOPS))
def test_new_message_after_a_nested_subgraph_stopped_mid_step_keeps_its_stored_work(
    backend: str, tmp_path: Path, stop: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    with threadlog.checkpointer(backend) as saver:
        graph = nested(saver, effects, SUB_STOPS[stop][0])
        first_turn(graph, stop)
        saved = nested_results(graph)
        assert len(saved) == 1, "Beijing's result is stored two levels down"
        shown = graph.get_state(CONFIG)
        assert shown.next == ("team",)
        assert [m.id for m in shown.values["messages"]] == ["u1"]
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        head = check_thread(graph, CONFIG, repaired_input_ok=True, repairing_nodes=("team",))
    assert [m.id for m in head] == [m.id for m in out["messages"]]


async def test_new_message_after_a_nested_subgraph_interrupt_keeps_its_stored_work_async(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    async with threadlog.acheckpointer(backend) as saver:
        graph = nested(saver, effects, SUB_STOPS["interrupt"][0])
        await afirst_turn(graph, "interrupt")
        snap = await graph.aget_state(CONFIG, subgraphs=True)
        agent = snap.tasks[0].state.tasks[0].state
        saved = {
            m.tool_call_id: m
            for t in agent.tasks
            for m in (t.result or {}).get("messages", [])
            if isinstance(m, ToolMessage)
        }
        assert len(saved) == 1
        out = await graph.ainvoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        state = await graph.aget_state(CONFIG)
    assert [m.id for m in state.values["messages"]] == [m.id for m in out["messages"]]
