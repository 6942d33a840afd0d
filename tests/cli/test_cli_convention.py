"""One CLI convention, every subcommand (`threadlog.cli.errors`): bad input — an unknown
thread, a missing or foreign file, a wrong URL scheme, a bad flag value — is one line
naming the flag or value, exit 2, nothing on stdout and nothing written; a mistyped
flag shows that subcommand's usage; a file that is not a LangGraph database stays
byte-identical; thread ids take a unique prefix; `--json` prints JSON only, with C1
controls and bidi overrides escaped."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from threadlog.cli import main

THREAD = "conv-thread-1"
COMMANDS = ["demo", "threads", "inspect", "export", "check", "replay", "prune"]

GRAPH_MODULE = """
from threadlog.examples import weather

def build():
    return weather.build_graph(max_model_calls=6)
"""


def _files(folder: Path) -> dict[str, str]:
    # A reader of the app's WAL-mode database makes SQLite's empty -wal/-shm companions;
    # every database file itself, and every other file, must stay byte-identical.
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.suffix != ".py" and p.name not in ("app.db-wal", "app.db-shm")
    }


@pytest.fixture
def work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A demo database holding THREAD, a plain SQLite file and a graph module."""
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--db", "app.db", "--thread", THREAD, "Paris?"]) == 0
    with sqlite3.connect(tmp_path / "plain.db") as conn:
        conn.execute("CREATE TABLE notes (x)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "conv_graph.py").write_text(GRAPH_MODULE)
    monkeypatch.delitem(sys.modules, "conv_graph", raising=False)
    capsys.readouterr()
    return tmp_path


G = ["--graph", "conv_graph:build"]

BAD: list[tuple[list[str], str]] = [
    # demo
    (["demo", "--db", "app.db", "--json", "--thread", "ghost"], "--thread: no thread 'ghost'"),
    (["demo", "--db", "plain.db", "hi"], "not a LangGraph checkpoint database"),
    (["demo", "--db", "empty.db", "hi"], "not a LangGraph checkpoint database"),
    (["demo", "--db", "ftp://x/y", "hi"], "--db 'ftp://x/y'"),
    (["demo", "--db", "http://127.0.0.1:1", "hi"], "is a LangGraph server"),
    (["demo", "--db", "app.db", "--max-model-calls", "x", "hi"], "--max-model-calls"),
    # threads
    (["threads", "--db", "missing.db"], "--db: no database at 'missing.db'"),
    (["threads", "--db", "plain.db"], "not a LangGraph checkpoint database"),
    (["threads", "--db", "ftp://x/y"], "cannot read 'ftp://x/y'"),
    (["threads", "--db", "app.db", "--limit", "-1"], "--limit: '-1'"),
    # inspect
    (["inspect", "--db", "app.db", "--thread", "ghost"], "--thread: no thread 'ghost'"),
    (["inspect", "--db", "plain.db", "--thread", THREAD], "not a LangGraph checkpoint database"),
    (["inspect", "--db", "app.db", "--thread", THREAD, "--last", "-3"], "--last: '-3'"),
    (["inspect", "--db", "app.db", "--thread", "conv", "--last", "0"], "--last: '0'"),
    # export
    (["export", "--db", "app.db", "--thread", "ghost"], "--thread: no thread 'ghost'"),
    (["export", "--db", "missing.db", "--thread", THREAD], "--db: no database at"),
    (["export", "--db", "app.db", "--thread", THREAD, "--format", "xml"], "--format"),
    # check
    (["check", "--db", "app.db", "--thread", "ghost"], "--thread: no thread 'ghost'"),
    (["check", "--db", "plain.db"], "not a LangGraph checkpoint database"),
    (["check", "--db", "plain.db", "--repair"], "not a LangGraph checkpoint database"),
    (["check", "--db", "missing.db", "--repair"], "no database at"),
    (["check", "--db", "app.db", "--profile", "nope"], "--profile"),
    (["check", "--db", "app.db", "--lock-timeout", "soon"], "--lock-timeout: 'soon'"),
    # replay
    (["replay", "--db", "app.db", "--thread", "ghost", *G], "--thread: no thread 'ghost'"),
    (["replay", "--db", "plain.db", "--thread", THREAD, *G], "not a LangGraph"),
    (["replay", "--db", "ftp://x/y", "--thread", THREAD, *G], "'ftp://x/y'"),
    (["replay", "--db", "app.db", "--thread", THREAD, "--turns", "9", *G], "--turns '9'"),
    # prune
    (["prune", "--db", "app.db", "--keep-latest", "--thread", "ghost"], "--thread: no thread"),
    (["prune", "--db", "plain.db", "--keep-latest", "--dry-run"], "not a LangGraph"),
    (["prune", "--db", "plain.db", "--keep-latest"], "not a LangGraph checkpoint database"),
    (["prune", "--db", "empty.db", "--keep-latest"], "not a LangGraph checkpoint database"),
    (["prune", "--db", "missing.db", "--keep-latest"], "no database at 'missing.db'"),
    (["prune", "--db", "ftp://x/y", "--keep-latest"], "--db 'ftp://x/y'"),
    (["prune", "--db", "app.db", "--older-than", "99999999999w"], "bad duration"),
    (["prune", "--db", "app.db", "--older-than", "0d"], "bad duration"),
]


@pytest.mark.parametrize(("argv", "says"), BAD, ids=[" ".join(a[:1] + a[2:4]) for a, _ in BAD])
def test_bad_input_is_one_line_naming_the_flag_or_value_exit_2_and_nothing_written(
    work: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    before = _files(work)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"threadlog {argv[0]}: error: ") and says in err, err
    assert "Traceback" not in err
    assert _files(work) == before  # byte-identical: no table, no WAL, no new file


def test_threadlog_debug_raises_the_error_for_its_traceback_instead_of_one_line(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOG_DEBUG", "1")
    with pytest.raises(Exception, match="no thread 'ghost'"):
        main(["inspect", "--db", "app.db", "--thread", "ghost"])
    assert capsys.readouterr().err == ""


def test_every_subcommand_is_in_the_table() -> None:
    assert {argv[0] for argv, _ in BAD} == set(COMMANDS)


VALID = {
    "demo": ["demo", "--db", "app.db", "hi"],
    "threads": ["threads", "--db", "app.db"],
    "inspect": ["inspect", "--db", "app.db", "--thread", THREAD],
    "export": ["export", "--db", "app.db", "--thread", THREAD],
    "check": ["check", "--db", "app.db"],
    "replay": ["replay", "--db", "app.db", "--thread", THREAD, *G],
    "prune": ["prune", "--db", "app.db", "--keep-latest"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_mistyped_flag_shows_that_subcommands_usage(
    work: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    before = _files(work)
    assert main([*VALID[command], "--jsno"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"usage: threadlog {command} ")
    assert err.endswith(f"threadlog {command}: error: unrecognized arguments: --jsno\n")
    assert _files(work) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "--db", "app.db", "--thread", "conv-th", "--json"],
        ["export", "--db", "app.db", "--thread", "conv-th"],
        ["check", "--db", "app.db", "--thread", "conv-th", "--json"],
        ["replay", "--db", "app.db", "--thread", "conv-th", *G, "--json"],
        ["demo", "--db", "app.db", "--thread", "conv-th", "--json"],
        ["prune", "--db", "app.db", "--thread", "conv-th", "--keep-latest", "--dry-run"],
    ],
    ids=lambda a: a[0],
)
def test_a_unique_thread_prefix_names_the_thread(
    work: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(["demo", "--db", "app.db", "--thread", "other-1", "Rome?"]) == 0
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert THREAD in out or "Paris?" in out or '"threads": 1' in out, out


def test_an_ambiguous_prefix_is_one_line_listing_the_candidates(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--db", "app.db", "--thread", "conv-thread-2", "Rome?"]) == 0
    capsys.readouterr()
    assert main(["inspect", "--db", "app.db", "--thread", "conv-thread"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "prefix of 2 threads" in err


def _json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_check_repair_json_prints_json_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.poisoned import threadlog_threads

    url = f"sqlite:///{tmp_path / 'poisoned.db'}"
    threadlog_threads(url)
    for extra in (["--dry-run"], []):
        main(["check", "--db", url, "--repair", "--json", *extra])
        out = capsys.readouterr().out
        rows = _json_lines(out)  # every line parses: no plain-text line at the end
        assert len(rows) >= 2 and "summary" in rows[-1], out


C1_BIDI = "\u009b31m\u202eevil"


def _crashed(url: str, thread_id: str) -> None:
    import contextlib

    from langchain_core.messages import HumanMessage

    import threadlog
    from tests.helpers.poisoned import Crash, crashing_weather
    from threadlog import OfflineChatModel, create_agent

    with threadlog.checkpointer(url) as saver:
        agent = create_agent(OfflineChatModel(), [crashing_weather], checkpointer=saver)
        with contextlib.suppress(Crash):
            agent.invoke(
                {"messages": [HumanMessage("北京今天适合带伞吗？")]},
                {"configurable": {"thread_id": thread_id}},
            )


def test_json_output_escapes_c1_controls_and_bidi_overrides(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--db", "app.db", "--thread", "ctl", C1_BIDI]) == 0
    _crashed(f"sqlite:///{work / 'app.db'}", f"crash{C1_BIDI}")
    capsys.readouterr()
    for argv in (
        ["check", "--db", "app.db", "--thread", f"crash{C1_BIDI}", "--json"],
        ["replay", "--db", "app.db", "--thread", "ctl", *G, "--json"],
        ["inspect", "--db", "app.db", "--thread", "ctl", "--json"],
        ["threads", "--db", "app.db", "--json"],
        ["demo", "--db", "app.db", "--thread", "ctl", "--json"],
    ):
        main(argv)
        out = capsys.readouterr().out
        assert "\u009b" not in out and "\u202e" not in out, argv
        assert "\\u009b31m\\u202eevil" in out, argv
        docs = _json_lines(out) if argv[0] == "check" else [json.loads(out)]
        assert C1_BIDI in json.dumps(docs, ensure_ascii=False), argv  # the same value


def _tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return sorted(r[0] for r in rows)


@pytest.mark.parametrize(
    "argv",
    [["prune", "--keep-latest"], ["prune", "--keep-latest", "--dry-run"], ["check", "--repair"]],
    ids=" ".join,
)
def test_a_postgres_database_without_langgraphs_tables_is_refused_and_left_as_it_is(
    pg_backend: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    import psycopg

    with psycopg.connect(pg_backend, autocommit=True) as conn:
        conn.execute("CREATE TABLE notes (x text)")
    before = _tables(pg_backend)
    assert main([argv[0], "--db", pg_backend, *argv[1:]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "not a LangGraph checkpoint database" in err
    assert _tables(pg_backend) == before == ["notes"]
