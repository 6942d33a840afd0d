"""Check the last turn of a thread, as `threadlog demo --json --thread ID` prints it:

    python scripts/check_turn.py THREAD.json

Passes (exit 0, the evidence printed) when the turn has a real tool call answered by its
result (same call id, not an error), ends with an assistant answer without calls, and the
answer uses the result: it repeats a number or a word of the result's first clause (the
weather tool's "light rain, 70% chance of precipitation, 22°C" → 70, 22, "light rain").
Otherwise one FAIL line and exit 1. Used by scripts/local_model.sh on a real model's turn.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any


def facts(result: str) -> list[str]:
    """What an answer built from `result` would repeat: its numbers and first clause."""
    numbers = re.findall(r"\d+", result)
    first = re.split(r"[,，;；]", result, maxsplit=1)[0].strip()
    return numbers + ([first] if first else [])


def check(doc: dict[str, Any]) -> list[str]:
    messages: list[dict[str, Any]] = doc["messages"]
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not starts:
        raise AssertionError("the thread has no user message")
    turn = messages[starts[-1] :]
    results = {m["tool_call_id"]: m for m in turn if m["role"] == "tool"}
    lines: list[str] = []
    paired: list[str] = []
    for m in turn:
        for call in m.get("tool_calls") or []:
            result = results.get(call["id"])
            if result is None:
                raise AssertionError(f"call {call['id']} ({call['name']}) has no result")
            if result.get("status") == "error":
                raise AssertionError(f"call {call['id']} failed: {result['content']!r}")
            args = json.dumps(call["args"], ensure_ascii=False)
            lines.append(f"paired: {call['name']}({args}) [{call['id']}] <- {result['content']!r}")
            paired.append(str(result["content"]))
    if not paired:
        raise AssertionError("no tool call in the turn (the model answered without the tool)")
    last = turn[-1]
    if last["role"] != "assistant" or last.get("tool_calls"):
        raise AssertionError(f"the turn does not end with an answer: last is {last['role']}")
    answer = str(last["content"])
    used = [f for result in paired for f in facts(result) if f.lower() in answer.lower()]
    lines.append(f"answer: {answer!r}")
    if not used:
        raise AssertionError(f"the answer repeats nothing of the tool's result: {answer!r}")
    lines.append(f"the answer uses the result: {', '.join(dict.fromkeys(used))}")
    return lines


def main(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    try:
        lines = check(doc)
    except AssertionError as e:
        print(f"FAIL: turn check on thread {doc.get('thread_id')}: {e}")
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
