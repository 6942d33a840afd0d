"""Importing threadlog patches nothing of LangGraph, and a graph with neither threadlog's
channel nor its saver runs LangGraph's own code paths, also once threadlog's hooks are in
place (`threadlog._upstream`, "Hooks")."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import MessagesState

import threadlog
from threadlog import _upstream

_FRESH_PROCESS = r'''
import inspect
import sqlite3
import sys

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import MessagesState
from langgraph.types import interrupt


def answer(state):
    n = len(state["messages"])
    return {"messages": [AIMessage(f"seen {n}", id=f"a{n}")]}


def ask(state):
    interrupt("approve?")
    return {}


def plain_run(saver):
    """What a plain LangGraph graph shows through its public API: values, next, tasks,
    metadata, history, after invoke, an interrupt, and update_state."""
    g = StateGraph(MessagesState)
    g.add_node("answer", answer)
    g.add_node("ask", ask)
    g.add_edge(START, "answer")
    g.add_edge(START, "ask")
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    result = graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, config)
    out = [(result["messages"], [i.value for i in result["__interrupt__"]])]  # ids are random
    for _ in range(2):
        state = graph.get_state(config)
        out.append((state.values, state.next, [(t.name, t.interrupts and t.interrupts[0].value)
                    for t in state.tasks], {k: state.metadata[k] for k in ("source", "step")}))
        graph.update_state(config, {"messages": [HumanMessage("edit", id="h1")]})
    out.append([(s.values, s.next) for s in graph.get_state_history(config)])
    return out


def savers():
    return [InMemorySaver(), SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))]


def snapshot():
    """Every attribute of every class in every loaded LangGraph module, by identity."""
    out = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("langgraph") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if inspect.isclass(value) and value.__module__ == name:
                out[f"{name}.{attr}"] = dict(vars(value))
            elif inspect.isfunction(value) and value.__module__ == name:
                out[f"{name}.{attr}"] = value
    return out


def changed(before, after):
    found = []
    for key, old in before.items():
        new = after.get(key)
        if isinstance(old, dict):
            found += [f"{key}.{k}" for k in old.keys() | new.keys()
                      if old.get(k) is not new.get(k)]
        elif new is not old:
            found.append(key)
    return found


without = [plain_run(s) for s in savers()]
before = snapshot()

import threadlog  # noqa: E402

for name in ("MessagesState", "Messages", "MessageLogChannel", "checkpointer", "acheckpointer",
             "ToolNode", "ModelNode", "validate", "create_agent", "inspect"):
    getattr(threadlog, name)
import threadlog.checkpoint, threadlog.channel, threadlog.nodes  # noqa: E401,E402

assert changed(before, snapshot()) == [], changed(before, snapshot())
assert [plain_run(s) for s in savers()] == without
assert changed(before, snapshot()) == [], changed(before, snapshot())

# A threadlog graph runs: its hooks go in ...
g = StateGraph(threadlog.MessagesState)
g.add_node("answer", answer)
g.add_edge(START, "answer")
with threadlog.checkpointer("memory://") as saver:
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, config)
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["hi", "seen 1"]
hooked = changed(before, snapshot())
assert hooked, "the hooks were installed by threadlog's graph and saver"
# ... and a plain graph still shows exactly what it showed without threadlog.
assert [plain_run(s) for s in savers()] == without
print("unpatched", len(hooked))
'''


def test_importing_threadlog_replaces_no_langgraph_attribute_and_plain_graphs_run_as_without(
) -> None:
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(threadlog.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS], env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("unpatched ")


def test_a_plain_graph_sees_no_hook_once_threadlogs_hooks_are_installed() -> None:
    _upstream.install_hooks()
    seen: list[tuple[str, bool, bool, bool]] = []

    class Probe(InMemorySaver):
        def get_tuple(self, config: Any) -> Any:
            seen.append(("read", _upstream.running_loop() is not None, _upstream.in_get_state(),
                         _upstream.in_state_preview()))
            return super().get_tuple(config)

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("ok", id="a1")]}

    g = StateGraph(MessagesState)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    graph = g.compile(checkpointer=Probe())
    config: Any = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "hi")]}, config)
    graph.get_state(config)
    graph.update_state(config, {"messages": [AIMessage("edited", id="a1")]})
    assert len(seen) >= 3
    assert all(s == ("read", False, False, False) for s in seen)
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["hi", "edited"]
