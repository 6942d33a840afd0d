"""Overhead of an idempotent tool call (key + receipt) vs the same tool unmarked, SQLite.

Contract: prints one table; asserts nothing. Each row is a turn of a model ⇄ tools graph
on `threadlog.checkpointer("sqlite:///...")` (durability "sync" and LangGraph's default
"async"): the model asks for `--calls` calls of a tool that returns at once, then
answers. The same graph runs with the tool marked (`threadlog.idempotent`: the tool
reads its key, looks for a receipt on its step's checkpoint, stores one as it returns)
and unmarked; turns alternate (marked, unmarked, ...) on fresh threads, after a warm-up.
Figures: the median turn time of each; `overhead/call` = (marked - unmarked) / calls;
`ratio` = marked / unmarked.

Usage:
    python benchmarks/idempotent.py                  # 1 and 8 calls, 40 turns each
    python benchmarks/idempotent.py --calls 1 8 32 --turns 100
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph

import threadlog


def _tool(marked: bool) -> BaseTool:
    @tool
    def pay(amount: int) -> str:
        """Charge an amount (returns at once)."""
        key = threadlog.idempotency_key() if marked else "-"
        return f"charged {amount} {key}"

    return threadlog.idempotent(pay) if marked else pay


def _graph(saver: Any, calls: int, marked: bool) -> Any:
    def model(state: threadlog.MessagesState) -> dict[str, Any]:
        msgs = state["messages"]
        if isinstance(msgs[-1], HumanMessage):
            tid = msgs[-1].id
            asks = [
                {"id": f"{tid}-{k}", "name": "pay", "args": {"amount": k}} for k in range(calls)
            ]
            return {"messages": [AIMessage("", id=f"{tid}-ai", tool_calls=asks)]}
        return {"messages": [AIMessage("done", id=f"{msgs[0].id}-done")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_node("tools", threadlog.ToolNode([_tool(marked)]))
    g.add_edge(START, "model")
    g.add_conditional_edges(
        "model",
        lambda s: "tools" if getattr(s["messages"][-1], "tool_calls", None) else END,
        ["tools", END],
    )
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


def measure(calls: int, turns: int, durability: str, root: Path) -> tuple[float, float]:
    times: dict[bool, list[float]] = {True: [], False: []}
    with threadlog.checkpointer(f"sqlite:///{root}/bench-{calls}-{durability}.db") as saver:
        graphs = {m: _graph(saver, calls, m) for m in (True, False)}
        for k in range(-3, turns):  # 3 warm-up turns each
            for marked in (True, False):
                tid = f"{'m' if marked else 'u'}-{k}"
                start = {"messages": [HumanMessage("go", id=f"h-{tid}")]}
                t0 = time.perf_counter()
                graphs[marked].invoke(
                    start, {"configurable": {"thread_id": tid}}, durability=durability
                )
                if k >= 0:
                    times[marked].append(time.perf_counter() - t0)
    return statistics.median(times[True]), statistics.median(times[False])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, nargs="+", default=[1, 8])
    p.add_argument("--turns", type=int, default=40)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-idem-"))
    print("| durability | calls | marked ms/turn | unmarked ms/turn | overhead ms/call | ratio |")
    print("|---|---|---|---|---|---|")
    for durability in ("sync", "async"):
        for calls in args.calls:
            marked, unmarked = measure(calls, args.turns, durability, root)
            per_call = (marked - unmarked) * 1000 / calls
            print(
                f"| {durability} | {calls} | {marked * 1000:.1f} | {unmarked * 1000:.1f} | "
                f"{per_call:.2f} | {marked / unmarked:.2f} |"
            )


if __name__ == "__main__":
    main()
