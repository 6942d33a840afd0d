"""Multi-agent apps on threadlog's log, each with an approval interrupt and a real process
kill (SIGKILL) inside an agent subgraph, then resumed from the database and a second turn:
a `langgraph-supervisor` app, a `langgraph-swarm` app, and LangChain's `create_agent`
with `HumanInTheLoopMiddleware`; SQLite and Postgres.

Each turn books a table; the booking tool needs approval (threadlog's
`requires_approval`, or the HITL middleware) and appends one fsynced line per run, so
side effects are counted across processes. A forked worker runs turn 1: the interrupt,
the approval, the booking — and is SIGKILLed inside the model call that answers after the
booking's result was stored. A new saver in the test process reads the thread
(`get_state`, `get_state(subgraphs=True)`, `get_state_history`, the inspector), resumes
with `invoke(None)`, and runs turn 2 with its own interrupt. Counted: each message once,
every call paired, each booking run exactly once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

import threadlog
import threadlog.inspect
from tests.helpers.durability import read_effects, record_effect
from tests.helpers.multi_agent import Scripted

KILL = {"on": False}
"""Set in the worker: the model call answering after a booking SIGKILLs the process."""


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def booker(messages: Sequence[BaseMessage]) -> AIMessage:
    """Books after a user message or a handoff; answers after the booking's result."""
    last, turn = messages[-1], _turn(messages)
    if isinstance(last, ToolMessage) and last.tool_call_id.startswith("book-"):
        if KILL["on"]:
            os.kill(os.getpid(), signal.SIGKILL)
        return AIMessage(f"booked for turn {turn}: {last.content}")
    call = {"name": "book_table", "args": {"city": "Rome"}, "id": f"book-{turn}"}
    return AIMessage("", tool_calls=[call])


def handing_off(me: str, to: str) -> Callable[[Sequence[BaseMessage]], AIMessage]:
    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        turn = _turn(messages)
        if isinstance(messages[-1], HumanMessage):
            call = {"name": f"transfer_to_{to}", "args": {}, "id": f"{me}-handoff-{turn}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage(f"{me} closes turn {turn}")

    return reply


def book_tool(effects: Path) -> Any:
    @tool
    def book_table(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Book a table (needs approval)."""
        record_effect(effects, tool_call_id, city)
        return f"table in {city}"

    return book_table


class SwarmState(threadlog.MessagesState):
    active_agent: str | None


class SupervisorState(threadlog.MessagesState):
    remaining_steps: int


def build(app: str, saver: Any, effects: Path) -> Any:
    if app == "middleware":
        from langchain.agents import create_agent
        from langchain.agents.middleware import AgentState, HumanInTheLoopMiddleware

        class State(AgentState):  # type: ignore[type-arg]
            messages: threadlog.Messages

        return create_agent(
            Scripted(script=booker),
            [book_tool(effects)],
            state_schema=State,
            middleware=[HumanInTheLoopMiddleware(interrupt_on={"book_table": True})],
            checkpointer=saver,
        )
    bob = threadlog.create_agent(
        Scripted(script=booker), [book_tool(effects)], requires_approval=["book_table"], name="bob"
    )
    if app == "swarm":
        from langgraph_swarm import create_handoff_tool, create_swarm

        alice = threadlog.create_agent(
            Scripted(script=handing_off("alice", "bob")),
            [create_handoff_tool(agent_name="bob")],
            name="alice",
        )
        builder = create_swarm(
            [alice, bob], default_active_agent="alice", state_schema=SwarmState
        )
    else:
        from langgraph_supervisor import create_supervisor

        builder = create_supervisor(
            [bob], model=Scripted(script=handing_off("supervisor", "bob")),
            state_schema=SupervisorState,
        )
    return builder.compile(checkpointer=saver)


def approve(app: str) -> Command[Any]:
    if app == "middleware":
        return Command(resume={"decisions": [{"type": "approve"}]})
    return Command(resume={"action": "approve"})


def turn(app: str, graph: Any, text: str, mid: str, cfg: Any) -> dict[str, Any]:
    """One user turn: it pauses for the booking's approval, the reviewer approves."""
    paused = graph.invoke({"messages": [HumanMessage(text, id=mid)]}, cfg, durability="sync")
    assert paused.get("__interrupt__"), "the booking must pause for approval"
    out: dict[str, Any] = graph.invoke(approve(app), cfg, durability="sync")
    return out


def _worker(app: str, url: str, effects: Path, cfg: Any) -> None:
    code = 1
    try:
        KILL["on"] = True
        with threadlog.checkpointer(url) as saver:
            turn(app, build(app, saver, effects), "book Rome", "u1", cfg)
        code = 0  # not reached when the kill lands
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


APPS = ["supervisor", "swarm", "middleware"]


@pytest.mark.parametrize("app", APPS)
def test_a_kill_inside_the_agent_resumes_with_each_booking_run_once_over_two_turns(
    backend: str, tmp_path: Path, app: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    cfg: Any = {"configurable": {"thread_id": f"crash-{app}"}}
    proc = multiprocessing.get_context("fork").Process(
        target=_worker, args=(app, backend, effects, cfg)
    )
    proc.start()
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL, "the worker must die inside the answering call"
    assert read_effects(effects) == ["book-1"]  # the booking ran, then the kill

    with threadlog.checkpointer(backend) as saver:
        graph = build(app, saver, effects)
        snap = graph.get_state(cfg)
        assert snap.next, "the unfinished turn is not shown as finished"
        graph.get_state(cfg, subgraphs=True)
        assert list(graph.get_state_history(cfg))
        threadlog.inspect.thread(graph, cfg).timeline().rows()
        graph.invoke(None, cfg, durability="sync")  # resume as a user would
        out = turn(app, graph, "and again", "u2", cfg)
        history = list(graph.get_state_history(cfg))
    messages = out["messages"]
    threadlog.validate(messages, allow_pending_calls=False)
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), f"a message stored twice: {ids}"
    assert [m.id for m in messages if isinstance(m, HumanMessage)] == ["u1", "u2"]
    bookings = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id[:5] == "book-"]
    # langgraph-supervisor passes only an agent's last message up (`output_mode`'s
    # default), so the supervisor's log holds bob's answers, not his tool calls.
    expected = [] if app == "supervisor" else [
        ("book-1", "table in Rome", "success"), ("book-2", "table in Rome", "success")]
    assert [(b.tool_call_id, b.content, b.status) for b in bookings] == expected
    answers = [m.content for m in messages if isinstance(m, AIMessage) and m.content]
    assert [a for a in answers if a.startswith("booked")] == [
        "booked for turn 1: table in Rome", "booked for turn 2: table in Rome"]
    # Each booking's side effect happened once: the stored result was not run again.
    assert Counter(read_effects(effects)) == Counter({"book-1": 1, "book-2": 1})
    for snap in history:  # every checkpoint of the thread stays a valid log
        threadlog.validate(snap.values.get("messages", []), allow_pending_calls=True)


@pytest.mark.parametrize("app", APPS)
def test_a_new_message_instead_of_the_approval_answers_the_paused_call(
    backend: str, tmp_path: Path, app: str
) -> None:
    """The reviewer never answers; the user writes again. The paused booking (inside the
    agent subgraph for the supervisor and the swarm) is answered "not completed" before
    the new message — the tool never runs — and the new turn books normally."""
    effects = tmp_path / "effects.jsonl"
    cfg: Any = {"configurable": {"thread_id": f"instead-{app}"}}
    with threadlog.checkpointer(backend) as saver:
        graph = build(app, saver, effects)
        paused = graph.invoke({"messages": [HumanMessage("book Rome", id="u1")]}, cfg)
        assert paused.get("__interrupt__")
        out = turn(app, graph, "book again", "u2", cfg)
    messages = out["messages"]
    threadlog.validate(messages, allow_pending_calls=False)
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), f"a message stored twice: {ids}"
    assert Counter(read_effects(effects)) == Counter({"book-2": 1})  # book-1 never ran
    # The abandoned call is logged, answered before the new message — in the supervisor's
    # log too, though it otherwise gets only an agent's last message.
    first = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "book-1")
    assert first.status == "error" and "not completed" in str(first.content)
    assert ids.index(first.id) < ids.index("u2")
