"""The inspector in subgraph namespaces: a subgraph stopped mid-turn (an interrupt inside
its tool step) is listed under the root thread, and its own checkpoints and messages are
shown with `namespace=` / `--namespace`, text and JSON, on SQLite and Postgres;
`threadlog export --namespace` exports a (nested) subgraph's log, with what its stopped
step stored, and `threadlog threads` counts each thread's subgraph namespaces.

The subgraph's steps are stored under `checkpoint_ns = "agent:<task id>"`; the root's
checkpoints show none of them until the subgraph returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import threadlog
import threadlog.inspect
from tests.helpers.recovery import CONFIG, ask_about_shanghai, first_turn, parent
from threadlog.cli import main


def stop_inside_the_subgraph(url: str, tmp_path: Path) -> Any:
    with threadlog.checkpointer(url) as saver:
        graph = parent(saver, tmp_path / "effects.jsonl", ask_about_shanghai)
        first_turn(graph, "interrupt")
        return graph.get_state(CONFIG, subgraphs=True)


def test_a_stopped_subgraph_is_listed_and_its_namespace_shows_its_steps(
    backend: str, tmp_path: Path
) -> None:
    snap = stop_inside_the_subgraph(backend, tmp_path)
    sub_state = snap.tasks[0].state
    ns = sub_state.config["configurable"]["checkpoint_ns"]
    root = threadlog.inspect.thread(backend, "t")
    # The root's own checkpoints hold only the user's message: the call is the subgraph's.
    assert [m.id for m in root.head.messages] == ["u1"]
    (row,) = root.subgraphs().rows()
    assert row == {
        "namespace": ns,
        "node": "agent",
        "parent_checkpoint": root.head.checkpoint_id,
        "checkpoints": 3,
        "head": sub_state.config["configurable"]["checkpoint_id"],
        "status": "stopped",
        "handed_to": None,
    }
    sub = threadlog.inspect.thread(backend, "t", namespace=ns)
    assert sub.namespace == ns and len(sub) == 3
    shown = [m.id for m in sub_state.values["messages"]]  # u1, the call, Beijing's result
    # Read by checkpoint id, the stopped step's stored result stays a pending write (the
    # head read of get_state(subgraphs=True) previews it).
    assert [m.id for m in sub.head.messages] == shown[:2]
    assert [r.source for r in sub.records] == ["input", "loop", "loop"]
    assert sub.head.interrupts == ("{'confirm': 'Shanghai'}",)
    calls = sub.pairs().rows()
    assert [c["args"]["city"] for c in calls] == ["Beijing", "Shanghai"]
    assert f"namespace {ns}" in str(sub.timeline())
    # A graph source reads the namespace through the subgraph itself: the same records.
    with threadlog.checkpointer(backend) as saver:
        graph = parent(saver, tmp_path / "effects.jsonl", ask_about_shanghai)
        via_graph = threadlog.inspect.thread(graph, CONFIG, namespace=ns)
    assert [r.checkpoint_id for r in via_graph.records] == [r.checkpoint_id for r in sub.records]
    assert [m.id for m in via_graph.head.messages] == shown[:2]
    assert via_graph.head.next == ("tools", "tools")  # the subgraph's own graph knows its tasks
    with pytest.raises(LookupError, match="namespace 'agent:nope'"):
        threadlog.inspect.thread(backend, "t", namespace="agent:nope")
    with pytest.raises(ValueError, match="root namespace only"):  # refused before any read
        threadlog.inspect.thread("http://127.0.0.1:9", "t", namespace=ns)


def test_the_cli_lists_subgraphs_and_shows_one_namespace_as_text_and_json(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = stop_inside_the_subgraph(sqlite_url, tmp_path)
    ns = snap.tasks[0].state.config["configurable"]["checkpoint_ns"]
    assert main(["inspect", "--db", sqlite_url, "--thread", "t"]) == 0
    text = capsys.readouterr().out
    assert "subgraphs of thread t" in text and ns in text and "stopped" in text
    assert main(["inspect", "--db", sqlite_url, "--thread", "t", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["namespace"] for s in doc["subgraphs"]] == [ns]
    assert main(["inspect", "--db", sqlite_url, "--thread", "t", "--namespace", ns]) == 0
    text = capsys.readouterr().out
    assert f"thread t, namespace {ns} · timeline" in text
    assert "get_weather(Beijing), get_weather(Shanghai)" in text
    args = ["inspect", "--db", sqlite_url, "--thread", "t", "--namespace", ns, "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["namespace"] == ns
    assert [r["source"] for r in doc["timeline"]] == ["input", "loop", "loop"]
    assert [c["args"]["city"] for c in doc["pairs"]] == ["Beijing", "Shanghai"]
    assert "subgraphs" not in doc  # a namespace's own view lists no further subgraphs


def nested_stop_and_a_plain_thread(url: str, tmp_path: Path) -> list[str]:
    """Thread "t": a sub-subgraph stopped mid-step (two namespaces, outer and inner);
    thread "plain": one user message through a graph without subgraphs. Returns the
    namespaces, outer first."""
    from langgraph.graph import START, StateGraph

    from tests.helpers.durability import user
    from tests.helpers.recovery import nested

    with threadlog.checkpointer(url) as saver:
        graph = nested(saver, tmp_path / "effects.jsonl", ask_about_shanghai)
        first_turn(graph, "interrupt")
        snap = graph.get_state(CONFIG, subgraphs=True)
        team = snap.tasks[0].state
        agent = team.tasks[0].state
        g = StateGraph(threadlog.AgentState)
        g.add_node("echo", lambda s: {})
        g.add_edge(START, "echo")
        plain = g.compile(checkpointer=saver)
        plain.invoke({"messages": [user("hello", "p1")]}, {"configurable": {"thread_id": "plain"}})
    return [s.config["configurable"]["checkpoint_ns"] for s in (team, agent)]


def test_export_reads_a_nested_subgraphs_log_and_threads_counts_namespaces(
    backend: str, tmp_path: Path
) -> None:
    from threadlog.inspect.export import messages_at

    outer, inner = nested_stop_and_a_plain_thread(backend, tmp_path)
    assert inner.startswith(outer + "|agent:")
    root, _ = messages_at(backend, "t")
    assert [m.id for m in root] == ["u1"]  # the call is the sub-subgraph's, not yet returned
    messages, head = messages_at(backend, "t", namespace=inner)
    # The head's log and the result Beijing's finished task stored before Shanghai's
    # interrupt stopped the step (tests/inspect/test_export_stopped_step.py).
    assert [type(m).__name__ for m in messages] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert messages[0].id == "u1"
    assert [c["args"]["city"] for c in messages[1].tool_calls] == ["Beijing", "Shanghai"]
    assert messages[2].tool_call_id == messages[1].tool_calls[0]["id"]
    (row,) = [s for s in threadlog.inspect.thread(backend, "t").subgraphs().rows()
              if s["namespace"] == inner]
    assert head == row["head"]
    with pytest.raises(LookupError, match="namespace 'agent:nope'.*" + outer.replace("|", r"\|")):
        messages_at(backend, "t", namespace="agent:nope")
    with pytest.raises(ValueError, match="root namespace only"):
        messages_at("http://127.0.0.1:9", "t", namespace=inner)
    rows = {r["thread_id"]: r for r in threadlog.inspect.threads(backend).rows()}
    assert (rows["t"]["subgraphs"], rows["plain"]["subgraphs"]) == (2, 0)


def test_the_cli_exports_a_namespace_and_lists_subgraph_counts_as_text_and_json(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from threadlog.inspect.export import loads

    outer, inner = nested_stop_and_a_plain_thread(sqlite_url, tmp_path)
    base = ["export", "--db", sqlite_url, "--thread", "t"]
    assert main([*base, "--namespace", inner]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["role"] for line in lines] == ["user", "assistant", "tool"]
    assert main([*base, "--namespace", inner, "--format", "langchain"]) == 0
    exported = loads(capsys.readouterr().out)
    assert exported[0].id == "u1" and len(exported[1].tool_calls) == 2
    assert main(base) == 0  # the root's own log: the user's message only
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["u1"]
    assert main([*base, "--namespace", "agent:nope"]) == 2  # bad input
    err = capsys.readouterr().err
    assert "namespace 'agent:nope'" in err and outer in err
    assert main(["threads", "--db", sqlite_url, "--json"]) == 0
    rows = {r["thread_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows["t"]["subgraphs"], rows["plain"]["subgraphs"]) == (2, 0)
    assert main(["threads", "--db", sqlite_url]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if "last user message" in line)
    assert "subs" in header
    t_line = next(line for line in text.splitlines() if " t " in line)
    plain_line = next(line for line in text.splitlines() if " plain " in line)
    col = header.index("subs") + len("subs") - 1  # right-aligned under its header
    assert (t_line[col], plain_line[col]) == ("2", "0")
    assert max(len(line) for line in text.splitlines()) <= 100
