"""A langgraph-swarm and a langgraph-supervisor app SIGKILLed mid-turn, inside their
handoffs too (scripts/kill_multi_agent.py): after a fresh process resumes the thread,
every message is in the head once, every checkpoint of every namespace reads back as it
did when first read, as the same turns do on LangGraph's saver, and
`threadlog check --all-checkpoints` exits 0; SQLite and Postgres, LangGraph's default
durability and "sync". The long run (seeds drawn from os.urandom) is the script's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.kill_multi_agent import Plan, run_trial, run_trials

SEED = 31
"""Six plans that cover both apps, both durabilities, both resumes, and kills on handoff
writes and on other writes (none on a timer: each lands)."""


def test_seeded_kills_in_multi_agent_apps_lose_duplicate_and_change_nothing(
    backend: str, tmp_path: Path
) -> None:
    plans = [Plan.draw(SEED, t) for t in range(6)]
    assert {(p.app, p.durability) for p in plans} >= {("swarm", "sync"), ("supervisor", "default")}
    assert {p.kind for p in plans} == {"write", "handoff"}

    summary = run_trials(backend, "test", trials=6, seed=SEED, root=tmp_path)

    assert summary.failures == []
    assert summary.killed == 6, "every kill point lands"
    assert summary.killed_by_kind["handoff"] == sum(p.kind == "handoff" for p in plans)
    assert summary.stored_messages > 0 and summary.checkpoints > 0
    assert (
        summary.lost_beyond_mode,
        summary.duplicated,
        summary.changed,
        summary.not_append_only,
        summary.not_as_langgraph,
        summary.check_failed,
        summary.unreadable,
    ) == (0, 0, 0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("app", "durability", "slot", "when"),
    [
        # The swarm's first handoff write is the parent's write of the agent's
        # `Command(graph=PARENT)` update; killed before it is stored.
        ("swarm", "default", 1, "before"),
        ("swarm", "sync", 1, "after"),
        # The supervisor's third: bob's output with its hand-back, as the parent stores it.
        ("supervisor", "sync", 3, "before"),
    ],
)
def test_a_kill_while_a_handoff_is_stored_keeps_every_checkpoint_and_the_check_clean(
    backend: str, tmp_path: Path, app: str, durability: str, slot: int, when: str
) -> None:
    plan = Plan(
        trial=0,
        seed=SEED,
        app=app,
        durability=durability,
        prior_turns=1,
        kind="handoff",
        slot=slot,
        when=when,
        delay=0.0,
        resume="none",
    )
    out = run_trial(backend, plan, tmp_path)
    assert out.killed
    assert out.ok, (
        out.lost,
        out.duplicated,
        out.changed,
        out.not_as_langgraph,
        out.check,
        out.unreadable,
    )
    assert out.lost == [] and out.check == ""
    assert out.checkpoints > 0


def test_a_supervisor_thread_given_new_input_after_a_kill_reads_without_a_false_integrity_error(
    backend: str, tmp_path: Path
) -> None:
    """Reading every namespace's history through a new saver steps the history cache back
    to checkpoints older than its entry; the checksum check took such a log for the
    entry's own plus rows, and raised `StoredDataError` on an untouched thread."""
    plan = Plan(
        trial=3,
        seed=SEED,
        app="supervisor",
        durability="sync",
        prior_turns=2,
        kind="write",
        slot=2,
        when="after",
        delay=0.0,
        resume="input",
    )
    out = run_trial(backend, plan, tmp_path)
    assert out.killed
    assert out.unreadable == []
    assert (out.lost, out.lost_cold, out.read_differs) == ([], [], [])
    assert out.ok
