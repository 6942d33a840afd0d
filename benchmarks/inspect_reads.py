"""How long the inspector takes to list 1000 threads and to open an 80-turn thread.

    PYTHONPATH=src python benchmarks/inspect_reads.py [--dir DIR] [--threads 1000] [--turns 80]

Builds (once, cached in --dir) a SQLite database written by `threadlog.create_agent` with the
offline model: `--threads` threads of two turns each (20 run for real, the rest copied
row by row under new thread ids, so the rows are exactly what a run stores), and one thread
of `--turns` turns. Then it times, in subprocesses so every figure includes start-up:

* `threadlog threads --db FILE` (the listing) against LangGraph's own way of doing it:
  `saver.list(None)` for the thread ids, then `graph.get_state` per thread;
* `threadlog inspect --db FILE --thread long` (the whole long thread), `--last 20`, and
  LangGraph's `get_state_history` over the same thread as the baseline.

With `--only cold` it builds (once) a thread of `--messages` messages (20,000 by default:
turns of `--batch` user messages each answered by as many replies; 1 by default, a chat
app's one checkpoint pair per exchange) and times a cold
`threadlog inspect --thread big --last 20` on it — a fresh process, nothing cached: what a
user waits for after `threads` names a long thread.

Each figure is wall and CPU seconds (user + sys of the child). Nothing here is asserted: the
numbers go into the issue's closing note.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SRC = HERE / "src"


def build(path: Path, threads: int, turns: int) -> None:
    from langchain_core.tools import tool

    import threadlog

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: light rain, 70% chance, 22°C"

    questions = ["Beijing and Shanghai: umbrella today?", "And Tokyo?", "Thanks!"]
    real = min(threads, 20)
    with threadlog.checkpointer(f"sqlite:///{path}") as saver:
        graph = threadlog.create_agent(
            threadlog.OfflineChatModel(), [get_weather], checkpointer=saver
        )
        for i in range(real):
            cfg = {"configurable": {"thread_id": f"t-{i:05d}"}}
            for q in questions[:2]:
                graph.invoke({"messages": [("user", f"{q} #{i}")]}, cfg)
        cfg = {"configurable": {"thread_id": "long"}}
        for i in range(turns):
            graph.invoke({"messages": [("user", questions[i % 3] + f" (turn {i})")]}, cfg)
    conn = sqlite3.connect(path)
    with conn:
        for i in range(real, threads):
            src = f"t-{i % real:05d}"
            for table in ("checkpoints", "writes"):
                cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
                sel = ", ".join("?" if c == "thread_id" else c for c in cols)
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(cols)}) SELECT {sel} FROM {table} "
                    "WHERE thread_id = ?",
                    (f"t-{i:05d}", src),
                )
    conn.close()


def build_big(path: Path, messages: int, batch: int) -> None:
    """One thread `big` of `messages` messages: turns of `batch` user messages, each
    answered by one reply (a chat app: batch 1, one checkpoint pair per exchange)."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, StateGraph

    import threadlog

    class State(threadlog.MessagesState):
        pass

    def reply(state: State) -> dict[str, object]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply {n + i}: " + "ok " * 20) for i in range(batch)]}

    b: StateGraph[State, None, State, State] = StateGraph(State)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    with threadlog.checkpointer(f"sqlite:///{path}") as saver:
        graph = b.compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "big"}}
        for turn in range(messages // (2 * batch)):
            asked = [("user", f"question {turn}.{i}: " + "why " * 20) for i in range(batch)]
            graph.invoke({"messages": asked}, cfg)  # type: ignore[arg-type]


BASELINE_LIST = """
import sys
from langgraph.checkpoint.sqlite import SqliteSaver
from threadlog.inspect.source import stand_in
with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    ids = sorted({t.config["configurable"]["thread_id"] for t in saver.list(None)})
    graph = stand_in(saver, None)
    n = 0
    for tid in ids:
        n += len(graph.get_state({"configurable": {"thread_id": tid}}).values["messages"])
print(len(ids), "threads", n, "messages")
"""

BASELINE_HISTORY = """
import sys
from langgraph.checkpoint.sqlite import SqliteSaver
from threadlog.inspect.source import stand_in
with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    graph = stand_in(saver, None)
    n = sum(1 for _ in graph.get_state_history({"configurable": {"thread_id": sys.argv[2]}}))
print(n, "checkpoints")
"""


def timed(label: str, argv: list[str], src: Path = SRC) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr[-300:]}"
    print(f"{label:<48} wall {wall:7.2f} s  cpu {cpu:7.2f} s  {status}", flush=True)
    return wall, cpu


def ratio(label: str, ours: tuple[float, float], base: tuple[float, float]) -> None:
    print(f"  ratio {label}: wall {ours[0] / base[0]:.2f}x  cpu {ours[1] / base[1]:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "threadlog-bench"))
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=80)
    ap.add_argument("--messages", type=int, default=20_000, help="the cold thread's size")
    ap.add_argument("--batch", type=int, default=1, help="user messages per turn (cold)")
    ap.add_argument("--only", choices=["list", "long", "cold"], help="run only one group")
    ap.add_argument(
        "--before", metavar="SRC",
        help="another threadlog source tree (e.g. `git archive <old commit> src`) whose "
        "`threadlog inspect` is timed too, as the before figure",
    )
    args = ap.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    cli = [py, "-m", "threadlog.cli"]
    if args.only == "cold":
        big = root / f"big-{args.messages}-{args.batch}.db"
        if not big.exists():
            t0 = time.perf_counter()
            build_big(big, args.messages, args.batch)
            print(f"built {big} in {time.perf_counter() - t0:.1f} s", flush=True)
        argv = [*cli, "inspect", "--db", str(big), "--thread", "big", "--last", "20"]
        if args.before:
            timed(f"before: cold inspect --last 20 ({args.messages} msgs)", argv,
                  Path(args.before))
        timed(f"cold inspect --last 20 ({args.messages} msgs)", argv)
        return
    db = root / f"bench-{args.threads}-{args.turns}.db"
    if not db.exists():
        t0 = time.perf_counter()
        build(db, args.threads, args.turns)
        print(f"built {db} in {time.perf_counter() - t0:.1f} s", flush=True)
    if args.only in (None, "list"):
        base = timed("langgraph: list + get_state per thread", [py, "-c", BASELINE_LIST, str(db)])
        ours = timed("threadlog threads (all)", [*cli, "threads", "--db", str(db), "--limit", "0"])
        ratio("threads (all) / langgraph's get_state loop", ours, base)
        timed("threadlog threads (default --limit 20)", [*cli, "threads", "--db", str(db)])
        timed("threadlog threads --json (all)", [*cli, "threads", "--db", str(db), "--json",
                                                  "--limit", "0"])
    if args.only in (None, "list"):
        timed("threadlog --help", [*cli, "--help"])
        if args.before:
            timed("before: threadlog --help", [*cli, "--help"], Path(args.before))
    if args.only in (None, "long"):
        base = timed(
            "langgraph: get_state_history(long)", [py, "-c", BASELINE_HISTORY, str(db), "long"]
        )
        if args.before:
            before = Path(args.before)
            timed("before: threadlog inspect --thread long",
                  [*cli, "inspect", "--db", f"sqlite:///{db}", "--thread", "long"], before)
            timed("before: threadlog inspect --thread long --last 20",
                  [*cli, "inspect", "--db", f"sqlite:///{db}", "--thread", "long", "--last", "20"],
                  before)
        ours = timed("threadlog inspect --thread long",
                     [*cli, "inspect", "--db", f"sqlite:///{db}", "--thread", "long"])
        ratio("inspect long / langgraph's get_state_history", ours, base)
        timed("threadlog inspect --thread long --last 20",
              [*cli, "inspect", "--db", f"sqlite:///{db}", "--thread", "long", "--last", "20"])
        timed("threadlog export --thread long",
              [*cli, "export", "--db", str(db), "--thread", "long"])


if __name__ == "__main__":
    main()
