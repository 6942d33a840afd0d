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


def test_the_async_table_pairs_each_repeat_back_to_back(
    workers: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The paired ratio is the median of repeat k's threadlog / LangGraph (a drift of the
    machine between repeats cancels), beside the ratio of the medians."""

    def row(variant: str, rate: float, cpu: float) -> dict[str, Any]:
        return {"workers": 64, "variant": variant, "turns_per_s": rate, "p50_ms": 100.0,
                "p99_ms": 120.0, "errors": [], "lost": 0, "duplicated": 0,
                "peak_connections": 2, "cpu_ms_per_turn": cpu, "turns": 320}

    # The machine halves its speed after the first repeat: each pair still reads 0.9x.
    rows = [row("threadlog", 90.0, 10.0), row("langgraph", 100.0, 9.0),
            row("langgraph", 50.0, 18.0), row("threadlog", 45.0, 20.0),
            row("threadlog", 45.0, 20.0), row("langgraph", 50.0, 18.0)]
    assert workers.report_async(rows, 5, 100) is True
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| 64 |"))
    cells = [c.strip() for c in line.split("|")]
    assert cells[4] == "0.90x MET"  # 45 / 50, the medians
    assert cells[5] == "0.90x (0.90-0.90)"
    assert cells[8] == "20.0 / 18.0"
