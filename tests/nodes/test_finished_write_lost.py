"""A parallel branch's finished result survives LangGraph losing its write.

The cause, LangGraph's: a task's writes are stored by a done-callback of its future
(`PregelRunner.commit` -> `put_writes` -> the loop's background executor). When a
sibling branch fails, the step ends at once; the loop's exit waits for the running
futures, but a future wakes its waiters *before* it runs its callbacks, so the executor
can shut down between a finished branch's result and the submit of its write:
"RuntimeError: cannot schedule new futures after shutdown", and the write is never
stored. Under load that happens by chance; here a slowed commit makes it happen every
time. On resume LangGraph re-runs that branch.

threadlog's tool node stores each finished call's result itself, inside its task, before
the task returns (a "finished" marker, `threadlog.checkpoint.recover`): on resume the
branch serves that result and its tool does not run again."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

# LangGraph's runner, slowed in this test only: the window the race needs, made wide.
from langgraph.pregel._runner import PregelRunner

import threadlog
from threadlog import ModelNode, ToolNode, send_tool_calls

ran: Counter[str] = Counter()
failing = {"Tokyo"}


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    ran[city] += 1
    if city in failing:
        raise RuntimeError(f"weather service down for {city}")
    time.sleep(0.2)  # the sibling fails first: the step ends while this one runs
    return f"{city}: sunny"


def _graph(saver: Any) -> Any:
    b: StateGraph[Any, Any, Any, Any] = StateGraph(threadlog.AgentState)
    b.add_node("model", ModelNode(threadlog.OfflineChatModel(), [get_weather]))
    b.add_node("tools", ToolNode([get_weather], handle_tool_errors=False))
    b.add_edge(START, "model")
    b.add_conditional_edges(
        "model", lambda s: send_tool_calls(s, node="tools") or END, ["tools", END]
    )
    b.add_edge("tools", "model")
    return b.compile(checkpointer=saver)


@pytest.fixture
def slowed_commit(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """A finished task's commit (its done-callback) waits, so the loop's exit shuts the
    executor down first; what the callback raised is collected."""
    original = PregelRunner.commit
    raised: list[BaseException] = []

    def commit(self: Any, task: Any, exception: BaseException | None) -> None:
        in_worker = threading.current_thread() is not threading.main_thread()
        if exception is None and task.name == "tools" and in_worker:
            time.sleep(0.5)
        try:
            original(self, task, exception)
        except BaseException as e:
            raised.append(e)
            raise

    monkeypatch.setattr(PregelRunner, "commit", commit)
    return raised


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_finished_branch_whose_write_langgraph_lost_does_not_run_again_on_resume(
    backend: str, durability: str, slowed_commit: list[BaseException]
) -> None:
    ran.clear()
    failing.clear()
    failing.add("Tokyo")
    cfg: Any = {"configurable": {"thread_id": "t"}}
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver)
        with pytest.raises(RuntimeError, match="down for Tokyo"):
            graph.invoke(
                {"messages": [HumanMessage("Paris and Tokyo?", id="u1")]}, cfg,
                durability=durability,
            )
        time.sleep(0.7)  # the slowed callback has tried to store Paris's write
        # LangGraph's own write of Paris's result was lost to the race (the cause).
        assert any("cannot schedule new futures after shutdown" in str(e) for e in slowed_commit)
        assert ran == Counter({"Paris": 1, "Tokyo": 1})
        failing.clear()
        slowed_commit.clear()
        out = graph.invoke(None, cfg, durability=durability)
    assert ran == Counter({"Paris": 1, "Tokyo": 2})  # Paris's finished tool ran once
    results = {m.tool_call_id: m.content for m in out["messages"] if isinstance(m, ToolMessage)}
    assert sorted(results.values()) == ["Paris: sunny", "Tokyo: sunny"]
    assert isinstance(out["messages"][-1], AIMessage)
    threadlog.validate(out["messages"])
