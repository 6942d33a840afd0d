"""`threadlog check` of the threads a real `langgraph dev` serves, through its URL.

One server for the module, running the repo's graphs (graphs/weather.py), holding three
threads made the way they happen there: a clean two-turn thread, a run interrupted before
its tools (the call waits for its tool step: in progress, a note), and a thread whose
head an SDK `update_state` gave a model message with a tool call and, after it, another
model message — the call has no result and the conversation moved on.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from langgraph_sdk import get_sync_client

from tests.helpers.demo import REPO, LangGraphDev
from threadlog import inspect
from threadlog.cli import main

CALL = "call_written_by_update_state"


@dataclass
class Served:
    url: str
    clean: str
    paused: str
    poisoned: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    app = tmp_path_factory.mktemp("langgraph_check_app")
    shutil.copy(REPO / "langgraph.json", app / "langgraph.json")
    shutil.copytree(REPO / "graphs", app / "graphs", ignore=shutil.ignore_patterns("__pycache__"))
    ask = {"messages": [{"role": "user", "content": "北京今天适合带伞吗？"}]}
    with LangGraphDev(app) as server:
        client = get_sync_client(url=server.url, api_key=None)
        clean = client.threads.create()["thread_id"]
        client.runs.wait(clean, "weather", input=ask)
        client.runs.wait(
            clean, "weather", input={"messages": [{"role": "user", "content": "那上海呢？"}]}
        )
        paused = client.threads.create()["thread_id"]
        client.runs.wait(paused, "weather", input=ask, interrupt_before=["tools"])
        poisoned = client.threads.create()["thread_id"]
        client.runs.wait(poisoned, "weather", input=ask)
        client.threads.update_state(
            poisoned,
            {
                "messages": [
                    {
                        "type": "ai",
                        "content": "",
                        "id": "ai-written-by-hand",
                        "tool_calls": [
                            {"id": CALL, "name": "get_weather", "args": {"city": "上海"}}
                        ],
                    },
                    {"type": "ai", "content": "never mind", "id": "ai-after-it"},
                ]
            },
            as_node="model",
        )
        client.threads.create()  # never run: no checkpoint, not listed
        yield Served(server.url, clean, paused, poisoned)


def found(report: inspect.CheckReport) -> set[tuple[str, str, str, str | None]]:
    return {(p.thread_id, p.channel, p.kind, p.call_id) for p in report.problems}


def test_check_of_a_server_finds_exactly_the_open_calls_and_the_clean_thread_is_clean(
    served: Served,
) -> None:
    report = inspect.check(served.url)

    assert found(report) == {(served.poisoned, "messages", "open_call", CALL)}
    # The paused call waits for its tool step (the server says `next`): a note.
    assert {(n.thread_id, n.kind) for n in report.noted} == {(served.paused, "in_progress")}
    poisoned = next(p for p in report.problems if p.thread_id == served.poisoned)
    assert poisoned.message_id == "ai-written-by-hand" and poisoned.call_name == "get_weather"
    assert poisoned.format == "server" and not poisoned.repairable
    t = report.tally
    assert (t.threads, t.checkpoints, t.clean, t.with_problems) == (3, 3, 2, 1)
    assert report.status == 1
    assert inspect.check(served.url, threads=[served.clean]).status == 0


def test_check_of_a_server_reads_threads_and_histories_page_by_page(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = found(inspect.check(served.url))
    monkeypatch.setattr("threadlog.inspect.remote._PAGE", 1)
    paged = inspect.check(served.url, all_checkpoints=True)

    assert found(inspect.check(served.url)) == whole
    client = get_sync_client(url=served.url, api_key=None)
    history = {t: len(client.threads.get_history(t, limit=1000))
               for t in (served.clean, served.paused, served.poisoned)}
    assert paged.tally.checkpoints == sum(history.values())
    # The inspector's own history read pages the same way (`before` the last one read).
    assert len(inspect.thread(served.url, served.clean).records) == history[served.clean]
    assert {p.checkpoint_id for p in paged.problems if p.call_id == CALL} == {
        client.threads.get_state(served.poisoned)["checkpoint"]["checkpoint_id"]
    }


def test_the_check_command_reads_a_server_url_with_the_same_exit_codes(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--db", served.url, "--profile", "anthropic"]) == 1
    out = capsys.readouterr().out
    assert f"thread {served.poisoned}: 1 problem(s)" in out
    assert f"call '{CALL}' (get_weather) has no result before the assistant message" in out
    assert f"thread {served.paused}: note: in_progress" in out
    assert "checked 3 thread(s), 3 checkpoint(s): 2 clean, 1 with problems — open_call 1" in out

    assert main(["check", "--db", served.url, "--thread", served.poisoned, "--json"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["kind"], r["call_id"], r["format"]) for r in rows[:-1]] == [
        ("open_call", CALL, "server")
    ]
    assert rows[-1]["summary"]["with_problems"] == 1

    assert main(["check", "--db", served.url, "--thread", served.clean]) == 0
    assert capsys.readouterr().out.startswith("checked 1 thread(s)")

    missing = str(uuid.uuid4())
    assert main(["check", "--db", served.url, "--thread", missing]) == 2
    err = capsys.readouterr().err
    assert f"no thread '{missing}'" in err and len(err.strip().splitlines()) == 1
    assert main(["check", "--db", served.url, "--thread", "not-a-uuid"]) == 2
    err = capsys.readouterr().err
    assert "'not-a-uuid'" in err and "UUID" in err and len(err.strip().splitlines()) == 1


def test_repair_through_a_server_url_is_refused_in_one_line_and_writes_nothing(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    before = client.threads.get_state(served.poisoned)["checkpoint"]["checkpoint_id"]

    assert main(["check", "--db", served.url, "--repair"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "is a LangGraph server" in captured.err and "--repair" in captured.err
    assert client.threads.get_state(served.poisoned)["checkpoint"]["checkpoint_id"] == before
