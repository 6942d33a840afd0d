"""`threadlog inspect --db URL --thread ID`: the terminal view, on SQLite and Postgres."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.inspect import write_thread
from threadlog.cli import main
from threadlog.inspect.table import display_width


@pytest.fixture
def db(backend: str) -> str:
    return write_thread(backend)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["inspect", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_timeline_pairs_and_forks_within_100_columns(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "--db", db, "--thread", "t-1")

    assert code == 0
    assert all(display_width(line) <= 100 for line in out.splitlines())
    assert "thread t-1 · timeline" in out and "thread t-1 · fork tree" in out
    assert "tool r-c-paris: Paris: fine" in out
    assert "c-rome" in out and "2 calls: 2 success" in out
    assert "2 branches · 1 fork point(s)" in out
    assert " kB stored" in out or " B stored" in out


def test_json_holds_the_rows_of_each_view(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--db", db, "--thread", "t-1", "--json")

    doc = json.loads(out)
    assert code == 0 and doc["thread"] == "t-1"
    assert [p["call_id"] for p in doc["pairs"]] == ["c-paris", "c-rome"]
    assert doc["timeline"][0]["source"] == "input"
    assert all(r["stored_bytes"] > 0 for r in doc["timeline"])
    assert sum(r["is_fork_point"] for r in doc["forks"]) == 1


def table_bytes(url: str) -> int:
    """Every byte of thread t-1 in the saver's tables, summed by the database itself."""
    if url.startswith("sqlite:///"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(url[len("sqlite:///") :])) as conn:
            a = conn.execute("SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints")
            b = conn.execute("SELECT sum(length(value)) FROM writes")
            return int(a.fetchone()[0]) + int(b.fetchone()[0])
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT sum(octet_length(checkpoint::text) + octet_length(metadata::text))"
            " FROM checkpoints) + (SELECT coalesce(sum(octet_length(blob)), 0) FROM"
            " checkpoint_blobs) + (SELECT sum(octet_length(blob)) FROM checkpoint_writes)"
        ).fetchone()
        assert row is not None
        return int(row[0])


def test_stored_bytes_add_up_to_the_tables(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "--db", db, "--thread", "t-1", "--json")

    assert sum(r["stored_bytes"] for r in json.loads(out)["timeline"]) == table_bytes(db)


def test_checkpoint_narrows_to_one_branch_and_shows_its_diff(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run_cli(capsys, "--db", db, "--thread", "t-1", "--json")
    timeline = json.loads(out)["timeline"]
    update = next(r for r in timeline if r["source"] == "update")

    code, out, _ = run_cli(
        capsys, "--db", db, "--thread", "t-1", "--checkpoint", update["checkpoint_id"][-8:]
    )

    timeline = out.split("· tool calls at")[0]
    assert code == 0
    assert "and Berlin?" in timeline
    assert "You're welcome." not in timeline  # the other branch's last answer
    assert "+ message    user" in out.split("· fork tree")[1]  # the diff from its parent


def test_last_reads_only_the_newest_checkpoints(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run_cli(capsys, "--db", db, "--thread", "t-1", "--json")
    everything = json.loads(out)["timeline"]

    code, out, _ = run_cli(capsys, "--db", db, "--thread", "t-1", "--last", "2", "--json")

    newest = [r["checkpoint_id"] for r in json.loads(out)["timeline"]]
    assert code == 0 and newest == [r["checkpoint_id"] for r in everything[-2:]]


def test_html_option_writes_the_thread_page(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "t-1.html"

    code, out, _ = run_cli(capsys, "--db", db, "--thread", "t-1", "--html", str(page))

    html = page.read_text(encoding="utf-8")
    assert code == 0 and out == f"wrote {page}\n"  # one line: the views are the page's
    assert html.startswith("<!DOCTYPE html>") and html.endswith("</html>")
    assert html.count('<details class="tl-turn"') == 3  # two turns, and the fork's one
    assert "branch #1 · forked from #0" in html  # the fork as its own branch
    assert 'id="result-c-paris"' in html and "Paris: fine" in html
    assert "tool calls at" in html  # the pairs table


def test_unknown_thread_or_database_exits_2_with_the_reason(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "--db", db, "--thread", "nope")
    assert code == 2 and "--thread: no thread 'nope'" in err

    code, _, err = run_cli(capsys, "--db", f"sqlite:///{tmp_path / 'missing.db'}", "--thread", "x")
    assert code == 2 and "no database at" in err
    assert not (tmp_path / "missing.db").exists()

    code, _, err = run_cli(capsys, "--db", db, "--thread", "t-1", "--checkpoint", "zzzz")
    assert code == 2 and "matches no checkpoint" in err


def test_runs_as_a_command(sqlite_url: str) -> None:
    db = write_thread(sqlite_url)
    proc = subprocess.run(
        [sys.executable, "-m", "threadlog.cli", "inspect", "--db", db, "--thread", "t-1"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "thread t-1 · tool calls at" in proc.stdout
