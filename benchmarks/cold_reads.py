"""Cold reads of a multi-agent thread: LangGraph's SqliteSaver vs threadlog, in CPU time.

Contract: prints one table; asserts nothing. Builds each app's thread once per lane
(`benchmarks/multi_agent.py`'s apps and savers, N turns, SQLite), then times each read on
a freshly opened saver (a new process's view: nothing cached), `--reps` times, and prints
the fastest and the median in CPU seconds (`time.process_time`: on a machine shared with
other work, wall time mostly measures the others), with threadlog / LangGraph ratios of
the fastest. Reads: `get_state`, `get_state(subgraphs=True)`,
`get_state_history(limit=10)`.

Usage:
    python benchmarks/cold_reads.py --turns 100
    python benchmarks/cold_reads.py --turns 30 --apps swarm --reps 3
    python benchmarks/cold_reads.py --dir /tmp/dbs   # keep the threads: time another build
                                                     # of threadlog on the same files
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from langchain_core.messages import HumanMessage  # noqa: E402
from multi_agent import build, saver_for  # noqa: E402

CFG: Any = {"configurable": {"thread_id": "t"}}
READS: dict[str, Callable[[Any], Any]] = {
    "get_state": lambda g: g.get_state(CFG),
    "subgraphs=True": lambda g: g.get_state(CFG, subgraphs=True),
    "history(10)": lambda g: list(g.get_state_history(CFG, limit=10)),
}


def fill(app: str, lane: str, turns: int, path: Path) -> None:
    with saver_for(lane, path) as saver:
        graph = build(app, lane).compile(checkpointer=saver)
        for i in range(turns):
            graph.invoke({"messages": [HumanMessage(f"question {i}", id=f"u{i}")]}, CFG)


def timed(app: str, lane: str, path: Path, read: Callable[[Any], Any], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        with saver_for(lane, path) as saver:
            graph = build(app, lane).compile(checkpointer=saver)
            start = time.process_time()
            read(graph)
            out.append(time.process_time() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--apps", nargs="+", default=["swarm", "supervisor"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="keep (and reuse) the DB files")
    args = parser.parse_args()
    print(f"{args.turns} turns, SQLite, CPU seconds on a fresh saver: fastest / median")
    print(f"{'app':<11} {'read':<15} {'LangGraph':>17} {'threadlog':>17} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for app in args.apps:
            paths = {
                lane: folder / f"{app}-{args.turns}-{lane}.sqlite"
                for lane in ("langgraph", "threadlog")
            }
            for lane, path in paths.items():
                if not path.exists():
                    fill(app, lane, args.turns, path)
                timed(app, lane, path, READS["get_state"], 1)  # imports, first-use setup
            for name, read in READS.items():
                got = {lane: timed(app, lane, p, read, args.reps) for lane, p in paths.items()}
                lg, tl = got["langgraph"], got["threadlog"]
                print(
                    f"{app:<11} {name:<15} {min(lg):>8.3f}/{statistics.median(lg):.3f} "
                    f"{min(tl):>8.3f}/{statistics.median(tl):.3f} {min(tl) / min(lg):>6.2f}x"
                )


if __name__ == "__main__":
    main()
