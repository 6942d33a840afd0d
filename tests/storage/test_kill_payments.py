"""SIGKILL an agent that pays (scripts/kill_payments.py), a short seeded run per backend
and `durability`: a tool marked idempotent never charges twice, never loses a charge and
never leaves "outcome unknown"; the long run is the script (`--trials 200`), figures in
docs/durability.md. Under `durability="exit"` no receipt is stored and the turn runs
again: one charge per marked call proves the re-run carried the same key (the service
dedups only by key)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scripts.kill_payments import Plan, run_trials

SEED = 3700
TRIALS = 8


@pytest.mark.parametrize("durability", [None, "sync", "exit"])
def test_killed_payments_are_charged_once_and_answered_with_their_charge(
    backend: str, durability: str | None, tmp_path: Path
) -> None:
    tally = run_trials(
        backend, TRIALS, root=tmp_path, durability=durability, seed=SEED, out=io.StringIO()
    )
    assert tally.failures == []
    marked = {k: tally.marked[k] for k in ("duplicated", "lost", "unknown", "uncharged")}
    assert marked == {"duplicated": 0, "lost": 0, "unknown": 0, "uncharged": 0}
    assert tally.marked["calls"] == 2 * TRIALS
    # Every point inside the worker lands (a timer's depends on the machine's speed).
    inside = sum(Plan.draw(SEED + k).point != "timer" for k in range(TRIALS))
    assert tally.killed >= inside >= TRIALS // 2
