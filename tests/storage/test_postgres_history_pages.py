"""A page of a multi-agent thread's history on Postgres costs what it shows: a new
process's `get_state_history(limit=N)` runs the same few statements and builds about as
many message objects for a langgraph-swarm thread three times as long (the cold read
says where each checkpoint's writes start, so the page's older checkpoints are the same
log at earlier versions, not reads of their own), sync and async, and shows the same
messages as LangGraph's own Postgres saver at every checkpoint of the page. The read
itself gives `PostgresSaver.get_delta_channel_history`'s answer at every checkpoint."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph_swarm import create_handoff_tool, create_swarm

import threadlog
from tests.helpers.delta_apps import cfg, message_rows
from tests.helpers.multi_agent import Scripted, SwarmState, messages_in, swarm_reply
from tests.helpers.poisoned import plain_saver


def _swarm(saver: Any) -> Any:
    agents = [
        threadlog.create_agent(
            Scripted(script=swarm_reply(me, other)),
            [create_handoff_tool(agent_name=other)],
            name=me,
        )
        for me, other in (("alice", "bob"), ("bob", "alice"))
    ]
    builder = create_swarm(agents, default_active_agent="alice", state_schema=SwarmState)
    return builder.compile(checkpointer=saver)


def _turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"turn {i}", id=f"u{i}")]}


def _fill(url: str, turns: int, thread: str) -> None:
    with threadlog.checkpointer(url) as saver:
        app = _swarm(saver)
        for i in range(turns):
            app.invoke(_turn(i), cfg(thread))


class _Statements:
    """Statements the reading thread sends while `counting` (sync and async cursors; the
    async reads run on this thread's event loop)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent = 0
        self.counting = False
        self.reader = threading.get_ident()
        for cls in (psycopg.Cursor, psycopg.AsyncCursor):
            for name in ("execute", "executemany"):
                monkeypatch.setattr(cls, name, self._counted(getattr(cls, name)))

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(cur: Any, *args: Any, **kwargs: Any) -> Any:
            self.sent += self.counting and threading.get_ident() == self.reader
            return fn(cur, *args, **kwargs)

        return counted



def _probe(built: dict[int, BaseMessage]) -> Callable[[Any], Any]:
    """A `wrap=` that records the distinct message objects the serializer hands out."""

    def wrap(saver: Any) -> Any:
        serde = saver.serde
        for name in ("loads_typed", "loads_shared"):
            loads = getattr(serde, name)

            def counted(*args: Any, _loads: Any = loads) -> Any:
                value = _loads(*args)
                built.update((id(m), m) for m in messages_in(value))
                return value

            setattr(serde, name, counted)
        return saver

    return wrap


def _page(url: str, thread: str, statements: _Statements) -> tuple[int, int, int]:
    """(statements, messages shown, message objects built) of a new process's page."""
    built: dict[int, BaseMessage] = {}
    with threadlog.checkpointer(url, wrap=_probe(built)) as saver:
        app = _swarm(saver)
        statements.sent, statements.counting = 0, True
        shown = list(app.get_state_history(cfg(thread), limit=10))
        statements.counting = False
    assert len(shown) == 10
    distinct = {m.id for s in shown for m in s.values.get("messages", [])}
    return statements.sent, len(distinct), len(built)


async def _apage(url: str, thread: str, statements: _Statements) -> int:
    async with threadlog.acheckpointer(url) as saver:
        app = _swarm(saver)
        statements.sent, statements.counting = 0, True
        shown = [s async for s in app.aget_state_history(cfg(thread), limit=10)]
        statements.counting = False
    assert len(shown) == 10
    return statements.sent


def test_a_cold_history_page_on_postgres_reads_and_builds_what_it_shows(
    pg_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(pg_backend, 4, "short")
    _fill(pg_backend, 12, "long")
    statements = _Statements(monkeypatch)
    sent, extra, asent = {}, {}, {}
    for thread in ("short", "long"):
        sent[thread], returned, built = _page(pg_backend, thread, statements)
        extra[thread] = built - returned
        asent[thread] = asyncio.run(_apage(pg_backend, thread, statements))
    # The listing, and the newest checkpoint's two-statement read: not one read per
    # checkpoint of the page, and not more for a longer thread.
    assert sent["long"] == sent["short"] <= 4, sent
    assert asent["long"] == asent["short"] <= 4, asent
    # Beyond the messages shown, each checkpoint's own pending writes (the listing's):
    # per checkpoint shown, not per turn of the thread.
    assert extra["long"] <= extra["short"] + 10, extra
    assert extra["long"] <= 10 * 8, extra


def test_a_cold_history_page_on_postgres_equals_langgraphs(
    pg_backend: str, pg_databases: Any
) -> None:
    turns = [_turn(i) for i in range(6)]
    with plain_saver(pg_databases.take()) as saver:
        app = _swarm(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        expected = [
            message_rows(s.values.get("messages"), ids=False)
            for s in app.get_state_history(cfg("s"), limit=10)
        ]
    _fill(pg_backend, len(turns), "s")
    with threadlog.checkpointer(pg_backend) as saver:
        shown = list(_swarm(saver).get_state_history(cfg("s"), limit=10))
    got = [message_rows(s.values.get("messages"), ids=True) for s in shown]
    # LangGraph stamps random ids on the scripted replies: compared by all else.
    assert [[(row[0], None, *row[2:]) for row in rows] for rows in got] == expected
    assert len(got) == 10 and len(got[0]) == 4 * len(turns)



def test_the_postgres_cold_read_equals_the_savers_own_at_every_checkpoint(
    pg_backend: str,
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    from threadlog.checkpoint.backends import backend_of

    _fill(pg_backend, 3, "s")
    with PostgresSaver.from_conn_string(pg_backend) as saver:
        backend = backend_of(saver)
        compared = 0
        for tup in list(saver.list(cfg("s"))):  # the listing holds the connection
            conf = tup.config["configurable"]
            channels = ["messages", "compactions"]
            own = saver.get_delta_channel_history(config=tup.config, channels=channels)
            ours = backend.read("s", conf["checkpoint_ns"], channels, conf["checkpoint_id"])
            assert ours is not None
            for ch in channels:
                assert list(ours[ch]["writes"]) == list(own[ch]["writes"]), (conf, ch)
                assert ours[ch].get("seed") == own[ch].get("seed"), (conf, ch)
                # Each checkpoint on the way has its place in the writes, oldest first.
                places = [n for n, _ in ours[ch]["writes"].states]  # type: ignore[attr-defined]
                assert places == sorted(places)
            compared += 1
    assert compared > 20  # every namespace's checkpoints: the parent's and each agent's
