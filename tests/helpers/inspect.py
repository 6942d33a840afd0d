"""Test helpers for the inspector: a scripted model ⇄ tools graph over `threadlog.AgentState`.

The model node answers from a fixed script picked by how many AIMessages the log holds, so
a resumed run replays identically. Tools run as one task per call (`Send`), so the timeline
shows parallel branches; `failing` names cities whose tool raises until `heal()` is called,
which is how a test makes a step fail and then resumes it.

`write_thread(url)` stores thread t-1 (two turns, then a fork) through LangGraph's own saver
for `url` (`raw_saver`), the way any app would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send

from threadlog import AgentState


def usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def call(city: str, cid: str) -> dict[str, Any]:
    return {"name": "get_weather", "args": {"city": city}, "id": cid, "type": "tool_call"}


SCRIPT = [
    AIMessage(
        "",
        id="ai-1",
        tool_calls=[call("Paris", "c-paris"), call("Rome", "c-rome")],
        usage_metadata=usage(10, 5),  # type: ignore[arg-type]
    ),
    AIMessage("Paris: sun. Rome: <rain> & wind.", id="ai-2", usage_metadata=usage(30, 8)),  # type: ignore[arg-type]
    AIMessage("You're welcome.", id="ai-3", usage_metadata=usage(50, 3)),  # type: ignore[arg-type]
    AIMessage("北京：小雨，降水概率 70%，建议带伞。" * 6, id="ai-4", usage_metadata=usage(90, 60)),  # type: ignore[arg-type]
]


class ScriptedAgent:
    def __init__(self, failing: set[str] | None = None) -> None:
        self.failing = set(failing or ())
        self.tool_runs: list[str] = []

    def heal(self) -> None:
        self.failing.clear()

    def model(self, state: AgentState) -> dict[str, Any]:
        n = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        return {"messages": [SCRIPT[n]]}

    def tool(self, payload: dict[str, Any]) -> dict[str, Any]:
        c = payload["call"]
        city = c["args"]["city"]
        self.tool_runs.append(city)
        if city in self.failing:
            raise RuntimeError(f"weather service down for {city}")
        return {"messages": [ToolMessage(f"{city}: fine", tool_call_id=c["id"], id=f"r-{c['id']}")]}

    @staticmethod
    def route(state: AgentState) -> list[Send] | str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [Send("tools", {"call": c}) for c in last.tool_calls]
        return END

    def build(self, saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
        b: StateGraph[Any, Any, Any, Any] = StateGraph(AgentState)
        b.add_node("model", self.model)
        b.add_node("tools", self.tool)  # type: ignore[call-overload]
        b.add_edge(START, "model")
        b.add_conditional_edges("model", self.route, ["tools", END])
        b.add_edge("tools", "model")
        return b.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "t-1"}}


def run_two_turns(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    """Turn 1: parallel calls and an answer; turn 2: a thank-you and a plain reply."""
    graph.invoke({"messages": [("user", "Weather in Paris and Rome?")]}, CONFIG)  # type: ignore[arg-type]
    graph.invoke({"messages": [("user", "thanks")]}, CONFIG)  # type: ignore[arg-type]


@contextlib.contextmanager
def raw_saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """LangGraph's own saver for `url`: the thread is written the way any app would."""
    if url.startswith("sqlite:///"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(url[len("sqlite:///") :]) as saver:
            yield saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as pg:
            pg.setup()
            yield pg


def write_thread(url: str) -> str:
    """Thread t-1 in `url`: two turns, then a fork made by update_state."""
    with raw_saver(url) as saver:
        graph = ScriptedAgent().build(saver)
        run_two_turns(graph)
        turn1 = next(
            s for s in graph.get_state_history(CONFIG) if s.values["messages"][-1].id == "ai-2"
        )
        graph.update_state(turn1.config, {"messages": [("user", "and Berlin?")]})
    return url
