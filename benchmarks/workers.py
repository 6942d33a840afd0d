"""Many workers, many threads, Postgres (issue 12 target 5).

Contract: for each worker count W, starts W processes that drive T threads x N turns of a
weather agent whose model waits 50 ms per call, twice side by side:

* `threadlog` — the product as shipped: `threadlog.create_agent(model, [get_weather],
  context=ContextPolicy(max_turns=20), checkpointer=threadlog.checkpointer(url))`, the
  saver opened inside each worker;
* `langgraph` — LangGraph's own: a plain `PostgresSaver`, a `StateGraph` on
  `MessagesState` (`add_messages`), LangGraph's prebuilt `ToolNode` + `tools_condition`,
  the same model and tool.

Each worker owns a disjoint set of threads (thread i goes to worker i mod W), so a thread's
turns are sequential. Timing starts when every worker has its graph and saver open. After
each run, every thread's final state is read with a fresh saver and checked: user messages
== turns sent, each answered by a final `AIMessage` without tool calls, no message id twice.
Prints turns/s per W and variant, the ratio threadlog/LangGraph against >= 0.9x (> 1.0x from
200 turns per thread on) as MET/SHORT, and the lost / duplicated counts (which must be 0).
Asserts nothing; exits 1 on a lost or duplicated turn.

Postgres: `THREADLOG_BENCH_POSTGRES_URL`, else a throwaway `pgserver` (benchmarks/storage.py).

Usage:
    python benchmarks/workers.py --quick                      # 16 threads x 5 turns
    python benchmarks/workers.py                              # 64 x 20, W = 1 2 4 8
    python benchmarks/workers.py --threads 32 --turns 10 --workers 1 2 4
    python benchmarks/workers.py --threads 8 --turns 200 --workers 8   # long threads
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import storage  # (pgserver and fresh databases, as benchmarks/agent.py uses)

VARIANTS = ("threadlog", "langgraph")
MODEL_WAIT_S = 0.05
# Issue 12 target 5: threadlog >= 0.9x LangGraph's turns/s at 20 turns per thread, and
# ahead of it (> 1.0x) at 200.
TARGET, TARGET_LONG, LONG_TURNS = 0.9, 1.0, 200
# The two fastest cities of the weather demo (50 and 60 ms), so the model's wait dominates.
CITIES = ("Shanghai", "Seoul")


def slow_model() -> Any:
    """`OfflineChatModel` that waits 50 ms per call, like a fast remote model."""
    import asyncio

    import threadlog

    class SlowOfflineModel(threadlog.OfflineChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(MODEL_WAIT_S)
            return super()._generate(*args, **kwargs)

        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(MODEL_WAIT_S)
            return super()._generate(*args, **kwargs)

        def _stream(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(MODEL_WAIT_S)
            return super()._stream(*args, **kwargs)

    return SlowOfflineModel()


@contextmanager
def open_saver(variant: str, url: str) -> Iterator[Any]:
    if variant == "threadlog":
        import threadlog

        with threadlog.checkpointer(url) as saver:
            yield saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as saver:
            yield saver


def build_graph(variant: str, saver: Any) -> Any:
    from threadlog.examples.weather import get_weather

    model = slow_model()
    if variant == "threadlog":
        import threadlog

        return threadlog.create_agent(
            model, [get_weather], context=threadlog.ContextPolicy(max_turns=20),
            checkpointer=saver,
        )
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    bound = model.bind_tools([get_weather])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def thread_id(i: int) -> str:
    return f"t{i:04d}"


def turn_input(thread: int, turn: int) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    text = f"Thread {thread} turn {turn}: weather in {CITIES[0]} and {CITIES[1]} today?"
    return {"messages": [HumanMessage(text, id=str(uuid.uuid4()))]}


# -- one worker process ----------------------------------------------------------------


def worker_main(variant: str, url: str, threads: list[int], turns: int, deadline: float,
                ready: Any, start: Any, out: Any) -> None:
    """Drive `threads` (this worker's own) for `turns` turns each; report what was sent."""
    sent = {thread_id(i): 0 for i in threads}
    errors: list[str] = []
    t0 = t1 = time.time()
    c0 = c1 = time.process_time()
    try:
        with open_saver(variant, url) as saver:
            graph = build_graph(variant, saver)
            ready.put(os.getpid())
            start.wait(timeout=max(1.0, deadline - time.time()))
            t0, c0 = time.time(), time.process_time()
            for turn in range(turns):
                for i in threads:
                    if time.time() > deadline:
                        errors.append("deadline reached")
                        break
                    tid = thread_id(i)
                    sent[tid] += 1
                    try:
                        graph.invoke(turn_input(i, turn),
                                     {"configurable": {"thread_id": tid}})
                    except Exception as exc:  # counted; the check then finds what is stored
                        errors.append(f"{tid} turn {turn}: {type(exc).__name__}: {exc}")
                else:
                    continue
                break
            t1, c1 = time.time(), time.process_time()
    except Exception:
        ready.put(os.getpid())  # never leave the parent waiting for this worker
        errors.append(traceback.format_exc())
    out.put({"pid": os.getpid(), "sent": sent, "errors": errors, "t0": t0, "t1": t1,
             "cpu_s": c1 - c0})


# -- one run: W workers, one variant, a fresh database ---------------------------------


def run(variant: str, url: str, workers: int, threads: int, turns: int,
        deadline: float) -> dict[str, Any]:
    """One run on the (empty) database at `url`; returns turns/s and the check's counts."""
    with open_saver(variant, url) as saver:
        saver.setup()  # once, here: concurrent migrations from W workers would race
    ctx = mp.get_context("spawn")
    ready, out, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=worker_main, daemon=True,
                    args=(variant, url, list(range(w, threads, workers)), turns, deadline,
                          ready, start, out))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    results: list[dict[str, Any]] = []
    try:
        for _ in procs:
            ready.get(timeout=max(1.0, deadline - time.time()))
        start.set()
        for _ in procs:
            results.append(out.get(timeout=max(1.0, deadline - time.time() + 30)))
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    sent: dict[str, int] = {}
    errors: list[str] = []
    for r in results:
        sent.update(r["sent"])
        errors += r["errors"]
    done = sum(sent.values())
    wall = max(r["t1"] for r in results) - min(r["t0"] for r in results) if results else 0.0
    check = check_threads(variant, url, sent)
    cpu = sum(r["cpu_s"] for r in results)
    return {"variant": variant, "workers": workers, "turns": done, "wall_s": wall,
            "turns_per_s": done / wall if wall > 0 else 0.0, "errors": errors,
            "cpu_ms_per_turn": 1000 * cpu / done if done else 0.0,
            "missing_workers": len(procs) - len(results), **check}


def check_threads(variant: str, url: str, sent: dict[str, int]) -> dict[str, int]:
    """Read every thread with a fresh saver: count lost and duplicated turns."""
    from langchain_core.messages import AIMessage, HumanMessage

    lost = duplicated = 0
    with open_saver(variant, url) as saver:
        graph = build_graph(variant, saver)
        for tid, n in sent.items():
            state = graph.get_state({"configurable": {"thread_id": tid}})
            messages = list(state.values.get("messages", ()))
            ids = [m.id for m in messages]
            duplicated += len(ids) - len(set(ids))
            humans = [k for k, m in enumerate(messages) if isinstance(m, HumanMessage)]
            duplicated += max(0, len(humans) - n)
            lost += max(0, n - len(humans))
            # Each user message is answered before the next one (or the end).
            for k, start in enumerate(humans):
                end = humans[k + 1] if k + 1 < len(humans) else len(messages)
                last = messages[end - 1] if end - 1 > start else None
                if not (isinstance(last, AIMessage) and not last.tool_calls):
                    lost += 1
    return {"lost": lost, "duplicated": duplicated}


def run_all(base: str, workers: list[int], threads: int, turns: int,
            timeout: float) -> list[dict[str, Any]]:
    """Every (W, variant) run on its own fresh database, both variants per W in a row."""
    deadline = time.time() + timeout
    rows: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="threadlog-workers-"))
    tag = uuid.uuid4().hex[:6]
    for w in workers:
        for variant in VARIANTS:
            if time.time() > deadline:
                print(f"timeout: skipping W={w} {variant}", file=sys.stderr)
                continue
            url = storage.fresh_target("postgres", base, workdir, f"wk_{tag}_{variant}_{w}")
            row = run(variant, url, w, threads, turns, deadline)
            rows.append(row)
            print(f"  W={w} {variant:9s} {row['turns']} turns in {row['wall_s']:.1f} s "
                  f"= {row['turns_per_s']:.2f} turns/s, "
                  f"worker CPU {row['cpu_ms_per_turn']:.1f} ms/turn; lost {row['lost']}, "
                  f"duplicated {row['duplicated']}, errors {len(row['errors'])}",
                  file=sys.stderr, flush=True)
            for e in row["errors"][:3]:
                print("    " + e.strip().splitlines()[-1], file=sys.stderr)
    return rows


def report(rows: list[dict[str, Any]], threads: int, turns: int) -> bool:
    """Print the table; True when no turn was lost or duplicated."""
    by = {(r["workers"], r["variant"]): r for r in rows}
    print(f"\nMany workers on Postgres: {threads} threads x {turns} turns, model waits "
          f"{MODEL_WAIT_S * 1000:.0f} ms/call; {os.cpu_count()} CPUs, {platform.python_version()}")
    print("| W | threadlog turns/s | LangGraph turns/s | ratio | target "
          "| worker CPU ms/turn (tl / lg) | lost | duplicated |")
    print("|---|---|---|---|---|---|---|---|")
    target = TARGET_LONG if turns >= LONG_TURNS else TARGET
    clean = True
    for w in sorted({r["workers"] for r in rows}):
        a, b = by.get((w, "threadlog")), by.get((w, "langgraph"))
        ta = f"{a['turns_per_s']:.2f}" if a else "-"
        tb = f"{b['turns_per_s']:.2f}" if b else "-"
        verdict, ratio = "-", "-"
        if a and b and b["turns_per_s"] > 0:
            r = a["turns_per_s"] / b["turns_per_s"]
            ratio = f"{r:.2f}x"
            met = r > target if turns >= LONG_TURNS else r >= target
            verdict = ("MET" if met else "SHORT") + (
                f" (> {target}x)" if turns >= LONG_TURNS else f" (>= {target}x)")
        got = [x for x in (a, b) if x]
        lost = "/".join(str(x["lost"]) for x in got)
        dup = "/".join(str(x["duplicated"]) for x in got)
        clean &= all(x["lost"] == 0 and x["duplicated"] == 0 and not x["missing_workers"]
                     for x in got)
        cpu = " / ".join(f"{x['cpu_ms_per_turn']:.1f}" for x in got)
        print(f"| {w} | {ta} | {tb} | {ratio} | {verdict} | {cpu} | {lost} | {dup} |")
    print("(lost/duplicated: threadlog/LangGraph; all must be 0. Targets: >= 0.9x at 20 turns "
          f"per thread, > 1.0x at {LONG_TURNS}; this run has {turns}.)")
    return clean


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--threads", type=int, default=None, help="default 64 (16 with --quick)")
    ap.add_argument("--turns", type=int, default=None, help="default 20 (5 with --quick)")
    ap.add_argument("--quick", action="store_true", help="16 threads x 5 turns")
    ap.add_argument("--timeout", type=float, default=600.0, help="whole run, seconds")
    args = ap.parse_args()
    threads = args.threads or (16 if args.quick else 64)
    turns = args.turns or (5 if args.quick else 20)
    if os.environ.get("THREADLOG_BENCH_POSTGRES_URL"):  # storage.postgres_base reads this
        os.environ["THREADLOG_TEST_POSTGRES_URL"] = os.environ["THREADLOG_BENCH_POSTGRES_URL"]
    t = time.time()
    with storage.postgres_base() as base:
        rows = run_all(base, args.workers, threads, turns, args.timeout)
    clean = report(rows, threads, turns)
    print(f"total {time.time() - t:.0f} s")
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
