"""A worker process for the durability tests: runs turns of the test agent on a thread.

The tests start it with `fork` (`start(...)`: the parent has already imported
LangGraph, so a worker costs milliseconds, not seconds) and it can also run as a module
from the repository root (`python -m tests.helpers.durability_worker`):

    ... turn URL THREAD EFFECTS TEXT MSG_ID [--kill POINT]
    ... resume URL THREAD EFFECTS
    ... race URL THREAD EFFECTS WORKER TURNS GO_FILE OUT [--exclusive]

Each worker opens its own `threadlog.checkpointer(URL)` (nothing is shared with the
parent). `turn` sends one user message; with `--kill` the process SIGKILLs itself at:
  before_model   input stored, in the model node before the model is called
  model_call     in the model node right after the model returned (its write not stored)
  after_model    the model's AIMessage stored, at the start of the first tool
  between_tools  the other tools' results stored, inside the last tool (before its effect)
  before_answer  every result stored, in the model node during the answering call
`resume` continues the thread from its checkpoint (`invoke(None)`).
`race` waits for GO_FILE, runs TURNS turns, retrying each on `ConcurrentRunError`, and
writes one JSON object to OUT: attempted, accepted (message ids), refused.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.process
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

import threadlog
from tests.helpers.durability import build_agent, kill_self, user, wait_for_calls, wait_for_results

KILL_POINTS = ("before_model", "model_call", "after_model", "between_tools", "before_answer")


def _killer(point: str | None, thread_id: str) -> tuple[Any, Any, list[Any]]:
    holder: list[Any] = []  # [saver, graph], set once built
    fired = threading.Lock()

    def model_hook(stage: str, messages: list[BaseMessage]) -> None:
        last = messages[-1] if messages else None
        if point == "before_model" and stage == "before" and isinstance(last, HumanMessage):
            kill_self()
        if point == "model_call" and stage == "after" and isinstance(last, HumanMessage):
            kill_self()
        if point == "before_answer" and stage == "before" and isinstance(last, ToolMessage):
            kill_self()

    def tool_hook(city: str, call_id: str) -> None:
        if point not in ("after_model", "between_tools"):
            return
        saver, graph = holder
        # LangGraph saves a step's checkpoint in the background while the next step
        # runs: wait until the model's message is stored, so the kill point is exact.
        ids = wait_for_calls(graph, thread_id)
        if point == "after_model":
            kill_self()
        if call_id != ids[-1]:
            return
        with fired:
            wait_for_results(saver, thread_id, ids[:-1])
            kill_self()

    return model_hook, tool_hook, holder


def run(argv: list[str]) -> int:
    mode, url, thread_id, effects = argv[0], argv[1], argv[2], Path(argv[3])
    config: Any = {"configurable": {"thread_id": thread_id}}
    point = argv[argv.index("--kill") + 1] if "--kill" in argv else None
    model_hook, tool_hook, holder = _killer(point, thread_id)
    with threadlog.checkpointer(url) as saver:
        graph = build_agent(saver, effects, hook=tool_hook, model_hook=model_hook)
        holder.extend([saver, graph])
        # "sync": a step's results are stored before the next step starts, so a crash
        # never loses a finished tool's result (LangGraph's default, "async", may lose
        # the last step's).
        if mode == "turn":
            graph.invoke({"messages": [user(argv[4], argv[5])]}, config, durability="sync")
        elif mode == "resume":
            graph.invoke(None, config, durability="sync")
        elif mode == "race":
            race(saver, graph, config, argv)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    return 0


CITIES = ("Beijing", "Shanghai", "Guangzhou", "Shenzhen", "Hangzhou", "Chengdu")


def race(saver: Any, graph: Any, config: Any, argv: list[str]) -> None:
    worker, turns, go, out = int(argv[4]), int(argv[5]), Path(argv[6]), Path(argv[7])
    exclusive = "--exclusive" in argv
    thread_id = config["configurable"]["thread_id"]
    while not go.exists():
        time.sleep(0.005)
    attempted = refused = 0
    accepted: list[str] = []
    for k in range(turns):
        mid = f"w{worker}-t{k}"
        city = CITIES[(worker + k) % len(CITIES)]
        text = f"Worker {worker} turn {k}: weather in {city}?"
        for _ in range(500):
            attempted += 1
            try:
                if exclusive:
                    with saver.exclusive(thread_id):
                        graph.invoke({"messages": [user(text, mid)]}, config)
                else:
                    graph.invoke({"messages": [user(text, mid)]}, config)
            except threadlog.ConcurrentRunError:
                refused += 1
                time.sleep(0.002 * (1 + worker))
                continue
            accepted.append(mid)
            break
        else:
            raise SystemExit(f"worker {worker}: turn {k} never got through")
    result = {"attempted": attempted, "accepted": accepted, "refused": refused}
    out.write_text(json.dumps(result))


def _child(argv: list[str]) -> None:
    code = 1
    try:
        code = run(argv)
    except BaseException:
        traceback.print_exc()
    finally:
        # Skip the parent's atexit hooks and buffers (pytest, pgserver): exit at once.
        sys.stderr.flush()
        os._exit(code)


def start(*argv: str) -> multiprocessing.process.BaseProcess:
    """Fork a worker running `run(argv)`; join it and read `.exitcode` (-9: SIGKILL)."""
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(list(argv),))
    proc.start()
    return proc


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
