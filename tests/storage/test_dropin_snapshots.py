"""How `threadlog.MessagesState` snapshots, by where it is loaded from (issue 12 target 4).

On a plain saver (LangGraph Server's, `langgraph dev`'s, a bare `SqliteSaver` /
`PostgresSaver`) the saver walks back to the nearest stored snapshot on every load, so a
channel rebuilt by that walk snapshots every `PLAIN_SAVER_SNAPSHOT_FREQUENCY` updates, as
`DeltaChannel` does. Behind threadlog's history cache (`threadlog.checkpointer(url)`) it
never snapshots by count, cold process or warm, so storage stays linear. Either way every
state of a thread reads exactly what a never-snapshotting channel reads: forks, time
travel, `update_state`, a second writer on the same thread, a crashed step resumed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from typing_extensions import TypedDict

import threadlog
from tests.helpers.perf import build_loop, say, shape
from threadlog.channel import PLAIN_SAVER_SNAPSHOT_FREQUENCY, KeyedWrites, MessageLogChannel
from threadlog.checkpoint.cache import history_cache_of, with_history_cache
from threadlog.context.events import CompactionsChannel

CFG: Any = {"configurable": {"thread_id": "t1"}}
TURNS = 30  # 4 message updates a turn: past the plain-saver cadence of 100


class NeverSnapshots(TypedDict):
    """The oracle: the same log, never snapshotted, so every read replays every write."""

    messages: Annotated[list[AnyMessage], MessageLogChannel(snapshot_frequency=999_999_999)]


@contextmanager
def plain_saver(url: str) -> Iterator[Any]:
    """The backend's own saver, no threadlog wrapper (as LangGraph Server runs it)."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        try:
            yield saver
        finally:
            conn.close()
    else:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver


def counters(saver: Any, config: Any = CFG) -> list[tuple[bool, int]]:
    """Per stored checkpoint, oldest first: does it hold a messages snapshot, and how
    many message updates has it seen since the last one (what a load walks over)."""
    out = []
    for tup in saver.list(config):
        snap = "messages" in tup.checkpoint["channel_values"]
        counts = (tup.metadata or {}).get("counters_since_delta_snapshot") or {}
        out.append((snap, int(counts.get("messages", (0, 0))[0])))
    return out[::-1]


def history_shapes(graph: Any, config: Any = CFG) -> list[Any]:
    return [
        (s.metadata.get("step") if s.metadata else None, shape(s.values.get("messages", [])))
        for s in graph.get_state_history(config)
    ]


def scenario(graph: Any, other: Any) -> None:
    """Turns, update_state on the head and on an old checkpoint, a fork from an old
    checkpoint (time travel), turns written by a second saver on the same thread, and a
    step that crashed and is resumed — crossing the plain saver's snapshots throughout."""
    for i in range(TURNS):
        graph.invoke(say(f"turn {i}"), CFG)
    graph.update_state(CFG, {"messages": [HumanMessage("edit head", id="h-edit-head")]})
    old = next(s for s in graph.get_state_history(CFG) if len(s.values["messages"]) == 50)
    graph.update_state(old.config, {"messages": [HumanMessage("edit old", id="h-edit-old")]})
    graph.invoke(say("fork"), old.config)
    for i in range(TURNS):
        (graph if i % 3 else other).invoke(say(f"more {i}"), CFG)
    with pytest.raises(RuntimeError, match="tool crashed"):
        graph.invoke(say("crash"), CFG)
    graph.invoke(None, CFG)  # resume: the crashed tool runs again
    graph.invoke(say("after"), CFG)


def crashing_loop(saver: Any, state: Any) -> Any:
    """`build_loop` whose tool fails once on the turn "crash" (then works on resume)."""
    graph = build_loop(saver, state)
    failed: list[str] = []
    tool = graph.builder.nodes["tool"].runnable

    def flaky(call: dict[str, Any]) -> Any:
        if call["id"].startswith("call-h-crash") and not failed:
            failed.append(call["id"])
            raise RuntimeError("tool crashed")
        return tool.invoke(call)

    graph.builder.nodes["tool"].runnable = threadlog_runnable(flaky)
    return graph.builder.compile(checkpointer=saver)


def threadlog_runnable(fn: Any) -> Any:
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(fn)


def test_on_a_plain_saver_every_load_walks_at_most_the_snapshot_cadence(backend: str) -> None:
    with plain_saver(backend) as saver:
        graph = build_loop(saver)
        for i in range(TURNS):
            graph.invoke(say(f"turn {i}"), CFG)
        seen = counters(saver)
        assert len(graph.get_state(CFG).values["messages"]) == 5 * TURNS
    assert sum(snap for snap, _ in seen) >= 1
    assert max(updates for _, updates in seen) < PLAIN_SAVER_SNAPSHOT_FREQUENCY


def test_the_shipped_checkpointer_never_snapshots_by_count_warm_or_cold(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build_loop(saver)
        for i in range(TURNS):
            graph.invoke(say(f"turn {i}"), CFG)
    # A new process: its cache is cold, and the first load is a full read.
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build_loop(saver)
        for i in range(TURNS):
            graph.invoke(say(f"again {i}"), CFG)
        seen = counters(saver)
    assert not any(snap for snap, _ in seen)
    assert max(updates for _, updates in seen) > 2 * PLAIN_SAVER_SNAPSHOT_FREQUENCY


def test_every_state_on_a_plain_saver_reads_what_a_never_snapshotting_log_reads(
    backend: str,
) -> None:
    with plain_saver(backend) as saver, plain_saver(backend) as second:
        scenario(crashing_loop(saver, threadlog.MessagesState),
                 build_loop(second, threadlog.MessagesState))
        got = history_shapes(build_loop(saver))
        snapshots = sum(snap for snap, _ in counters(saver))
    oracle_cfg: Any = {"configurable": {"thread_id": "oracle"}}
    with plain_saver(backend) as saver, plain_saver(backend) as second:

        def on(graph: Any) -> Any:  # the same scenario on another thread
            class Redirect:
                def invoke(self, inp: Any, config: Any) -> Any:
                    conf = {**config["configurable"], "thread_id": "oracle"}
                    return graph.invoke(inp, {**config, "configurable": conf})

                def update_state(self, config: Any, values: Any) -> Any:
                    conf = {**config["configurable"], "thread_id": "oracle"}
                    return graph.update_state({**config, "configurable": conf}, values)

                def get_state_history(self, config: Any) -> Any:
                    return graph.get_state_history(oracle_cfg)

            return Redirect()

        scenario(on(crashing_loop(saver, NeverSnapshots)), on(build_loop(second, NeverSnapshots)))
        want = history_shapes(build_loop(saver, NeverSnapshots), oracle_cfg)
        # Forks and edits snapshot on both; only the plain-saver cadence adds more.
        oracle_snapshots = sum(snap for snap, _ in counters(saver, oracle_cfg))
    assert snapshots > oracle_snapshots
    assert got == want
    head = [mid for _, mid, _ in got[0][1]]
    assert len(head) == len(set(head))  # one branch, nothing replayed twice
    for mid in ("h-fork", "h-more 0", "h-more 1", "h-crash", "h-after"):
        assert mid in head
    assert "h-edit-old" not in head and "h-edit-head" not in head  # other branches
    assert any(mid == "h-edit-old" for _, shp in got for _, mid, _ in shp)


def test_a_snapshot_the_run_stores_keeps_the_next_turn_a_cache_hit(sqlite_url: str) -> None:
    class Snapshots(TypedDict):  # a snapshot every few updates, as LangGraph forces one
        messages: Annotated[list[AnyMessage], MessageLogChannel(snapshot_frequency=3)]

    path = sqlite_url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = with_history_cache(SqliteSaver(conn))
        saver.setup()
        cache = history_cache_of(saver)
        assert cache is not None
        graph = build_loop(saver, Snapshots)
        for i in range(2):  # the second turn's load is the one cold read
            graph.invoke(say(f"turn {i}"), CFG)
        misses = cache.misses
        for i in range(2, 12):
            graph.invoke(say(f"turn {i}"), CFG)
        assert sum(snap for snap, _ in counters(saver)) >= 10
        assert cache.misses == misses
        cached = shape(graph.get_state(CFG).values["messages"])
    finally:
        conn.close()
    with plain_saver(sqlite_url) as plain:
        assert cached == shape(build_loop(plain, Snapshots).get_state(CFG).values["messages"])
    assert len(cached) == 5 * 12


class FrequentSnapshots(TypedDict):  # a snapshot every few updates, as LangGraph forces one
    messages: Annotated[list[AnyMessage], MessageLogChannel(snapshot_frequency=3)]


async def test_async_a_snapshot_the_run_stores_keeps_the_next_turn_a_cache_hit(
    sqlite_url: str,
) -> None:
    path = sqlite_url.removeprefix("sqlite:///")
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        with_history_cache(saver)
        cache = history_cache_of(saver)
        assert cache is not None
        graph = build_loop(saver, FrequentSnapshots)
        for i in range(2):
            await graph.ainvoke(say(f"turn {i}"), CFG)
        misses = cache.misses
        for i in range(2, 8):
            await graph.ainvoke(say(f"turn {i}"), CFG)
        assert cache.misses == misses
        cached = shape((await graph.aget_state(CFG)).values["messages"])
    with plain_saver(sqlite_url) as plain:
        snapshots = sum(snap for snap, _ in counters(plain))
        read = shape(build_loop(plain, FrequentSnapshots).get_state(CFG).values["messages"])
    assert snapshots >= 6 and cached == read and len(cached) == 5 * 8


@pytest.mark.parametrize("channel", [MessageLogChannel, CompactionsChannel])
def test_the_cadence_follows_how_each_channel_was_loaded(channel: Any) -> None:
    class Registry:
        def put(self, *args: Any) -> None:
            pass

    never = 1_000_000_000
    spec = channel()
    walked = spec.from_checkpoint(None)
    walked.replay_writes([])  # a plain saver's walk: its writes are a plain list
    cached = spec.from_checkpoint(None)
    cached.replay_writes(KeyedWrites([], Registry(), ("t", "", "k"), "c1"))  # even a miss
    assert spec.snapshot_frequency == never  # a new thread: nothing loaded it
    assert walked.snapshot_frequency == PLAIN_SAVER_SNAPSHOT_FREQUENCY
    assert walked.copy().snapshot_frequency == PLAIN_SAVER_SNAPSHOT_FREQUENCY
    assert cached.snapshot_frequency == never and cached.copy().snapshot_frequency == never
    fixed = channel(snapshot_frequency=7).from_checkpoint(None)
    fixed.replay_writes([])
    assert fixed.snapshot_frequency == 7 and channel(snapshot_frequency=7) != spec
