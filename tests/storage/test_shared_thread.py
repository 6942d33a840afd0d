"""Two OS processes share one thread through the public API, default settings.

Each worker opens its own `threadlog.checkpointer(url)`, builds `threadlog.create_agent`
with `OfflineChatModel` and a weather tool that records every call it runs, and sends
16 turns (a question naming a city: one tool call, its result, the answer). A turn
refused with `ConcurrentRunError` is sent again (same message id). Afterwards the thread
is counted, not trusted:

* fabricated results — tool results saying the call was not completed although the
  tool ran for that call id (its effect is recorded);
* unanswered turns — user messages whose `invoke` returned normally but which are not
  in the log, or are not followed by the model's final answer before the next user
  message.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool

import threadlog
from tests.helpers.durability import COUNTS

TURNS = 16
WORKERS = 2
CITIES = ["Beijing", "Shanghai", "Guangzhou", "Shenzhen", "Hangzhou", "Chengdu", "Nanjing",
          "Wuhan"]


def _agent(saver: Any, effects: Path) -> Any:
    @tool
    def get_weather(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Today's weather for a city."""
        time.sleep(0.03)  # a real tool takes a moment: the other worker gets a chance
        fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps({"call_id": tool_call_id}) + "\n").encode())
        finally:
            os.close(fd)
        return f"{city}: sunny, 21°C"

    return threadlog.create_agent(threadlog.OfflineChatModel(), [get_weather],
                                  checkpointer=saver)


def _worker(url: str, thread: str, effects: str, worker: int, go: str, out: str) -> None:
    returned: list[str] = []
    refused = 0
    with threadlog.checkpointer(url) as saver:
        graph = _agent(saver, Path(effects))
        config = {"configurable": {"thread_id": thread}}
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.001)
        for turn in range(TURNS):
            mid = f"w{worker}-t{turn}"
            city = CITIES[(worker * TURNS + turn) % len(CITIES)]
            message = {"role": "user", "content": f"Weather in {city}?", "id": mid}
            for _ in range(200):
                try:
                    graph.invoke({"messages": [message]}, config)
                except threadlog.ConcurrentRunError:
                    refused += 1
                    time.sleep(0.002)
                    continue
                returned.append(mid)
                break
    Path(out).write_text(json.dumps({"returned": returned, "refused": refused}))


def _count(messages: list[Any], returned: list[str], ran: set[str]) -> tuple[int, int]:
    fabricated = sum(
        1
        for m in messages
        if isinstance(m, ToolMessage) and "not completed" in str(m.content)
        and m.tool_call_id in ran
    )
    position = {m.id: i for i, m in enumerate(messages)}
    unanswered = 0
    for mid in returned:
        i = position.get(mid)
        if i is None:
            unanswered += 1
            continue
        turn = []
        for m in messages[i + 1:]:
            if isinstance(m, HumanMessage):
                break
            turn.append(m)
        if not (turn and isinstance(turn[-1], AIMessage) and not turn[-1].tool_calls):
            unanswered += 1
    return fabricated, unanswered


def test_two_processes_on_one_thread_fabricate_no_result_and_answer_every_turn(
    backend: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    go = tmp_path / "go"
    thread = "shared"
    with threadlog.checkpointer(backend) as saver:  # the thread exists before the race
        _agent(saver, effects).invoke({"messages": [("user", "Weather in Wuhan?")]},
                                      {"configurable": {"thread_id": thread}})
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_worker, args=(backend, thread, str(effects), w, str(go),
                                          str(tmp_path / f"out{w}.json")))
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    go.touch()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    outs = [json.loads((tmp_path / f"out{w}.json").read_text()) for w in range(WORKERS)]
    returned = [mid for o in outs for mid in o["returned"]]
    ran = {json.loads(line)["call_id"] for line in effects.read_text().splitlines()}
    with threadlog.checkpointer(backend) as saver:
        graph = _agent(saver, effects)
        state = graph.get_state({"configurable": {"thread_id": thread}})
    fabricated, unanswered = _count(state.values["messages"], returned, ran)
    kind = backend.split(":", 1)[0]
    COUNTS[f"shared thread {kind}: fabricated results"] += fabricated
    COUNTS[f"shared thread {kind}: unanswered turns"] += unanswered
    COUNTS[f"shared thread {kind}: refusals retried"] += sum(o["refused"] for o in outs)
    assert len(returned) == WORKERS * TURNS
    assert state.next == ()
    assert (fabricated, unanswered) == (0, 0)


if __name__ == "__main__":  # pragma: no cover - a manual run prints the counts
    pytest.main([__file__, "-q", "-s"])
