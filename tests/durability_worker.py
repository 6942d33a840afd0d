"""A worker process for the durability tests: runs turns of the test agent on a thread.

    python tests/durability_worker.py turn URL THREAD EFFECTS TEXT MSG_ID [--kill POINT]
    python tests/durability_worker.py resume URL THREAD EFFECTS
    python tests/durability_worker.py race URL THREAD EFFECTS WORKER TURNS GO_FILE [--exclusive]

`turn` sends one user message; with `--kill` the process SIGKILLs itself at that point:
  before_model   input stored, in the model node before the model is called
  model_call     in the model node right after the model returned (its write not stored)
  after_model    the model's AIMessage stored, at the start of the first tool
  between_tools  the other tools' results stored, inside the last tool (before its effect)
  before_answer  every result stored, in the model node during the answering call
`resume` continues the thread from its checkpoint (`invoke(None)`).
`race` waits for GO_FILE, then runs TURNS turns, retrying each on `ConcurrentRunError`,
and prints one JSON line: attempted, accepted, refused, and the accepted message ids.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import threadlog
from helpers_durability import build_agent, kill_self, user, wait_for_results

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
        if point == "after_model":
            kill_self()
        if point != "between_tools":
            return
        saver, graph = holder
        msgs = graph.get_state({"configurable": {"thread_id": thread_id}}).values["messages"]
        ai = next(m for m in reversed(msgs) if isinstance(m, AIMessage))
        ids = [c["id"] for c in ai.tool_calls]
        if call_id != ids[-1]:
            return
        with fired:
            wait_for_results(saver, thread_id, ids[:-1])
            kill_self()

    return model_hook, tool_hook, holder


def main(argv: list[str]) -> int:
    mode, url, thread_id, effects = argv[0], argv[1], argv[2], Path(argv[3])
    config: Any = {"configurable": {"thread_id": thread_id}}
    point = argv[argv.index("--kill") + 1] if "--kill" in argv else None
    model_hook, tool_hook, holder = _killer(point, thread_id)
    with threadlog.checkpointer(url) as saver:
        graph = build_agent(saver, effects, hook=tool_hook, model_hook=model_hook)
        holder.extend([saver, graph])
        if mode == "turn":
            graph.invoke({"messages": [user(argv[4], argv[5])]}, config)
        elif mode == "resume":
            graph.invoke(None, config)
        elif mode == "race":
            return race(saver, graph, config, argv)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    return 0


CITIES = ("Beijing", "Shanghai", "Guangzhou", "Shenzhen", "Hangzhou", "Chengdu")


def race(saver: Any, graph: Any, config: Any, argv: list[str]) -> int:
    worker, turns, go = int(argv[4]), int(argv[5]), Path(argv[6])
    exclusive = "--exclusive" in argv
    thread_id = config["configurable"]["thread_id"]
    while not go.exists():
        time.sleep(0.01)
    attempted = refused = 0
    accepted: list[str] = []
    for k in range(turns):
        mid = f"w{worker}-t{k}"
        city = CITIES[(worker + k) % len(CITIES)]
        text = f"Worker {worker} turn {k}: weather in {city}?"
        for _ in range(200):
            attempted += 1
            try:
                if exclusive:
                    with saver.exclusive(thread_id):
                        graph.invoke({"messages": [user(text, mid)]}, config)
                else:
                    graph.invoke({"messages": [user(text, mid)]}, config)
            except threadlog.ConcurrentRunError:
                refused += 1
                time.sleep(0.01 * (1 + worker))
                continue
            accepted.append(mid)
            break
        else:
            raise SystemExit(f"worker {worker}: turn {k} never got through")
    print(json.dumps({"attempted": attempted, "accepted": accepted, "refused": refused}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
