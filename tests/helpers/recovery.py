"""The recovery scenarios' weather agent, stops and checks, at the root and in subgraphs.

Shared by tests/storage (recovery, subgraph recovery, deep and `Send` subgraphs) and
tests/inspect (the views and exports of a stopped step). In the scenario, the model asks
for Beijing's and Shanghai's weather in one step, one task per call; Beijing's call
finishes and is stored, Shanghai's interrupts or raises (`STOPS`), then the user sends
`INSTEAD`. `assert_recovered` checks the log kept Beijing's stored result and answered
Shanghai's call once.

* `agent(saver, effects, hook)`: the agent at the root; `parent(...)`: inside a subgraph
  (namespace "agent:<task>"); `nested(...)`: two subgraph levels down.
* `SUB_STOPS`: `STOPS` with a raise that waits for Beijing's result in any namespace.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt

import threadlog
from tests.helpers.durability import make_weather_tool, model_tools_graph, read_effects, user
from threadlog.nodes.model import NOT_COMPLETED

TWO_CITIES = "What's the weather in Beijing and Shanghai?"
INSTEAD = "Never mind. Weather in Guangzhou?"
CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t"}}


Hook = Callable[[BaseCheckpointSaver[Any]], Callable[[str, str], None]]


def ask_about_shanghai(saver: BaseCheckpointSaver[Any]) -> Callable[[str, str], None]:
    def hook(city: str, call_id: str) -> None:
        if city == "Shanghai":
            interrupt({"confirm": city})

    return hook


def shanghai_is_down(saver: BaseCheckpointSaver[Any]) -> Callable[[str, str], None]:
    """Shanghai raises once Beijing's result is stored: LangGraph cancels the tasks
    still running when one fails, and this test is about a result that was saved."""

    def hook(city: str, call_id: str) -> None:
        if city == "Shanghai":
            wait_for_a_stored_result(saver)
            raise ConnectionError("weather service for Shanghai is down")

    return hook


def wait_for_a_stored_result(saver: BaseCheckpointSaver[Any], limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        saved = saver.get_tuple(CONFIG)
        if saved is not None and any(
            isinstance(m, ToolMessage)
            for _, _, v in saved.pending_writes or ()
            for m in (v if isinstance(v, list) else [v])
        ):
            return
        time.sleep(0.01)
    raise AssertionError("Beijing's result was never stored")


STOPS: dict[str, tuple[Hook, type[Exception] | None]] = {
    "interrupt": (ask_about_shanghai, None),
    "raise": (shanghai_is_down, ConnectionError),
}


def agent(saver: BaseCheckpointSaver[Any], effects: Path, hook: Hook) -> Any:
    """model ⇄ tools with the ModelNode itself as the node (sync and async paths)."""
    weather = make_weather_tool(effects, hook(saver))
    g = model_tools_graph(weather)
    return g.compile(checkpointer=saver)


def stored_results(saver: BaseCheckpointSaver[Any]) -> dict[str, ToolMessage]:
    """The ToolMessages pending on the thread's head: the paused step's saved results."""
    saved = saver.get_tuple(CONFIG)
    assert saved is not None
    return {
        m.tool_call_id: m
        for _, _, v in saved.pending_writes or ()
        for m in (v if isinstance(v, list) else [v])
        if isinstance(m, ToolMessage)
    }


def first_turn(graph: Any, stop: str) -> None:
    error = STOPS[stop][1]
    if error is None:
        out = graph.invoke({"messages": [user(TWO_CITIES, "u1")]}, CONFIG)
        assert out["__interrupt__"][0].value == {"confirm": "Shanghai"}
    else:
        with pytest.raises(error, match="Shanghai"):
            graph.invoke({"messages": [user(TWO_CITIES, "u1")]}, CONFIG)


async def afirst_turn(graph: Any, stop: str) -> None:
    error = STOPS[stop][1]
    if error is None:
        out = await graph.ainvoke({"messages": [user(TWO_CITIES, "u1")]}, CONFIG)
        assert out["__interrupt__"][0].value == {"confirm": "Shanghai"}
    else:
        with pytest.raises(error, match="Shanghai"):
            await graph.ainvoke({"messages": [user(TWO_CITIES, "u1")]}, CONFIG)


def assert_recovered(
    final: list[BaseMessage],
    saved: dict[str, ToolMessage],
    effects: Path,
    shanghai_reads: str = NOT_COMPLETED,
) -> None:
    """Beijing's stored result, Shanghai's explicit error, u2 and the answer: once each.
    `shanghai_reads`: the repair of Shanghai's call — "not completed" when its tool
    reported back (it raised, or paused), `OUTCOME_UNKNOWN` when it was killed while its
    tool ran (the tool may have finished its effect)."""
    threadlog.validate(final, allow_pending_calls=False)
    ids = [m.id for m in final]
    assert len(ids) == len(set(ids)), f"message ids appear more than once: {ids}"
    assert [m.id for m in final if isinstance(m, HumanMessage)] == ["u1", "u2"]
    request = final[1]
    assert isinstance(request, AIMessage)
    beijing, shanghai = (c["id"] for c in request.tool_calls)
    assert list(saved) == [beijing]  # only the finished sibling was stored
    # Both calls are answered before the new message, in call order.
    first, second = final[2], final[3]
    assert isinstance(first, ToolMessage) and isinstance(second, ToolMessage)
    assert final[4].id == "u2"
    stored = saved[beijing]
    assert (first.tool_call_id, first.id, first.content, first.status) == (
        beijing, stored.id, stored.content, "success")
    assert first.content == "Beijing: sunny, 21°C"
    assert (second.tool_call_id, second.status, second.content) == (
        shanghai, "error", shanghai_reads)
    answer = final[-1]
    assert isinstance(answer, AIMessage) and not answer.tool_calls
    assert "Guangzhou" in answer.text
    # Beijing's tool ran once (not again for the recovery), Shanghai's never finished.
    effects_by_call = Counter(read_effects(effects))
    guangzhou = [m.tool_call_id for m in final[5:] if isinstance(m, ToolMessage)]
    assert effects_by_call == Counter([beijing, *guangzhou])


# -- inside subgraphs -------------------------------------------------------------------


def shanghai_is_down_in_any_namespace(saver: BaseCheckpointSaver[Any]) -> Any:
    """Shanghai raises once Beijing's result is stored, in any namespace of the thread
    (LangGraph cancels the tasks still running when one fails)."""

    def stored() -> bool:
        return any(
            isinstance(m, ToolMessage)
            for t in saver.list({"configurable": {"thread_id": "t"}})
            for _, _, v in t.pending_writes or ()
            for m in (v if isinstance(v, list) else [v])
        )

    def hook(city: str, call_id: str) -> None:
        if city == "Shanghai":
            deadline = time.monotonic() + 30
            while not stored():
                assert time.monotonic() < deadline, "Beijing's result was never stored"
                time.sleep(0.01)
            raise ConnectionError("weather service for Shanghai is down")

    return hook


SUB_STOPS = {**STOPS, "raise": (shanghai_is_down_in_any_namespace, ConnectionError)}


def parent(saver: BaseCheckpointSaver[Any], effects: Path, hook: Hook) -> Any:
    """START -> agent (a subgraph: model ⇄ tools, one task per call) -> END."""
    return parent_with(saver, make_weather_tool(effects, hook(saver)))


def parent_with(saver: BaseCheckpointSaver[Any], weather: Any) -> Any:
    sub = model_tools_graph(weather)
    g = StateGraph(threadlog.AgentState)
    g.add_node("agent", sub.compile())
    g.add_edge(START, "agent")
    return g.compile(checkpointer=saver)


def subgraph_results(graph: Any) -> dict[str, ToolMessage]:
    """The results the stopped subgraph stored, read through `get_state(subgraphs=True)`."""
    snap = graph.get_state(CONFIG, subgraphs=True)
    (task,) = snap.tasks
    assert task.name == "agent" and task.state is not None, "the subgraph's state is shown"
    assert task.state.config["configurable"]["checkpoint_ns"].startswith("agent:")
    found: dict[str, ToolMessage] = {}
    for sub_task in task.state.tasks:
        for m in (sub_task.result or {}).get("messages", []):
            if isinstance(m, ToolMessage):
                found[m.tool_call_id] = m
    return found


def nested(saver: BaseCheckpointSaver[Any], effects: Path, hook: Hook) -> Any:
    """START -> team (subgraph: START -> agent (sub-subgraph: model ⇄ tools)) -> END."""
    weather = make_weather_tool(effects, hook(saver))
    agent = model_tools_graph(weather)
    team = StateGraph(threadlog.AgentState)
    team.add_node("agent", agent.compile())
    team.add_edge(START, "agent")
    g = StateGraph(threadlog.AgentState)
    g.add_node("team", team.compile())
    g.add_edge(START, "team")
    return g.compile(checkpointer=saver)


def nested_results(graph: Any) -> dict[str, ToolMessage]:
    """The results the stopped sub-subgraph stored, read through `get_state(subgraphs=True)`."""
    snap = graph.get_state(CONFIG, subgraphs=True)
    (team,) = snap.tasks
    assert team.name == "team" and team.state is not None
    (agent,) = team.state.tasks
    assert agent.name == "agent" and agent.state is not None
    ns = agent.state.config["configurable"]["checkpoint_ns"]
    assert ns.startswith("team:") and "|agent:" in ns, ns
    return {
        m.tool_call_id: m
        for t in agent.state.tasks
        for m in (t.result or {}).get("messages", [])
        if isinstance(m, ToolMessage)
    }
