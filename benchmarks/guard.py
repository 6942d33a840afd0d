"""The run guard's cost: guard overhead as a share of a turn's CPU time (issue 12, target 2).

Runs the BENCHMARKS.md weather loop (human → AI with 2 calls → 2 results from two `Send`
tasks → AI; 5 messages, 4 supersteps per turn) through `threadlog.checkpointer(url)` as
shipped (guard + history cache) and through `threadlog.checkpointer(url, guard=False)`
(the same saver and cache, no guard), interleaved turn by turn in one process on two
databases, so both see the same machine load. Reported per point:

* CPU ms/turn (process time, all threads; median) and wall ms/turn, both variants;
* **guard overhead** = (guarded - unguarded) / guarded CPU per turn; target ≤ 10%.

Points: the last 10% of `--turns` turns (default 400) on SQLite and Postgres; and turns
on a thread that already holds `--long` messages (default 20 000, SQLite; the thread is
built once without the guard, then the file is copied for both variants).

    python benchmarks/guard.py                       # 400 turns sqlite+postgres, 20k messages
    python benchmarks/guard.py --quick               # 60 turns, 2 000 messages, sqlite only
    python benchmarks/guard.py --backends sqlite --long 0

Postgres: THREADLOG_TEST_POSTGRES_URL, else a throwaway `pgserver` instance.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

import threadlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage import postgres_base

TARGET = 0.10


def build_loop(checkpointer: Any) -> Any:
    def agent(state: threadlog.MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        n = len(state["messages"])
        if isinstance(last, HumanMessage):
            calls = [
                {"name": "get_weather", "args": {"city": city}, "id": f"call-{last.id}-{i}"}
                for i, city in enumerate(("Beijing", "Shanghai"))
            ]
            text = f"checking the weather for you, one moment ({n})" + " ." * 40
            return {"messages": [AIMessage(text, tool_calls=calls, id=f"ai-{last.id}")]}
        return {"messages": [AIMessage(f"sunny, take no umbrella ({n})" + " ." * 50,
                                       id=f"answer-{last.id}")]}

    def tool(call: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [ToolMessage(f"{call['args']['city']}: sunny, 21°C" + " ." * 50,
                                         tool_call_id=call["id"], name=call["name"],
                                         id=f"result-{call['id']}")]}

    def route(state: threadlog.MessagesState) -> Any:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [Send("tool", c) for c in last.tool_calls]
        return END

    g = StateGraph(threadlog.MessagesState)
    g.add_node("agent", agent)
    g.add_node("tool", tool)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tool", END])
    g.add_edge("tool", "agent")
    return g.compile(checkpointer=checkpointer)


CONFIG = {"configurable": {"thread_id": "bench"}}


def turn(graph: Any, i: int) -> tuple[float, float]:
    text = f"Weather in Beijing and Shanghai today? (turn {i})" + " ." * 30
    c0, w0 = time.process_time(), time.perf_counter()
    graph.invoke({"messages": [HumanMessage(text, id=f"h{i}")]}, CONFIG)
    return (time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000


def interleaved(guarded_url: str, plain_url: str, start: int, turns: int,
                measure_from: int) -> dict[str, dict[str, float]]:
    cpu: dict[str, list[float]] = {"guard": [], "plain": []}
    wall: dict[str, list[float]] = {"guard": [], "plain": []}
    with ExitStack() as stack:
        graphs = {
            "guard": build_loop(stack.enter_context(threadlog.checkpointer(guarded_url))),
            "plain": build_loop(
                stack.enter_context(threadlog.checkpointer(plain_url, guard=False))
            ),
        }
        for i in range(start, start + turns):
            order = ("guard", "plain") if i % 2 else ("plain", "guard")
            for name in order:
                c, w = turn(graphs[name], i)
                if i - start >= measure_from:
                    cpu[name].append(c)
                    wall[name].append(w)
    return {
        name: {"cpu": statistics.median(cpu[name]), "wall": statistics.median(wall[name])}
        for name in cpu
    }


def report(label: str, res: dict[str, dict[str, float]]) -> float:
    g, p = res["guard"], res["plain"]
    overhead = (g["cpu"] - p["cpu"]) / g["cpu"]
    verdict = "MET" if overhead <= TARGET else "SHORT"
    print(
        f"{label:<34} guard {g['cpu']:7.1f} cpu ms ({g['wall']:7.1f} wall) | "
        f"no guard {p['cpu']:7.1f} cpu ms ({p['wall']:7.1f} wall) | "
        f"overhead {overhead * 100:5.1f}% of CPU  {verdict} (≤ {TARGET:.0%})",
        flush=True,
    )
    return overhead


def sqlite_url(folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    with sqlite3.connect(path) as conn:  # WAL persists in the file: fewer fsyncs measured
        conn.execute("PRAGMA journal_mode=WAL")
    return f"sqlite:///{path}"


def fresh_pg(base: str) -> str:
    import psycopg

    name = "tl_guard_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(base)._replace(path="/" + name))


def long_thread(folder: str, messages: int, turns: int) -> dict[str, dict[str, float]]:
    """Build a `messages`-message thread once (no guard), copy it, measure both."""
    seed = sqlite_url(folder, "seed.db")
    with threadlog.checkpointer(seed, guard=False) as saver:
        graph = build_loop(saver)
        for i in range(messages // 5):
            graph.invoke({"messages": [HumanMessage(f"q{i}", id=f"s{i}")]}, CONFIG)
    path = seed[len("sqlite:///"):]
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for name in ("long-guard.db", "long-plain.db"):
        shutil.copy(path, os.path.join(folder, name))
    return interleaved(
        f"sqlite:///{os.path.join(folder, 'long-guard.db')}",
        f"sqlite:///{os.path.join(folder, 'long-plain.db')}",
        start=10**6, turns=turns, measure_from=turns // 4,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=400)
    ap.add_argument("--long", type=int, default=20_000, help="messages; 0 skips")
    ap.add_argument("--long-turns", type=int, default=40)
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.turns, args.long, args.backends = 60, 2000, ["sqlite"]
    print(f"machine: {os.cpu_count()} cpus, {platform.platform()}, Python "
          f"{platform.python_version()}; threadlog from {os.path.dirname(threadlog.__file__)}")
    last10 = max(1, args.turns // 10)
    with tempfile.TemporaryDirectory(prefix="threadlog-guard-") as folder, ExitStack() as st:
        for backend in args.backends:
            if backend == "sqlite":
                urls = sqlite_url(folder, "g.db"), sqlite_url(folder, "p.db")
            else:
                base = st.enter_context(postgres_base())
                urls = fresh_pg(base), fresh_pg(base)
            res = interleaved(*urls, start=0, turns=args.turns,
                              measure_from=args.turns - last10)
            report(f"{backend}, last 10% of {args.turns} turns", res)
        if args.long:
            res = long_thread(folder, args.long, args.long_turns)
            report(f"sqlite, thread of {args.long} messages", res)


if __name__ == "__main__":
    main()
