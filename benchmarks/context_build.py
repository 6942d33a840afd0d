"""Per-turn cost of building the model's context on a long log (issue 4).

Contract: prints one table; asserts nothing. A synthetic 10 000-message thread (tool
exchanges of 1-3 parallel calls, long and short texts) grows by one turn at a time; each
row is one token budget and reports the median over `--turns` turns *after the first*:

    threadlog  — `compact` + `plan_context` (events recorded, caches warm)
    node prep  — what ModelNode adds before sending: repair scan, `validate`, `to_wire`
    trim       — langchain-core `trim_messages(strategy="last", start_on="human",
                 include_system=True)` with `count_tokens_approximately` on the same log
                 (it re-walks and re-counts the log every turn)

`ratio` = trim / threadlog (above 1: threadlog is faster). The first turn (cold: every
message counted once) is shown separately.

Usage:
    python benchmarks/context_build.py                   # budgets 2k, 8k, 32k; 100 turns
    python benchmarks/context_build.py --budgets 4000 --turns 300
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from threadlog import ContextPolicy, append_messages, to_wire, validate
from threadlog.context.compaction import compact
from threadlog.nodes.model import repair_open_calls


def synthetic_log(size: int, seed: int = 7) -> list[BaseMessage]:
    rng = random.Random(seed)
    out: list[Any] = [SystemMessage("You are a weather assistant.", id="sys")]
    n = 0
    while len(out) < size:
        n += 1
        out.append(HumanMessage("q" * rng.choice([5, 40, 400]), id=f"h{n}"))
        for k in range(rng.choice([0, 1, 1, 2])):
            calls = [{"name": "get_weather", "args": {"city": f"c{i}"}, "id": f"c{n}-{k}-{i}",
                      "type": "tool_call"} for i in range(rng.randint(1, 3))]
            out.append(AIMessage("", id=f"a{n}-{k}", tool_calls=calls))
            out += [ToolMessage("r" * rng.choice([10, 300]), tool_call_id=c["id"],
                                id=f"t{c['id']}") for c in calls]
        out.append(AIMessage("answer " * rng.choice([2, 40]), id=f"f{n}"))
    return append_messages([], out[:size])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--budgets", type=int, nargs="+", default=[2_000, 8_000, 32_000])
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    base = synthetic_log(args.size)
    print(f"log: {len(base)} messages; medians over {args.turns} turns after the first")
    print(f"{'budget':>7} {'kept':>5} {'first ms':>9} {'threadlog ms':>13} "
          f"{'node prep ms':>13} {'trim ms':>8} {'ratio':>6}")
    for budget in args.budgets:
        log = list(base)
        policy = ContextPolicy(max_tokens=budget)
        t0 = time.perf_counter()
        view, events = compact(log, [], policy)
        first = time.perf_counter() - t0
        ours: list[float] = []
        prep: list[float] = []
        trim: list[float] = []
        cache: dict[tuple[str, str], BaseMessage] = {}
        for i in range(args.turns):
            log.append(HumanMessage(f"next question {i}", id=f"x{i}"))
            t0 = time.perf_counter()
            view, new = compact(log, events, policy)
            events += new
            t1 = time.perf_counter()
            context, _ = repair_open_calls(view.messages)
            validate(context, allow_pending_calls=False)
            to_wire(context, cache=cache)
            t2 = time.perf_counter()
            trim_messages(log, max_tokens=budget, strategy="last", start_on="human",
                          include_system=True, token_counter=count_tokens_approximately)
            t3 = time.perf_counter()
            ours.append(t1 - t0)
            prep.append(t2 - t1)
            trim.append(t3 - t2)
            log.append(AIMessage(f"answer {i}", id=f"y{i}"))
        o, p, t = (statistics.median(x) * 1e3 for x in (ours, prep, trim))
        print(f"{budget:>7} {len(view.messages):>5} {first * 1e3:>9.2f} {o:>13.3f} "
              f"{p:>13.3f} {t:>8.2f} {t / o:>6.0f}")


if __name__ == "__main__":
    main()
