"""A message-log write that re-sends what the log holds is stored as what it adds
(`threadlog.checkpoint.resent`): a langgraph-swarm app, whose agent nodes and handoffs
write the whole history back to the parent each time and whose every agent invocation
gets it as input in a new namespace, stores flat bytes per turn, and every checkpoint of
its history — the parent's and each agent's namespace — reads back the same messages
(ids, order, content) as on LangGraph's own saver, which stores every write whole: warm,
cold, and `get_tuple`'s pending writes rebuilt as written. SQLite and Postgres."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph_swarm import create_handoff_tool, create_swarm

import threadlog
from tests.helpers.delta_apps import (
    bytes_per_turn,
    cfg,
    message_rows,
    reference_saver,
)
from tests.helpers.multi_agent import Scripted
from tests.helpers.multi_agent import SwarmState as State
from tests.helpers.multi_agent import swarm_reply as _agent_reply
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


def test_a_swarm_stores_flat_bytes_per_turn_in_every_namespace(backend: str) -> None:
    with threadlog.checkpointer(backend) as saver:
        per_turn = bytes_per_turn(_swarm(saver), backend, [_turn(i) for i in range(TURNS)], "s")
    half = TURNS // 2
    first, second = sum(per_turn[1:half]), sum(per_turn[half + 1 :])
    # Whole histories re-sent each turn (agent outputs, handoffs, each agent's input in
    # its own namespace) made the second half ~3x the first here.
    assert second <= 1.15 * first, per_turn
    assert max(per_turn[1:]) <= 1.3 * min(per_turn[1:]), per_turn


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


def test_every_checkpoint_of_a_swarm_reads_back_as_on_langgraphs_saver(
    backend: str, tmp_path: Any, request: Any
) -> None:
    turns = [_turn(i) for i in range(6)]
    # LangGraph stamps random ids on the scripted replies and handoff results: the two
    # runs are compared by everything else, and this run's ids warm against cold.
    with reference_saver(backend, tmp_path, request) as saver:
        app = _swarm(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        expected = _history(app, "s", ids=False)
        expected_writes = _writes(saver, app, "s", ids=False)
        expected_subgraphs = _subgraphs(app, saver, ids=False)
    with threadlog.checkpointer(backend) as saver:
        app = _swarm(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        warm = _history(app, "s")
        warm_subgraphs = _subgraphs(app, saver)
        stored = [v for v in _all_root_writes(saver) if is_resent(v)]
        assert stored, "nothing was stored as what it added"
    with threadlog.checkpointer(backend) as saver:  # a new process's view: nothing cached
        app = _swarm(saver)
        cold, cold_writes = _history(app, "s"), _writes(saver, app, "s")
        cold_bare = _writes(saver, app, "s", ids=False)
        cold_subgraphs = _subgraphs(app, saver)
    assert cold == warm
    assert [[(row[0], None, *row[2:]) for row in rows] for rows in cold] == expected
    assert cold_bare == expected_writes
    assert cold_subgraphs == warm_subgraphs
    assert [
        [[(row[0], None, *row[2:]) for row in rows] for rows in ns] for ns in cold_subgraphs
    ] == expected_subgraphs
    assert len(expected_subgraphs) == 6 * 2  # two agents ran each turn
    assert all(len({row[1] for row in rows}) == len(rows) for rows in cold)  # each once
    assert len(cold_writes) == len(expected) == 6 * 4 and len(cold[0]) == 6 * 4


def _subgraphs(app: Any, saver: Any, *, ids: bool = True) -> list[list[list[Any]]]:
    """Each agent invocation's namespace, in the order they ran: its messages at each of
    its checkpoints, oldest first."""
    by_ns: dict[str, list[Any]] = {}
    for tup in saver.list(cfg("s")):
        ns = tup.config["configurable"].get("checkpoint_ns") or ""
        if ns:
            by_ns.setdefault(ns, []).append(tup.config)
    out = []
    for configs in sorted(by_ns.values(), key=lambda c: min(_cid(x) for x in c)):
        states = [app.get_state(c) for c in sorted(configs, key=_cid)]
        out.append([message_rows(st.values.get("messages"), ids=ids) for st in states])
    return out


def _cid(config: Any) -> str:
    return str(config["configurable"]["checkpoint_id"])


def _all_root_writes(saver: Any) -> list[Any]:
    out = []
    for tup in saver.list(cfg("s")):
        out.extend(v for _, ch, v in tup.pending_writes or () if ch == "messages")
    return out
