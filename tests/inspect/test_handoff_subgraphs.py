"""A swarm's or a supervisor's handoff ends an agent's subgraph with a `Command` to the
parent graph, leaving the subgraph's own head with a task: the subgraphs view lists it as
handed off, named by node names ("flight_assistant → hotel_assistant"), not as stopped
(`threadlog.inspect.namespaces`). A subgraph really stopped (killed, interrupted) stays
"stopped" (tests/inspect/test_inspect_subgraphs.py)."""

from __future__ import annotations

import json

import pytest

import threadlog
from tests.helpers import recorded_apps as apps
from threadlog.cli import main


def test_a_swarms_handoffs_are_listed_as_handed_off_agents_by_node_name(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = apps.swarm(saver)
        apps.one_turn(graph, "s", "book a hotel")
        apps.one_turn(graph, "s", "and a flight")
    rows = threadlog.inspect.thread(backend, "s").subgraphs().rows()
    # Turn 1: flight_assistant hands off, hotel_assistant answers; turn 2 the other way.
    assert [(r["node"], r["status"], r["handed_to"]) for r in rows] == [
        ("flight_assistant", "handed off", "hotel_assistant"),
        ("hotel_assistant", "finished", None),
        ("hotel_assistant", "handed off", "flight_assistant"),
        ("flight_assistant", "finished", None),
    ]
    assert main(["inspect", "--db", backend, "--thread", "s"]) == 0
    text = capsys.readouterr().out
    assert (
        "2 handed off: flight_assistant → hotel_assistant; hotel_assistant → flight_assistant"
        in text
    )
    table = text.split("subgraphs of thread s", 1)[1]
    assert "\n" + " " * 56 + "→ hotel_assistant" in table  # under the agent it left
    assert rows[0]["namespace"] in text  # whole: --namespace takes it
    assert "stopped" not in text.split("subgraphs of thread s", 1)[1]
    assert main(["inspect", "--db", backend, "--thread", "s", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in doc["subgraphs"]] == [
        "handed off", "finished", "handed off", "finished"
    ]


def test_a_supervisors_delegations_are_listed_as_handed_off_to_each_worker(
    sqlite_url: str,
) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = apps.supervisor(saver)
        apps.one_turn(graph, "v", "hello")
    rows = threadlog.inspect.thread(sqlite_url, "v").subgraphs().rows()
    handed = [(r["node"], r["handed_to"]) for r in rows if r["status"] == "handed off"]
    assert handed == [("supervisor", "research_expert"), ("supervisor", "math_expert")]
    assert not [r for r in rows if r["status"] == "stopped"]
