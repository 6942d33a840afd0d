"""Every line the `threadlog` command prints keeps stored control characters from the
terminal: `inspect`, `threads`, the progress line, error lines and the demo's transcript
print them as visible escapes (tables within 100 columns); `--json` and `export` carry
the exact strings. Run through the command's entry point, `threadlog.cli.main`, on the
hostile thread of `tests/helpers/terminal.py` (SQLite, `threadlog.checkpointer`).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.helpers.terminal import (
    AI_3,
    ANSWER,
    CALL,
    CITY,
    CLEAR,
    ERROR_KIND,
    ERROR_TEXT,
    SUBGRAPH,
    THREAD,
    TITLE,
    TOOL,
    USER_TEXT,
    raw_controls,
    visible,
    write_hostile_thread,
)
from threadlog import inspect
from threadlog.cli import main
from threadlog.cli.transcript import Transcript
from threadlog.inspect.export import messages_at
from threadlog.terminal import display_width


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("hostile") / "threads.sqlite"
    write_hostile_thread(f"sqlite:///{path}")
    return f"sqlite:///{path}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_inspect_prints_every_view_escaped_within_100_columns(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    head = inspect.thread(url, THREAD).head.checkpoint_id
    code, out, err = run(
        capsys, "inspect", "--db", url, "--thread", THREAD, "--checkpoint", head, "--context", "-1"
    )

    assert code == 0, err
    assert "· timeline" in out and "tool calls at" in out and "what the model saw" in out
    assert "subgraphs of thread" in out and "diff " in out
    assert raw_controls(out) == [], out
    for stored in (THREAD, ERROR_TEXT, ERROR_KIND, TOOL, AI_3, ANSWER, SUBGRAPH):
        assert visible(stored) in out, visible(stored)
    assert all(display_width(line) <= 100 for line in out.splitlines())


def test_inspect_json_carries_the_exact_stored_strings(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", "--db", url, "--thread", THREAD, "--json")

    doc = json.loads(out)
    pair = doc["pairs"][0]
    assert code == 0 and doc["thread"] == THREAD
    assert (pair["call_id"], pair["tool"], pair["args"]) == (CALL, TOOL, {"city": CITY})
    assert (pair["result"], pair["error_kind"]) == (ERROR_TEXT, ERROR_KIND)
    appended = [m["content"] for row in doc["timeline"] for m in row["appended"]]
    assert USER_TEXT in appended and ANSWER in appended
    assert doc["subgraphs"][0]["namespace"].startswith(SUBGRAPH)


def test_the_progress_line_shows_the_thread_id_escaped(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOG_PROGRESS_AFTER", "0")  # print progress from the start
    code, _, err = run(capsys, "inspect", "--db", url, "--thread", THREAD)

    assert code == 0 and f"reading thread {visible(THREAD)}" in err
    assert raw_controls(err) == [], err


def test_threads_lists_the_thread_escaped_and_its_json_exact(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "threads", "--db", url)
    assert code == 0 and visible(THREAD) in out and raw_controls(out) == [], out
    assert all(display_width(line) <= 100 for line in out.splitlines())

    code, out, _ = run(capsys, "threads", "--db", url, "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["thread_id"] == THREAD


@pytest.mark.parametrize("fmt", ["jsonl", "langchain", "openai"])
def test_export_prints_the_exact_stored_strings(
    url: str, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    code, out, _ = run(capsys, "export", "--db", url, "--thread", THREAD, "--format", fmt)

    assert code == 0
    assert inspect.export.loads(out)[0].content == USER_TEXT  # JSON: nothing escaped away
    assert ERROR_TEXT in [m.content for m in inspect.export.loads(out)]


@pytest.mark.parametrize("command", ["inspect", "export"])
def test_an_error_quoting_a_stored_namespace_is_one_escaped_line(
    url: str, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # The error lists the thread's namespaces, read from the database: the subgraph's
    # node name is in them.
    code, out, err = run(capsys, command, "--db", url, "--thread", THREAD, "--namespace", "nope")

    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"threadlog {command}: error: ") and visible(SUBGRAPH) in err
    assert raw_controls(err) == [], err


def test_the_demo_transcript_prints_a_stored_turn_escaped(url: str) -> None:
    messages, _ = messages_at(url, THREAD)
    out = io.StringIO()
    transcript = Transcript(out)
    for m in messages:
        transcript.message(m)
    # A streamed answer whose escape sequence is split across two tokens.
    for token in ["done \x1b", "[1A\x1b[2K", "\x9b2J \u202e"]:
        transcript.token(token)
    transcript.message(AIMessage(ANSWER, id="ai-streamed"))
    # A message's text keeps its own line breaks and tabs; everything else is escaped.
    transcript.message(HumanMessage(f"first line\n\tsecond{CLEAR}", id="u-prose"))
    transcript.line("checkpoint", f"id\n{TITLE}")
    text = out.getvalue()

    assert raw_controls(text, allowed="\n\t") == [], text
    for stored in (USER_TEXT, TOOL, CALL, ERROR_TEXT, ANSWER):
        assert visible(stored) in text, visible(stored)
    assert f"first line\n\tsecond{visible(CLEAR)}" in text
    assert f"checkpoint id\\x0a{visible(TITLE)}" in text  # a field is one line


def test_the_demo_prints_its_thread_and_question_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'demo.sqlite'}"
    code, out, err = run(capsys, "demo", f"rain in Beijing?{CLEAR}", "--thread", THREAD, "--db", db)

    assert code == 0, err
    assert raw_controls(out) == [], out
    assert f"thread {visible(THREAD)} · " in out  # the header
    assert f"rain in Beijing?{visible(CLEAR)}" in out  # the user's line
    assert f"--thread {visible(THREAD)}" in out  # how to continue


def test_a_demo_error_line_is_escaped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, err = run(capsys, "demo", "hi", "--model", f"openai:m{CLEAR}")

    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"--model openai:m{visible(CLEAR)} needs an API key" in err
    assert raw_controls(err) == [], err
