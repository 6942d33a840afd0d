"""Issue 12 target 4 under a real `langgraph dev`: `threadlog.MessagesState` vs LangGraph's
`DeltaChannel`, each graph served with the server's own checkpointer (no threadlog wrapper).

Contract: starts `langgraph dev` (offline, no reload) on a temporary app that serves the
scripted loop of `benchmarks/storage.py` twice — `threadlog` (`threadlog.Messages`) and
`delta` (`DeltaChannel` + LangGraph's messages reducer) — and drives one thread on each,
turn by turn, interleaved, through the official SDK (`runs.stream`). Per turn it records the
client's wall time and the server's CPU time (every process in the server's process group,
from /proc), and prints the median wall and mean CPU over the 20 turns before each size with
the ratio threadlog / DeltaChannel. Asserts nothing; the server is always stopped.

    python benchmarks/dropin_dev.py --sizes 100 400
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
"""


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 400])
    p.add_argument("--timeout", type=float, default=1800, help="stop driving after this")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    from langgraph_sdk import get_sync_client

    app = Path(tempfile.mkdtemp(prefix="threadlog-dev-bench-"))
    (app / "loops.py").write_text(LOOPS)
    (app / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."],
        "graphs": {"threadlog": "./loops.py:threadlog_loop", "delta": "./loops.py:delta_loop"},
    }))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "OPENAI_"))}
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false",
               PYTHONPATH=f"{REPO / 'src'}{os.pathsep}{env.get('PYTHONPATH', '')}")
    log = (app / "langgraph-dev.log").open("wb")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "langgraph"), "dev", "--no-browser", "--no-reload",
         "--port", str(port)],
        cwd=app, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("langgraph dev did not start:\n"
                                 + (app / "langgraph-dev.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        client = get_sync_client(url=url)
        threads = {g: client.threads.create()["thread_id"] for g in ("threadlog", "delta")}
        wall: dict[str, list[float]] = {g: [] for g in threads}
        cpu: dict[str, list[float]] = {g: [] for g in threads}
        at: dict[str, dict[str, dict[str, float]]] = {g: {} for g in threads}
        t_end = time.monotonic() + a.timeout
        for t in range(max(a.sizes)):
            if time.monotonic() > t_end:
                print(f"stopped at turn {t} (--timeout)", flush=True)
                break
            for g, thread in threads.items():
                c0, w0 = _group_cpu(proc.pid), time.perf_counter()
                for part in client.runs.stream(thread, g, input=_human(t), stream_mode="updates"):
                    if part.event == "error":
                        raise SystemExit(f"run failed on turn {t}: {part.data}")
                wall[g].append(time.perf_counter() - w0)
                cpu[g].append(_group_cpu(proc.pid) - c0)
                if t + 1 in a.sizes:
                    # CPU is read in clock ticks (10 ms): a mean over 20 turns, not a median
                    at[g][str(t + 1)] = {"ms": 1000 * statistics.median(wall[g][-20:]),
                                         "cpu_ms": 1000 * statistics.fmean(cpu[g][-20:])}
            if t + 1 in a.sizes:
                tl, dl = at["threadlog"][str(t + 1)], at["delta"][str(t + 1)]
                print(f"@{t + 1} turns: threadlog {tl['ms']:.1f} ms (server CPU "
                      f"{tl['cpu_ms']:.1f}), DeltaChannel {dl['ms']:.1f} ms (CPU "
                      f"{dl['cpu_ms']:.1f}): ratio wall {tl['ms'] / dl['ms']:.2f}x, CPU "
                      f"{tl['cpu_ms'] / max(dl['cpu_ms'], 1e-9):.2f}x", flush=True)
        n = len(client.threads.get_state(threads["threadlog"])["values"]["messages"])
        print(f"threadlog thread holds {n} messages", flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(at, indent=1))
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
