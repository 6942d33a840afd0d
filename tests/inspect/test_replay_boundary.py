"""`threadlog replay` owns the tool boundary, not the node list: no tool function runs in
a replay (without `--tools live`) wherever it is called from — a top-level tool node, an
agent used as a subgraph node, an agent inside an agent, an agent a node function
invokes, LangGraph's prebuilt agent — and a faithful replay reports `match`. A graph a
replay cannot make safe is refused with one line naming the node."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import START, StateGraph

import threadlog
from threadlog import ContextPolicy, OfflineChatModel, create_agent
from threadlog.check.replay import replay
from threadlog.cli import main
from threadlog.examples import weather

QUESTIONS = ["北京今天适合带伞吗？", "What about Shanghai and Beijing?", "thanks!"]


class Runs:
    """A weather tool whose function counts how often it really runs."""

    def __init__(self) -> None:
        self.count = 0

    def tool(self) -> BaseTool:
        def get_weather(city: str) -> str:
            """Today's weather for one city."""
            self.count += 1
            return str(weather.get_weather.invoke({"city": city}))

        return StructuredTool.from_function(get_weather)


def _agent(tool: BaseTool) -> Any:
    return create_agent(
        OfflineChatModel(),
        [tool],
        system_prompt=weather.SYSTEM_PROMPT,
        context=ContextPolicy(max_turns=20),
        max_model_calls=6,
    )


def _wrap(node: Any, name: str) -> Any:
    g = StateGraph(threadlog.AgentState)
    g.add_node(name, node)
    g.add_edge(START, name)
    return g


def top_level(tool: BaseTool, saver: Any = None) -> Any:
    return _agent(tool) if saver is None else _agent(tool).copy(update={"checkpointer": saver})


def agent_subgraph(tool: BaseTool, saver: Any = None) -> Any:
    return _wrap(_agent(tool), "agent").compile(checkpointer=saver)


def agent_in_agent(tool: BaseTool, saver: Any = None) -> Any:
    team = _wrap(_agent(tool), "agent").compile()
    return _wrap(team, "team").compile(checkpointer=saver)


def agent_in_a_node(tool: BaseTool, saver: Any = None) -> Any:
    inner = _agent(tool)

    def delegate(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": inner.invoke({"messages": state["messages"]})["messages"]}

    return _wrap(delegate, "delegate").compile(checkpointer=saver)


SHAPES: dict[str, Callable[..., Any]] = {
    "top-level tool node": top_level,
    "agent subgraph": agent_subgraph,
    "agent inside an agent": agent_in_agent,
    "agent invoked by a node": agent_in_a_node,
}


def _stored(url: str, shape: Callable[..., Any]) -> int:
    runs = Runs()
    with threadlog.checkpointer(url) as saver:
        graph = shape(runs.tool(), saver)
        for q in QUESTIONS:
            graph.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "t"}})
    return runs.count


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("model", ["stored", "live"])
def test_no_tool_function_runs_in_a_replay_at_any_depth_and_a_faithful_replay_matches(
    tmp_path: Path, shape: str, model: str
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    assert _stored(url, SHAPES[shape]) == 3  # Beijing, then Shanghai and Beijing
    runs = Runs()
    graph = SHAPES[shape](runs.tool())
    report = replay(graph, url, "t", model=model)  # type: ignore[arg-type]
    assert runs.count == 0
    assert [r.kind for r in report.results] == ["match"] * 3, str(report)


def test_a_call_no_stored_result_answers_is_a_divergence_inside_a_subgraph(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    _stored(url, agent_in_agent)

    class AlsoHangzhou(OfflineChatModel):
        def _generate(self, messages: Any, *a: Any, **kw: Any) -> Any:
            edited = [
                m.model_copy(update={"content": str(m.content).replace("北京", "北京和杭州")})
                if isinstance(m, HumanMessage)
                else m
                for m in messages
            ]
            return super()._generate(edited, *a, **kw)

    runs = Runs()

    def build() -> Any:
        inner = create_agent(
            AlsoHangzhou(),
            [runs.tool()],
            system_prompt=weather.SYSTEM_PROMPT,
            context=ContextPolicy(max_turns=20),
            max_model_calls=6,
        )
        return _wrap(_wrap(inner, "agent").compile(), "team").compile()

    (r,) = replay(build(), url, "t", turns="1", model="live").results
    assert r.kind == "call" and runs.count == 0, r
    live = replay(build(), url, "t", turns="1", model="live", tools="live")
    assert live.results[0].kind == "call" and runs.count == 1  # only the new call ran


def test_langgraphs_prebuilt_agent_as_a_subgraph_runs_no_tool_in_a_replay(
    tmp_path: Path,
) -> None:
    from tests.helpers.poisoned import plain_saver, react_agent

    url = f"sqlite:///{tmp_path / 'react.db'}"
    runs = Runs()
    with plain_saver(url) as saver:
        app = _wrap(react_agent(None, tools=[runs.tool()]), "agent").compile(checkpointer=saver)
        for q in QUESTIONS[:2]:
            app.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "r"}})
    assert runs.count == 3
    runs.count = 0
    again = _wrap(react_agent(None, tools=[runs.tool()]), "agent").compile()
    report = replay(again, url, "r", model="live")
    assert runs.count == 0 and report.matched, str(report)


def test_the_tool_hook_is_gone_after_a_replay_and_never_reaches_another_graph(
    tmp_path: Path,
) -> None:
    import threading

    from langchain_core.tools import BaseTool as Base

    url = f"sqlite:///{tmp_path / 'app.db'}"
    _stored(url, agent_subgraph)
    run_before = Base.run
    elsewhere = Runs()
    seen: list[int] = []

    def other_app() -> None:  # a graph running meanwhile in another thread: its tool runs
        graph = _agent(elsewhere.tool())
        for q in QUESTIONS[:2]:
            graph.invoke({"messages": [HumanMessage(q)]})
        seen.append(elsewhere.count)

    runs = Runs()
    other = threading.Thread(target=other_app)
    other.start()
    assert replay(agent_subgraph(runs.tool()), url, "t").matched
    other.join()
    assert runs.count == 0 and seen == [3]
    assert Base.run is run_before


UNSAFE_APP = """
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.graph import START, StateGraph

import threadlog
from threadlog import ContextPolicy, OfflineChatModel, create_agent


class Overriding(BaseTool):
    name: str = "get_weather"
    description: str = "Today's weather for one city."

    def _run(self, city: str) -> str:
        return "sunny"

    def run(self, *args: Any, **kwargs: Any) -> Any:  # bypasses BaseTool.run
        return self._run(*args)


def wrap(node, name):
    g = StateGraph(threadlog.AgentState)
    g.add_node(name, node)
    g.add_edge(START, name)
    return g.compile()


agent = create_agent(OfflineChatModel(), [Overriding()], context=ContextPolicy(max_turns=20))
graph = wrap(wrap(agent, "agent"), "team")
"""


def test_a_graph_whose_tool_the_replay_cannot_reach_is_refused_naming_the_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path / 'app.db'}"
    _stored(url, agent_in_agent)
    (tmp_path / "unsafe_app.py").write_text(UNSAFE_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "unsafe_app", raising=False)
    db = str(tmp_path / "app.db")
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT count(*) FROM checkpoints").fetchone()
    assert main(["replay", "--db", db, "--thread", "t", "--graph", "unsafe_app:graph"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "node 'team/agent/tools': tool 'get_weather'" in captured.err
    assert "overrides run()" in captured.err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == before


def test_a_remote_graph_node_is_refused_naming_it() -> None:
    from langgraph.pregel.remote import RemoteGraph

    from threadlog.check.replay import refusal

    g = StateGraph(threadlog.AgentState)
    g.add_node("research", RemoteGraph("agent", url="http://127.0.0.1:1"))  # never called
    g.add_edge(START, "research")
    assert refusal(g.compile()).startswith("node 'research' is a RemoteGraph")
    assert refusal(agent_in_agent(weather.get_weather)) == ""


def test_stored_replies_are_served_to_any_graphs_chat_model_no_model_node_needed(
    tmp_path: Path,
) -> None:
    """`model="stored"` on LangGraph's prebuilt agent and on LangChain's `create_agent`,
    as a subgraph node: the model is never called, no tool runs, every turn matches."""
    from langchain.agents import create_agent as langchain_agent

    from tests.helpers.poisoned import plain_saver, react_agent

    class Counting(OfflineChatModel):
        calls: int = 0

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            type(self).calls += 1
            return super()._generate(*args, **kwargs)

    def shapes(runs: Runs) -> dict[str, Any]:
        return {
            "prebuilt": react_agent(None, tools=[runs.tool()]),
            "langchain": _wrap(
                langchain_agent(Counting(), [runs.tool()], system_prompt=weather.SYSTEM_PROMPT),
                "agent",
            ).compile(),
        }

    for name in ("prebuilt", "langchain"):
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        runs = Runs()
        with plain_saver(url) as saver:
            app = shapes(runs)[name].copy(update={"checkpointer": saver})
            for q in QUESTIONS:
                app.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "t"}})
        assert runs.count == 3
        again = Runs()
        Counting.calls = 0
        report = replay(shapes(again)[name], url, "t", model="stored")
        assert report.matched and len(report.results) == 3, str(report)
        assert again.count == 0 and Counting.calls == 0, name
