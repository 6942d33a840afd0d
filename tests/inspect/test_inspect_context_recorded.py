"""`threadlog inspect --context CALL` speaks CLI: on a thread that recorded its model calls
it shows the request the call sent (the app's own node, its prompt built from state), and
without a recorded call it says in words that it shows a rebuild — never asking for a
Python argument."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import threadlog
from tests.helpers import recorded_apps as apps
from threadlog.cli import main


def _db(tmp_path: Path, record: bool) -> str:
    url = f"sqlite:///{tmp_path / 'app.sqlite'}"
    with threadlog.checkpointer(url, record_calls=record) as saver:
        graph = apps.own_node(saver)
        apps.one_turn(graph, "t", "hello", user_name="Ada\u202e")
        apps.one_turn(graph, "t", "again")
    return url


def test_context_shows_the_request_the_apps_own_node_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _db(tmp_path, record=True)
    capsys.readouterr()
    assert main(["inspect", "--db", url, "--thread", "t", "--context", "-1"]) == 0
    out = capsys.readouterr().out
    assert "sent 4 messages" in out
    assert "as the call recorded it: model ToolScripted, respond" in out
    # The system prompt the node built for turn 2, in full, escaped for the terminal.
    sent = apps.own_node_prompt("Ada\\u202e", 2).replace("\n", " ")
    assert f"system prompt sent: {sent}" in " ".join(out.split())
    assert "\u202e" not in out
    assert "pass " not in out and "rebuilt" not in out and "assumed" not in out
    assert main(["inspect", "--db", url, "--thread", "t", "--context", "-1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["context"]
    assert rows[0]["seen"] == "added" and rows[0]["role"] == "system"
    assert rows[0]["content"] == apps.own_node_prompt("Ada\u202e", 2)
    assert [r["seen"] for r in rows[1:]] == ["kept"] * 3  # every log message was sent


def test_without_recorded_calls_context_says_it_is_a_rebuild(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _db(tmp_path, record=False)
    capsys.readouterr()
    assert main(["inspect", "--db", url, "--thread", "t", "--context", "-1"]) == 0
    out = capsys.readouterr().out
    assert "rebuilt from the log by the context rules: no recorded call made this message" in out
    assert "system prompt: the run recorded none; this rebuild sends none" in out
    assert "pass " not in out and "=)" not in out
