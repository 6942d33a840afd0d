"""LangGraph Server on `threadlog.server.checkpointer`: what needs the saver's lifecycle
methods (`adelete_for_runs`, `acopy_thread`, `aprune`; issue 21 parts 2-3).

Same app and server set-up as test_server_checkpointer.py (its own server). Until those
methods are on the saver the server warns at start-up and `multitask_strategy="rollback"`
answers HTTP 500, so this module fails on a branch without them.

Under `langgraph dev` the in-memory runtime never calls `aprune`: its thread TTL sweep
does nothing and `threads.prune(strategy="keep_latest")` answers 422 whatever the
checkpointer (test_server_checkpointer.py shows both prune answers); only the method's
presence is seen here, through the start-up log.
"""

from __future__ import annotations

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError

from tests.helpers.demo import LangGraphDev
from tests.helpers.server import (
    ask,
    assert_paired,
    finished_runs,
    kinds,
    messages_of,
    module_server,
    run_inside_tool,
    server_log_problems,
)

server = module_server("threadlog_server_lifecycle")


_messages = messages_of


def test_the_server_finds_every_lifecycle_method_on_the_saver(server: LangGraphDev) -> None:
    text = server.log.read_text()
    assert "Using custom checkpointer: GuardedSaver" in text
    assert "Custom checkpointer missing" not in text  # adelete_for_runs, acopy_thread, aprune


def test_rollback_while_the_first_run_is_inside_a_tool_call_leaves_no_trace_of_it(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "slow", input=ask("北京今天下雨吗？"))
    before = _messages(client, thread)
    first = run_inside_tool(server, client, thread, "武汉", "武汉今天下雨吗？")
    second = client.runs.create(
        thread, "slow", input=ask("上海呢？"), multitask_strategy="rollback"
    )
    client.runs.join(thread, second["run_id"])
    assert client.runs.get(thread, second["run_id"])["status"] == "success"
    with pytest.raises(NotFoundError):  # the server deletes a rolled-back run
        client.runs.get(thread, first["run_id"])

    messages = _messages(client, thread)
    assert messages[: len(before)] == before
    assert "武汉" not in str(messages)  # neither its question, its call nor an answer
    assert [m["type"] for m in messages[len(before) :]] == ["human", "ai", "tool", "ai"]
    assert_paired(messages)
    history = client.threads.get_history(thread, limit=100)
    assert first["run_id"] not in {s["metadata"].get("run_id") for s in history}
    # The thread still reads and grows: the next turn sees a whole, paired log.
    client.runs.wait(thread, "slow", input=ask("广州呢？"))
    assert kinds(client, thread)[-4:] == ["human", "ai", "tool", "ai"]
    assert_paired(_messages(client, thread))


def test_threads_copy_is_the_savers_own_and_reads_identically(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    thread = client.threads.create()["thread_id"]
    for question in ("北京今天适合带伞吗？", "那上海呢？"):
        client.runs.wait(thread, "weather", input=ask(question))
    copy = client.threads.copy(thread)["thread_id"]
    original = client.threads.get_history(thread, limit=100)
    copied = client.threads.get_history(copy, limit=100)
    assert [s["values"] for s in copied] == [s["values"] for s in original]
    assert [s["next"] for s in copied] == [s["next"] for s in original]
    client.runs.wait(copy, "weather", input=ask("那广州呢？"))
    assert kinds(client, copy) == ["human", "ai", "tool", "ai"] * 3
    assert_paired(_messages(client, copy))
    assert _messages(client, thread) == original[0]["values"]["messages"]


def test_the_server_log_has_no_error_no_500_and_nothing_not_implemented(
    server: LangGraphDev, client: SyncLangGraphClient
) -> None:
    """Last in the module: the log then covers every test above on this server."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))
    text = server.log.read_text()
    assert finished_runs(text) >= 1
    assert server_log_problems(text) == []
