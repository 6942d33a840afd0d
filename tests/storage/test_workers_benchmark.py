"""`benchmarks/workers.py` (issue 12 target 5): worker processes sharing a Postgres
database lose and duplicate no turn, for threadlog's agent and for LangGraph's own graph.

Untimed: the benchmark's core `run` with 2 worker processes, 2 threads x 2 turns, on the
suite's Postgres; its turn check is also shown to count a missing or an extra turn. The
`--async` core (issue 24), `run_async`: 6 concurrent `ainvoke`s in one process, 2 turns
each, every turn completed and threadlog within its connection bound.
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



@pytest.mark.parametrize("variant", ["threadlog", "langgraph"])
def test_concurrent_async_runs_in_one_process_lose_and_duplicate_no_turn(
    workers: Any, pg_backend: str, variant: str
) -> None:
    row = workers.run_async(variant, pg_backend, 6, 2, time.time() + 120)

    assert row["errors"] == []
    assert row["turns"] == 12
    assert (row["lost"], row["duplicated"]) == (0, 0)
    assert len(row["latencies_ms"]) == 12
    # threadlog: its own connection, the guard's reads, at most 2 lock sessions (default)
    assert 1 <= row["peak_connections"] <= (4 if variant == "threadlog" else 1)
