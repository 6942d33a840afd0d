"""`threadlog check` reads subgraph namespaces: a subgraph app (START -> agent, a compiled
model ⇄ tools subgraph) whose inner tool step crashed leaves its call open in the
subgraph's namespace (`agent:<task id>`) while the root holds only the user's message.
The tool step is pending there (a resume runs it), so the calls are `in_progress` notes
naming the namespace, not problems; once the thread moved past them they are problems
of the older checkpoints (`--all-checkpoints`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

import threadlog
from tests.helpers.recovery import CONFIG, INSTEAD, SUB_STOPS, TWO_CITIES, first_turn, parent
from threadlog.check.database import check, check_threads, resolve_profiles
from threadlog.cli import main


def crash_inside_the_subgraph(url: str, tmp_path: Path) -> tuple[str, str, list[str]]:
    """Thread "t": the subgraph's tool step crashed (Shanghai raised); thread "clean":
    the same app, finished. Returns the crashed namespace, Shanghai's call id and the
    ids of both calls of that step."""
    with threadlog.checkpointer(url) as saver:
        graph = parent(saver, tmp_path / "effects.jsonl", SUB_STOPS["raise"][0])
        first_turn(graph, "raise")
        (task,) = graph.get_state(CONFIG, subgraphs=True).tasks
        assert task.state is not None
        ns = task.state.config["configurable"]["checkpoint_ns"]
        request = next(m for m in task.state.values["messages"] if getattr(m, "tool_calls", None))
        shanghai = next(c["id"] for c in request.tool_calls if c["args"]["city"] == "Shanghai")
        fine = parent(saver, tmp_path / "fine.jsonl", lambda s: lambda city, cid: None)
        fine.invoke(
            {"messages": [HumanMessage(TWO_CITIES, id="c1")]},
            {"configurable": {"thread_id": "clean"}},
        )
    return ns, shanghai, [c["id"] for c in request.tool_calls]


def found(report: Any) -> set[tuple[str, str, str, str | None]]:
    return {(p.thread_id, p.namespace, p.kind, p.call_id) for p in report.problems}


def noted(report: Any) -> set[tuple[str, str, str, str | None]]:
    return {(p.thread_id, p.namespace, p.kind, p.call_id) for p in report.noted}


def test_check_notes_the_open_calls_of_a_subgraph_whose_tool_step_crashed_naming_its_namespace(
    sqlite_url: str, tmp_path: Path
) -> None:
    ns, shanghai, calls = crash_inside_the_subgraph(sqlite_url, tmp_path)
    assert ns.startswith("agent:")

    report = check(sqlite_url)
    # Both calls of the stopped step: Beijing's result is only a pending write of that
    # step, which a read of the checkpoint does not apply — as at the root. The step is
    # pending in the namespace: the calls are in progress, not problems.
    assert shanghai in calls
    assert found(report) == set()
    assert noted(report) == {("t", ns, "in_progress", c) for c in calls}
    assert {(p.thread_id, p.namespace, p.channel) for p in report.noted} == {
        ("t", ns, "messages")
    }
    assert not any(p.repairable for p in report.noted)  # --repair writes at the root
    assert (report.tally.clean, report.tally.with_problems, report.status) == (2, 0, 0)
    assert report.tally.checkpoints == 2  # the root heads: namespaces are not counted
    # The root alone holds only the user's message: without the namespaces it reads clean.
    with threadlog.checkpointer(sqlite_url) as saver:
        root_only = list(check_threads(saver, profiles=resolve_profiles(None)))
    assert [r.problems for r in root_only] == [[], []]


def test_the_check_command_names_the_subgraph_namespace_in_text_and_json(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ns, _shanghai, calls = crash_inside_the_subgraph(sqlite_url, tmp_path)

    assert main(["check", "--db", sqlite_url, "--thread", "t"]) == 0
    out = capsys.readouterr().out
    assert "thread t: note: in_progress" in out and f"call '{calls_first(out, calls)}'" in out
    assert main(["check", "--db", sqlite_url, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[-1]["summary"]["notes"] == {"in_progress": 2}
    assert main(["check", "--db", sqlite_url, "--thread", "clean"]) == 0
    capsys.readouterr()


def calls_first(out: str, calls: list[str]) -> str:
    """The call the command's one note line names (the first of the step's)."""
    return next(c for c in calls if f"call '{c}'" in out)


def test_a_subgraph_step_the_thread_moved_past_is_no_problem_at_any_checkpoint(
    sqlite_url: str, tmp_path: Path
) -> None:
    ns, shanghai, calls = crash_inside_the_subgraph(sqlite_url, tmp_path)
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = parent(saver, tmp_path / "effects.jsonl", lambda s: lambda city, cid: None)
        graph.invoke({"messages": [HumanMessage(INSTEAD, id="u2")]}, CONFIG)

    assert check(sqlite_url).status == 0  # the next run does not send the crashed step
    # Its calls wait on the namespace's pending tool step: no history that reaches a
    # provider holds them (a swarm's handoff leaves every agent's namespace this way).
    every = check(sqlite_url, all_checkpoints=True)
    assert shanghai in calls
    assert found(every) == set() and every.status == 0
    assert {("t", ns, "in_progress", c) for c in calls} <= noted(every)
