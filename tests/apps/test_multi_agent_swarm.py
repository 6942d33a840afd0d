"""A `langgraph-swarm` app whose state is threadlog's log: agents made with
`threadlog.create_agent`, swarm handoff tools (`Command(goto=..., graph=Command.PARENT)`
re-sending the agent's history), two turns, SQLite and Postgres."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph_swarm import create_handoff_tool, create_swarm

import threadlog
from tests.helpers.multi_agent import Scripted
from tests.helpers.multi_agent import SwarmState as State
from tests.helpers.multi_agent import swarm_reply as _agent_reply


def test_a_swarm_on_threadlogs_log_hands_off_both_ways_over_two_turns(backend: str) -> None:
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
    cfg: Any = {"configurable": {"thread_id": "swarm"}}
    with threadlog.checkpointer(backend) as saver:
        app = builder.compile(checkpointer=saver)
        first = app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        assert first["messages"][-1].content == "bob answers turn 1"
        assert first["active_agent"] == "bob"
        out = app.invoke({"messages": [HumanMessage("again", id="u2")]}, cfg)
    assert out["messages"][-1].content == "alice answers turn 2"
    assert out["active_agent"] == "alice"
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["alice-handoff-1", "bob-handoff-2"]
    assert all(m.status == "success" for m in results)
    assert len({m.id for m in out["messages"]}) == len(out["messages"])  # each stored once
    threadlog.validate(out["messages"])
