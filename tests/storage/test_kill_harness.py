"""Randomized SIGKILL (scripts/kill_harness.py) as a short seeded run, on SQLite and Postgres.

The long run is the script (`--trials 200`); here 15 seeded trials per backend, plus the
exact kill points of issue 15 item 1: the process dies after a step's writes are stored
and before its checkpoint, and the next user turn must keep what was stored. The same
short run under LangGraph's default durability ("async") checks what docs/durability.md
promises there (issue 24 item 5).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from scripts.kill_harness import (
    DURABILITIES,
    Outcome,
    Plan,
    _read,
    _slots,
    main,
    run_trial,
    run_trials,
    turn_writes,
)

SEED = 15


def test_random_kills_lose_duplicate_and_repeat_nothing_and_threads_stay_readable(
    backend: str, tmp_path: Path
) -> None:
    summary = run_trials(backend, "test", trials=15, seed=SEED, root=tmp_path)
    assert summary.failures == []
    # Counted on write kill points only: a timer's lands or not by the machine's speed.
    assert summary.killed_by_kind["write"] >= 10, "most trials must actually kill the worker"
    assert summary.killed_by_kind["write"] == _landing(15), "every write kill point lands"
    assert summary.stored_messages > 0
    assert (
        summary.lost,
        summary.duplicated,
        summary.repeated,
        summary.shown_finished,
        summary.unreadable,
    ) == (0, 0, 0, 0, 0)


def _landing(trials: int, app: str = "agent", durability: str = "sync") -> int:
    """Write kill points among the seeded plans that are within their turn's writes: each
    kills the worker (a write point is exact, unlike a timer)."""
    plans = [Plan.draw(SEED, t, app=app, durability=durability) for t in range(trials)]
    return sum(p.kind == "write" and p.slot <= turn_writes(p) for p in plans)


# A turn with one city and one task per step makes these saver writes, in order:
# 1 input checkpoint, 2 `__start__` writes (the user message), 3 its checkpoint,
# 4 the model's writes (the call), 5 checkpoint, 6 the tool node's "started" marker,
# 7 the tool's writes, 8 checkpoint, 9 the model's writes (the answer), 10 checkpoint.
BASE = Plan(
    trial=0,  # QUESTIONS[1] on the killed turn: two cities; trial 2 -> "How about Chengdu?"
    seed=SEED,
    prior_turns=1,
    branches=False,
    kind="write",
    slot=2,
    when="after",
    delay=0.0,
    resume="input",
)


@pytest.mark.parametrize(
    ("slot", "what"),
    [(1, "input stored, not yet run"), (2, "user message"), (4, "tool call"), (9, "answer")],
)
@pytest.mark.parametrize("resume", ["input", "none"])
def test_a_step_stored_without_its_checkpoint_survives_the_next_turn(
    backend: str, tmp_path: Path, slot: int, what: str, resume: str
) -> None:
    plan = replace(BASE, trial=1, slot=slot, resume=resume)  # "How about Chengdu?" next
    out = run_trial(backend, plan, tmp_path)
    assert out.killed, f"the worker was not killed after write {slot} ({what})"
    assert out.stored > 0
    assert out.lost == [], f"{what}: stored before the kill, gone after the next turn"
    assert not out.shown_finished, f"{what}: get_state showed the unfinished step as finished"
    assert (out.duplicated, out.repeated, out.unreadable) == ([], [], [])


def test_a_torn_postgres_session_mid_turn_loses_and_repeats_nothing(
    pg_backend: str, tmp_path: Path
) -> None:
    # Where the cut lands depends on the machine's speed (a timer after the turn starts):
    # on a loaded machine a batch can finish every turn first. Every trial's invariants are
    # checked; more seeded batches run until at least one session was cut mid-turn.
    killed = 0
    for batch in range(5):
        summary = run_trials(
            pg_backend,
            "test",
            trials=6,
            seed=SEED + batch,
            root=tmp_path / str(batch),
            fault="pgterm",
        )
        assert summary.failures == []
        killed += summary.killed
        if killed:
            break
    assert killed >= 1, "the sessions must be cut mid-turn"


def test_a_full_disk_mid_turn_loses_and_repeats_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'unused.sqlite'}"  # each trial gets a database of its own
    summary = run_trials(url, "test", trials=6, seed=SEED, root=tmp_path, fault="diskfull")
    assert summary.failures == []
    assert summary.killed == 6, "every trial's turn must hit the size limit"


# -- the same agent as a subgraph of a parent graph (issue 14) -------------------------


@pytest.mark.parametrize("app", ["subgraph", "nested"])
def test_random_kills_inside_a_subgraph_lose_duplicate_and_repeat_nothing(
    backend: str, tmp_path: Path, app: str
) -> None:
    summary = run_trials(backend, "test", trials=8, seed=SEED, root=tmp_path, app=app)
    assert summary.failures == []
    # Seed 15's 8 plans hold 5 write kill points; one (write 17 / 22 of a one-city turn,
    # which makes 15 / 20) is past its turn's writes: every other one must land.
    assert summary.killed_by_kind["write"] == _landing(8, app), "every write kill point lands"
    assert summary.killed_by_kind["write"] >= 4, "most trials must actually kill the worker"
    assert summary.stored_messages > 0


# A one-city turn of the subgraph app makes these saver writes: 1-3 the parent's input
# checkpoint, `__start__` writes and step checkpoint; 4-6 the subgraph's (its namespace);
# 7 the subgraph model's call, 8 checkpoint, 9 the tool node's "started" marker, 10 the
# tool's result, 11 checkpoint, 12 the answer, 13 checkpoint; 14-15 the parent's
# subgraph-task writes and checkpoint.
#
# The nested app (parent -> team -> agent, two levels down): 1-3 the parent's input
# checkpoint, `__start__` writes and step checkpoint; 4-6 the team subgraph's; 7-9 the
# agent's (namespace "agent:<t>|agent:<t>"); 10 the model's call, 11 checkpoint, 12 the
# "started" marker, 13 the tool's result, 14 checkpoint, 15 the answer, 16 checkpoint;
# 17-20 the two subgraph tasks' writes and checkpoints on the way back up.
STEPS = ("the model's call", "the tool's result", "the answer")
KILL_POINTS = {
    "subgraph": ((7, 10, 12), "in the subgraph's namespace"),
    "nested": ((10, 13, 15), "two namespaces down"),
}


@pytest.mark.parametrize(
    ("app", "slot", "what"),
    [
        (app, slot, what)
        for app, (slots, _) in KILL_POINTS.items()
        for slot, what in zip(slots, STEPS, strict=True)
    ],
)
def test_new_input_after_a_kill_inside_a_subgraph_keeps_what_the_subgraph_stored(
    backend: str, tmp_path: Path, app: str, slot: int, what: str
) -> None:
    plan = replace(BASE, trial=1, app=app, slot=slot)  # "How about Chengdu?"
    out = run_trial(backend, plan, tmp_path)
    assert out.killed, f"the worker was not killed after write {slot} ({what})"
    assert out.lost == [], f"{what}: stored {KILL_POINTS[app][1]}, gone after new input"
    assert (out.duplicated, out.repeated, out.unreadable, out.shown_finished) == (
        [], [], [], False)


# -- LangGraph's default durability, "async" (issue 24 item 5) -------------------------


def test_under_async_durability_a_kill_loses_only_its_turns_unstored_steps(
    backend: str, tmp_path: Path
) -> None:
    # docs/durability.md, "Durability modes": a kill may lose what the killed turn wrote
    # on a checkpoint that was never stored — nothing else, and never a duplicate, a
    # split request/result pair, a re-run of a visible result or an unreadable thread.
    summary = run_trials(backend, "test", trials=15, seed=SEED, root=tmp_path, durability="async")
    assert summary.failures == []
    # Counted on write kill points only: a timer's lands or not by the machine's speed.
    assert summary.killed_by_kind["write"] >= 10, "most trials must actually kill the worker"
    assert summary.killed_by_kind["write"] == _landing(15, durability="async")
    assert summary.stored_messages > 0
    # The tool node's marker waits for its step's checkpoint, so a tool starts only once
    # the checkpoint its result is written on is stored: no tool result is lost, and no
    # tool re-runs for a result stored on a checkpoint never stored.
    assert (summary.lost_by_kind["tool"], summary.rerun_unreachable) == (0, 0)
    assert (
        summary.lost_beyond_mode,
        summary.lost_before_the_kill,
        summary.duplicated,
        summary.split,
        summary.repeated,
        summary.shown_finished,
        summary.unreadable,
    ) == (0, 0, 0, 0, 0, 0, 0)


def _lost(durability: str, *, row_stored: bool, killed_turn: bool = True) -> Outcome:
    out = Outcome(replace(BASE, durability=durability), killed=True)
    out.lost, out.lost_on = ["tool:m1"], {"tool:m1": "|c1"}
    out.lost_on_missing = [] if row_stored else ["|c1"]
    out.lost_before_the_kill = [] if killed_turn else ["tool:m1"]
    return out


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_a_message_lost_with_its_unstored_checkpoint_fails_only_a_sync_trial(
    durability: str,
) -> None:
    assert _lost(durability, row_stored=False).ok
    assert not _lost("sync", row_stored=False).ok
    # A write whose checkpoint row exists was reachable: losing it breaks every mode,
    # and so does losing a message of a turn that had returned.
    assert not _lost(durability, row_stored=True).ok
    assert not _lost(durability, row_stored=False, killed_turn=False).ok


# Each step's checkpoint, then the next step's writes; the tool step's are two: the tool
# node's "started" marker (stored by the node itself, before the tool runs; not under
# "exit"), then the result.
STEPWISE = ["put", "writes", "put", "writes", "put", "writes", "writes", "put", "writes", "put"]


@pytest.mark.parametrize(
    ("durability", "ops"),
    [
        ("sync", STEPWISE),
        ("async", None),  # the same writes, in the order the background saves land
        ("exit", ["writes"] * 4 + ["put"]),  # kept in memory, stored as the run returns
    ],
)
def test_the_trials_durability_reaches_every_run_of_the_worker(
    sqlite_url: str, tmp_path: Path, durability: str, ops: list[str] | None
) -> None:
    # A one-city turn makes 10 saver writes (above); the killed turn must run in the
    # plan's mode (here it is not killed: there is no 99th write).
    plan = replace(BASE, trial=1, slot=99, durability=durability)
    out = run_trial(sqlite_url, plan, tmp_path)
    assert not out.killed and out.ok
    turn = [r["op"] for r in _read(tmp_path / "trial1" / "stored.jsonl") if r["killed_turn"]]
    if ops is None:
        assert sorted(turn) == sorted(STEPWISE)
    else:
        assert turn == ops


# Killed turns of each shape (trial, prior turns, a task per call): one city, two cities
# in one tool task, two cities a task per call (`per_call_branches`) — on a new thread,
# and after a finished turn (under "exit" a thread's first run also stores a stub).
SHAPES = ((0, 0, False), (1, 0, False), (3, 0, True), (5, 1, True))


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("app", ["agent", "subgraph", "nested", "deep"])
def test_every_write_of_a_turn_is_a_kill_point(
    sqlite_url: str, tmp_path: Path, app: str, durability: str
) -> None:
    # Counted, not assumed: a turn's writes (the tool node's "started" marker included)
    # are what `turn_writes` says, and the most any turn makes is the plans' slot range,
    # so a seeded write kill point can land on every write, the last ones too.
    counted = []
    for trial, prior, branches in SHAPES:
        plan = replace(
            BASE, trial=trial, prior_turns=prior, branches=branches, slot=999, app=app,
            durability=durability,
        )
        out = run_trial(sqlite_url, plan, tmp_path)
        assert not out.killed and out.ok
        journal = _read(tmp_path / f"trial{trial}" / "stored.jsonl")
        counted.append(sum(r["killed_turn"] for r in journal))
        assert counted[-1] == turn_writes(plan), (trial, prior, branches)
    assert max(counted) == _slots(app, durability)


def test_the_json_summary_is_written_with_kills_by_kind(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    argv = ["--trials", "3", "--backend", "sqlite", "--seed", str(SEED), "--json", str(path)]
    assert main([*argv, "--durability", "async"]) == 0
    summary = json.loads(path.read_text())
    assert summary["killed_by_kind"] and all(
        isinstance(k, str) and isinstance(n, int) for k, n in summary["killed_by_kind"].items()
    )
    assert sum(summary["killed_by_kind"].values()) == summary["killed"]
    assert summary["backend"] == "sqlite, durability=async"
