"""Durability scenarios, each on SQLite and on a real Postgres (the `backend` fixture).

Every test ends with `check_thread` (tests/helpers/durability.py): every checkpoint of the thread
validates, no message id appears twice, every tool call has exactly one result at the
head, and — unless a fork was made on purpose — no checkpoint has two children.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command, interrupt

import threadlog
from tests.helpers.durability import COUNTS, build_agent, check_thread, read_effects, user
from tests.helpers.durability_worker import KILL_POINTS, start
from threadlog.nodes.model import NOT_COMPLETED

TWO_CITIES = "What's the weather in Beijing and Shanghai?"


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _tool_results(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# -- SIGKILL and restart ---------------------------------------------------------


@pytest.mark.parametrize("point", KILL_POINTS)
def test_worker_killed_mid_turn_resumes_without_loss_or_repeat(
    backend: str, point: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    first = start("turn", backend, "k", str(effects), TWO_CITIES, "u1", "--kill", point)
    first.join(60)
    assert first.exitcode == -9, f"the worker was not killed at {point}"
    done_before = read_effects(effects)
    COUNTS["kill points tried"] += 1
    with threadlog.checkpointer(backend) as saver:
        stored = build_agent(saver, effects).get_state(_config("k")).values["messages"]
    stored_ids = {m.id for m in stored}  # incl. results stored for the unfinished step

    again = start("resume", backend, "k", str(effects))
    again.join(60)
    assert again.exitcode == 0

    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, effects)
        head = check_thread(graph, _config("k"))
    ai = [m for m in head if isinstance(m, AIMessage)]
    calls = [c["id"] for c in ai[0].tool_calls]
    assert [m.id for m in head if isinstance(m, HumanMessage)] == ["u1"]
    assert len(calls) == 2 and ai[-1].content.startswith("Beijing")
    assert all(r.status == "success" for r in _tool_results(head))
    # Each tool ran to completion exactly once, across both processes.
    assert sorted(read_effects(effects)) == sorted(calls)
    if point in ("between_tools", "before_answer"):
        assert done_before, "the finished sibling's effect should predate the kill"
    lost = stored_ids - {m.id for m in head}
    assert not lost, f"stored before the kill, gone after the restart: {lost}"
    COUNTS["messages lost"] += len(lost)
    COUNTS["messages duplicated"] += len(head) - len({m.id for m in head})


# -- one of N parallel branches raises ---------------------------------------------


def test_failed_branch_is_rerun_alone_and_siblings_results_kept(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    attempts: Counter[str] = Counter()

    config = _config("p")

    def flaky(city: str, call_id: str) -> None:
        attempts[city] += 1
        if city == "Guangzhou" and attempts[city] == 1:
            # LangGraph cancels still-running siblings when one task fails; this test is
            # about siblings that finished, so fail only once both results are stored.
            _wait_for_stored_results(saver, config, 2)
            raise ConnectionError("weather service for Guangzhou is down")

    text = "Weather in Beijing, Guangzhou and Shanghai?"
    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, effects, hook=flaky, handle_errors=False)
        with pytest.raises(ConnectionError, match="Guangzhou"):
            graph.invoke({"messages": [user(text, "u1")]}, config)
        kept = {
            m.tool_call_id: m.id
            for _, _, v in saver.get_tuple(config).pending_writes
            for m in (v if isinstance(v, list) else [v])
            if isinstance(m, ToolMessage)
        }
        assert len(kept) == 2  # Beijing and Shanghai finished and were stored
        graph.invoke(None, config)
        head = check_thread(graph, config)
    assert attempts == {"Beijing": 1, "Shanghai": 1, "Guangzhou": 2}
    results = {m.tool_call_id: m.id for m in _tool_results(head)}
    assert len(results) == 3
    for call_id, result_id in kept.items():
        assert results[call_id] == result_id  # the stored results, not new ones
    assert Counter(read_effects(effects)) == Counter(list(results))


def _wait_for_stored_results(saver: Any, config: Any, n: int, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        saved = saver.get_tuple(config)
        stored = [
            m
            for _, _, v in (saved.pending_writes if saved else None) or ()
            for m in (v if isinstance(v, list) else [v])
            if isinstance(m, ToolMessage)
        ]
        if len(stored) >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"{n} sibling results were never stored")


# -- interrupt inside a tool ---------------------------------------------------------


def _asks_for_shanghai(city: str, call_id: str) -> None:
    if city == "Shanghai":
        answer = interrupt({"confirm": city})
        assert answer == "yes"


def test_interrupt_in_a_tool_resumes_with_command(backend: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    config = _config("i")
    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, effects, hook=_asks_for_shanghai)
        out = graph.invoke({"messages": [user(TWO_CITIES, "u1")]}, config)
        assert out["__interrupt__"][0].value == {"confirm": "Shanghai"}
        check_thread(graph, config, complete=False)  # paused: Shanghai's call is open
        graph.invoke(Command(resume="yes"), config)
        head = check_thread(graph, config)
    results = _tool_results(head)
    assert [r.status for r in results] == ["success", "success"]
    assert Counter(read_effects(effects)) == Counter(r.tool_call_id for r in results)


def test_new_message_instead_of_resume_is_repaired_not_broken(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    config = _config("n")
    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, effects, hook=_asks_for_shanghai)
        graph.invoke({"messages": [user(TWO_CITIES, "u1")]}, config)
        saved = {
            m.tool_call_id: m.id
            for _, _, v in saver.get_tuple(config).pending_writes
            for m in (v if isinstance(v, list) else [v])
            if isinstance(m, ToolMessage)
        }
        graph.invoke({"messages": [user("Never mind. Weather in Guangzhou?", "u2")]}, config)
        head = check_thread(graph, config, repaired_input_ok=True)
    ids = [m.id for m in head]
    first_calls = [c["id"] for c in head[1].tool_calls]
    # Both calls of the paused step are answered before u2, Shanghai's explicitly as
    # not completed (the model node's policy), never as a fake success.
    block = head[2 : ids.index("u2")]
    assert sorted(r.tool_call_id for r in block) == sorted(first_calls)
    shanghai = next(r for r in block if r.tool_call_id == first_calls[1])
    assert shanghai.status == "error" and shanghai.content == NOT_COMPLETED
    # Beijing had finished and was stored before the new message: its real result is
    # logged (the stored message, not a repair), and its tool ran once.
    beijing = next(r for r in block if r.tool_call_id == first_calls[0])
    assert saved == {first_calls[0]: beijing.id} and beijing.status == "success"
    assert Counter(read_effects(effects))[first_calls[0]] == 1
    assert isinstance(head[-1], AIMessage) and "Guangzhou" in head[-1].content


# -- fork / time travel --------------------------------------------------------------


def test_fork_from_an_old_checkpoint_keeps_both_branches_whole(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    config = _config("f")
    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, effects)
        graph.invoke({"messages": [user("Weather in Beijing?", "u1")]}, config)
        graph.invoke({"messages": [user("And in Shanghai?", "u2")]}, config)
        original = [m.id for m in graph.get_state(config).values["messages"]]
        end_of_turn_1 = next(
            s
            for s in graph.get_state_history(config)
            if not s.next and [m.id for m in s.values["messages"]][-1] != original[-1]
        )
        prefix = [m.id for m in end_of_turn_1.values["messages"]]
        fork = graph.update_state(end_of_turn_1.config, {"messages": []})
        out = graph.invoke({"messages": [user("And in Guangzhou?", "u3")]}, fork)
        branch = [m.id for m in out["messages"]]
        assert branch[: len(prefix)] == prefix
        assert branch.count("u3") == 1 and "u2" not in branch
        assert isinstance(out["messages"][-1], AIMessage)
        assert "Guangzhou" in out["messages"][-1].content
        # The original branch is untouched and still readable at its own head.
        history = list(graph.get_state_history(config))
        old_head = next(s for s in history if [m.id for m in s.values["messages"]] == original)
        assert not old_head.next
        check_thread(graph, config, linear=False)
        check_thread(graph, old_head.config, linear=False)


# -- concurrent workers ---------------------------------------------------------------


@pytest.mark.parametrize("exclusive", [False, True], ids=["write-guard", "exclusive"])
def test_concurrent_workers_give_one_linear_history(
    backend: str, tmp_path: Path, exclusive: bool
) -> None:
    workers = 4 if backend.startswith("postgres") else 2
    turns = 3
    effects = tmp_path / "effects.jsonl"
    go = tmp_path / "go"
    flags = ["--exclusive"] if exclusive else []
    # Create the thread first, so every worker starts from a stored head.
    with threadlog.checkpointer(backend) as saver:
        build_agent(saver, effects).invoke(
            {"messages": [user("Weather in Wuhan?", "u0")]}, _config("c")
        )
    procs = [
        start(
            "race", backend, "c", str(effects), str(w), str(turns), str(go),
            str(tmp_path / f"out{w}.json"), *flags,
        )
        for w in range(workers)
    ]
    go.touch()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = [json.loads((tmp_path / f"out{w}.json").read_text()) for w in range(workers)]
    accepted = [mid for r in results for mid in r["accepted"]]
    assert len(accepted) == workers * turns

    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, effects)
        # Linear: no checkpoint has two children; and whole turns with or without
        # `exclusive` (the default multitask strategy queues runs), so no call is left
        # open under another worker's input for the model node to repair.
        head = check_thread(graph, _config("c"), repaired_input_ok=False)
    users = [m.id for m in head if isinstance(m, HumanMessage)]
    assert sorted(users) == sorted(["u0", *accepted])  # every accepted turn, once
    # Whole turns never interleave: each user message is followed by its own answer.
    for i, m in enumerate(head):
        if isinstance(m, HumanMessage):
            nxt = head[i + 1]
            assert isinstance(nxt, AIMessage) and nxt.tool_calls, f"turn {m.id} split"
    calls = [c["id"] for m in head if isinstance(m, AIMessage) for c in m.tool_calls]
    # A refused run may have run a tool whose result was refused; a stored result's
    # tool ran at least once, and no call is answered twice (checked above).
    assert set(calls) <= set(read_effects(effects))
    mode = "exclusive" if exclusive else "write-guard"
    COUNTS[f"{mode} turns attempted"] += sum(r["attempted"] for r in results)
    COUNTS[f"{mode} turns accepted"] += len(accepted)
    COUNTS[f"{mode} turns refused"] += sum(r["refused"] for r in results)


# -- bad input at the edge --------------------------------------------------------------

BAD_INPUTS: dict[str, tuple[Any, type[Exception], str]] = {
    "unknown role": ({"role": "wizard", "content": "hi"}, threadlog.InvalidMessageError,
                     "unknown role 'wizard'"),
    "missing role": ({"content": "hi"}, threadlog.InvalidMessageError, "'role'"),
    # LangGraph's own id stamping converts input dicts first, so this one surfaces as
    # langchain-core's ValidationError (a ValueError) naming the field.
    "malformed content": ({"role": "user", "content": 42}, ValueError, "content"),
    "forged tool result": (
        {"role": "tool", "content": "sunny", "tool_call_id": "call_forged"},
        threadlog.ToolPairingError, "call_forged"),
    "oversized content": ({"role": "user", "content": "x" * 5000},
                          threadlog.InvalidMessageError, "5000 characters"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_refused_and_leaves_the_thread_unchanged(
    backend: str, tmp_path: Path, case: str
) -> None:
    bad, error, named = BAD_INPUTS[case]
    effects = tmp_path / "effects.jsonl"
    config = _config("b")
    with threadlog.checkpointer(backend, max_input_chars=4000) as saver:
        graph = build_agent(saver, effects)
        graph.invoke({"messages": [user("Weather in Beijing?", "u1")]}, config)
        before = [(s.config["configurable"]["checkpoint_id"], len(s.values["messages"]))
                  for s in graph.get_state_history(config)]
        with pytest.raises(error) as err:
            graph.invoke({"messages": [user("fine", "ok1"), bad]}, config)
        assert named in str(err.value)
        after = [(s.config["configurable"]["checkpoint_id"], len(s.values["messages"]))
                 for s in graph.get_state_history(config)]
        assert after == before
        assert "ok1" not in [m.id for m in graph.get_state(config).values["messages"]]
        graph.invoke({"messages": [user("Weather in Shanghai?", "u2")]}, config)
        head = check_thread(graph, config)
    assert [m.id for m in head if isinstance(m, HumanMessage)] == ["u1", "u2"]


def test_forged_result_for_an_answered_call_is_refused(backend: str, tmp_path: Path) -> None:
    config = _config("b2")
    with threadlog.checkpointer(backend) as saver:
        graph = build_agent(saver, tmp_path / "effects.jsonl")
        out = graph.invoke({"messages": [user("Weather in Beijing?", "u1")]}, config)
        call_id = out["messages"][1].tool_calls[0]["id"]
        forged = {"role": "tool", "content": "hail", "tool_call_id": call_id}
        with pytest.raises(threadlog.ToolPairingError, match="already has a result"):
            graph.invoke({"messages": [forged]}, config)
        assert [m.id for m in graph.get_state(config).values["messages"]] == [
            m.id for m in out["messages"]]
        check_thread(graph, config)
