"""`threadlog` under a real `langgraph dev`, on the server's own saver and on threadlog's.

Issue 12 target 4 (`threadlog.MessagesState` vs LangGraph's `DeltaChannel`, both on the
server's own checkpointer) and issue 21 part 4 (the same loop on
`threadlog.server.checkpointer`, the history-cached saver, beside the server's own).

Contract: starts up to four `langgraph dev` servers (offline, no reload, free loopback
ports): `builtin`, the server's own checkpointer, serving the scripted loop of
`benchmarks/storage.py` twice — `threadlog` (`threadlog.Messages`) and `delta`
(`DeltaChannel` + LangGraph's messages reducer) —, and `saver`, the same `threadlog` loop
with `"checkpointer": {"backend": "custom", "path": "threadlog.server.checkpointer"}` (a
SQLite file in its app folder); `floor`, a server on the same checkpointer serving
`storage.build_graph("floor")` — the same supersteps and parallel tasks per turn, a state
that never grows — so what the server spends per turn whatever the history (its run
bookkeeping) is measured beside it, and `threadlog+saver`'s figures are also printed above
that floor; `plain` serves the same floor graph on LangGraph's own `AsyncSqliteSaver` as its
custom checkpointer (lane `floor+plain`: what the server's run bookkeeping costs with no
threadlog in it). One thread per lane — `threadlog`, `delta` (builtin), `threadlog+saver`,
`floor` and `floor+plain` — driven turn by turn through the official SDK (`runs.stream`);
the servers are driven at the same time (one client thread each; the lanes of one server
interleaved). Per turn it records the client's wall time and the server's CPU time (every
process in that server's process group, from /proc), and prints at each size the median wall
and mean CPU over the 20 turns before it (`--window`), the ratio threadlog / DeltaChannel,
and at the end each lane's CPU per turn @largest / @smallest size. Asserts nothing; the
servers are always stopped. `--lanes` picks lanes; `--timeout` stops driving (then it says
where); `--no-persistence` turns off the dev server's own file persistence (its flush loop
pickles its whole store, every thread's values included, whatever the checkpointer):
langgraph-cli drops the config's `disable_persistence`, so the server is started through a
launcher that keeps it, and the run stops if the server's log still shows the flush loop
starting.

    python benchmarks/dropin_dev.py --sizes 100 400
    python benchmarks/dropin_dev.py --sizes 100 2000 --lanes threadlog threadlog+saver
    python benchmarks/dropin_dev.py --sizes 100 2000 --lanes threadlog threadlog+saver floor \
        --no-persistence
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

LOOPS = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import storage

threadlog_loop = storage.build_graph("threadlog", None)
delta_loop = storage.build_graph("delta", None)
floor_loop = storage.build_graph("floor", None)
"""
# `langgraph dev` itself, except that its config check keeps `disable_persistence`: langgraph-cli
# (0.4.x here) rebuilds the config from the keys it knows and drops that one, so the server got
# `disable_persistence=False` and its flush loop pickled the whole in-memory store (every
# thread's values, every run) every 10 s whatever the file said — checked by the server's log
# line "Starting dev persistence flush loop" and its `.langgraph_api/*.pckl` files.
KEEP_DISABLE_PERSISTENCE = """
import json, pathlib, sys
import langgraph_cli.cli, langgraph_cli.config as config

_validate = config.validate_config_file

def validate_config_file(path):
    checked = _validate(path)
    checked["disable_persistence"] = bool(
        json.loads(pathlib.Path(path).read_text()).get("disable_persistence"))
    return checked

config.validate_config_file = validate_config_file
sys.argv[0] = "langgraph"
langgraph_cli.cli.cli()
"""
LANES = {"threadlog": ("builtin", "threadlog"), "delta": ("builtin", "delta"),
         "threadlog+saver": ("saver", "threadlog"), "floor": ("floor", "floor"),
         "floor+plain": ("plain", "floor")}
SAVER = {"backend": "custom", "path": "threadlog.server.checkpointer"}
# LangGraph's own AsyncSqliteSaver as the server's custom checkpointer, no threadlog in it.
PLAIN = {"backend": "custom", "path": "./plain_saver.py:checkpointer"}
PLAIN_SAVER = """
import contextlib
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

@contextlib.asynccontextmanager
async def checkpointer():
    async with AsyncSqliteSaver.from_conn_string("plain-checkpoints.sqlite") as saver:
        yield saver
"""
# Each server's checkpointer: `floor` is threadlog's saver with no history, `plain` the
# same graph on LangGraph's saver (what the server's own run bookkeeping costs).
CHECKPOINTERS: dict[str, dict[str, str] | None] = {
    "builtin": None, "saver": SAVER, "floor": SAVER, "plain": PLAIN}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) of every live process in the process group."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _human(turn: int) -> dict[str, Any]:
    pad = "x" * 100
    return {"messages": [{"type": "human", "id": str(uuid.uuid4()),
                          "content": f"Turn {turn}: the weather in two cities today? {pad}"}]}


def _start(name: str, graphs: list[str], checkpointer: dict[str, str] | None,
           persist: bool = True) -> tuple[subprocess.Popen[bytes], str, Path]:
    app = Path(tempfile.mkdtemp(prefix=f"threadlog-dev-bench-{name}-"))
    (app / "loops.py").write_text(LOOPS)
    (app / "plain_saver.py").write_text(PLAIN_SAVER)
    config: dict[str, Any] = {"dependencies": ["."],
                              "graphs": {g: f"./loops.py:{g}_loop" for g in graphs}}
    if checkpointer:
        config["checkpointer"] = checkpointer
    if not persist:
        config["disable_persistence"] = True  # no flush loop pickling the dev server's store
    (app / "langgraph.json").write_text(json.dumps(config))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LANGSMITH_", "OPENAI_", "THREADLOG_CHECKPOINTER_URL"))}
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false",
               PYTHONPATH=f"{REPO / 'src'}{os.pathsep}{env.get('PYTHONPATH', '')}")
    log = (app / "langgraph-dev.log").open("wb")
    cli = [str(Path(sys.executable).parent / "langgraph")]
    if not persist:
        cli = [sys.executable, "-c", KEEP_DISABLE_PERSISTENCE]
    proc = subprocess.Popen(
        [*cli, "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=app, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            raise SystemExit(f"langgraph dev ({name}) did not start:\n"
                             + (app / "langgraph-dev.log").read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2):
                pass
        except OSError:
            time.sleep(0.3)
            continue
        if not persist and b"Starting dev persistence flush loop" in (
                app / "langgraph-dev.log").read_bytes():
            _stop(proc)
            raise SystemExit(f"langgraph dev ({name}) started its flush loop despite "
                             "disable_persistence: the figures would not be persistence-off")
        return proc, url, app


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class Lane:
    def __init__(self, name: str, graph: str) -> None:
        self.name, self.graph = name, graph
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.at: dict[str, dict[str, float]] = {}
        self.error: str | None = None


def _drive(url: str, pgid: int, lanes: list[Lane], sizes: list[int], t_end: float,
           done: list[str], window: int = 20) -> None:
    """One server's lanes, interleaved turn by turn, until the largest size or `t_end`."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    threads = {lane.name: client.threads.create()["thread_id"] for lane in lanes}
    for t in range(max(sizes)):
        if time.monotonic() > t_end:
            done.append(f"{'/'.join(lane.name for lane in lanes)} stopped at turn {t} "
                        "(--timeout)")
            return
        for lane in lanes:
            c0, w0 = _group_cpu(pgid), time.perf_counter()
            given = {"n": 1} if lane.graph == "floor" else _human(t)
            for part in client.runs.stream(threads[lane.name], lane.graph, input=given,
                                           stream_mode="updates"):
                if part.event == "error":
                    lane.error = f"run failed on turn {t}: {part.data}"
                    return
            lane.wall.append(time.perf_counter() - w0)
            lane.cpu.append(_group_cpu(pgid) - c0)
            if t + 1 in sizes:
                # CPU is read in clock ticks (10 ms): a mean over `window` turns, not a median
                lane.at[str(t + 1)] = {"ms": 1000 * statistics.median(lane.wall[-window:]),
                                       "cpu_ms": 1000 * statistics.fmean(lane.cpu[-window:])}
                print(f"@{t + 1} turns: {lane.name} {lane.at[str(t + 1)]['ms']:.1f} ms "
                      f"(server CPU {lane.at[str(t + 1)]['cpu_ms']:.1f})", flush=True)
    for lane in lanes:
        values = client.threads.get_state(threads[lane.name])["values"]
        if lane.graph == "floor":
            done.append(f"{lane.name} thread's state: n = {values['n']} (no history)")
        else:
            done.append(f"{lane.name} thread holds {len(values['messages'])} messages")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 400])
    p.add_argument("--lanes", nargs="+", choices=list(LANES), default=list(LANES))
    p.add_argument("--timeout", type=float, default=1800, help="stop driving after this")
    p.add_argument("--json", default=None)
    p.add_argument("--window", type=int, default=20,
                   help="turns before each size its figures are the median / mean of")
    p.add_argument("--no-persistence", action="store_true",
                   help="`disable_persistence` in langgraph.json: the dev server keeps its own "
                        "store in memory only (no periodic pickling of every thread's values)")
    a = p.parse_args()
    sizes = sorted(a.sizes)
    lanes = [Lane(name, LANES[name][1]) for name in a.lanes]
    by_server: dict[str, list[Lane]] = {}
    for lane in lanes:
        by_server.setdefault(LANES[lane.name][0], []).append(lane)
    servers: dict[str, tuple[subprocess.Popen[bytes], str, Path]] = {}
    done: list[str] = []
    try:
        for name, its in by_server.items():
            servers[name] = _start(name, sorted({lane.graph for lane in its}),
                                   CHECKPOINTERS[name], persist=not a.no_persistence)
        t_end = time.monotonic() + a.timeout
        drivers = [threading.Thread(target=_drive,
                                    args=(servers[n][1], servers[n][0].pid, its, sizes, t_end,
                                          done, a.window))
                   for n, its in by_server.items()]
        for d in drivers:
            d.start()
        for d in drivers:
            d.join()
    finally:
        for proc, _, _ in servers.values():
            _stop(proc)
    for line in done:
        print(line, flush=True)
    for lane in lanes:
        if lane.error:
            print(f"{lane.name}: {lane.error}", flush=True)
    named = {lane.name: lane for lane in lanes}
    for size in map(str, sizes):
        if "threadlog" in named and "delta" in named:
            tl, dl = named["threadlog"].at.get(size), named["delta"].at.get(size)
            if tl and dl:
                print(f"@{size} turns, builtin saver: threadlog {tl['ms']:.1f} ms (server CPU "
                      f"{tl['cpu_ms']:.1f}), DeltaChannel {dl['ms']:.1f} ms (CPU "
                      f"{dl['cpu_ms']:.1f}): ratio wall {tl['ms'] / dl['ms']:.2f}x, CPU "
                      f"{tl['cpu_ms'] / max(dl['cpu_ms'], 1e-9):.2f}x", flush=True)
    for lane in lanes:
        reached = [s for s in map(str, sizes) if s in lane.at]
        if len(reached) >= 2:
            lo, hi = lane.at[reached[0]], lane.at[reached[-1]]
            print(f"{lane.name}: server CPU per turn @{reached[-1]} / @{reached[0]} = "
                  f"{hi['cpu_ms']:.1f} / {lo['cpu_ms']:.1f} ms = "
                  f"{hi['cpu_ms'] / max(lo['cpu_ms'], 1e-9):.2f}x", flush=True)
    if "threadlog+saver" in named and "floor" in named:
        # What the thread's history costs the server, above what its runs cost it anyway.
        tl, fl = named["threadlog+saver"].at, named["floor"].at
        both = [s for s in map(str, sizes) if s in tl and s in fl]
        for size in both:
            print(f"@{size} turns: threadlog+saver {tl[size]['cpu_ms']:.1f} ms, floor "
                  f"{fl[size]['cpu_ms']:.1f} ms: above the floor "
                  f"{tl[size]['cpu_ms'] - fl[size]['cpu_ms']:.1f} ms", flush=True)
        if len(both) >= 2:
            lo, hi = both[0], both[-1]
            above_lo = tl[lo]["cpu_ms"] - fl[lo]["cpu_ms"]
            above_hi = tl[hi]["cpu_ms"] - fl[hi]["cpu_ms"]
            print(f"threadlog+saver above the floor @{hi} / @{lo} = {above_hi:.1f} / "
                  f"{above_lo:.1f} ms = {above_hi / max(above_lo, 1e-9):.2f}x; the floor's own "
                  f"@{hi} / @{lo} = {fl[hi]['cpu_ms'] / max(fl[lo]['cpu_ms'], 1e-9):.2f}x",
                  flush=True)
    if "floor" in named and "floor+plain" in named:
        fl, pl = named["floor"].at, named["floor+plain"].at
        for size in (s for s in map(str, sizes) if s in fl and s in pl):
            print(f"@{size} turns, no history: threadlog's saver {fl[size]['cpu_ms']:.1f} ms, "
                  f"LangGraph's AsyncSqliteSaver {pl[size]['cpu_ms']:.1f} ms", flush=True)
    if a.json:
        # Each lane's figures at each size, and every turn's (wall, server CPU) seconds:
        # any other window can be computed afterwards.
        Path(a.json).write_text(json.dumps(
            {lane.name: {**lane.at, "turns": list(zip(lane.wall, lane.cpu, strict=True))}
             for lane in lanes}, indent=1))


if __name__ == "__main__":
    main()
