"""Bytes `prune(strategy="keep_latest")` frees on a long agent thread (issue 21, item 8).

Contract: prints one table; asserts nothing. Builds one thread of N turns (default 2000)
of `threadlog.create_agent` (offline model, one weather call per turn, `max_turns=3`
context policy: compaction events too) on a fresh SQLite file through
`threadlog.checkpointer`, then prunes it with `keep_latest`, and reports:

* the rows' bytes (`length()` of every checkpoint, metadata and write of the thread:
  `Backend.stored_bytes`) before and after, and how many checkpoints;
* the file's size after `VACUUM` before and after (SQLite keeps freed pages otherwise);
* the prune's wall time, and that the head reads the same messages (ids and digests) and
  the next turn continues.

Usage:
    python benchmarks/prune_bytes.py              # 2000 turns
    python benchmarks/prune_bytes.py --turns 200  # a quick run
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from typing import Any

from langchain_core.tools import tool

import threadlog
from threadlog.checkpoint.backends import backend_of
from threadlog.log.messages import digest

CITIES = ["Beijing", "Shanghai", "Chengdu", "Paris", "Rome", "Lisbon", "Oslo", "Cairo"]


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"{city}: sunny, 24°C, light wind from the south-east"


def _rows_bytes(saver: Any, tid: str) -> tuple[int, int]:
    backend = backend_of(saver.inner)
    namespaces = [""] + [ns for ns, _, _ in backend.namespace_counts(tid)]
    total = count = 0
    for ns in namespaces:
        sizes = backend.stored_bytes(tid, ns) or {}
        total += sum(sizes.values())
        count += len(backend.checkpoint_ids(tid, ns))
    return total, count


def _vacuumed(path: str) -> int:
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.close()
    return os.path.getsize(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="threadlog-prune-")
    path = os.path.join(folder, "thread.sqlite")
    url = f"sqlite:///{path}"
    cfg: Any = {"configurable": {"thread_id": "long"}}
    started = time.perf_counter()
    with threadlog.checkpointer(url) as saver:
        app = threadlog.create_agent(
            threadlog.OfflineChatModel(),
            [get_weather],
            checkpointer=saver,
            context=threadlog.ContextPolicy(max_turns=3),
        )
        for i in range(args.turns):
            # As benchmarks/agent.py: a distinct question each turn (the offline model's
            # ids follow its input).
            a, b = CITIES[i % len(CITIES)], CITIES[(i + 1) % len(CITIES)]
            text = f"Turn {i}: weather in {a} and {b} today?"
            msg = {"role": "user", "content": text, "id": f"u{i}"}
            app.invoke({"messages": [msg]}, cfg)
        built = time.perf_counter() - started
        before_rows, before_n = _rows_bytes(saver, "long")
        head = [(m.id, digest(m)) for m in app.get_state(cfg).values["messages"]]
    before_file = _vacuumed(path)
    with threadlog.checkpointer(url) as saver:
        t0 = time.perf_counter()
        saver.prune(["long"], strategy="keep_latest")  # type: ignore[attr-defined]
        took = time.perf_counter() - t0
        after_rows, after_n = _rows_bytes(saver, "long")
        app = threadlog.create_agent(
            threadlog.OfflineChatModel(),
            [get_weather],
            checkpointer=saver,
            context=threadlog.ContextPolicy(max_turns=3),
        )
        same = [(m.id, digest(m)) for m in app.get_state(cfg).values["messages"]] == head
        nxt = {"role": "user", "content": "After pruning: Oslo?", "id": "next"}
        app.invoke({"messages": [nxt]}, cfg)
        continued = app.get_state(cfg).values["messages"][-1].type == "ai"
    after_file = _vacuumed(path)
    mb = 1024 * 1024
    print(f"prune(keep_latest) on a {args.turns}-turn create_agent thread, SQLite "
          f"(built in {built:.0f} s; {len(head)} messages at the head)")  # fmt: skip
    print("| measure | before | after | freed |")
    print("|---|---|---|---|")
    print(f"| checkpoints | {before_n} | {after_n} | {before_n - after_n} |")
    print(f"| rows' bytes (checkpoints, metadata, writes) | {before_rows / mb:.2f} MB | "
          f"{after_rows / mb:.2f} MB | {(before_rows - after_rows) / mb:.2f} MB "
          f"({100 * (before_rows - after_rows) / before_rows:.0f}%) |")  # fmt: skip
    print(f"| file after VACUUM | {before_file / mb:.2f} MB | {after_file / mb:.2f} MB | "
          f"{(before_file - after_file) / mb:.2f} MB |")  # fmt: skip
    print(f"prune took {took:.2f} s; head reads the same: {same}; next turn answered: {continued}")


if __name__ == "__main__":
    main()
