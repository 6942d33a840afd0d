"""`benchmarks/workers.py` (issue 12 target 5): worker processes sharing a Postgres
database lose and duplicate no turn, for threadlog's agent and for LangGraph's own graph.

Untimed: the benchmark's core `run` with 2 worker processes, 2 threads x 2 turns, on the
suite's Postgres; its turn check is also shown to count a missing or an extra turn.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Any:
    # On sys.path (not loaded from a file spec): the spawned workers import it by name.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import workers as module

    return module


@pytest.mark.parametrize("variant", ["threadlog", "langgraph"])
def test_two_worker_processes_lose_and_duplicate_no_turn(
    workers: Any, pg_backend: str, variant: str
) -> None:
    row = workers.run(variant, pg_backend, 2, 2, 2, time.time() + 120)

    assert row["errors"] == []
    assert row["missing_workers"] == 0
    assert row["turns"] == 4
    assert (row["lost"], row["duplicated"]) == (0, 0)
    # The check reads what is stored: claiming one more or one fewer turn than was sent
    # on a thread shows up as a lost or a duplicated turn.
    sent = {workers.thread_id(0): 3, workers.thread_id(1): 1}
    assert workers.check_threads(variant, pg_backend, sent) == {"lost": 1, "duplicated": 1}

