"""LangGraph Server (`langgraph dev`) with `threadlog.server.checkpointer`, driven by the SDK.

One real server for the module, on a free loopback port, serving the repository's own
`langgraph.json` (its `checkpointer` entry included) plus a graph with a slow tool
(`tests/apps/graphs/slow_tool.py`). Its threads live in the default SQLite file under the
server's working folder. What needs the lifecycle methods (rollback, native copy, prune)
is in test_server_lifecycle.py.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.helpers.demo import REPO, LangGraphDev
from tests.helpers.server import (
    DB,
    ask,
    assert_paired,
    finished_runs,
    kinds,
    messages_of,
    module_server,
    run_inside_tool,
    server_log_problems,
)
from threadlog.cli import main as cli_main

server = module_server("threadlog_server")


_messages = messages_of


def _stored_checkpoints(server: LangGraphDev, thread: str) -> int:
    with sqlite3.connect(server.app_dir / DB) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = ?", (thread,)
        ).fetchone()
    return int(n)


def test_the_repositorys_langgraph_json_names_threadlogs_checkpointer(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    assert '"path": "threadlog.server.checkpointer"' in (REPO / "langgraph.json").read_text()
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    assert "Using custom checkpointer: GuardedSaver" in server.log.read_text()
    # The default store: a SQLite file under the server's working folder holds the thread.
    assert _stored_checkpoints(server, thread) > 0


def test_the_readmes_sdk_snippet_prints_two_paired_turns(
    server: LangGraphDev, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    served = readme.split("## Serve the demo with `langgraph dev`", 1)[1].split("\n## ", 1)[0]
    (snippet,) = re.findall(r"```python\n(.*?)```", served, re.S)
    snippet = snippet.replace("http://127.0.0.1:PORT", server.url)
    exec(compile(snippet, "README.md", "exec"), {"__name__": "readme"})
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["human", "ai", "tool", "ai"] * 2
    assert "get_weather" in lines[1] and "小雨" in lines[2] and "上海" in lines[-1]


def test_threadlog_threads_lists_what_the_server_stored(
    server: LangGraphDev, client: SyncLangGraphClient, capsys: pytest.CaptureFixture[str]
) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    assert cli_main(["threads", "--db", str(server.app_dir / DB)]) == 0
    assert thread in capsys.readouterr().out


def test_runs_wait_and_stream_then_state_and_history_read_the_same_log(
    client: SyncLangGraphClient,
) -> None:
    thread = client.threads.create()["thread_id"]
    done = client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    assert isinstance(done, dict) and "北京建议带伞" in done["messages"][-1]["content"]
    updates = [
        part.data
        for part in client.runs.stream(
            thread, "weather", input=ask("那上海呢？"), stream_mode="updates"
        )
        if part.event == "updates"
    ]
    assert [next(iter(u)) for u in updates if "tools" in u] == ["tools"]

    state = client.threads.get_state(thread)
    messages = state["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    assert_paired(messages)
    history = client.threads.get_history(thread, limit=100)
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert history[0]["values"]["messages"] == messages
    # Every earlier state is a prefix of the head's log (append-only), and paired.
    for snapshot in history:
        earlier = snapshot["values"].get("messages", [])
        assert [m["id"] for m in earlier] == [m["id"] for m in messages[: len(earlier)]]
        if not snapshot["next"]:
            assert_paired(earlier)
    assert [s["metadata"]["source"] for s in history][-1] == "input"


def test_update_state_with_a_new_message_then_a_run_answers_it(
    client: SyncLangGraphClient,
) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    # As the graph's input (Studio's "edit state" names the node): the model runs next.
    client.threads.update_state(thread, ask("那广州呢？"), as_node="__start__")
    assert kinds(client, thread) == ["human", "ai", "tool", "ai", "human"]
    client.runs.wait(thread, "weather", input=None)
    messages = _messages(client, thread)
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    assert [c["args"]["city"] for c in messages[5]["tool_calls"]] == ["广州"]
    assert_paired(messages)


def test_studio_fork_edits_an_earlier_checkpoint_and_runs_from_the_new_one(
    client: SyncLangGraphClient,
) -> None:
    """Studio's fork: `update_state(..., checkpoint_id=earlier)`, then a run from the
    checkpoint it returned; the fork reads its own branch, the old head stays readable."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    first_end = client.threads.get_state(thread)["checkpoint"]["checkpoint_id"]
    client.runs.wait(thread, "weather", input=ask("那上海呢？"))
    old_head = client.threads.get_state(thread)

    forked = client.threads.update_state(
        thread, ask("那深圳呢？"), checkpoint_id=first_end, as_node="__start__"
    )
    fork_id = forked["checkpoint"]["checkpoint_id"]
    client.runs.wait(thread, "weather", input=None, checkpoint_id=fork_id)
    messages = _messages(client, thread)
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    assert [c["args"]["city"] for c in messages[5]["tool_calls"]] == ["深圳"]
    assert_paired(messages)
    again = client.threads.get_state(thread, checkpoint_id=old_head["checkpoint"]["checkpoint_id"])
    assert again["values"]["messages"] == old_head["values"]["messages"]


def test_studios_edit_of_a_message_is_an_edit_event_on_threadlogs_checkpointer(
    client: SyncLangGraphClient,
) -> None:
    """Issue 22 on `threadlog.server.checkpointer`: the SDK's `threads.update_state` with
    a same-id message and new content answers 200 (an edit event, through the guard and
    the checksums), the resumed run asks about the edited question, the audit keeps the
    original."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(
        thread, "weather", input=ask("北京今天适合带伞吗？"), interrupt_before=["model"]
    )
    question = client.threads.get_state(thread)["values"]["messages"][0]
    client.threads.update_state(
        thread, {"messages": [{**question, "content": "上海今天适合带伞吗？"}]}
    )  # raises on a 4xx
    client.runs.wait(thread, "weather", input=None)
    messages = client.threads.get_state(thread)["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert (messages[0]["id"], messages[0]["content"]) == (question["id"], "上海今天适合带伞吗？")
    assert [c["args"]["city"] for c in messages[1]["tool_calls"]] == ["上海"]
    audit = messages[0]["response_metadata"]["threadlog_edit"]
    assert audit["original"]["content"] == "北京今天适合带伞吗？"


def test_threads_copy_reads_like_the_original_and_goes_its_own_way(
    client: SyncLangGraphClient,
) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    original = _messages(client, thread)
    copy = client.threads.copy(thread)["thread_id"]
    assert _messages(client, copy) == original
    client.runs.wait(copy, "weather", input=ask("那上海呢？"))
    assert kinds(client, copy) == ["human", "ai", "tool", "ai"] * 2
    assert_paired(_messages(client, copy))
    assert _messages(client, thread) == original  # the original did not move


def test_threads_delete_removes_the_thread_and_its_stored_checkpoints(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    kept = client.threads.create()["thread_id"]
    client.runs.wait(kept, "weather", input=ask("那上海呢？"))
    assert _stored_checkpoints(server, thread) > 0
    client.threads.delete(thread)
    with pytest.raises(NotFoundError):
        client.threads.get_state(thread)
    assert _stored_checkpoints(server, thread) == 0
    assert kinds(client, kept) == ["human", "ai", "tool", "ai"]


def test_threads_prune_delete_removes_the_threads_checkpoints_keep_latest_is_refused_by_dev(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    """`langgraph dev`'s in-memory runtime prunes by deleting the thread (the saver's
    `adelete_thread`) and answers 422 to `keep_latest` itself, whatever the checkpointer:
    under `langgraph dev` the saver's `aprune` is never called (docs/server.md)."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    with pytest.raises(UnprocessableEntityError, match="keep_latest"):
        client.threads.prune([thread], strategy="keep_latest")
    assert kinds(client, thread) == ["human", "ai", "tool", "ai"]
    assert client.threads.prune([thread], strategy="delete") == {"pruned_count": 1}
    with pytest.raises(NotFoundError):
        client.threads.get_state(thread)
    assert _stored_checkpoints(server, thread) == 0


def test_reject_refuses_a_second_run_while_the_first_is_inside_a_tool_call(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    thread = client.threads.create()["thread_id"]
    first = run_inside_tool(server, client, thread, "武汉", "武汉今天下雨吗？")
    with pytest.raises(ConflictError):
        client.runs.create(
            thread, "slow", input=ask("北京呢？"), multitask_strategy="reject"
        )
    client.runs.cancel(thread, first["run_id"], wait=True)
    client.runs.wait(thread, "slow", input=ask("北京呢？"))
    assert [c["args"]["city"] for c in _messages(client, thread)[-3]["tool_calls"]] == ["北京"]


def test_enqueue_runs_the_second_run_after_the_first_on_a_whole_log(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    thread = client.threads.create()["thread_id"]
    first = run_inside_tool(server, client, thread, "西安", "西安今天下雨吗？")
    second = client.runs.create(
        thread, "slow", input=ask("北京呢？"), multitask_strategy="enqueue"
    )
    client.runs.join(thread, second["run_id"])
    assert [client.runs.get(thread, r["run_id"])["status"] for r in (first, second)] == [
        "success",
        "success",
    ]
    messages = _messages(client, thread)
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    questions = [m["content"] for m in messages if m["type"] == "human"]
    assert questions == ["西安今天下雨吗？", "北京呢？"]
    assert_paired(messages)


def _assert_cancelled_turn_kept(messages: list[dict[str, Any]], question: str) -> None:
    """The cancelled turn's question and call are kept, its call answered (not run again:
    the tool never finished), then the next turn follows, all paired."""
    assert messages[0]["content"] == question
    request, answer = messages[1], messages[2]
    assert [c["args"]["city"] for c in request["tool_calls"]] == ["武汉"]
    assert answer["type"] == "tool" and answer["tool_call_id"] == request["tool_calls"][0]["id"]
    # The tool had started: "outcome unknown", not "not completed" (threadlog.log.pairing).
    assert answer["status"] == "error" and "晴" not in answer["content"]
    assert answer["response_metadata"]["threadlog_error"] == "outcome_unknown"
    assert [m["type"] for m in messages[3:]] == ["human", "ai", "tool", "ai"]
    assert_paired(messages)


def test_interrupt_cancels_a_run_inside_a_tool_call_and_the_next_run_proceeds(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    thread = client.threads.create()["thread_id"]
    first = run_inside_tool(server, client, thread, "武汉", "武汉今天下雨吗？")
    second = client.runs.create(
        thread, "slow", input=ask("北京呢？"), multitask_strategy="interrupt"
    )
    client.runs.join(thread, second["run_id"])
    assert client.runs.get(thread, first["run_id"])["status"] == "interrupted"
    assert client.runs.get(thread, second["run_id"])["status"] == "success"
    _assert_cancelled_turn_kept(_messages(client, thread), "武汉今天下雨吗？")


def test_a_run_cancelled_inside_a_tool_call_releases_the_thread_and_loses_nothing(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    thread = client.threads.create()["thread_id"]
    first = run_inside_tool(server, client, thread, "武汉", "武汉今天下雨吗？")
    client.runs.cancel(thread, first["run_id"], wait=True)
    assert client.runs.get(thread, first["run_id"])["status"] == "interrupted"
    # The run guard's lock went with the cancelled run: a new run takes the thread.
    client.runs.wait(thread, "slow", input=ask("北京呢？"))
    _assert_cancelled_turn_kept(_messages(client, thread), "武汉今天下雨吗？")
    # ... and the thread keeps working turn after turn.
    client.runs.wait(thread, "slow", input=ask("上海呢？"))
    assert kinds(client, thread)[-4:] == ["human", "ai", "tool", "ai"]


def test_studio_rerun_from_a_checkpoint_inside_a_turn_replays_it_on_a_branch(
    client: SyncLangGraphClient,
) -> None:
    """Studio's "re-run from here": no input, an older checkpoint (before the tool step)."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    history = client.threads.get_history(thread, limit=50)
    (mid,) = [s["checkpoint"]["checkpoint_id"] for s in history if s["next"] == ["tools"]]
    client.runs.wait(thread, "weather", input=None, checkpoint_id=mid)
    head = client.threads.get_state(thread)
    messages = head["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert_paired(messages)
    # The new head descends from `mid` on a new branch beside the first run's end.
    by_id = {s["checkpoint"]["checkpoint_id"]: s for s in client.threads.get_history(thread)}
    assert len(by_id) > len(history)
    at, line = head["checkpoint"]["checkpoint_id"], []
    while at is not None:
        line.append(at)
        parent = by_id[at]["parent_checkpoint"]
        at = parent["checkpoint_id"] if parent else None
    assert mid in line and history[0]["checkpoint"]["checkpoint_id"] not in line


def test_the_server_log_has_no_error_no_500_and_nothing_not_implemented(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    """Last but one in the module: the log then covers every test above on this server."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    text = server.log.read_text()
    assert finished_runs(text) >= 1
    assert server_log_problems(text) == []


def test_new_input_from_an_older_checkpoint_runs_as_a_fork_and_the_old_head_stays(
    client: SyncLangGraphClient,
) -> None:
    """LangGraph's time travel through the SDK: a run with new input and an explicit older
    `checkpoint_id` runs as a new branch from it (docs/server.md); the turn it left out is
    not in the new head, the old head still reads as it was, the log stays paired."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    first = client.threads.get_state(thread)
    client.runs.wait(thread, "weather", input=ask("那上海呢？"))
    old_head = client.threads.get_state(thread)
    first_end = first["checkpoint"]["checkpoint_id"]
    client.runs.wait(thread, "weather", input=ask("那广州呢？"), checkpoint_id=first_end)
    after = client.threads.get_state(thread)
    ids = [m["id"] for m in after["values"]["messages"]]
    first_ids = [m["id"] for m in first["values"]["messages"]]
    assert ids[: len(first_ids)] == first_ids
    asked = [m["content"] for m in after["values"]["messages"] if m["type"] == "human"]
    assert asked == ["北京今天适合带伞吗？", "那广州呢？"]
    assert after["checkpoint"]["checkpoint_id"] != old_head["checkpoint"]["checkpoint_id"]
    old = client.threads.get_state(thread, checkpoint_id=old_head["checkpoint"]["checkpoint_id"])
    assert old["values"] == old_head["values"]
    assert_paired(after["values"]["messages"])


def test_threadlog_inspect_calls_lists_the_model_calls_of_a_served_thread(
    server: LangGraphDev, client: SyncLangGraphClient, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    capsys.readouterr()
    code = cli_main(["inspect", "--db", str(server.app_dir / DB), "--thread", thread,
                     "--calls", "--json"])
    calls = json.loads(capsys.readouterr().out)
    assert code == 0 and len(calls) >= 2  # asks the tool, then answers
    assert all(c["model"] and c["reply_id"] for c in calls)
    assert [m["content"] for m in calls[0]["messages"] if m["role"] == "user"] == [
        "北京今天适合带伞吗？"
    ]
    assert calls[-1]["reply"]["content"]
