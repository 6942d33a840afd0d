"""A message-log write that re-sends what the log holds is stored as what it adds
(`threadlog.checkpoint.resent`): a langgraph-swarm app, whose agent nodes and handoffs
write the whole history back to the parent each time, stores flat bytes per turn in the
parent's writes, and every checkpoint of its history reads back the same messages (ids,
order, content) as on LangGraph's own saver, which stores every write whole — warm, cold,
and `get_tuple`'s pending writes rebuilt as written. SQLite and Postgres."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph_swarm import create_handoff_tool, create_swarm

import threadlog
from tests.apps.test_multi_agent_swarm import State, _agent_reply
from tests.helpers.delta_apps import cfg, message_rows
from tests.helpers.multi_agent import Scripted
from tests.helpers.poisoned import plain_saver
from threadlog.log.message_log import is_resent

TURNS = 12


def _swarm(saver: Any) -> Any:
    alice = threadlog.create_agent(
        Scripted(script=_agent_reply("alice", "bob")),
        [create_handoff_tool(agent_name="bob")],
        name="alice",
    )
    bob = threadlog.create_agent(
        Scripted(script=_agent_reply("bob", "alice")),
        [create_handoff_tool(agent_name="alice")],
        name="bob",
    )
    builder = create_swarm([alice, bob], default_active_agent="alice", state_schema=State)
    return builder.compile(checkpointer=saver)


def _turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"turn {i}", id=f"u{i}")]}


def _root_message_bytes(url: str) -> int:
    """Bytes the parent namespace's message writes take in storage."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url[len("sqlite:///") :])) as con:
            row = con.execute(
                "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes "
                "WHERE checkpoint_ns = '' AND channel = 'messages'"
            ).fetchone()
    else:
        import psycopg

        with psycopg.connect(url) as con:
            row = con.execute(
                "SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM checkpoint_writes "
                "WHERE checkpoint_ns = '' AND channel = 'messages'"
            ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_swarms_parent_writes_grow_by_what_each_turn_adds(backend: str) -> None:
    per_turn = []
    with threadlog.checkpointer(backend) as saver:
        app = _swarm(saver)
        before = _root_message_bytes(backend)
        for i in range(TURNS):
            app.invoke(_turn(i), cfg("s"))
            now = _root_message_bytes(backend)
            per_turn.append(now - before)
            before = now
    half = TURNS // 2
    first, second = sum(per_turn[1:half]), sum(per_turn[half + 1 :])
    # Whole histories re-sent each turn made the second half ~3x the first here.
    assert second <= 1.2 * first, per_turn
    assert max(per_turn[1:]) <= 1.5 * min(per_turn[1:]), per_turn


def _history(app: Any, thread: str, *, ids: bool = True) -> list[list[tuple[Any, ...]]]:
    return [
        message_rows(s.values.get("messages"), ids=ids)
        for s in app.get_state_history(cfg(thread))
    ]


def _writes(saver: Any, app: Any, thread: str, *, ids: bool = True) -> list[list[Any]]:
    """Each checkpoint's message writes as get_tuple hands them over, newest first."""
    out = []
    for snapshot in app.get_state_history(cfg(thread)):
        tup = saver.get_tuple(snapshot.config)
        values = [v for _, ch, v in tup.pending_writes or () if ch == "messages"]
        assert not any(is_resent(v) for v in values)  # rebuilt as written
        out.append(message_rows([m for v in values for m in v], ids=ids))
    return out


@contextlib.contextmanager
def _reference(url: str, tmp_path: Any, request: Any) -> Iterator[Any]:
    ref = (
        f"sqlite:///{tmp_path / 'langgraph.sqlite'}"
        if url.startswith("sqlite:///")
        else request.getfixturevalue("pg_databases").take()
    )
    with plain_saver(ref) as saver:
        yield saver


def test_every_checkpoint_of_a_swarm_reads_back_as_on_langgraphs_saver(
    backend: str, tmp_path: Any, request: Any
) -> None:
    turns = [_turn(i) for i in range(6)]
    # LangGraph stamps random ids on the scripted replies and handoff results: the two
    # runs are compared by everything else, and this run's ids warm against cold.
    with _reference(backend, tmp_path, request) as saver:
        app = _swarm(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        expected = _history(app, "s", ids=False)
        expected_writes = _writes(saver, app, "s", ids=False)
    with threadlog.checkpointer(backend) as saver:
        app = _swarm(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        warm = _history(app, "s")
        stored = [v for v in _all_root_writes(saver) if is_resent(v)]
        assert stored, "nothing was stored as what it added"
    with threadlog.checkpointer(backend) as saver:  # a new process's view: nothing cached
        app = _swarm(saver)
        cold, cold_writes = _history(app, "s"), _writes(saver, app, "s")
        cold_bare = _writes(saver, app, "s", ids=False)
    assert cold == warm
    assert [[(row[0], None, *row[2:]) for row in rows] for rows in cold] == expected
    assert cold_bare == expected_writes
    assert all(len({row[1] for row in rows}) == len(rows) for rows in cold)  # each once
    assert len(cold_writes) == len(expected) == 6 * 4 and len(cold[0]) == 6 * 4


def _all_root_writes(saver: Any) -> list[Any]:
    out = []
    for tup in saver.list(cfg("s")):
        out.extend(v for _, ch, v in tup.pending_writes or () if ch == "messages")
    return out
