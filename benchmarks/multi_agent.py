"""Multi-agent apps on LangGraph's savers and on threadlog's checkpointer, side by side.

Contract: prints one table of figures and ratios (threadlog / LangGraph); asserts nothing.
Offline: every model is a scripted chat model (`tests/helpers/multi_agent.Scripted`), so
only the graphs and the savers are measured. Each app is ported as a user would:

* `swarm` — langgraph-swarm, two agents handing off to each other every turn (a handoff
  re-sends the agent's history to the parent). LangGraph lane: `create_react_agent`
  workers, `create_swarm`'s default state. threadlog lane: `threadlog.create_agent`
  workers, a `threadlog.MessagesState` state.
* `supervisor` — langgraph-supervisor, a supervisor delegating each turn to one worker
  and closing it. Same two lanes (`create_supervisor(..., state_schema=...)` for threadlog).
* `deepagents` — `deepagents.create_deep_agent` with one subagent, called through its
  `task` tool every turn. The same graph in both lanes (deepagents' own state: its delta
  messages channel), only the saver differs.

Backends: `sqlite` (sync: LangGraph's `SqliteSaver`, `threadlog.checkpointer(url)`) and
`postgres` (async: LangGraph's fastest shipped configuration, `AsyncPostgresSaver` over a
`psycopg_pool.AsyncConnectionPool`; `threadlog.acheckpointer(url)`), each lane in a new
database (Postgres: `THREADLOG_TEST_POSTGRES_URL`, else a throwaway `pgserver`).

Per lane: the database's size after N turns (SQLite: the file and its WAL; Postgres: the
tables' relation sizes after `VACUUM`), ms/turn over the last 10 turns,
`get_state_history(limit=10)` and `get_state` on a freshly opened saver (a cold cache:
the median of `--cold-reads` such opens, default 5, wall and CPU time, both lanes alike),
and growth = (bytes stored by the second half of the turns) / (by the first half), from
the rows' value sizes (1.0 is linear; LangGraph's full lists make it ~3).

Usage:
    python benchmarks/multi_agent.py --turns 100
    python benchmarks/multi_agent.py --turns 50 --backend postgres
    python benchmarks/multi_agent.py --turns 30 --apps swarm deepagents
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import storage  # noqa: E402  (pgserver and fresh databases, as benchmarks/agent.py uses)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402

import threadlog  # noqa: E402
from tests.helpers.delta_apps import stored_bytes  # noqa: E402
from tests.helpers.multi_agent import Scripted, deep_agent  # noqa: E402

APPS = ("swarm", "supervisor", "deepagents")
COLD_READS = 5  # fresh-saver `get_state`s per lane; the median is reported (--cold-reads)
LANES = ("langgraph", "threadlog")


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def _swarm_reply(me: str, other: str) -> Callable[[Sequence[BaseMessage]], AIMessage]:
    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        turn = _turn(messages)
        if isinstance(messages[-1], HumanMessage):
            call = {"name": f"transfer_to_{other}", "args": {}, "id": f"{me}-h-{turn}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage(f"{me} answers turn {turn}: " + "details " * 20)

    return reply


def _supervisor_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    turn = _turn(messages)
    if isinstance(messages[-1], HumanMessage):
        call = {"name": "transfer_to_bob", "args": {}, "id": f"sup-h-{turn}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage(f"supervisor closes turn {turn}")


def _bob_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(f"bob works on turn {_turn(messages)}: " + "findings " * 20)


def _deep_main(messages: Sequence[BaseMessage]) -> AIMessage:
    turn = _turn(messages)
    if isinstance(messages[-1], HumanMessage):
        args = {"description": f"look into {turn}", "subagent_type": "researcher"}
        call = {"name": "task", "args": args, "id": f"task-{turn}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage(f"main answers turn {turn}: " + "summary " * 20)


def _deep_sub(messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(f"researched {messages[-1].content}: " + "findings " * 20)


def _worker(lane: str, model: Any, tools: list[Any], name: str) -> Any:
    if lane == "threadlog":
        return threadlog.create_agent(model, tools, name=name)
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, name=name)


def _deep_agent(saver: Any) -> Any:
    return deep_agent(saver, _deep_main, _deep_sub)


def build(app: str, lane: str) -> Any:
    if app == "swarm":
        from langgraph_swarm import create_handoff_tool, create_swarm

        alice = _worker(
            lane, Scripted(script=_swarm_reply("alice", "bob")),
            [create_handoff_tool(agent_name="bob")], "alice",
        )
        bob = _worker(
            lane, Scripted(script=_swarm_reply("bob", "alice")),
            [create_handoff_tool(agent_name="alice")], "bob",
        )
        if lane == "threadlog":

            class SwarmState(threadlog.MessagesState):
                active_agent: str | None

            return create_swarm([alice, bob], default_active_agent="alice",
                                state_schema=SwarmState)
        return create_swarm([alice, bob], default_active_agent="alice")
    from langgraph_supervisor import create_supervisor

    bob = _worker(lane, Scripted(script=_bob_reply), [], "bob")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lane == "threadlog":

            class SupState(threadlog.MessagesState):
                remaining_steps: int

            return create_supervisor([bob], model=Scripted(script=_supervisor_reply),
                                     state_schema=SupState)
        return create_supervisor([bob], model=Scripted(script=_supervisor_reply))


def compiled(app: str, lane: str, saver: Any) -> Any:
    if app == "deepagents":  # deepagents compiles its graph itself
        return _deep_agent(saver)
    return build(app, lane).compile(checkpointer=saver)


@contextlib.contextmanager
def saver_for(lane: str, path: Path) -> Iterator[Any]:
    if lane == "threadlog":
        with threadlog.checkpointer(f"sqlite:///{path}") as saver:
            yield saver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(path)) as saver:
            saver.setup()
            yield saver


def _size(path: Path) -> int:
    return sum(
        os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if os.path.exists(p)
    )


def _stored(path: Path) -> int:
    """Bytes of every stored checkpoint, its metadata and every write (WAL included)."""
    return stored_bytes(f"sqlite:///{path}")


def _row(
    full: int,
    times: list[float],
    history: float,
    walls: list[float],
    cpus: list[float],
    stored: int,
    half: int,
) -> dict[str, float]:
    """One lane's figures: ms/turn over the last 10 turns, the median cold read."""
    last = times[-10:]
    return {
        "db_mb": full / 1e6,
        "ms_turn": 1000 * sum(last) / len(last),
        "history_s": history,
        "cold_s": statistics.median(walls),
        "cold_cpu_s": statistics.median(cpus),
        "growth": (stored - half) / half if half else float("nan"),
    }


def run_lane(app: str, lane: str, turns: int, folder: Path) -> dict[str, float]:
    path = folder / f"{app}-{lane}.sqlite"
    cfg: Any = {"configurable": {"thread_id": "t"}}
    times: list[float] = []
    half = 0
    with saver_for(lane, path) as saver:
        graph = compiled(app, lane, saver)
        for i in range(turns):
            start = time.perf_counter()
            graph.invoke({"messages": [HumanMessage(f"question {i}", id=f"u{i}")]}, cfg)
            times.append(time.perf_counter() - start)
            if i + 1 == turns // 2:
                half = _stored(path)
    stored = _stored(path)
    full = _size(path)
    walls, cpus = [], []
    for _ in range(COLD_READS):
        with saver_for(lane, path) as saver:
            graph = compiled(app, lane, saver)
            start, cpu = time.perf_counter(), time.process_time()
            graph.get_state(cfg)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
    with saver_for(lane, path) as saver:
        graph = compiled(app, lane, saver)
        start = time.perf_counter()
        shown = list(graph.get_state_history(cfg, limit=10))
        history = time.perf_counter() - start
        assert len(shown) == 10
    return _row(full, times, history, walls, cpus, stored, half)


@contextlib.asynccontextmanager
async def async_saver_for(lane: str, url: str) -> AsyncIterator[Any]:
    if lane == "threadlog":
        async with threadlog.acheckpointer(url) as saver:
            yield saver
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    # The pool as LangGraph's docs set it up: autocommit, no prepared statements.
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, kwargs=kwargs, max_size=10, open=False) as pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        yield saver


async def run_lane_async(app: str, lane: str, turns: int, url: str) -> dict[str, float]:
    cfg: Any = {"configurable": {"thread_id": "t"}}
    times: list[float] = []
    half = 0
    async with async_saver_for(lane, url) as saver:
        graph = compiled(app, lane, saver)
        for i in range(turns):
            start = time.perf_counter()
            await graph.ainvoke({"messages": [HumanMessage(f"question {i}", id=f"u{i}")]}, cfg)
            times.append(time.perf_counter() - start)
            if i + 1 == turns // 2:
                half = stored_bytes(url)
    stored = stored_bytes(url)
    full = storage.db_bytes("postgres", url)
    walls, cpus = [], []
    for _ in range(COLD_READS):
        async with async_saver_for(lane, url) as saver:
            graph = compiled(app, lane, saver)
            start, cpu = time.perf_counter(), time.process_time()
            await graph.aget_state(cfg)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
    async with async_saver_for(lane, url) as saver:
        graph = compiled(app, lane, saver)
        start = time.perf_counter()
        shown = [s async for s in graph.aget_state_history(cfg, limit=10)]
        history = time.perf_counter() - start
        assert len(shown) == 10
    return _row(full, times, history, walls, cpus, stored, half)


def _print(app: str, got: dict[str, dict[str, float]]) -> None:
    for lane, r in got.items():
        print(
            f"{app:<11} {lane:<10} {r['db_mb']:>8.2f} {r['ms_turn']:>8.1f} "
            f"{r['history_s']:>11.3f} {r['cold_s']:>17.3f} {r['cold_cpu_s']:>13.3f} "
            f"{r['growth']:>15.2f}",
            flush=True,
        )
    lg, tl = got["langgraph"], got["threadlog"]
    print(
        f"{app:<11} {'ratio':<10} {tl['db_mb'] / lg['db_mb']:>7.2f}x "
        f"{tl['ms_turn'] / lg['ms_turn']:>7.2f}x "
        f"{tl['history_s'] / lg['history_s']:>10.2f}x "
        f"{tl['cold_s'] / lg['cold_s']:>16.2f}x "
        f"{tl['cold_cpu_s'] / lg['cold_cpu_s']:>12.2f}x "
        f"{tl['growth'] / lg['growth']:>14.2f}x",
        flush=True,
    )


def main() -> None:
    global COLD_READS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--apps", nargs="+", choices=APPS, default=list(APPS))
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--cold-reads", type=int, default=COLD_READS)
    args = parser.parse_args()
    COLD_READS = max(1, args.cold_reads)
    lanes = (
        "LangGraph SqliteSaver vs threadlog.checkpointer (sync)"
        if args.backend == "sqlite"
        else "LangGraph AsyncPostgresSaver + AsyncConnectionPool vs threadlog.acheckpointer"
    )
    print(f"{args.turns} turns, {args.backend}: {lanes}; offline scripted models")
    head = f"{'app':<11} {'lane':<10} {'DB MB':>8} {'ms/turn':>8} {'hist(10) s':>11} "
    print(head + f"{'cold get_state s':>17} {'cold cpu s':>13} {'growth 2nd/1st':>15}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "sqlite":
            for app in args.apps:
                _print(app, {lane: run_lane(app, lane, args.turns, Path(tmp)) for lane in LANES})
            return
        with storage.postgres_base() as base:
            for app in args.apps:
                got = {}
                for lane in LANES:
                    url = storage.fresh_target("postgres", base, Path(tmp), f"ma_{app}_{lane}")
                    got[lane] = asyncio.run(run_lane_async(app, lane, args.turns, url))
                _print(app, got)


if __name__ == "__main__":
    main()
