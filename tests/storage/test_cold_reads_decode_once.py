"""A cold read of a multi-agent thread decodes each stored message once
(`threadlog.checkpoint.shared_records`): a langgraph-swarm thread's handoffs and agent
outputs both carry each turn's new messages, and a new process's `get_state` (also with
`subgraphs=True`) and, on SQLite, `get_state_history(limit=N)` build about as many
message objects as they return — however long the thread — and read back the same
messages as LangGraph's own saver, at every checkpoint. SQLite and Postgres."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph_swarm import create_handoff_tool, create_swarm

import threadlog
from tests.helpers.delta_apps import cfg, message_rows
from tests.helpers.multi_agent import Scripted, SwarmState, messages_in, swarm_reply
from tests.helpers.poisoned import plain_saver


def _swarm(saver: Any) -> Any:
    alice = threadlog.create_agent(
        Scripted(script=swarm_reply("alice", "bob")),
        [create_handoff_tool(agent_name="bob")],
        name="alice",
    )
    bob = threadlog.create_agent(
        Scripted(script=swarm_reply("bob", "alice")),
        [create_handoff_tool(agent_name="alice")],
        name="bob",
    )
    builder = create_swarm([alice, bob], default_active_agent="alice", state_schema=SwarmState)
    return builder.compile(checkpointer=saver)


def _turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"turn {i}", id=f"u{i}")]}



class _Probe:
    """The distinct message objects the backend saver's serializer hands out (held, so
    no id is reused while a read runs)."""

    def __init__(self) -> None:
        self.objects: dict[int, BaseMessage] = {}

    @property
    def built(self) -> int:
        return len(self.objects)

    def wrap(self, saver: Any) -> Any:
        serde = saver.serde
        for name in ("loads_typed", "loads_shared"):  # a whole blob, one read's writes
            setattr(serde, name, self._counted(getattr(serde, name)))
        return saver

    def _counted(self, loads: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            value = loads(*args)
            self.objects.update((id(m), m) for m in messages_in(value))
            return value

        return counted


def _fill(url: str, turns: int, thread: str) -> None:
    with threadlog.checkpointer(url) as saver:
        app = _swarm(saver)
        for i in range(turns):
            app.invoke(_turn(i), cfg(thread))


def _cold(url: str, read: Callable[[Any], int]) -> tuple[int, int]:
    """(messages returned, message objects built) by `read` in a new process's view."""
    probe = _Probe()
    with threadlog.checkpointer(url, wrap=probe.wrap) as saver:
        returned = read(_swarm(saver))
    return returned, probe.built


def _state(thread: str, *, subgraphs: bool = False) -> Callable[[Any], int]:
    def read(app: Any) -> int:
        return len(app.get_state(cfg(thread), subgraphs=subgraphs).values["messages"])

    return read


def _history(thread: str, limit: int) -> Callable[[Any], int]:
    def read(app: Any) -> int:
        shown = list(app.get_state_history(cfg(thread), limit=limit))
        assert len(shown) == limit
        # Distinct messages: older checkpoints hold a prefix of the newest one's.
        return len({m.id for s in shown for m in s.values.get("messages", [])})

    return read


def test_a_cold_get_state_builds_each_message_it_returns_once(backend: str) -> None:
    _fill(backend, 4, "short")
    _fill(backend, 12, "long")
    extra = {}
    for thread, turns in (("short", 4), ("long", 12)):
        for subgraphs in (False, True):
            returned, built = _cold(backend, _state(thread, subgraphs=subgraphs))
            assert returned == 4 * turns  # user, handoff call, handoff result, answer
            extra[thread, subgraphs] = built - returned
    # Beyond the messages returned, a bounded few (a checkpoint's own values): the
    # same for a thread three times as long — not the turns' re-sent copies.
    assert extra[("long", False)] == extra[("short", False)] <= 4, extra
    assert extra[("long", True)] == extra[("short", True)] <= 4, extra


def test_a_cold_history_page_on_sqlite_builds_what_it_returns(sqlite_url: str) -> None:
    # SQLite's cold read says which writes lead to each checkpoint, so the page's older
    # checkpoints are the same log at earlier versions (Postgres: test_postgres_history_pages).
    _fill(sqlite_url, 4, "short")
    _fill(sqlite_url, 12, "long")
    extra = {}
    for thread in ("short", "long"):
        returned, built = _cold(sqlite_url, _history(thread, 10))
        extra[thread] = built - returned
    # Each checkpoint's own pending writes are read for the page (LangGraph's `list`):
    # per checkpoint shown, not per turn of the thread.
    assert extra["long"] <= extra["short"] + 10, extra
    assert extra["long"] <= 10 * 8, extra


def test_cold_reads_of_a_swarm_equal_langgraphs_at_every_checkpoint(
    backend: str, tmp_path: Any, request: Any
) -> None:
    turns = [_turn(i) for i in range(5)]
    ref = (
        f"sqlite:///{tmp_path / 'langgraph.sqlite'}"
        if backend.startswith("sqlite:///")
        else request.getfixturevalue("pg_databases").take()
    )
    with plain_saver(ref) as saver:
        app = _swarm(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        expected = [
            message_rows(s.values.get("messages"), ids=False)
            for s in app.get_state_history(cfg("s"))
        ]
    _fill(backend, len(turns), "s")
    with threadlog.checkpointer(backend) as saver:
        configs = [s.config for s in _swarm(saver).get_state_history(cfg("s"))]
    cold = []
    for config in configs:  # each checkpoint read first thing by a new process
        with threadlog.checkpointer(backend) as saver:
            values = _swarm(saver).get_state(config).values
            cold.append(message_rows(values.get("messages"), ids=True))
    # LangGraph stamps random ids on the scripted replies: compared by all else, and
    # each message appears once, in order.
    assert [[(row[0], None, *row[2:]) for row in rows] for rows in cold] == expected
    assert all(len({row[1] for row in rows}) == len(rows) for rows in cold)
    assert len(cold) == len(expected) and len(cold[0]) == 4 * len(turns)
