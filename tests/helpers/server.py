"""Helpers for the LangGraph Server tests: an app served with threadlog's checkpointer.

* `threadlog_app(tmp)` writes the app: the repository's `langgraph.json` (so its
  `checkpointer` entry is what is tested) plus the `slow` graph of
  `tests/apps/graphs/slow_tool.py`, and `graphs/`. The server's SQLite file lands in
  `tmp/.threadlog/checkpoints.sqlite` (the default: nothing sets the URL).
* `server_log_problems(text)`: the lines of a `langgraph dev` log that report an error —
  a record at level error/critical/exception, a traceback, a 5xx answer, or a method
  "not implemented" — so a test can assert there are none.
* `wait_for(path)`, `ask(question)`, `kinds(client, thread)`, `assert_paired(messages)`.
* `module_server(folder)`: a module-scoped `server` fixture, `langgraph dev` serving that
  app; `client` (tests/apps/conftest.py) is the SDK's sync client for it.
* `run_inside_tool(server, client, thread, city, question)`: starts a `slow` run and
  returns it once its tool call for `city` is running.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.helpers.demo import REPO, LangGraphDev

GRAPHS = Path(__file__).resolve().parents[1] / "apps" / "graphs"
DB = Path(".threadlog") / "checkpoints.sqlite"


def threadlog_app(app: Path) -> Path:
    config = json.loads((REPO / "langgraph.json").read_text())
    config["graphs"]["slow"] = "./test_graphs/slow_tool.py:graph"
    (app / "langgraph.json").write_text(json.dumps(config, indent=2))
    shutil.copytree(REPO / "graphs", app / "graphs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(GRAPHS, app / "test_graphs", ignore=shutil.ignore_patterns("__pycache__"))
    return app


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PROBLEM = re.compile(
    r"\[\s*(error|critical|exception)\s*\]|Traceback|\s5\d\d\s+\d+ms|not implemented"
    r"|Background run failed",
    re.IGNORECASE,
)


def server_log_problems(text: str) -> list[str]:
    lines = _ANSI.sub("", text).splitlines()
    return [line[:300] for line in lines if _PROBLEM.search(line)]


def finished_runs(text: str) -> int:
    """How many runs the log reports succeeded (its access log shows only non-2xx)."""
    return _ANSI.sub("", text).count("Background run succeeded")


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


def ask(question: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}]}


def messages_of(client: SyncLangGraphClient, thread: str) -> list[dict[str, Any]]:
    """The head's messages of `thread`, as the server returns them."""
    messages: list[dict[str, Any]] = client.threads.get_state(thread)["values"]["messages"]
    return messages


def kinds(client: SyncLangGraphClient, thread: str) -> list[str]:
    return [m["type"] for m in client.threads.get_state(thread)["values"].get("messages", [])]


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """Each AI message with calls is followed by one result per call, in call order."""
    for i, m in enumerate(messages):
        if m["type"] == "ai" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            assert [r.get("tool_call_id") for r in messages[i + 1 : i + 1 + len(ids)]] == ids


def module_server(folder: str) -> Any:
    """A module-scoped `server` fixture: `langgraph dev` serving `threadlog_app` in a new
    temporary folder named `folder` (`server = module_server("...")` in a test module)."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LangGraphDev]:
        app = threadlog_app(tmp_path_factory.mktemp(folder))
        with LangGraphDev(app) as dev:
            yield dev

    return server


def run_inside_tool(
    server: LangGraphDev, client: SyncLangGraphClient, thread: str, city: str, question: str
) -> dict[str, Any]:
    """A `slow` run on `thread`, returned once its tool call for `city` has started (the
    slow tool touches `tool-started-<city>` in the app folder, then waits)."""
    started = server.app_dir / f"tool-started-{city}"
    started.unlink(missing_ok=True)
    run: dict[str, Any] = client.runs.create(thread, "slow", input=ask(question))
    wait_for(started)
    return run
