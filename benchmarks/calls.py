"""What recording model calls costs (`threadlog.checkpoint.calls`): the product agent of
`benchmarks/agent.py` (`create_agent` + `ContextPolicy(max_turns=3)` on
`threadlog.checkpointer(url)`) with `record_calls=True` (the default) against
`record_calls=False`, interleaved turn by turn in one process on separate databases, so
both lanes see the same machine load.

Contract: prints, per backend, the CPU time per turn (median over all turns and over the
last 10%) of each lane and their ratio (target ≤ 1.10x), the database bytes after the run
and their ratio (target ≤ 1.15x), and how many calls the recording lane stored; asserts
nothing.

Usage:
    python benchmarks/calls.py                       # sqlite, 400 turns
    python benchmarks/calls.py --backends sqlite postgres --turns 400
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent
import storage


@contextmanager
def saver(backend: str, target: str, record_calls: bool) -> Any:
    import threadlog

    with threadlog.checkpointer(agent.url_of(backend, target), wrap=agent._fast_sqlite,
                                record_calls=record_calls) as s:
        yield s


def run(backend: str, base: str, turns: int, workdir: Path) -> dict[str, Any]:
    from threadlog.inspect.calls import recorded_calls

    targets = {
        lane: storage.fresh_target(backend, base, workdir, f"calls_{lane}")
        for lane in ("on", "off")
    }
    with ExitStack() as stack:
        lanes = {
            lane: agent.Lane(agent.agent_graph("turns3", stack.enter_context(
                saver(backend, targets[lane], lane == "on"))), agent.agent_input)
            for lane in ("on", "off")
        }
        for t in range(turns):
            order = ("on", "off") if t % 2 else ("off", "on")
            for lane in order:
                lanes[lane].turn(t)
    out: dict[str, Any] = {}
    for lane, x in lanes.items():
        k = max(1, len(x.cpu) // 10)
        out[lane] = {
            "cpu_ms": 1000 * statistics.median(x.cpu),
            "cpu_ms_tail": 1000 * statistics.median(x.cpu[-k:]),
            "bytes": storage.db_bytes(backend, targets[lane]),
        }
    out["calls"] = len(recorded_calls(agent.url_of(backend, targets["on"]), "bench"))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--backends", nargs="+", default=["sqlite"])
    p.add_argument("--turns", type=int, default=400)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        for backend in args.backends:
            base = (
                stack.enter_context(storage.postgres_base()) if backend == "postgres" else ""
            )
            r = run(backend, base, args.turns, Path(tmp))
            on, off = r["on"], r["off"]
            print(f"{backend}, {args.turns} turns, {r['calls']} calls recorded")
            print(f"  CPU/turn median   on {on['cpu_ms']:.2f} ms  off {off['cpu_ms']:.2f} ms"
                  f"  ratio {on['cpu_ms'] / off['cpu_ms']:.3f}x (target ≤ 1.10x)")
            print(f"  CPU/turn last 10% on {on['cpu_ms_tail']:.2f} ms  off "
                  f"{off['cpu_ms_tail']:.2f} ms  ratio "
                  f"{on['cpu_ms_tail'] / off['cpu_ms_tail']:.3f}x")
            print(f"  storage           on {on['bytes']} B  off {off['bytes']} B  ratio "
                  f"{on['bytes'] / off['bytes']:.3f}x (target ≤ 1.15x)")


if __name__ == "__main__":
    main()
