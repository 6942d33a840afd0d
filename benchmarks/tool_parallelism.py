"""Parallel speed-up of the tool step: threadlog's ToolNode vs LangGraph's, same run (issue 3).

Contract: prints one table; asserts nothing. Each row runs one tool step answering N
calls of a tool that waits 200 ms, inside a one-node graph (START → tools → END) so
both nodes get a real LangGraph runtime; the figure is the median wall time of
`--repeat` runs after one warm-up. Sequential execution would take N * 200 ms.

    sync  — a sync tool (`time.sleep`) under `graph.invoke`: threads
    async — an async tool (`asyncio.sleep`) under `graph.ainvoke`: the event loop

Columns: `ratio` = LangGraph time / threadlog time (above 1: threadlog is faster);
`speed-up` = sequential time / threadlog time.

Usage:
    python benchmarks/tool_parallelism.py              # 1, 8, 32 calls, 3 repeats
    python benchmarks/tool_parallelism.py --calls 1 8 32 64 --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph import MessagesState as LGMessagesState
from langgraph.prebuilt import ToolNode as LGToolNode

from threadlog import MessagesState, ToolNode

WAIT_S = 0.2


@tool
def wait_sync(i: int) -> str:
    """Wait 200 ms in a thread."""
    time.sleep(WAIT_S)
    return f"done {i}"


@tool
async def wait_async(i: int) -> str:
    """Wait 200 ms on the event loop."""
    await asyncio.sleep(WAIT_S)
    return f"done {i}"


def one_step_graph(node: Any, state: type) -> Any:
    g = StateGraph(state)
    g.add_node("tools", node)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def request(tool_name: str, n: int) -> dict[str, Any]:
    calls = [{"name": tool_name, "args": {"i": i}, "id": f"c{i}"} for i in range(n)]
    return {"messages": [HumanMessage("go", id="h"), AIMessage("", id="a", tool_calls=calls)]}


def timed_sync(graph: Any, inp: dict[str, Any], n: int, repeat: int) -> float:
    out = graph.invoke(inp)  # warm-up, and a check that every call was answered
    assert sum(m.type == "tool" for m in out["messages"]) == n
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        graph.invoke(inp)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


async def timed_async(graph: Any, inp: dict[str, Any], n: int, repeat: int) -> float:
    out = await graph.ainvoke(inp)
    assert sum(m.type == "tool" for m in out["messages"]) == n
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        await graph.ainvoke(inp)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    print(f"tool waits {WAIT_S * 1000:.0f} ms; {os.cpu_count()} CPUs; median of {args.repeat}")
    header = (
        f"{'mode':<6} {'calls':>5} {'sequential':>11} {'langgraph':>10} "
        f"{'threadlog':>10} {'ratio':>6} {'speed-up':>9}"
    )
    print(header)
    print("-" * len(header))
    for mode, t in (("sync", wait_sync), ("async", wait_async)):
        ours = one_step_graph(ToolNode([t]), MessagesState)
        theirs = one_step_graph(LGToolNode([t]), LGMessagesState)
        for n in args.calls:
            inp = request(t.name, n)
            if mode == "sync":
                lg = timed_sync(theirs, inp, n, args.repeat)
                tl = timed_sync(ours, inp, n, args.repeat)
            else:
                lg = asyncio.run(timed_async(theirs, inp, n, args.repeat))
                tl = asyncio.run(timed_async(ours, inp, n, args.repeat))
            seq = n * WAIT_S
            print(
                f"{mode:<6} {n:>5} {seq:>10.2f}s {lg:>9.3f}s {tl:>9.3f}s "
                f"{lg / tl:>5.2f}x {seq / tl:>8.1f}x"
            )


if __name__ == "__main__":
    main()
