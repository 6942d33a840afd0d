"""Two lanes of `workers.py --async`'s load at the same moments (issue 24's diagnostic).

Contract: each repeat starts lane A and lane B together, each a process of its own running
`workers.aload` (W concurrent `ainvoke`s, N turns each, on a fresh Postgres database), and
prints each lane's CPU ms per turn, turns/s and cyclic-GC ms per turn (`gc.callbacks`), then
the B/A ratios and their medians. This shared 2-CPU machine's speed moves by 50-90% over
minutes (BENCHMARKS.md, issue 21's third round), so two lanes run one after the other can
differ by more than any change being measured; two lanes run side by side see the same
machine. Use it to compare two versions of the code (`--lane NAME=VARIANT:SRC`, SRC a tree's
`src/` folder) or the two variants; the issue's figure stays `workers.py --async`'s
alternating table. Asserts nothing.

Usage:
    python benchmarks/paired.py --lane lg=langgraph --lane tl=threadlog
    python benchmarks/paired.py --lane base=threadlog:/tmp/old/src --lane new=threadlog:src
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import storage
import workers


def _lane(variant: str, src: str | None, url: str, w: int, turns: int, out: Any) -> None:
    if src:
        sys.path.insert(0, src)
        for name in [m for m in sys.modules if m == "threadlog" or m.startswith("threadlog.")]:
            del sys.modules[name]
    spent = [0.0, 0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            spent[1] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - spent[1]

    with workers.open_saver(variant, url) as saver:
        saver.setup()
    gc.callbacks.append(timed)
    r = asyncio.run(workers.aload(variant, url, w, turns, time.time() + 900))
    n = max(1, len(r["latencies"]))
    code = sys.modules.get("threadlog")
    out.put({"turns_per_s": len(r["latencies"]) / r["wall_s"] if r["wall_s"] else 0.0,
             "cpu_ms": 1000 * r["cpu_s"] / n, "gc_ms": 1000 * spent[0] / n,
             "errors": len(r["errors"]), "code": Path(code.__file__).parent.parent.as_posix()
             if code and code.__file__ else "-"})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lane", action="append", required=True,
                    help="NAME=VARIANT[:SRC] (twice): VARIANT threadlog or langgraph")
    ap.add_argument("--workers", type=int, default=256)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if len(args.lane) != 2:
        ap.error("give --lane exactly twice")
    lanes = []
    for spec in args.lane:
        name, _, rest = spec.partition("=")
        variant, _, src = rest.partition(":")
        if variant not in workers.VARIANTS:
            ap.error(f"--lane {spec!r}: the variant is one of {workers.VARIANTS}")
        lanes.append((name, variant, str(Path(src).resolve()) if src else None))
    ctx = mp.get_context("spawn")
    ratios: dict[str, list[float]] = {"cpu_ms": [], "turns_per_s": []}
    workdir = Path(tempfile.mkdtemp(prefix="threadlog-paired-"))
    with workers.postgres_server(100) as base:
        for k in range(args.repeat):
            got: dict[str, dict[str, Any]] = {}
            started = []
            for name, variant, src in (lanes if k % 2 == 0 else lanes[::-1]):
                url = storage.fresh_target("postgres", base, workdir,
                                           f"pa_{uuid.uuid4().hex[:8]}")
                q = ctx.Queue()
                p = ctx.Process(target=_lane, args=(variant, src, url, args.workers,
                                                    args.turns, q), daemon=True)
                p.start()
                started.append((name, p, q))
            for name, p, q in started:
                got[name] = q.get(timeout=1800)
                p.join(timeout=30)
                g = got[name]
                print(f"{k} {name}: {g['turns_per_s']:.1f} turns/s, CPU {g['cpu_ms']:.2f} "
                      f"ms/turn, GC {g['gc_ms']:.2f} ms/turn, errors {g['errors']} ({g['code']})",
                      flush=True)
            a, b = got[lanes[0][0]], got[lanes[1][0]]
            for key in ratios:
                ratios[key].append(b[key] / a[key] if a[key] else float("nan"))
            print(f"  {lanes[1][0]}/{lanes[0][0]}: CPU {ratios['cpu_ms'][-1]:.3f}, "
                  f"turns/s {ratios['turns_per_s'][-1]:.3f}", flush=True)
    print(f"median {lanes[1][0]}/{lanes[0][0]} over {args.repeat} pairs (W = {args.workers}, "
          f"{args.turns} turns): CPU {statistics.median(ratios['cpu_ms']):.3f}, turns/s "
          f"{statistics.median(ratios['turns_per_s']):.3f}")


if __name__ == "__main__":
    main()
