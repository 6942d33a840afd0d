"""Threads served by a real `langgraph dev`, read through its URL with `langgraph-sdk`.

One server for the module (started as tests/apps/test_langgraph_dev.py does); every view, the
listing, the export and the CLI read the same two threads through `http://127.0.0.1:PORT`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from langgraph_sdk import get_sync_client

from tests.helpers.demo import REPO, LangGraphDev
from threadlog import digest, inspect
from threadlog.inspect.remote import to_messages


@dataclass
class Served:
    url: str
    two_turns: str  # weather: two questions
    branches: str  # weather_branches: one question, one Send per call
    paused: str  # weather, run with interrupt_before=["tools"]: waiting before its tools


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    app = tmp_path_factory.mktemp("langgraph_app")
    shutil.copy(REPO / "langgraph.json", app / "langgraph.json")
    shutil.copytree(REPO / "graphs", app / "graphs", ignore=shutil.ignore_patterns("__pycache__"))
    with LangGraphDev(app) as server:
        client = get_sync_client(url=server.url, api_key=None)
        two = client.threads.create()["thread_id"]
        for q in ("北京今天适合带伞吗？", "那上海呢？"):
            client.runs.wait(two, "weather", input={"messages": [{"role": "user", "content": q}]})
        branches = client.threads.create()["thread_id"]
        client.runs.wait(
            branches,
            "weather_branches",
            input={"messages": [{"role": "user", "content": "北京和上海今天要带伞吗？"}]},
        )
        paused = client.threads.create()["thread_id"]
        client.runs.wait(
            paused,
            "weather",
            input={"messages": [{"role": "user", "content": "北京今天适合带伞吗？"}]},
            interrupt_before=["tools"],
        )
        yield Served(server.url, two, branches, paused)


def served_messages(url: str, thread_id: str) -> list[str]:
    state = get_sync_client(url=url, api_key=None).threads.get_state(thread_id)
    return [digest(m) for m in to_messages(state["values"]["messages"])]


def test_a_served_thread_opens_with_its_timeline_and_pairs(served: Served) -> None:
    t = inspect.thread(served.url, served.branches)

    assert [digest(m) for m in t.head.messages] == served_messages(served.url, served.branches)
    pairs = t.pairs().rows()
    assert [p["args"]["city"] for p in pairs] == ["北京", "上海"]
    assert {p["status"] for p in pairs} == {"success"}
    # The two per-call tasks ran from one checkpoint: the next one names their node.
    assert any("tools" in r.writers for r in t.records)
    assert t.head.messages[-1].type == "ai"
    text = str(t.timeline())
    assert "北京" in text and served.branches in text


def test_the_listing_shows_both_served_threads_newest_first(served: Served) -> None:
    listing = inspect.threads(served.url, limit=0)
    ids = [s.thread_id for s in listing.items]
    assert ids.index(served.branches) < ids.index(served.two_turns)
    two = next(s for s in listing.items if s.thread_id == served.two_turns)
    assert (two.turns, two.messages, two.last_user) == (2, 8, "那上海呢？")
    assert two.subgraphs is None  # the server's API does not say; a database counts them
    assert [s.thread_id for s in inspect.threads(served.url, search="那上海").items] == [
        served.two_turns
    ]


def test_a_served_thread_exports_whole_and_at_an_earlier_checkpoint(served: Served) -> None:
    messages, head = inspect.export.messages_at(served.url, served.two_turns)
    assert [digest(m) for m in messages] == served_messages(served.url, served.two_turns)
    back = inspect.export.loads(inspect.export.dumps(messages, "jsonl"))
    assert [digest(m) for m in back] == [digest(m) for m in messages]

    t = inspect.thread(served.url, served.two_turns)
    first_turn = next(r for r in t.records if len(r.messages) == 4)
    earlier, cid = inspect.export.messages_at(
        served.url, served.two_turns, first_turn.checkpoint_id[-12:]
    )
    assert cid == first_turn.checkpoint_id != head
    assert [m.id for m in earlier] == [m.id for m in messages[:4]]


def test_the_commands_read_a_served_thread_through_its_url(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    from threadlog.cli import main

    assert main(["threads", "--db", served.url]) == 0
    listed = capsys.readouterr().out
    assert served.two_turns in listed
    row = next(line for line in listed.splitlines() if served.two_turns in line)
    assert row.split()[7] == "-"  # subs: unknown from a server

    args = ["inspect", "--db", served.url, "--thread", served.branches, "--context", "-1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "tool calls at" in out and "what the model saw for" in out

    assert main(["export", "--db", served.url, "--thread", served.two_turns]) == 0
    exported = inspect.export.loads(capsys.readouterr().out)
    assert [digest(m) for m in exported] == served_messages(served.url, served.two_turns)


def test_a_served_thread_paused_before_its_tools_is_named_so(served: Served) -> None:
    found = {s.thread_id: s for s in inspect.threads(served.url, limit=0).items}
    assert found[served.paused].paused == "paused before tools"
    assert found[served.two_turns].paused is None
    shown = inspect.threads(served.url, limit=0)
    (row,) = [r for r, s in zip(shown.display_rows(), shown.items, strict=True)
              if s.thread_id == served.paused]
    assert str(row["last_user"]).startswith("⏸ paused before tools · ")
    t = inspect.thread(served.url, served.paused)
    assert t.head.paused == "paused before tools"
    assert "⏸ paused before tools" in str(t.timeline())
