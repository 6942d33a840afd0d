"""The warm-process history cache reads exactly the history the database holds.

Every test compares what a cached saver reads with what a plain saver (no cache) reads
from the same database: resumes, forks, update_state, a second process, async, and a
cache squeezed by its memory bound.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from tests.helpers.perf import build_loop, say, shape
from threadlog.checkpoint.cache import history_cache_of, with_history_cache

CFG: Any = {"configurable": {"thread_id": "t1"}}


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "threads.sqlite")


@pytest.fixture
def cached(db: str) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = with_history_cache(SqliteSaver(conn))
    saver.setup()
    yield saver
    conn.close()


def plain_read(db: str, config: Any = CFG) -> list[Any]:
    """The history as a fresh, uncached saver reads it from the database."""
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        return shape(build_loop(SqliteSaver(conn)).get_state(config).values["messages"])
    finally:
        conn.close()


def test_resumed_turns_read_the_same_history_as_an_uncached_saver(
    cached: SqliteSaver, db: str
) -> None:
    graph = build_loop(cached)
    for i in range(6):
        graph.invoke(say(f"turn {i}"), CFG)
    messages = graph.get_state(CFG).values["messages"]
    assert len(messages) == 30
    assert shape(messages) == plain_read(db)
    cache = history_cache_of(cached)
    assert cache is not None and cache.hits >= 5  # turns after the first came from cache


def test_a_fork_from_an_older_checkpoint_reads_that_checkpoints_history(
    cached: SqliteSaver, db: str
) -> None:
    graph = build_loop(cached)
    for i in range(4):
        graph.invoke(say(f"turn {i}"), CFG)
    # The checkpoint right after turn 1 finished (10 messages).
    old = next(s for s in graph.get_state_history(CFG) if len(s.values.get("messages", ())) == 10)
    forked = graph.invoke(say("fork"), old.config)
    assert [m.content for m in forked["messages"][:10]] == [
        m.content for m in old.values["messages"]
    ]
    assert len(forked["messages"]) == 15
    assert shape(graph.get_state(CFG).values["messages"]) == plain_read(db)
    # Back on the fork's branch and on an old checkpoint, cached reads still match.
    assert shape(graph.get_state(old.config).values["messages"]) == plain_read(db, old.config)


def test_update_state_on_latest_and_on_an_old_checkpoint_is_read_back_exactly(
    cached: SqliteSaver, db: str
) -> None:
    graph = build_loop(cached)
    for i in range(3):
        graph.invoke(say(f"turn {i}"), CFG)
    graph.update_state(CFG, {"messages": [HumanMessage("note", id="note-1")]})
    graph.invoke(say("after note"), CFG)
    assert shape(graph.get_state(CFG).values["messages"]) == plain_read(db)
    first = next(s for s in graph.get_state_history(CFG) if len(s.values.get("messages", ())) == 5)
    branch = graph.update_state(first.config, {"messages": [AIMessage("edit", id="edit-1")]})
    got = shape(graph.get_state(branch).values["messages"])
    assert got == plain_read(db, branch)
    assert [m[1] for m in got][-1] == "edit-1" and len(got) == 6


def test_a_second_process_reads_exactly_the_history_the_first_wrote(
    cached: SqliteSaver, db: str
) -> None:
    graph = build_loop(cached)
    for i in range(5):
        graph.invoke(say(f"turn {i}"), CFG)
    code = textwrap.dedent(
        f"""
        import json, sqlite3
        from langgraph.checkpoint.sqlite import SqliteSaver
        from tests.helpers.perf import build_loop, say, shape
        from threadlog.checkpoint.cache import with_history_cache
        saver = with_history_cache(SqliteSaver(sqlite3.connect({db!r}, check_same_thread=False)))
        g = build_loop(saver)
        cfg = {{"configurable": {{"thread_id": "t1"}}}}
        g.invoke(say("from process two"), cfg)
        print(json.dumps(shape(g.get_state(cfg).values["messages"])))
        """
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    theirs = [tuple(m) for m in json.loads(out.stdout)]
    assert len(theirs) == 30
    # The first process's warm cache is behind now; it must still read process two's turn.
    ours = shape(graph.get_state(CFG).values["messages"])
    assert ours == theirs == plain_read(db)
    graph.invoke(say("back in process one"), CFG)
    assert shape(graph.get_state(CFG).values["messages"]) == plain_read(db)


def test_a_snapshot_taken_before_a_turn_is_not_changed_by_the_turn(cached: SqliteSaver) -> None:
    graph = build_loop(cached)
    graph.invoke(say("one"), CFG)
    before = graph.get_state(CFG).values["messages"]
    kept = shape(before)
    graph.invoke(say("two"), CFG)
    assert shape(before) == kept
    assert len(graph.get_state(CFG).values["messages"]) == 10


def test_the_cache_stays_within_its_message_bound_and_still_reads_right(db: str) -> None:
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = with_history_cache(SqliteSaver(conn), max_messages=12)
    graph = build_loop(saver)
    cache = history_cache_of(saver)
    assert cache is not None
    for t in ("a", "b", "c"):
        for i in range(2):
            graph.invoke(say(f"{t}{i}"), {"configurable": {"thread_id": t}})
            assert cache.size <= 12
    # Thread "a" (10 messages) was evicted by "b" and "c"; reads are still exact.
    for t in ("a", "b", "c"):
        cfg = {"configurable": {"thread_id": t}}
        assert shape(graph.get_state(cfg).values["messages"]) == plain_read(db, cfg)
    graph.invoke(say("a2"), {"configurable": {"thread_id": "a"}})
    assert cache.size <= 12
    conn.close()


def test_a_thread_larger_than_the_bound_is_not_cached_but_reads_right(db: str) -> None:
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = with_history_cache(SqliteSaver(conn), max_messages=4)
    graph = build_loop(saver)
    for i in range(3):
        graph.invoke(say(f"turn {i}"), CFG)
    cache = history_cache_of(saver)
    assert cache is not None and len(cache) == 0 and cache.hits == 0
    assert shape(graph.get_state(CFG).values["messages"]) == plain_read(db)
    conn.close()


def test_wrapping_keeps_the_same_saver_and_is_idempotent() -> None:
    saver = InMemorySaver()
    wrapped = with_history_cache(saver)
    assert wrapped is saver and isinstance(saver, InMemorySaver)
    cache = history_cache_of(saver)
    assert with_history_cache(saver) is saver and history_cache_of(saver) is cache
    graph = build_loop(saver)
    for i in range(3):
        graph.invoke(say(f"turn {i}"), CFG)
    assert len(graph.get_state(CFG).values["messages"]) == 15
    assert cache is not None and cache.hits >= 2


async def test_async_saver_reads_the_same_history_through_the_cache(db: str) -> None:
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        with_history_cache(saver)
        graph = build_loop(saver)
        for i in range(4):
            await graph.ainvoke(say(f"turn {i}"), CFG)
        old = [s async for s in graph.aget_state_history(CFG)][6]
        await graph.ainvoke(say("fork"), old.config)
        state = await graph.aget_state(CFG)
        cache = history_cache_of(saver)
        assert cache is not None and cache.hits >= 3
        got = shape(state.values["messages"])
    assert got == plain_read(db)


def test_postgres_resumes_forks_and_updates_read_the_same_as_an_uncached_saver(
    pg_backend: str,
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_backend) as saver, PostgresSaver.from_conn_string(
        pg_backend
    ) as plain:
        saver.setup()
        with_history_cache(saver)
        graph, reference = build_loop(saver), build_loop(plain)
        for i in range(4):
            graph.invoke(say(f"turn {i}"), CFG)
        old = next(
            s for s in graph.get_state_history(CFG) if len(s.values.get("messages", ())) == 10
        )
        graph.invoke(say("fork"), old.config)
        graph.update_state(CFG, {"messages": [HumanMessage("note", id="note-1")]})
        graph.invoke(say("after"), CFG)

        def read(g: Any, cfg: Any = CFG) -> list[Any]:
            return shape(g.get_state(cfg).values["messages"])

        assert read(graph) == read(reference)
        assert len(read(graph)) == 10 + 5 + 1 + 5
        assert read(graph, old.config) == read(reference, old.config)
        cache = history_cache_of(saver)
        assert cache is not None and cache.hits >= 3


def test_the_cold_sqlite_read_returns_what_the_savers_own_walk_returns(
    cached: SqliteSaver, db: str
) -> None:
    from threadlog.checkpoint.backends import backend_of

    graph = build_loop(cached)
    for i in range(3):
        graph.invoke(say(f"turn {i}"), CFG)
    old = next(s for s in graph.get_state_history(CFG) if len(s.values.get("messages", ())) == 5)
    graph.invoke(say("fork"), old.config)  # the fork's first checkpoint holds a snapshot
    graph.invoke(say("more"), CFG)
    plain = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    checked = 0
    for snap in list(plain.list(CFG)):
        cfg = snap.config
        cid = cfg["configurable"]["checkpoint_id"]
        ours = backend_of(plain).read("t1", "", ["messages", "branch:to:agent"], cid)
        theirs = plain.get_delta_channel_history(
            config=cfg, channels=["messages", "branch:to:agent"]
        )
        assert ours is not None
        assert ours == theirs
        checked += "seed" in theirs["messages"]
    assert checked > 0  # some reads stopped at the fork's snapshot


# -- the channel's shared-log views (what makes copies and cached loads O(1)) ---------


def _channel_with(*messages: Any) -> Any:
    from threadlog.channel import MessageLogChannel

    ch = MessageLogChannel().from_checkpoint(None)
    ch.update([list(messages)])
    return ch


def test_a_copy_and_its_original_never_see_each_others_writes() -> None:
    from threadlog.errors import ToolPairingError

    original = _channel_with(HumanMessage("hi", id="h1"))
    copy = original.copy()
    copy.update([[AIMessage("from copy", id="c1")]])
    original.update([[AIMessage("from original", id="o1")]])
    assert [m.id for m in copy.get()] == ["h1", "c1"]
    assert [m.id for m in original.get()] == ["h1", "o1"]
    # A refused write on a shared log changes neither view.
    third = original.copy()
    bad = {"role": "tool", "content": "x", "tool_call_id": "nope", "id": "t1"}
    with pytest.raises(ToolPairingError):
        third.update([[bad]])
    assert [m.id for m in third.get()] == ["h1", "o1"]
    assert [m.id for m in original.get()] == ["h1", "o1"]


def test_a_view_behind_the_log_reads_and_writes_the_log_as_it_was() -> None:
    calls = [{"name": "f", "args": {}, "id": "k1"}, {"name": "f", "args": {}, "id": "k2"}]
    ch = _channel_with(HumanMessage("q", id="h1"), AIMessage("", id="a1", tool_calls=calls))
    behind = ch.copy()
    ch.update([[{"role": "tool", "content": "2", "tool_call_id": "k2", "id": "r2"}]])
    ch.update([[{"role": "tool", "content": "1", "tool_call_id": "k1", "id": "r1"}]])
    assert [m.id for m in ch.get()] == ["h1", "a1", "r1", "r2"]  # placed in call order
    assert [m.id for m in behind.get()] == ["h1", "a1"]
    assert [c["id"] for _, c in behind.log.open_calls()] == ["k1", "k2"]
    behind.update([[{"role": "tool", "content": "1b", "tool_call_id": "k1", "id": "r1b"}]])
    assert [m.id for m in behind.get()] == ["h1", "a1", "r1b"]
    assert [m.id for m in ch.get()] == ["h1", "a1", "r1", "r2"]


def test_a_view_that_receives_the_writes_the_log_already_holds_moves_up_to_them() -> None:
    ch = _channel_with(HumanMessage("q", id="h1"))
    follower = ch.copy()
    answer = AIMessage("a", id="a1")
    ch.update([[answer]])
    follower.update([[answer]])  # the same write, e.g. LangGraph's fresh read
    assert follower.log is ch.log  # no copy was made
    assert [m.id for m in follower.get()] == ["h1", "a1"]
    # A different write at the same place gets a log of its own.
    other = _channel_with(HumanMessage("q", id="h1"))
    fork = other.copy()
    other.update([[AIMessage("x", id="x1")]])
    fork.update([[AIMessage("y", id="y1")]])
    assert fork.log is not other.log
    assert [m.id for m in fork.get()] == ["h1", "y1"]


def test_threadlog_checkpointer_with_the_cache_reads_what_it_reads_without(backend: str) -> None:
    import threadlog

    with threadlog.checkpointer(backend, wrap=with_history_cache) as saver:
        graph = build_loop(saver)
        for i in range(3):
            graph.invoke(say(f"turn {i}"), CFG)
        old = next(
            s for s in graph.get_state_history(CFG) if len(s.values.get("messages", ())) == 5
        )
        graph.update_state(old.config, {"messages": [HumanMessage("fork", id="h-fork")]})
        graph.invoke(say("more"), CFG)
        cached = shape(graph.get_state(CFG).values["messages"])
        cache = history_cache_of(saver.__dict__.get("inner", saver))
        assert cache is not None and cache.hits >= 2
    with threadlog.checkpointer(backend) as plain:
        assert cached == shape(build_loop(plain).get_state(CFG).values["messages"])
    assert len(cached) == 5 + 1 + 5 and cached[5][1] == "h-fork"
