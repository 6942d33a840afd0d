"""`langgraph dev` serves the repository's langgraph.json; the official SDK drives it.

The server runs in a temporary copy of `langgraph.json` and `graphs/` (so its
`.langgraph_api/` state never lands in the checkout), offline, without reload — with the
server's own saver (its `checkpointer` entry left out): the drop-in path, threadlog's
channel on a plain saver. The same app on `threadlog.server.checkpointer` is
tests/apps/test_server_checkpointer.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.helpers.demo import REPO, LangGraphDev


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncLangGraphClient]:
    app = tmp_path_factory.mktemp("langgraph_app")
    config = json.loads((REPO / "langgraph.json").read_text())
    del config["checkpointer"]  # the server's own saver
    (app / "langgraph.json").write_text(json.dumps(config))
    shutil.copytree(REPO / "graphs", app / "graphs", ignore=shutil.ignore_patterns("__pycache__"))
    with LangGraphDev(app) as server:
        yield get_sync_client(url=server.url)


def ask(question: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}]}


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """Each AI message with calls is followed by one result per call, in call order."""
    for i, m in enumerate(messages):
        if m["type"] == "ai" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            assert [r.get("tool_call_id") for r in messages[i + 1 : i + 1 + len(ids)]] == ids


def test_langgraph_json_serves_both_demo_graphs(client: SyncLangGraphClient) -> None:
    graph_ids = {a["graph_id"] for a in client.assistants.search()}
    assert {"weather", "weather_branches"} <= graph_ids


def test_two_turns_on_one_thread_keep_a_paired_history(client: SyncLangGraphClient) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))

    pieces: list[str] = []
    for part in client.runs.stream(
        thread, "weather", input=ask("那上海呢？"), stream_mode="messages-tuple"
    ):
        if part.event == "messages":
            chunk, meta = part.data
            if chunk["type"] == "AIMessageChunk" and meta.get("langgraph_node") == "model":
                pieces.append(chunk["content"])

    messages = client.threads.get_state(thread)["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    assert [m["content"] for m in messages if m["type"] == "human"] == [
        "北京今天适合带伞吗？",
        "那上海呢？",
    ]
    assert_paired(messages)
    assert messages[2]["content"] == "小雨，降水概率 70%，气温 22°C"
    assert "北京建议带伞" in messages[3]["content"]
    # The second answer streamed in pieces and is exactly what the log holds.
    assert "".join(pieces) == messages[-1]["content"] == "上海：多云，降水概率 20%，气温 26°C。"
    assert len([p for p in pieces if p]) > 1


def test_per_call_branches_finish_out_of_order_and_land_in_call_order(
    client: SyncLangGraphClient,
) -> None:
    thread = client.threads.create()["thread_id"]
    finished: list[str] = []
    for part in client.runs.stream(
        thread, "weather_branches", input=ask("北京和上海今天要带伞吗？"), stream_mode="updates"
    ):
        if part.event == "updates" and "tools" in part.data:
            finished += [m["tool_call_id"] for m in part.data["tools"]["messages"]]

    messages = client.threads.get_state(thread)["values"]["messages"]
    request = messages[1]
    first, second = (c["id"] for c in request["tool_calls"])
    assert [c["args"]["city"] for c in request["tool_calls"]] == ["北京", "上海"]
    assert finished == [second, first]  # Shanghai's branch finished first...
    assert [m["tool_call_id"] for m in messages[2:4]] == [first, second]  # ...log: call order
    assert_paired(messages)
    assert "北京建议带伞" in messages[-1]["content"]


FORGED = {"messages": [{"role": "tool", "content": "sunny", "tool_call_id": "forged"}]}


def _kinds(client: SyncLangGraphClient, thread: str) -> list[str]:
    """The thread's message types, read through the state endpoint (raises unless 200)."""
    return [m["type"] for m in client.threads.get_state(thread)["values"].get("messages", [])]


def test_forks_and_edits_from_an_earlier_checkpoint_keep_the_state_readable(
    client: SyncLangGraphClient,
) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    client.runs.wait(thread, "weather", input=ask("那上海呢？"))
    ends = [s for s in client.threads.get_history(thread, limit=50) if not s["next"]]
    first = ends[-1]["checkpoint_id"]  # the end of turn 1 (history is newest first)

    client.runs.wait(thread, "weather", input=ask("那广州呢？"), checkpoint_id=first)
    assert _kinds(client, thread) == ["human", "ai", "tool", "ai"] * 2
    client.runs.wait(thread, "weather", input=ask("那深圳呢？"))
    assert _kinds(client, thread) == ["human", "ai", "tool", "ai"] * 3

    # An edit from the same earlier checkpoint stores a snapshot where the fork starts;
    # reading it back used to fail in MessageLog (AttributeError: 'dict' ... 'id').
    client.threads.update_state(thread, ask("杭州呢？"), checkpoint_id=first)
    assert _kinds(client, thread) == ["human", "ai", "tool", "ai", "human"]
    client.runs.wait(thread, "weather", input=ask("那成都呢？"))
    messages = client.threads.get_state(thread)["values"]["messages"]
    assert [m["type"] for m in messages][-4:] == ["human", "ai", "tool", "ai"]
    assert_paired(messages)


def test_a_review_edit_sent_as_plain_data_runs_the_edited_call(
    client: SyncLangGraphClient,
) -> None:
    """LangGraph's review point (`interrupt_before=["tools"]`), then a `threadlog.Edit` sent
    through the SDK as the plain dict it is: the server stores it, the tool runs the edited
    call, the state shows it in place with the original in its audit record."""
    thread = client.threads.create()["thread_id"]
    question = ask("北京今天适合带伞吗？")
    client.runs.wait(thread, "weather", input=question, interrupt_before=["tools"])
    request = client.threads.get_state(thread)["values"]["messages"][-1]
    assert [c["args"]["city"] for c in request["tool_calls"]] == ["北京"]
    calls = [{**request["tool_calls"][0], "args": {"city": "上海"}}]
    edit = {"type": "threadlog.edit", "message": {**request, "tool_calls": calls}, "by": "ops"}
    client.threads.update_state(thread, {"messages": [edit]}, as_node="model")
    client.runs.wait(thread, "weather", input=None)
    messages = client.threads.get_state(thread)["values"]["messages"]
    assert [m["type"] for m in messages][:3] == ["human", "ai", "tool"]
    assert [c["args"]["city"] for c in messages[1]["tool_calls"]] == ["上海"]
    audit = messages[1]["response_metadata"]["threadlog_edit"]
    assert [c["args"]["city"] for c in audit["original"]["tool_calls"]] == ["北京"]
    assert [e["by"] for e in audit["edits"]] == ["ops"]
    assert "20%" in messages[2]["content"]  # Shanghai's weather: the edited call ran
    assert_paired(messages)


def test_studios_edit_of_a_message_answers_200_and_the_next_run_sees_it(
    client: SyncLangGraphClient,
) -> None:
    """Issue 22: Studio's edit — the SDK's `threads.update_state` with a same-id message and
    new content — is an edit event (was HTTP 400): the run resumed after it asks about the
    edited question, and the audit record keeps the original."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(
        thread, "weather", input=ask("北京今天适合带伞吗？"), interrupt_before=["model"]
    )
    question = client.threads.get_state(thread)["values"]["messages"][0]
    edited = {**question, "content": "上海今天适合带伞吗？"}
    client.threads.update_state(thread, {"messages": [edited]})  # raises on a 4xx
    client.runs.wait(thread, "weather", input=None)
    messages = client.threads.get_state(thread)["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[0]["id"] == question["id"]
    assert messages[0]["content"] == "上海今天适合带伞吗？"
    assert [c["args"]["city"] for c in messages[1]["tool_calls"]] == ["上海"]
    assert "20%" in messages[2]["content"]  # Shanghai's weather: the run saw the edit
    audit = messages[0]["response_metadata"]["threadlog_edit"]
    assert audit["original"]["content"] == "北京今天适合带伞吗？"
    assert [e["source"] for e in audit["edits"]] == ["update_state"]


def test_a_refused_input_leaves_the_thread_readable_and_usable(
    client: SyncLangGraphClient,
) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    with pytest.raises(Exception, match="ToolPairingError"):
        client.runs.wait(thread, "weather", input=FORGED)
    assert _kinds(client, thread) == ["human", "ai", "tool", "ai"]  # the last good state
    client.runs.wait(thread, "weather", input=ask("那上海呢？"))
    assert _kinds(client, thread) == ["human", "ai", "tool", "ai"] * 2


def test_a_refused_input_on_a_new_thread_reads_as_empty(client: SyncLangGraphClient) -> None:
    thread = client.threads.create()["thread_id"]
    with pytest.raises(Exception, match="ToolPairingError"):
        client.runs.wait(thread, "weather", input=FORGED)
    assert _kinds(client, thread) == []  # 200, not 400
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    assert _kinds(client, thread) == ["human", "ai", "tool", "ai"]


def test_the_server_loads_the_dotted_checkpointer_path_and_not_the_colon_form() -> None:
    """docs/server.md's "path form": the loader langgraph-api uses for `checkpointer.path`."""
    import os
    import subprocess
    import sys

    probe = (
        "import threadlog.server\n"
        "from langgraph_api._checkpointer._adapter import _load_checkpointer as load\n"
        "assert load('threadlog.server.checkpointer') is threadlog.server.checkpointer\n"
        "try:\n"
        "    load('threadlog.server:checkpointer')\n"
        "except Exception as e:\n"
        "    print('refused:', type(e).__name__)\n"
        "else:\n"
        "    print('loaded')\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "LANGGRAPH_RUNTIME_EDITION": "inmem",
        "REDIS_URI": "fake",
        "DATABASE_URI": ":memory:",
        "MIGRATIONS_PATH": "__inmem",
        **{k: os.environ[k] for k in ("PYTHONPATH", "HOME") if k in os.environ},
    }
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1].startswith("refused:")
