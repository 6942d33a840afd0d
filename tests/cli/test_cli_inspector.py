"""`threadlog threads`, `threadlog export`, `inspect --context`, `demo --json` without a
question, `--version`, a fast `--help`, and one line on stderr for every bad source."""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.inspect import CONFIG, ScriptedAgent, raw_saver
from threadlog import digest, inspect, openai_payload
from threadlog.cli import main

REPO = Path(__file__).resolve().parents[2]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def three_turns(url: str) -> str:
    """t-1: parallel calls and an answer, a thank-you, then a long Chinese answer."""
    with raw_saver(url) as saver:
        graph = ScriptedAgent().build(saver)
        for q in ("Weather in Paris and Rome?", "thanks", "北京呢？"):
            graph.invoke({"messages": [("user", q)]}, CONFIG)  # type: ignore[arg-type]
    return url


def one_error_line(code: int, err: str, status: int = 2) -> str:
    """Bad input is exit 2 (cli/errors.py); a database that fails mid-run, 1."""
    lines = err.strip().splitlines()
    assert code == status, err
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- threads --------------------------------------------------------------------------


def test_threads_lists_text_and_json(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    three_turns(sqlite_url)
    path = sqlite_url[len("sqlite:///") :]

    code, out, _ = cli(capsys, "threads", "--db", path)
    assert code == 0 and "t-1" in out and "北京呢？" in out

    code, out, _ = cli(capsys, "threads", "--db", sqlite_url, "--json", "--search", "ROME")
    (row,) = json.loads(out)
    assert code == 0 and (row["thread_id"], row["turns"], row["messages"]) == ("t-1", 3, 9)


# -- export ---------------------------------------------------------------------------


def reimport(messages: list[Any], url: str) -> list[Any]:
    """`messages` written into a fresh thread of `url`, read back the way a run reads it."""
    import threadlog
    from threadlog.inspect.source import stand_in

    with threadlog.checkpointer(url) as saver:
        graph = stand_in(saver, None)
        cfg: Any = {"configurable": {"thread_id": "copy"}}
        graph.update_state(cfg, {"messages": messages})
        return list(graph.get_state(cfg).values["messages"])


@pytest.mark.parametrize("fmt", ["jsonl", "langchain", "openai"])
def test_export_round_trips_to_the_same_model_visible_history(
    backend: str, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    three_turns(backend)
    original, _ = inspect.export.messages_at(backend, "t-1")
    assert max(len(m.text) for m in original) > 100  # long content, exported whole

    code, out, _ = cli(capsys, "export", "--db", backend, "--thread", "t-1", "--format", fmt)
    assert code == 0

    copy = reimport(inspect.export.loads(out), f"sqlite:///{tmp_path / 'copy.db'}")
    assert openai_payload(copy) == openai_payload(original)
    if fmt != "openai":  # the OpenAI format carries no message ids
        assert [(m.id, digest(m)) for m in copy] == [(m.id, digest(m)) for m in original]


def test_export_at_a_checkpoint_and_to_a_file_reads_only(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    three_turns(sqlite_url)
    path = Path(sqlite_url[len("sqlite:///") :])
    before = path.read_bytes()
    t = inspect.thread(sqlite_url, "t-1")
    turn1 = next(r for r in t.records if len(r.messages) == 5)

    out_file = tmp_path / "t1.jsonl"
    code, _, _ = cli(
        capsys, "export", "--db", str(path), "--thread", "t-1",
        "--checkpoint", turn1.checkpoint_id[-10:], "-o", str(out_file),
    )

    lines = out_file.read_text(encoding="utf-8").splitlines()
    assert code == 0 and [json.loads(x)["id"] for x in lines] == [m.id for m in turn1.messages]
    assert path.read_bytes() == before


# -- demo --json reads without asking --------------------------------------------------


def test_demo_json_without_a_question_prints_the_history_and_appends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "demo.db")
    code, _, _ = cli(capsys, "demo", "--db", db, "--thread", "d-1", "北京今天适合带伞吗？")
    assert code == 0
    before, _ = inspect.export.messages_at(db, "d-1")

    code, out, _ = cli(capsys, "demo", "--db", db, "--thread", "d-1", "--json")

    doc = json.loads(out)
    after, _ = inspect.export.messages_at(db, "d-1")
    assert code == 0 and [m["id"] for m in doc["messages"]] == [m.id for m in before]
    assert [m.id for m in after] == [m.id for m in before]  # no turn was added


def test_one_model_call_is_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "demo", "--db", str(tmp_path / "d.db"), "hello")
    assert code == 0 and "(1 model call)" in out


# -- inspect --context, progress ------------------------------------------------------


def test_inspect_context_shows_what_the_model_saw(
    sqlite_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    three_turns(sqlite_url)
    monkeypatch.setenv("THREADLOG_PROGRESS_AFTER", "0")  # show progress at once
    page = tmp_path / "t.html"

    code, out, err = cli(capsys, "inspect", "--db", sqlite_url, "--thread", "t-1",
                         "--context", "ai-2", "--html", str(page))

    assert code == 0 and out == f"wrote {page}\n"
    assert "what the model saw for ai-2" in page.read_text(encoding="utf-8")
    assert "reading thread t-1" in err and "done in" in err
    code, out, _ = cli(capsys, "inspect", "--db", sqlite_url, "--thread", "t-1",
                       "--context", "ai-2")
    assert code == 0 and "what the model saw for ai-2" in out
    code, out, _ = cli(capsys, "inspect", "--db", sqlite_url, "--thread", "t-1",
                       "--context", "-1", "--json")
    rows = json.loads(out)["context"]  # the last call saw the whole log: no policy cut it
    assert code == 0 and [r["seen"] for r in rows] == ["kept"] * 8
    assert rows[-1]["content"] == "北京呢？"


def test_a_read_under_a_second_is_silent_and_a_longer_one_is_two_lines_suggesting_last(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    three_turns(sqlite_url)
    monkeypatch.delenv("THREADLOG_PROGRESS_AFTER", raising=False)
    code, _, err = cli(capsys, "inspect", "--db", sqlite_url, "--thread", "t-1")
    assert code == 0 and err == ""  # this read takes well under the default second

    monkeypatch.setenv("THREADLOG_PROGRESS_AFTER", "0")  # as if every read were slow
    code, _, err = cli(capsys, "inspect", "--db", sqlite_url, "--thread", "t-1")
    start, end = err.splitlines()  # not a terminal: a start and an end line
    assert code == 0 and start.startswith("reading thread t-1") and "--last N" in start
    assert end.startswith("reading thread t-1") and "done in" in end


# -- --version and --help -------------------------------------------------------------


def test_version_and_help_load_no_langgraph() -> None:
    probe = (
        "import sys\nfrom threadlog.cli import main\n"
        "for argv in (['--help'], ['--version'], ['threads', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langgraph', 'langchain_core', 'langchain_openai'))\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": f"{REPO / 'src'}", "PATH": "/usr/bin:/bin"},
    ).stdout
    assert "threadlog 0.1.0" in out and "usage: threadlog" in out
    assert out.strip().splitlines()[-1] == "HEAVY []"


def test_inspecting_a_database_thread_loads_no_tool_node_or_prebuilt_agent(
    sqlite_url: str,
) -> None:
    # Start-up of a cold `threadlog inspect` (issue 22): the reader needs LangGraph's
    # loader, not the tool node's module tree and `langgraph.prebuilt` behind it.
    three_turns(sqlite_url)
    probe = (
        "import sys\nfrom threadlog.cli import main\n"
        f"code = main(['inspect', '--db', {sqlite_url!r}, '--thread', 't-1', '--last', '3'])\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('langgraph.prebuilt', "
        "'threadlog.nodes.tools', 'threadlog.nodes.model')))\n"
        "print('CODE', code, 'HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": f"{REPO / 'src'}", "PATH": "/usr/bin:/bin"},
    ).stdout
    assert "· timeline" in out
    assert out.strip().splitlines()[-1] == "CODE 0 HEAVY []"


# -- one line, exit 1, for every bad source --------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def plain_http_server(root: Path) -> Iterator[str]:
    """A web server that is not LangGraph (it serves files; /info is a 404)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, directory=str(root), **k)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_file_that_is_not_a_database_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello, not sqlite\n" * 100)
    for command in ("threads", "inspect", "export"):
        extra = [] if command == "threads" else ["--thread", "t"]
        line = one_error_line(*cli(capsys, command, "--db", str(bad), *extra)[::2])
        assert "is not a SQLite database" in line
    assert bad.read_text() == "hello, not sqlite\n" * 100


def test_a_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error_line(*cli(capsys, "inspect", "--db", str(tmp_path), "--thread", "t")[::2])
    assert "is a directory" in line


def test_a_missing_file_is_one_line_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    line = one_error_line(*cli(capsys, "threads", "--db", str(missing))[::2])
    assert "no database at" in line and not missing.exists()


def test_another_apps_checkpoints_table_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, note TEXT)")
        conn.commit()
    line = one_error_line(*cli(capsys, "inspect", "--db", str(path), "--thread", "t")[::2])
    assert "not a LangGraph checkpoint database" in line
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["checkpoints"]  # nothing created


def test_a_closed_postgres_port_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql://app:s3cret@127.0.0.1:{free_port()}/app"
    line = one_error_line(*cli(capsys, "threads", "--db", url)[::2])
    assert "cannot connect to postgresql://app:***@127.0.0.1" in line and "s3cret" not in line


def test_a_bad_html_path_is_one_line_before_reading(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    three_turns(sqlite_url)
    target = tmp_path / "no" / "such" / "dir" / "t.html"
    line = one_error_line(
        *cli(capsys, "inspect", "--db", sqlite_url, "--thread", "t-1", "--html", str(target))[::2]
    )
    assert "does not exist" in line


def test_a_server_that_is_not_langgraph_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with plain_http_server(tmp_path) as url:
        line = one_error_line(*cli(capsys, "inspect", "--db", url, "--thread", "t")[::2])
    assert "is not a LangGraph server" in line


def test_an_unreachable_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    line = one_error_line(*cli(capsys, "threads", "--db", url)[::2])
    assert f"cannot reach {url}" in line


def test_demo_on_a_locked_database_is_one_line_and_keeps_the_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "demo.db")
    assert cli(capsys, "demo", "--db", db, "--thread", "d-1", "hello")[0] == 0
    before, _ = inspect.export.messages_at(db, "d-1")
    real_connect = sqlite3.connect

    def impatient(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs["timeout"] = 0.2  # the saver waits 30 s for a lock; the test need not
        return real_connect(*args, **kwargs)

    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process writing, for as long as it likes
    try:
        monkeypatch.setattr(sqlite3, "connect", impatient)
        line = one_error_line(
            *cli(capsys, "demo", "--db", db, "--thread", "d-1", "again")[::2], status=1
        )
    finally:
        monkeypatch.undo()
        holder.rollback()
        holder.close()
    assert "database is locked" in line
    after, _ = inspect.export.messages_at(db, "d-1")
    assert [m.id for m in after] == [m.id for m in before]


def test_inspect_json_carries_whole_messages(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    three_turns(sqlite_url)
    answer = inspect.export.messages_at(sqlite_url, "t-1")[0][-1].text
    assert len(answer) > 100

    code, out, _ = cli(capsys, "inspect", "--db", sqlite_url, "--thread", "t-1", "--json")

    appended = [m for row in json.loads(out)["timeline"] for m in row["appended"]]
    assert code == 0 and appended[-1]["content"] == answer
    request = next(m for m in appended if m["calls"])
    assert request["calls"][0] == {"id": "c-paris", "name": "get_weather",
                                   "args": {"city": "Paris"}}
