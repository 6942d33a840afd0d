"""The multi-agent forms docs/compatibility.md prints ("Multi-agent apps: the forms to use")
run as printed on threadlog's log: a `langgraph-supervisor` app and a `langgraph-swarm` app
whose workers are `create_react_agent` and LangChain `create_agent` agents, two turns each
in a new saver, SQLite; the stored thread is clean and paired."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import create_react_agent
from langgraph_supervisor import create_supervisor

import threadlog
from tests.helpers.demo import REPO
from tests.helpers.multi_agent import Scripted
from threadlog.cli import main

# The doc shows create_react_agent as users still write it; its deprecation is LangGraph's.
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

DOC = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
MARK = "<!-- tested: tests/apps/test_multi_agent_ports.py -->"
UNKNOWN = "wrote to unknown channel"


def snippets() -> dict[str, str]:
    """Each tested block, preceded by blank lines so a traceback names its line in the doc."""
    found = re.finditer(re.escape(MARK) + r"\n```python\n(.*?)```", DOC, re.S)
    blocks = ["\n" * DOC.count("\n", 0, m.start(1)) + m.group(1) for m in found]
    return {"supervisor" if "create_supervisor" in b else "swarm": b for b in blocks}


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"found {query}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


TOOL_ARGS = {"search": {"query": "threadlog"}, "add": {"a": 2, "b": 3}}


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def worker(me: str, tool_name: str, other: str | None = None) -> Scripted:
    """Hands a user's message to `other`; otherwise calls its tool once, then answers."""

    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        last, turn = messages[-1], _turn(messages)
        if isinstance(last, ToolMessage) and last.name == tool_name:
            return AIMessage(f"{me} answers turn {turn}")
        if isinstance(last, HumanMessage) and other is not None:
            call = {"name": f"transfer_to_{other}", "args": {}, "id": f"{me}-handoff-{turn}"}
            return AIMessage("", tool_calls=[call])
        call = {"name": tool_name, "args": TOOL_ARGS[tool_name], "id": f"{me}-{tool_name}-{turn}"}
        return AIMessage("", tool_calls=[call])

    return Scripted(script=reply)


def supervisor(workers: Sequence[str]) -> Scripted:
    """Delegates turn n to `workers[n - 1]`, then closes the turn."""

    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        turn = _turn(messages)
        if isinstance(messages[-1], HumanMessage):
            name = f"transfer_to_{workers[turn - 1]}"
            return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": f"sup-{turn}"}])
        return AIMessage(f"supervisor closes turn {turn}")

    return Scripted(script=reply)


def _scope(url: str, question: str) -> dict[str, Any]:
    return {
        "__name__": "compatibility_md",
        "url": url,
        "config": {"configurable": {"thread_id": "ports"}},
        "question": question,
        "search": search,
        "add": add,
        "supervisor_model": supervisor(["research", "math"]),
        "research_model": worker("research", "search"),
        "math_model": worker("math", "add"),
        "alice_model": worker("alice", "add", other="bob"),
        "bob_model": worker("bob", "search", other="alice"),
    }


def _unknown_channel_writes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if UNKNOWN in r.getMessage()]


AGENTS = {"supervisor": ("research", "math"), "swarm": ("alice", "bob")}
EXPECTED = {
    "supervisor": [
        "research answers turn 1",
        "supervisor closes turn 1",
        "math answers turn 2",
        "supervisor closes turn 2",
    ],
    "swarm": ["bob answers turn 1", "alice answers turn 2"],
}
# A worker answers only after its own tool's result; the supervisor's default
# output_mode="last_message" passes just that answer up, a swarm agent its whole history.
CALLS = {
    "supervisor": [
        "transfer_to_research",
        "transfer_back_to_supervisor",
        "transfer_to_math",
        "transfer_back_to_supervisor",
    ],
    "swarm": ["transfer_to_bob", "search", "transfer_to_alice", "add"],
}


def test_the_compatibility_page_has_both_multi_agent_forms() -> None:
    assert sorted(snippets()) == ["supervisor", "swarm"]


@pytest.mark.parametrize("form", ["supervisor", "swarm"])
def test_a_documented_multi_agent_form_runs_two_turns_on_threadlogs_log_and_checks_clean(
    form: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'ports.sqlite'}"
    code = compile(snippets()[form], "docs/compatibility.md", "exec", dont_inherit=True)
    caplog.set_level(logging.WARNING)
    for question in ("first question", "second question"):  # each turn in a new saver
        scope = _scope(url, question)
        exec(code, scope)
    for agent in (*AGENTS[form], "app"):  # every graph's messages are threadlog's log
        assert isinstance(scope[agent].channels["messages"], threadlog.MessageLogChannel)
    with threadlog.checkpointer(url) as saver:
        app = scope["builder"].compile(checkpointer=saver)
        state = app.get_state(scope["config"])
        history = list(app.get_state_history(scope["config"]))
    messages = state.values["messages"]
    answers = [m.content for m in messages if isinstance(m, AIMessage) and m.content]
    assert [a for a in answers if "answers" in a or "closes" in a] == EXPECTED[form]
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.name for m in results] == CALLS[form]
    assert all(m.status == "success" for m in results)
    assert len({m.id for m in messages}) == len(messages)  # each message stored once
    threadlog.validate(messages, allow_pending_calls=False)
    for snap in history:
        threadlog.validate(snap.values.get("messages", []))
    assert main(["check", "--db", url]) == 0
    writes = _unknown_channel_writes(caplog)
    if form == "swarm":
        assert writes == []
    else:  # explained in the doc: langgraph-supervisor re-sends the managed value
        assert set(writes) == {
            "Task supervisor with path ('__pregel_pull', 'supervisor') wrote to unknown "
            "channel remaining_steps, ignoring it."
        }


def test_create_react_agent_refuses_a_worker_state_without_remaining_steps() -> None:
    with pytest.raises(ValueError, match="remaining_steps"):
        create_react_agent(worker("w", "add"), [add], state_schema=threadlog.MessagesState)


class LangGraphState(MessagesState):
    remaining_steps: RemainingSteps


def test_langgraph_logs_the_supervisors_remaining_steps_warning_on_its_own_saver_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    research = create_react_agent(
        worker("research", "search"), [search], name="research", state_schema=LangGraphState
    )
    builder = create_supervisor(
        [research], model=supervisor(["research"]), state_schema=LangGraphState
    )
    app = builder.compile(checkpointer=InMemorySaver())
    caplog.set_level(logging.WARNING)
    out = app.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "lg"}})
    assert out["messages"][-1].content == "supervisor closes turn 1"
    assert _unknown_channel_writes(caplog) == [
        "Task supervisor with path ('__pregel_pull', 'supervisor') wrote to unknown "
        "channel remaining_steps, ignoring it."
    ]
