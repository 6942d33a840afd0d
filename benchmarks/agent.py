"""The agent as users run it (issue 12): `create_agent` + a context policy on
`threadlog.checkpointer(url)`, beside the bare channel and LangGraph's own channels.

Contract: prints one table per backend with every target of issue 12 (and the long-thread
figures of issue 15 item 7) as measured / limit / MET or SHORT; asserts nothing. Each
measurement runs in a fresh subprocess, so peak RSS and caches are that run's own.

The loop is the one of `benchmarks/storage.py` (human → AI with 2 calls → 2 results →
AI, ~150-byte contents). Two ways to drive it:

* `agent` — the product: `threadlog.create_agent(OfflineChatModel(), [get_weather],
  context=ContextPolicy(...), checkpointer=threadlog.checkpointer(url))`. The offline
  model names one call per city, so every turn is the same 5 messages.
* the scripted graphs of `benchmarks/storage.py` (`threadlog`, `delta`, `add_messages`,
  `floor`), where only the channel and the saver are measured.

Targets (issue 12 numbering):

1. storage with `ContextPolicy(max_turns=3)` and with `max_tokens` + a summarizer vs
   `context=None` (≤ 1.25x), and bytes/turn over the last half vs the first (≤ 1.1x);
2. guard overhead as a share of a turn's CPU time (≤ 10%);
3. per turn, last 10%: the bare loop on `threadlog.checkpointer(url)` (guard + cache)
   vs the integer-state floor on a plain saver, interleaved in one process (≤ 1.3x),
   the same for the whole agent, and flatness (late turns vs turns ~100, ≤ 1.15x);
4. `threadlog.MessagesState` on a plain `SqliteSaver`/`PostgresSaver` vs LangGraph's
   `DeltaChannel` (≤ 1.0x) and `add_messages`, and its flatness;
6. RSS of one process after many threads vs the history cache's bound;
L. long thread (issue 15 item 7): `get_state_history(limit=10)` on a 20 000-message
   thread, and the turn that carries LangGraph's forced snapshot vs a median turn.

SQLite databases use WAL with `synchronous=NORMAL` for every variant (set through the
public `wrap=` hook of `threadlog.checkpointer`), so the disk's fsync is not what is
measured. Postgres: `THREADLOG_BENCH_POSTGRES_URL`, else a throwaway `pgserver`.

Usage:
    python benchmarks/agent.py --quick            # sqlite, small sizes (~3 min)
    python benchmarks/agent.py                    # sqlite + postgres, issue sizes
    python benchmarks/agent.py --backends sqlite --turns 1000 --parts storage turn
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import storage

PAD = storage.PAD
PARTS = ("storage", "turn", "dropin", "memory", "long")


# -- the product path ---------------------------------------------------------------


def _fast_sqlite(saver: Any) -> Any:
    """`wrap=` hook: the same WAL settings as every other variant (see module doc)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = saver.conn if isinstance(saver, SqliteSaver) else None
    if conn is not None:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    return saver


def url_of(backend: str, target: str) -> str:
    return f"sqlite:///{target}" if backend == "sqlite" else target


@contextmanager
def product_saver(backend: str, target: str, *, guard: bool = True, cache: bool = True,
                  max_messages: int | None = None) -> Iterator[Any]:
    import threadlog

    wrap = _fast_sqlite
    if max_messages is not None:
        def wrap(s: Any) -> Any:
            return threadlog.with_history_cache(_fast_sqlite(s), max_messages=max_messages)
        cache = False
    with threadlog.checkpointer(url_of(backend, target), guard=guard, cache=cache,
                                wrap=wrap) as saver:
        yield saver


def policy_of(kind: str) -> Any:
    import threadlog

    if kind == "none":
        return None
    if kind == "turns3":
        return threadlog.ContextPolicy(max_turns=3)
    if kind == "tokens":
        return threadlog.ContextPolicy(max_tokens=2000, summarizer=threadlog.OfflineChatModel())
    raise SystemExit(f"unknown policy {kind!r}")


def agent_graph(policy: str, saver: Any) -> Any:
    from langchain_core.tools import tool

    import threadlog

    @tool
    def get_weather(city: str) -> str:
        """Today's weather for a city."""
        return f"{city}: sunny, 23C, humidity 40%, wind 3 m/s NE. {PAD}"

    return threadlog.create_agent(
        threadlog.OfflineChatModel(), [get_weather],
        system_prompt="You are a weather assistant.",
        context=policy_of(policy), checkpointer=saver,
    )


def agent_input(turn: int) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    a, b = storage.CITIES[turn % 6], storage.CITIES[(turn + 1) % 6]
    text = f"Turn {turn}: weather in {a} and {b} today? {PAD}"
    return {"messages": [HumanMessage(text, id=str(uuid.uuid4()))]}


# -- measurements (each in its own process) ----------------------------------------


class Lane:
    """One graph driven turn by turn, with its per-turn wall and CPU times."""

    def __init__(self, graph: Any, make_input: Any, thread: str = "bench") -> None:
        self.graph, self.make_input = graph, make_input
        self.config = {"configurable": {"thread_id": thread}}
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def turn(self, t: int) -> None:
        inp = self.make_input(t)
        w0, c0 = time.perf_counter(), time.process_time()
        self.graph.invoke(inp, self.config)
        self.wall.append(time.perf_counter() - w0)
        self.cpu.append(time.process_time() - c0)

    def tail(self, frac: float = 0.1) -> dict[str, float]:
        k = max(1, int(len(self.wall) * frac))
        return {"ms": 1000 * statistics.median(self.wall[-k:]),
                "cpu_ms": 1000 * statistics.median(self.cpu[-k:])}

    def span(self, lo: int, hi: int) -> dict[str, float]:
        return {"ms": 1000 * statistics.median(self.wall[lo:hi]),
                "cpu_ms": 1000 * statistics.median(self.cpu[lo:hi])}

    def window(self, at: int, half: int = 10) -> dict[str, float]:
        lo, hi = max(0, at - half), min(len(self.wall), at + half)
        return {"ms": 1000 * statistics.median(self.wall[lo:hi]),
                "cpu_ms": 1000 * statistics.median(self.cpu[lo:hi])}


def run_storage(backend: str, target: str, policy: str, turns: int) -> dict[str, Any]:
    """One agent thread of `turns` turns; DB bytes at the half and at the end."""
    with product_saver(backend, target) as saver:
        lane = Lane(agent_graph(policy, saver), agent_input)
        half = 0
        for t in range(turns):
            lane.turn(t)
            if t + 1 == turns // 2:
                half = storage.db_bytes(backend, target)
        snap = lane.graph.get_state(lane.config)
        events = len(snap.values.get("compactions") or [])
        n = len(snap.values["messages"])
    return {"half_bytes": half, "end_bytes": storage.db_bytes(backend, target),
            "messages": n, "events": events, "tail": lane.tail(),
            "at100": lane.window(min(100, turns // 2)), "peak_rss_mb": storage.peak_rss_mb()}


def run_turn(backend: str, targets: dict[str, str], turns: int) -> dict[str, Any]:
    """Interleaved, turn by turn, separate databases: the agent with and without the
    guard, the bare loop on `threadlog.checkpointer`, and the floor on a plain saver."""
    with ExitStack() as stack:
        lanes = {
            "agent": Lane(agent_graph("turns3", stack.enter_context(
                product_saver(backend, targets["agent"]))), agent_input),
            "agent_noguard": Lane(agent_graph("turns3", stack.enter_context(
                product_saver(backend, targets["agent_noguard"], guard=False))), agent_input),
            "loop": Lane(storage.build_graph("threadlog", stack.enter_context(
                product_saver(backend, targets["loop"]))),
                lambda t: storage.turn_input("threadlog", t)),
            "loop_noguard": Lane(storage.build_graph("threadlog", stack.enter_context(
                product_saver(backend, targets["loop_noguard"], guard=False))),
                lambda t: storage.turn_input("threadlog", t)),
            "floor": Lane(storage.build_graph("floor", stack.enter_context(
                storage.open_saver(backend, targets["floor"], "floor"))),
                lambda t: storage.turn_input("floor", t)),
        }
        for t in range(turns):
            for lane in lanes.values():
                lane.turn(t)
    # The target's point is the last 10% of 400 turns; a longer run also gives flatness
    # (its own last 10% against turns ~100).
    n400 = min(400, turns)
    return {name: {"tail": lane.tail(), "at100": lane.window(min(100, turns // 2)),
                   "last400": lane.span(n400 - max(1, n400 // 10), n400)}
            for name, lane in lanes.items()}


DROPIN_VARIANTS = ("threadlog", "delta", "add_messages", "shipped")


def run_dropin(backend: str, targets: dict[str, str], turns: int, sizes: list[int],
               add_max: int) -> dict[str, Any]:
    """The scripted loop on plain savers, no threadlog wrapper (as LangGraph Server runs
    it), interleaved turn by turn in one process (separate databases) so every lane sees
    the same machine load: `threadlog` is `threadlog.Messages` (`threadlog.MessagesState`),
    `delta` LangGraph's `DeltaChannel`, `add_messages` LangGraph's reducer (stopped after
    `add_max` turns: it grows quadratically), `shipped` the same loop on
    `threadlog.checkpointer(url)` for its storage. Per lane and size: the median turn
    over the 10 turns before the size, DB bytes there, and the stored snapshots."""

    with ExitStack() as stack:
        lanes: dict[str, Lane] = {}
        for v, target in targets.items():
            saver = stack.enter_context(
                product_saver(backend, target) if v == "shipped"
                else storage.open_saver(backend, target, "plain"))
            variant = "threadlog" if v == "shipped" else v
            lanes[v] = Lane(storage.build_graph(variant, saver),
                            lambda t, variant=variant: storage.turn_input(variant, t))
        at: dict[str, dict[str, Any]] = {v: {} for v in lanes}
        for t in range(turns):
            for v, lane in lanes.items():
                if v == "add_messages" and t >= add_max:
                    continue
                lane.turn(t)
                if t + 1 in sizes:
                    k = min(10, len(lane.wall))
                    at[v][str(t + 1)] = {
                        "ms": 1000 * statistics.median(lane.wall[-k:]),
                        "cpu_ms": 1000 * statistics.median(lane.cpu[-k:]),
                        "db_bytes": storage.db_bytes(backend, targets[v]),
                    }
    return at


def run_memory(backend: str, target: str, threads: int, turns: int,
               max_messages: int) -> dict[str, Any]:
    """Many threads in one process through one saver whose cache holds `max_messages`."""
    import gc

    try:
        from threadlog.checkpoint.cache import history_cache_of
    except ImportError:
        from threadlog.history_cache import history_cache_of  # type: ignore[no-redef]

    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    with product_saver(backend, target, max_messages=max_messages) as saver:
        graph = agent_graph("turns3", saver)
        inner = saver
        while history_cache_of(inner) is None and getattr(inner, "inner", None) is not None:
            inner = inner.inner
        cache = history_cache_of(inner)
        samples: list[tuple[int, float, int]] = []
        t0 = time.perf_counter()
        for th in range(threads):
            lane = Lane(graph, agent_input, thread=f"t{th}")
            for t in range(turns):
                lane.turn(t)
            if th in (0, threads // 4, threads // 2, 3 * threads // 4, threads - 1):
                gc.collect()
                samples.append((th + 1, rss_mb(), cache.size if cache else -1))
        elapsed = time.perf_counter() - t0
    return {"samples": samples, "max_messages": max_messages, "seconds": elapsed,
            "messages_per_thread": 5 * turns}


def run_long(backend: str, target: str, turns: int) -> dict[str, Any]:
    """One long thread of the bare loop on `threadlog.checkpointer`; then
    `get_state_history(limit=10)` in a fresh process (see `run_history`)."""
    with product_saver(backend, target) as saver:
        lane = Lane(storage.build_graph("threadlog", saver),
                    lambda t: storage.turn_input("threadlog", t))
        for t in range(turns):
            lane.turn(t)
    worst = max(range(len(lane.wall)), key=lane.wall.__getitem__)
    return {"turns": turns, "median_ms": 1000 * statistics.median(lane.wall),
            "worst_ms": 1000 * lane.wall[worst], "worst_turn": worst,
            "head": lane.window(min(100, turns // 2)), "tail": lane.tail()}


def run_history(backend: str, target: str) -> dict[str, Any]:
    with product_saver(backend, target) as saver:
        graph = storage.build_graph("threadlog", saver)
        config = {"configurable": {"thread_id": "bench"}}
        before = storage.peak_rss_mb()
        t0 = time.perf_counter()
        got = list(graph.get_state_history(config, limit=10))
        ms = 1000 * (time.perf_counter() - t0)
        n = len(got[0].values["messages"]) if got else 0
    return {"ms": ms, "states": len(got), "messages": n,
            "peak_rss_mb": storage.peak_rss_mb(), "rss_before_mb": before}


# -- driver ---------------------------------------------------------------------------


def spawn(spec: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"benchmark subprocess {spec} failed:\n{out.stderr[-4000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def one(spec: dict[str, Any]) -> dict[str, Any]:
    kind = spec.pop("kind")
    fn = {"storage": run_storage, "turn": run_turn, "dropin": run_dropin,
          "memory": run_memory, "long": run_long, "history": run_history}[kind]
    return dict(fn(**spec))


class Report:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []

    def ratio(self, backend: str, what: str, value: float, limit: float,
              detail: str = "") -> None:
        met = "MET" if round(value, 2) <= limit else "SHORT"
        self.rows.append((what + (f" ({detail})" if detail else ""), backend,
                          f"{value:.2f}x", f"{limit}x", met))

    def value(self, backend: str, what: str, shown: str, limit: str, met: bool | None) -> None:
        self.rows.append((what, backend, shown, limit,
                          "-" if met is None else "MET" if met else "SHORT"))

    def print(self) -> None:
        print("| target | backend | measured | limit | result |")
        print("|---|---|---|---|---|")
        for r in self.rows:
            print("| " + " | ".join(r) + " |")


def _fmt(d: dict[str, float]) -> str:
    return f"{d['ms']:.1f} ms (CPU {d['cpu_ms']:.1f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="sqlite, small sizes")
    p.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument("--turns", type=int, default=2000, help="storage runs (issue: 2000)")
    p.add_argument("--turn-turns", type=int, default=400, help="per-turn runs (issue: 400)")
    p.add_argument("--dropin-turns", type=int, nargs="+", default=[100, 400, 2000],
                   help="drop-in sizes: one interleaved run to the largest, measured at each")
    p.add_argument("--dropin-variants", nargs="+", default=list(DROPIN_VARIANTS),
                   choices=DROPIN_VARIANTS)
    p.add_argument("--dropin-add-max", type=int, default=400,
                   help="stop the add_messages lane after this many turns (quadratic)")
    p.add_argument("--threads", type=int, nargs=2, default=[1000, 50],
                   metavar=("THREADS", "TURNS"), help="memory run (issue: 1000 x 50)")
    p.add_argument("--cache-messages", type=int, default=20_000,
                   help="history cache bound (messages) for the memory run")
    p.add_argument("--long-messages", type=int, default=20_000)
    p.add_argument("--workdir", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(one(json.loads(a.one))))
        return
    if a.quick:
        a.backends, a.turns, a.turn_turns = ["sqlite"], 200, 120
        a.dropin_turns, a.threads, a.cache_messages = [40, 120], [60, 10], 1000
        a.dropin_add_max = 120
        a.long_messages = 2500

    if os.environ.get("THREADLOG_BENCH_POSTGRES_URL"):  # storage.postgres_base reads this
        os.environ["THREADLOG_TEST_POSTGRES_URL"] = os.environ["THREADLOG_BENCH_POSTGRES_URL"]
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="threadlog-agent-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cpus, {storage._ram_gb():.1f} GB RAM, "
          f"{platform.platform()}, Python {platform.python_version()}, {storage._versions()}")
    print(f"sizes: storage {a.turns} turns, per-turn {a.turn_turns} turns, drop-in "
          f"{'/'.join(map(str, a.dropin_turns))} turns, memory {a.threads[0]} threads x "
          f"{a.threads[1]} turns (cache bound {a.cache_messages} messages), long thread "
          f"{a.long_messages} messages" + (" [--quick: smaller than the issue's]"
                                           if a.quick else ""))
    rep = Report()
    results: dict[str, Any] = {}
    with contextmanager(storage._maybe_pg)(a.backends) as pg_base:
        for backend in a.backends:
            base = pg_base if backend == "postgres" else ""
            res = results[backend] = {}

            def tgt(name: str, backend: str = backend, base: str = base) -> str:
                return storage.fresh_target(backend, base, workdir, f"ag_{backend}_{name}")

            if "storage" in a.parts:
                for pol in ("none", "turns3", "tokens"):
                    res[f"storage_{pol}"] = r = spawn({"kind": "storage", "backend": backend,
                                                       "target": tgt(pol), "policy": pol,
                                                       "turns": a.turns})
                    print(f"[{backend}] storage {pol}: {r['end_bytes'] / 1e6:.2f} MB "
                          f"({r['half_bytes'] / 1e6:.2f} MB at half), {r['messages']} msgs, "
                          f"{r['events']} events, tail {_fmt(r['tail'])}, turns ~100 "
                          f"{_fmt(r['at100'])}", flush=True)
                none = res["storage_none"]
                for pol, name in (("turns3", "ContextPolicy(max_turns=3)"),
                                  ("tokens", "ContextPolicy(max_tokens=2000, summarizer)")):
                    r = res[f"storage_{pol}"]
                    rep.ratio(backend, f"1. DB bytes @{a.turns} turns, {name} / context=None",
                              r["end_bytes"] / none["end_bytes"], 1.25,
                              f"{r['end_bytes'] / 1e6:.2f} / {none['end_bytes'] / 1e6:.2f} MB,"
                              f" {r['events']} events")
                    first, last = r["half_bytes"], r["end_bytes"] - r["half_bytes"]
                    rep.ratio(backend, f"1. bytes/turn last half / first half, {name}",
                              last / first, 1.1)
                r = res["storage_turns3"]
                rep.ratio(backend, f"3. agent ms/turn @{a.turns} / @100 turns, max_turns=3",
                          r["tail"]["ms"] / r["at100"]["ms"], 1.15,
                          f"{_fmt(r['tail'])} vs {_fmt(r['at100'])}; CPU "
                          f"{r['tail']['cpu_ms'] / r['at100']['cpu_ms']:.2f}x")
            if "turn" in a.parts:
                names = ("agent", "agent_noguard", "loop", "loop_noguard", "floor")
                res["turn"] = r = spawn({"kind": "turn", "backend": backend,
                                         "targets": {n: tgt("turn_" + n) for n in names},
                                         "turns": a.turn_turns})
                n400 = min(400, a.turn_turns)
                print(f"[{backend}] per turn, last 10% of {n400}: " + ", ".join(
                    f"{n} {_fmt(r[n]['last400'])}" for n in names), flush=True)
                fl = r["floor"]["last400"]
                for n, what in (("loop", "bare loop on threadlog.checkpointer"),
                                ("agent", "create_agent+max_turns=3 on threadlog.checkpointer")):
                    rep.ratio(backend, f"3. ms/turn last 10% of {n400}, {what} / floor",
                              r[n]["last400"]["ms"] / fl["ms"], 1.3,
                              f"{_fmt(r[n]['last400'])} vs {_fmt(fl)}; CPU "
                              f"{r[n]['last400']['cpu_ms'] / fl['cpu_ms']:.2f}x")
                if a.turn_turns >= 1000:
                    print(f"[{backend}] per turn, last 10% of {a.turn_turns}: " + ", ".join(
                        f"{n} {_fmt(r[n]['tail'])}" for n in names) + "; turns ~100: "
                        + ", ".join(f"{n} {_fmt(r[n]['at100'])}" for n in names), flush=True)
                    for n, what in (("loop", "bare loop"), ("agent", "agent"), ("floor", "floor")):
                        t, h = r[n]["tail"], r[n]["at100"]
                        rep.ratio(backend, f"3. ms/turn @{a.turn_turns} / @100 turns, {what}",
                                  t["ms"] / h["ms"], 1.15, f"{_fmt(t)} vs {_fmt(h)}; CPU "
                                  f"{t['cpu_ms'] / h['cpu_ms']:.2f}x")
                for n, what in (("loop", "bare loop"), ("agent", "agent")):
                    g, ng = r[n]["tail"]["cpu_ms"], r[n + "_noguard"]["tail"]["cpu_ms"]
                    rep.value(backend, f"2. guard overhead, share of turn CPU, {what} "
                              f"({g:.1f} vs {ng:.1f} ms without the guard)",
                              f"{100 * (g - ng) / g:.0f}%", "10%", (g - ng) / g <= 0.10)
            if "dropin" in a.parts:
                sizes = sorted(a.dropin_turns)
                lo, hi = sizes[0], sizes[-1]
                res["dropin"] = d = spawn({
                    "kind": "dropin", "backend": backend,
                    "targets": {v: tgt(f"dropin_{v}") for v in a.dropin_variants},
                    "turns": hi, "sizes": sizes, "add_max": a.dropin_add_max})
                for v, by in d.items():
                    print(f"[{backend}] drop-in {v}: " + ", ".join(
                        f"@{n} {_fmt(r)} {r['db_bytes'] / 1e6:.2f} MB" for n, r in by.items()),
                        flush=True)
                tl, dl = d.get("threadlog", {}), d.get("delta", {})
                for n in sizes:
                    t, dd = tl.get(str(n)), dl.get(str(n))
                    if t is None or dd is None:
                        continue
                    m = d.get("add_messages", {}).get(str(n))
                    rep.ratio(backend, f"4. plain saver, MessagesState / DeltaChannel @{n} turns,"
                              " CPU", t["cpu_ms"] / dd["cpu_ms"], 1.0,
                              f"{_fmt(t)} vs {_fmt(dd)}; wall {t['ms'] / dd['ms']:.2f}x"
                              + (f"; add_messages {_fmt(m)}" if m else ""))
                    rep.value(backend, f"4. DB MB @{n} turns: MessagesState plain / DeltaChannel"
                              " / threadlog.checkpointer", " / ".join(
                                  f"{d[v][str(n)]['db_bytes'] / 1e6:.2f}" if str(n) in d.get(v, {})
                                  else "-" for v in ("threadlog", "delta", "shipped")), "-", None)
                if str(lo) in tl and str(hi) in tl:
                    t_lo, t_hi = tl[str(lo)], tl[str(hi)]
                    flat = (f"; DeltaChannel CPU "
                            f"{dl[str(hi)]['cpu_ms'] / dl[str(lo)]['cpu_ms']:.2f}x"
                            if str(lo) in dl and str(hi) in dl else "")
                    rep.ratio(backend, f"4. plain saver MessagesState CPU/turn @{hi} / @{lo} turns",
                              t_hi["cpu_ms"] / t_lo["cpu_ms"], 1.15,
                              f"wall {t_hi['ms'] / t_lo['ms']:.2f}x{flat}")
            if "memory" in a.parts and backend == a.backends[0]:
                th, tu = a.threads
                res["memory"] = r = spawn({"kind": "memory", "backend": backend,
                                           "target": tgt("memory"), "threads": th,
                                           "turns": tu, "max_messages": a.cache_messages})
                s = r["samples"]
                print(f"[{backend}] memory (threads, RSS MB, cached msgs): {s}, "
                      f"{r['seconds']:.0f} s", flush=True)
                full = next((x for x in s if x[2] >= 0.8 * a.cache_messages), s[-1])
                grew = s[-1][1] / full[1]
                rep.value(backend, f"6. cache size after {th} threads x {tu} turns "
                          f"(bound {a.cache_messages} messages)", f"{s[-1][2]} messages",
                          f"{a.cache_messages}", s[-1][2] <= a.cache_messages)
                rep.ratio(backend, f"6. RSS after {th} threads / RSS once the cache was full "
                          f"(after {full[0]} threads)", grew, 1.1,
                          f"{s[-1][1]:.0f} / {full[1]:.0f} MB")
            if "long" in a.parts:
                turns = a.long_messages // 5
                target = tgt("long")
                res["long"] = r = spawn({"kind": "long", "backend": backend,
                                         "target": target, "turns": turns})
                res["history"] = h = spawn({"kind": "history", "backend": backend,
                                            "target": target})
                print(f"[{backend}] long thread: {r}; history: {h}", flush=True)
                rep.value(backend, f"L. get_state_history(limit=10), {h['messages']} messages "
                          f"(peak RSS {h['peak_rss_mb']:.0f} MB)", f"{h['ms']:.0f} ms",
                          "2000 ms, 300 MB", h["ms"] <= 2000 and h["peak_rss_mb"] <= 300)
                # Reported, not judged: the issue asks that LangGraph's forced snapshot
                # (every 5000 supersteps) not stall a turn, and names no limit.
                rep.value(backend, f"L. slowest turn (turn {r['worst_turn']}) / median turn "
                          f"over {turns} turns", f"{r['worst_ms']:.0f} / "
                          f"{r['median_ms']:.1f} ms", "-", None)
                rep.ratio(backend, f"L. ms/turn last 10% / turns ~100, {a.long_messages} msgs",
                          r["tail"]["ms"] / r["head"]["ms"], 1.2,
                          f"{_fmt(r['tail'])} vs {_fmt(r['head'])}")
    print()
    rep.print()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
