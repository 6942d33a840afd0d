"""A new user message on an interrupted or failed parallel tool step keeps the saved results.

The step runs one task per call (`send_tool_calls`). Beijing's call finishes and is
stored as a pending write; Shanghai's call interrupts or raises. The user then sends a
new message instead of resuming: LangGraph drops the step's pending writes, and the
model node must log Beijing's *stored* result (same id and content, the tool not run
again) and answer only Shanghai's call: "not completed" when its tool reported back (it
interrupted or raised), "outcome unknown" when the worker was killed inside it.

Each scenario runs on SQLite and Postgres through `threadlog.checkpointer(url)`, sync
and async, and on plain LangGraph savers.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

import threadlog
from tests.helpers.durability import (
    build_agent,
    check_thread,
    read_effects,
    user,
)
from tests.helpers.durability_worker import start
from tests.helpers.recovery import (
    CONFIG,
    INSTEAD,
    STOPS,
    TWO_CITIES,
    afirst_turn,
    agent,
    ask_about_shanghai,
    assert_recovered,
    first_turn,
    stored_results,
)
from threadlog.checkpoint.recover import arecover_results, recover_results
from threadlog.log.pairing import OUTCOME_UNKNOWN

# -- threadlog.checkpointer on SQLite and Postgres ----------------------------------------


@pytest.mark.parametrize("stop", list(STOPS))
def test_new_message_after_a_stopped_step_logs_the_saved_sibling_result(
    backend: str, tmp_path: Path, stop: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    with threadlog.checkpointer(backend) as saver:
        graph = agent(saver, effects, STOPS[stop][0])
        first_turn(graph, stop)
        saved = stored_results(saver)
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        head = check_thread(graph, CONFIG, repaired_input_ok=True)
    assert [m.id for m in head] == [m.id for m in out["messages"]]


@pytest.mark.parametrize("stop", list(STOPS))
async def test_new_message_after_a_stopped_step_logs_the_saved_result_async(
    backend: str, tmp_path: Path, stop: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    async with threadlog.acheckpointer(backend) as saver:
        graph = agent(saver, effects, STOPS[stop][0])
        await afirst_turn(graph, stop)
        saved_tuple = await saver.aget_tuple(CONFIG)
        assert saved_tuple is not None
        saved = {
            m.tool_call_id: m
            for _, _, v in saved_tuple.pending_writes or ()
            for m in (v if isinstance(v, list) else [v])
            if isinstance(m, ToolMessage)
        }
        out = await graph.ainvoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        state = await graph.aget_state(CONFIG)
    assert [m.id for m in state.values["messages"]] == [m.id for m in out["messages"]]


def test_a_later_turn_after_recovery_keeps_one_linear_valid_history(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with threadlog.checkpointer(backend) as saver:
        graph = agent(saver, effects, ask_about_shanghai)
        first_turn(graph, "interrupt")
        graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        graph.invoke({"messages": [user("And in Wuhan?", "u3")]}, CONFIG)
        head = check_thread(graph, CONFIG, repaired_input_ok=True)
    results = [m for m in head if isinstance(m, ToolMessage)]
    assert [r.status for r in results] == ["success", "error", "success", "success"]
    assert Counter(read_effects(effects)) == Counter(
        r.tool_call_id for r in results if r.status == "success")


def test_new_message_after_a_worker_killed_mid_step_logs_the_saved_result(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    # SIGKILLed inside Shanghai's tool, once Beijing's result is stored: its tool had
    # started, so its outcome is unknown (it is not "not completed").
    worker = start("turn", backend, "t", str(effects), TWO_CITIES, "u1", "--kill", "between_tools")
    worker.join(60)
    assert worker.exitcode == -9, "the worker was not killed"
    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, effects)
        saved = stored_results(saver)
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects, OUTCOME_UNKNOWN)
        check_thread(graph, CONFIG, repaired_input_ok=True)


# -- plain LangGraph savers ----------------------------------------------------------------


@pytest.mark.parametrize("stop", list(STOPS))
def test_recovery_works_with_a_plain_sqlite_saver(tmp_path: Path, stop: str) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    effects = tmp_path / "effects.jsonl"
    conn = sqlite3.connect(tmp_path / "plain.sqlite", check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        graph = agent(saver, effects, STOPS[stop][0])
        first_turn(graph, stop)
        saved = stored_results(saver)
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
        assert_recovered(out["messages"], saved, effects)
        check_thread(graph, CONFIG, repaired_input_ok=True)
    finally:
        conn.close()


async def test_recovery_works_with_a_plain_async_sqlite_saver(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    effects = tmp_path / "effects.jsonl"
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "plain.sqlite")) as saver:
        graph = agent(saver, effects, ask_about_shanghai)
        await afirst_turn(graph, "interrupt")
        saved_tuple = await saver.aget_tuple(CONFIG)
        assert saved_tuple is not None
        saved = {
            m.tool_call_id: m
            for _, _, v in saved_tuple.pending_writes or ()
            for m in (v if isinstance(v, list) else [v])
            if isinstance(m, ToolMessage)
        }
        out = await graph.ainvoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
    assert_recovered(out["messages"], saved, effects)


def test_recovery_works_behind_the_history_cache(tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    url = f"sqlite:///{tmp_path / 'cached.sqlite'}"
    with threadlog.checkpointer(url, wrap=threadlog.with_history_cache) as saver:
        graph = agent(saver, effects, ask_about_shanghai)
        first_turn(graph, "interrupt")
        saved = stored_results(saver)
        out = graph.invoke({"messages": [user(INSTEAD, "u2")]}, CONFIG)
    assert_recovered(out["messages"], saved, effects)


# -- the lookup itself ---------------------------------------------------------------------


async def test_lookup_finds_only_the_asked_calls_on_this_thread(tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    url = f"sqlite:///{tmp_path / 'lookup.sqlite'}"
    with threadlog.checkpointer(url) as saver:
        graph = agent(saver, effects, ask_about_shanghai)
        first_turn(graph, "interrupt")
        saved = stored_results(saver)
        request = graph.get_state(CONFIG).values["messages"][1]
        beijing, shanghai = (c["id"] for c in request.tool_calls)
        found = recover_results(saver, CONFIG, {beijing, shanghai}, requests={request.id})
        assert list(found) == [beijing] and found[beijing].id == saved[beijing].id
        assert recover_results(saver, CONFIG, {shanghai}, requests={request.id}) == {}
        other = {"configurable": {"thread_id": "another"}}
        assert recover_results(saver, other, {beijing}) == {}
        # A walk too short to reach the tool step's checkpoint finds nothing.
        graph.update_state(CONFIG, {"messages": []})
        graph.update_state(CONFIG, {"messages": []})
        assert recover_results(saver, CONFIG, {beijing}, max_walk=2) == {}
        assert recover_results(saver, CONFIG, {beijing}, max_walk=3)[beijing].id == (
            saved[beijing].id)
    async with threadlog.acheckpointer(url) as asaver:
        found = await arecover_results(asaver, CONFIG, {beijing}, requests={request.id})
    assert found[beijing].id == saved[beijing].id
