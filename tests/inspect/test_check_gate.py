"""`threadlog check` is a gate: it exits 0 on healthy threads of the apps users build, at
their heads and at every checkpoint (`--all-checkpoints`) — the checkpoint between a model
step and its tool step is in progress, not a problem — and a thread paused before its
tools is paused, not broken: `--repair` leaves its calls to the tool step, which runs
once on resume. A history that starts with the app's own, unstored prompt is a note
unless `--strict-first-turn`."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

import threadlog
from tests.helpers.multi_agent import Scripted
from tests.helpers.poisoned import plain_saver, react_agent, snapshot
from threadlog.cli import main
from threadlog.examples.weather import build_graph
from threadlog.inspect import check

ran: Counter[str] = Counter()


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    ran[city] += 1
    return f"{city}: sunny"


def _cfg(tid: str) -> Any:
    return {"configurable": {"thread_id": tid}}


def _ask(app: Any, tid: str, *questions: str) -> None:
    for i, q in enumerate(questions):
        app.invoke({"messages": [HumanMessage(q, id=f"{tid}-q{i}")]}, _cfg(tid))


def _gate(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, int, str]:
    head = main(["check", "--db", url, *extra])
    every = main(["check", "--db", url, "--all-checkpoints", *extra])
    return head, every, capsys.readouterr().out


# -- healthy apps ---------------------------------------------------------------------


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def _swarm(saver: Any) -> Any:
    from langgraph_swarm import create_handoff_tool, create_swarm

    def reply(me: str, other: str) -> Any:
        def script(messages: Sequence[BaseMessage]) -> AIMessage:
            if isinstance(messages[-1], HumanMessage):
                call = {"name": f"transfer_to_{other}", "args": {}, "id": f"{me}-{_turn(messages)}"}
                return AIMessage("", tool_calls=[call])
            return AIMessage(f"{me} answers turn {_turn(messages)}")

        return script

    class State(threadlog.MessagesState):
        active_agent: str | None

    alice = threadlog.create_agent(
        Scripted(script=reply("alice", "bob")), [create_handoff_tool(agent_name="bob")],
        name="alice",
    )
    bob = threadlog.create_agent(
        Scripted(script=reply("bob", "alice")), [create_handoff_tool(agent_name="alice")],
        name="bob",
    )
    builder = create_swarm([alice, bob], default_active_agent="alice", state_schema=State)
    return builder.compile(checkpointer=saver)


def _supervisor(saver: Any) -> Any:
    from langgraph_supervisor import create_supervisor

    def supervisor_reply(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "transfer_to_bob", "args": {}, "id": f"sup-{_turn(messages)}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage(f"supervisor closes turn {_turn(messages)}")

    class State(threadlog.MessagesState):
        remaining_steps: int

    bob = threadlog.create_agent(
        Scripted(script=lambda m: AIMessage(f"bob works on turn {_turn(m)}")), [], name="bob"
    )
    builder = create_supervisor([bob], model=Scripted(script=supervisor_reply), state_schema=State)
    return builder.compile(checkpointer=saver)


class TopicState(TypedDict, total=False):
    topic: str
    messages: Annotated[list[BaseMessage], add_messages]


def _prompt_first(saver: Any) -> Any:
    """The data-enrichment way: the app sends its own prompt (built from `topic`) before
    the stored messages and does not store it, so the stored history starts with the
    model's reply."""
    model = threadlog.OfflineChatModel().bind_tools([get_weather])

    def agent(state: TopicState) -> dict[str, Any]:
        prompt = HumanMessage(f"Is it raining in {state['topic']}?")
        return {"messages": [model.invoke([prompt, *state.get("messages", [])])]}

    b: StateGraph[Any, Any, Any, Any] = StateGraph(TopicState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([get_weather]))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=saver)


def test_check_and_all_checkpoints_exit_0_on_healthy_threads_of_the_apps_users_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'apps.db'}"
    with threadlog.checkpointer(url) as saver:
        _ask(build_graph(checkpointer=saver), "demo", "北京和上海今天要带伞吗？", "Tokyo?")
        agent = threadlog.create_agent(
            threadlog.OfflineChatModel(), [get_weather], checkpointer=saver
        )
        _ask(agent, "create-agent", "Beijing and Paris?", "London?")
        _ask(_swarm(saver), "swarm", "hi", "again")
        _ask(_supervisor(saver), "supervisor", "hi", "again")
    with plain_saver(url) as plain:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _ask(react_agent(plain, [get_weather]), "react-agent", "Paris and Tokyo?", "London?")
        app = _prompt_first(plain)
        app.invoke({"topic": "Paris"}, _cfg("prompt-first"))
        app.invoke({"topic": "Tokyo"}, _cfg("prompt-first"))
    before = snapshot(url)

    head, every, out = _gate(url, capsys)
    assert (head, every) == (0, 0), out
    assert "checked 6 thread(s)" in out and "6 clean, 0 with problems" in out
    # The app's own prompt is a note, said once per thread, and not a failure.
    assert "thread prompt-first: note: first_not_user" in out
    report = check(url, all_checkpoints=True)
    assert report.problems == [] and report.status == 0
    assert {n.thread_id for n in report.noted if n.kind == "first_not_user"} == {"prompt-first"}
    # The rest are the handoff calls left in each agent's namespace the run moved past.
    assert {n.thread_id for n in report.noted if n.kind == "in_progress"} <= {"swarm", "supervisor"}
    # Opting in: the app says it sends the stored history as it is.
    strict, strict_every, out = _gate(url, capsys, "--strict-first-turn")
    assert (strict, strict_every) == (1, 1)
    assert "thread prompt-first: 1 problem(s)" in out and "first_not_user" in out
    assert snapshot(url) == before  # checks only read


# -- a pause is not a problem ----------------------------------------------------------


def _interrupting_app(saver: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return react_agent(saver, [get_weather], interrupt_before=["tools"])


@pytest.mark.parametrize("app", ["interrupt_before", "approval"])
def test_repair_leaves_a_paused_threads_calls_to_its_tool_step_which_runs_them_once(
    backend: str, app: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran.clear()
    if app == "interrupt_before":
        opened: Any = plain_saver(backend)
    else:
        opened = threadlog.checkpointer(backend)
    with opened as saver:
        if app == "interrupt_before":
            graph = _interrupting_app(saver)
        else:
            graph = threadlog.create_agent(
                threadlog.OfflineChatModel(),
                [get_weather],
                checkpointer=saver,
                requires_approval=["get_weather"],
            )
        _ask(graph, "t", "Beijing and Paris?")
        assert set(graph.get_state(_cfg("t")).next) == {"tools"}
    before = snapshot(backend)

    assert main(["check", "--db", backend]) == 0  # paused: in progress, not a problem
    out = capsys.readouterr().out
    assert "thread t: note: in_progress" in out and "1 clean, 0 with problems" in out
    assert main(["check", "--db", backend, "--repair"]) == 0
    out = capsys.readouterr().out
    assert "repaired 0 thread(s)" in out and "appended" not in out
    assert snapshot(backend) == before  # the repair wrote nothing

    opened = plain_saver(backend) if app == "interrupt_before" else threadlog.checkpointer(backend)
    with opened as saver:
        if app == "interrupt_before":
            graph = _interrupting_app(saver)
            graph.invoke(None, _cfg("t"))
        else:
            graph = threadlog.create_agent(
                threadlog.OfflineChatModel(),
                [get_weather],
                checkpointer=saver,
                requires_approval=["get_weather"],
            )
            for _ in range(2):  # one approval per call
                if graph.get_state(_cfg("t")).next:
                    graph.invoke(Command(resume={"action": "approve"}), _cfg("t"))
        assert not graph.get_state(_cfg("t")).next
        messages = graph.get_state(_cfg("t")).values["messages"]
    assert ran == Counter({"Beijing": 1, "Paris": 1})
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert sorted(m.content for m in results) == ["Beijing: sunny", "Paris: sunny"]
    report = check(backend, all_checkpoints=True)
    assert report.problems == [] and report.status == 0


def test_check_exits_0_on_swarm_and_supervisor_threads_on_sqlite_and_postgres(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with threadlog.checkpointer(backend) as saver:
        _ask(_swarm(saver), "swarm", "hi", "again", "once more")
        _ask(_supervisor(saver), "supervisor", "hi", "again", "once more")
    capsys.readouterr()
    for thread in ("swarm", "supervisor"):
        for every in ([], ["--all-checkpoints"]):
            code = main(["check", "--db", backend, "--thread", thread, "--json", *every])
            out = capsys.readouterr().out
            assert code == 0, out
            assert '"with_problems": 0' in out and '"unreadable": 0' in out
    report = check(backend, all_checkpoints=True)
    assert report.problems == [] and report.status == 0
    assert {n.thread_id for n in report.noted if n.kind == "in_progress"} <= {"swarm", "supervisor"}
