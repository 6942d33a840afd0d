"""How long `threadlog check` takes over 10,000 threads of 50 messages, and its memory.

    PYTHONPATH=src python benchmarks/check.py [--dir DIR] [--threads 10000 2000]
        [--formats threadlog add_messages]

Builds (once per size, cached in --dir) a SQLite database per format: two template threads
of 50 messages each are written by a real agent with the offline model — threadlog's
weather agent (`create_agent`, the message log) or LangGraph's `create_react_agent`
(plain `add_messages`) — 12 weather turns and a "thanks!" turn, and a poisoned one whose
13th turn crashed in its tool (a call with no result). Their rows are then copied under new
thread ids (one in a hundred from the poisoned template), so every thread is stored
exactly as a run stores it (for `add_messages`, whose saver stores the whole list in every
checkpoint, only the head checkpoint is copied: it is all `check` reads). Then
`threadlog check --db FILE` runs in a subprocess, so the figure includes start-up; wall
and CPU seconds and the child's peak RSS are printed per size, to show the time per thread
and that memory does not grow with the thread count.
Nothing is asserted: the figures go into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
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
QUESTIONS = [
    f"{city} today: umbrella?"
    for city in ("Beijing", "Shanghai", "Guangzhou", "Shenzhen", "Hangzhou", "Chengdu") * 2
]


class Crash(BaseException):
    pass


def _templates(path: Path, fmt: str) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import StructuredTool

    import threadlog
    from threadlog.examples.weather import build_graph, get_weather

    def crash(city: str) -> str:
        raise Crash(city)

    crashing = StructuredTool.from_function(func=crash, name="get_weather", description="w")
    url = f"sqlite:///{path}"

    def run(graph: object, broken: object, saver: object) -> None:
        for tid, last in (("tmpl-clean", None), ("tmpl-open", broken)):
            cfg = {"configurable": {"thread_id": tid}}
            for q in QUESTIONS:
                graph.invoke({"messages": [HumanMessage(q)]}, cfg)  # type: ignore[attr-defined]
            if last is None:
                graph.invoke({"messages": [HumanMessage("thanks!")]}, cfg)  # type: ignore[attr-defined]
            else:
                with contextlib.suppress(Crash):
                    last.invoke({"messages": [HumanMessage("Wuhan?")]}, cfg)  # type: ignore[attr-defined]

    if fmt == "threadlog":
        with threadlog.checkpointer(url) as saver:
            from threadlog import OfflineChatModel, create_agent

            run(
                build_graph(checkpointer=saver),
                create_agent(OfflineChatModel(), [crashing], checkpointer=saver),
                saver,
            )
        return
    import warnings

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.prebuilt import create_react_agent

    from threadlog import OfflineChatModel

    warnings.simplefilter("ignore")
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.setup()
        model = OfflineChatModel()
        run(
            create_react_agent(model, [get_weather], checkpointer=saver),
            create_react_agent(model, [crashing], checkpointer=saver),
            saver,
        )


def build(path: Path, fmt: str, threads: int) -> None:
    if path.exists():
        return
    tmp = path.with_suffix(".tmp")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(str(tmp) + suffix)
    _templates(tmp, fmt)
    conn = sqlite3.connect(tmp)
    conn.execute("PRAGMA synchronous=OFF")
    # A plain saver stores the whole list in every checkpoint (50 messages x 50
    # checkpoints a thread): its copies keep only the head row, which is all `check` reads.
    heads_only = fmt != "threadlog"
    heads = dict(
        conn.execute(
            "SELECT thread_id, max(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
            "GROUP BY thread_id"
        ).fetchall()
    )
    for table in ("checkpoints", "writes"):
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        rest = ", ".join(c for c in cols if c != "thread_id")
        sql = (
            f"INSERT INTO {table} (thread_id, {rest}) "
            f"SELECT ?, {rest} FROM {table} WHERE thread_id = ?"
        )
        if heads_only:
            sql += " AND checkpoint_id = ?"
        for i in range(threads):
            template = "tmpl-open" if i % 100 == 0 else "tmpl-clean"
            params = (f"thread-{i:05d}", template) + ((heads[template],) if heads_only else ())
            conn.execute(sql, params)
    for table in ("checkpoints", "writes"):
        conn.execute(f"DELETE FROM {table} WHERE thread_id LIKE 'tmpl-%'")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()
    os.replace(tmp, path)


def timed(argv: list[str]) -> tuple[float, float, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout.splitlines() + proc.stderr.splitlines()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "tl-check-bench"))
    parser.add_argument("--threads", type=int, nargs="+", default=[10_000, 2_000])
    parser.add_argument("--formats", nargs="+", default=["threadlog", "add_messages"])
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    for fmt in args.formats:
        for n in args.threads:
            db = Path(args.dir) / f"{fmt}-{n}.db"
            t0 = time.perf_counter()
            build(db, fmt, n)
            made = time.perf_counter() - t0
            # Peak RSS of RUSAGE_CHILDREN is the largest child so far: a fresh wrapper
            # per size reports the check's own (its only child).
            code = (
                "import resource, subprocess, sys;"
                f"subprocess.run([sys.executable, '-m', 'threadlog', 'check', '--db', {str(db)!r}],"
                " stdout=sys.stdout);"
                "print('maxrss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
            )
            wall, cpu, out = timed([sys.executable, "-c", code])
            summary = next((x for x in out if x.startswith("checked ")), "?")
            rss = next((int(x.split()[1]) for x in out if x.startswith("maxrss_kb")), 0)
            size = db.stat().st_size / 1e6
            print(
                f"{fmt:>12} {n:>6} threads ({size:.0f} MB, built in {made:.0f} s): "
                f"wall {wall:.1f} s, CPU {cpu:.1f} s, {1000 * wall / n:.2f} ms/thread, "
                f"peak RSS {rss / 1024:.0f} MB\n{'':>14}{summary}",
                flush=True,
            )


if __name__ == "__main__":
    main()
