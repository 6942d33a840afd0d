"""`langgraph dev` on `threadlog.server.checkpointer` with `THREADLOG_CHECKPOINTER_URL`
naming a Postgres database (the conftest's throwaway server): the threads land there, and a
run cancelled inside a tool call lets go of the thread, as on SQLite. The app names the
checkpointer through docs/server.md's one-line file, the form a server that loads only
files takes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from langgraph_sdk import get_sync_client

from tests.helpers.demo import LangGraphDev
from tests.helpers.server import (
    DB,
    ask,
    assert_paired,
    kinds,
    run_inside_tool,
    server_log_problems,
    threadlog_app,
)


@pytest.fixture
def served(tmp_path: Path, pg_backend: str) -> Iterator[tuple[LangGraphDev, str]]:
    (tmp_path / "app").mkdir()
    app = threadlog_app(tmp_path / "app")
    (app / "checkpointer.py").write_text("from threadlog.server import checkpointer\n")
    config = json.loads((app / "langgraph.json").read_text())
    config["checkpointer"]["path"] = "./checkpointer.py:checkpointer"
    (app / "langgraph.json").write_text(json.dumps(config))
    with LangGraphDev(app, env={"THREADLOG_CHECKPOINTER_URL": pg_backend}) as server:
        yield server, pg_backend


def test_the_variable_puts_the_servers_threads_in_postgres(
    served: tuple[LangGraphDev, str],
) -> None:
    server, url = served
    client = get_sync_client(url=server.url)
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "weather", input=ask("北京今天适合带伞吗？"))

    first = run_inside_tool(server, client, thread, "武汉", "武汉今天下雨吗？")
    client.runs.cancel(thread, first["run_id"], wait=True)
    client.runs.wait(thread, "slow", input=ask("上海呢？"))

    messages = client.threads.get_state(thread)["values"]["messages"]
    first_turn, cancelled = ["human", "ai", "tool", "ai"], ["human", "ai", "tool"]
    assert [m["type"] for m in messages] == [*first_turn, *cancelled, *first_turn]
    assert messages[6]["response_metadata"]["threadlog_error"] == "outcome_unknown"
    assert_paired(messages)
    assert kinds(client, thread)[-4:] == ["human", "ai", "tool", "ai"]
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s", (thread,)
        ).fetchone()
    assert row is not None and row[0] > 0
    assert not (server.app_dir / DB).exists()  # nothing in the default SQLite file
    log = server.log.read_text()
    assert "Using custom checkpointer: GuardedSaver" in log
    assert server_log_problems(log) == []
