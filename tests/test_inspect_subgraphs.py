"""The inspector in subgraph namespaces: a subgraph stopped mid-turn (an interrupt inside
its tool step) is listed under the root thread, and its own checkpoints and messages are
shown with `namespace=` / `--namespace`, text and JSON, on SQLite and Postgres.

The subgraph's steps are stored under `checkpoint_ns = "agent:<task id>"`; the root's
checkpoints show none of them until the subgraph returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_recover_results import CONFIG, ask_about_shanghai, first_turn
from test_subgraph_recovery import parent

import threadlog
import threadlog.inspect
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
