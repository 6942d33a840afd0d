"""`threadlog prune` (`threadlog.cli.prune`) on SQLite and Postgres databases: the same
rules as `saver.prune`; `--archive` writes a SQLite file that `threadlog threads`,
`inspect` and `export` open like a database; `--dry-run` changes nothing; bad input is one
line, exit status 2, nothing changed."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import threadlog
from tests.helpers.lifecycle import QUESTIONS, lifecycle_agent
from threadlog.cli import main
from threadlog.log.messages import digest

_agent = lifecycle_agent


def _fill(url: str, *threads: str) -> None:
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver)
        for tid in threads:
            for i, q in enumerate(QUESTIONS):
                msg = {"messages": [{"role": "user", "content": q, "id": f"{tid}-u{i}"}]}
                app.invoke(msg, {"configurable": {"thread_id": tid}})


def _read(url: str, tid: str) -> tuple[int, list[tuple[str, str]]]:
    with threadlog.checkpointer(url) as saver:
        cfg: Any = {"configurable": {"thread_id": tid}}
        n = len(list(saver.list(cfg)))
        if not n:
            return 0, []
        messages = _agent(saver).get_state(cfg).values["messages"]
        return n, [(m.id, digest(m)) for m in messages]


# Filling runs the agent for every question, the slowest part of these tests: a SQLite
# database is filled once per session and each test gets its own copy.
_FILLED: dict[str, Path] = {}


@pytest.fixture
def db(backend: str, tmp_path: Path) -> str:
    if not backend.startswith("sqlite:///"):
        _fill(backend, "a", "b")
        return backend
    master = _FILLED.get("sqlite")
    if master is None:
        master = tmp_path / "filled" / "master.sqlite"
        master.parent.mkdir()
        _fill(f"sqlite:///{master}", "a", "b")
        _FILLED["sqlite"] = master
    shutil.copyfile(master, backend[len("sqlite:///") :])
    return backend


def test_keep_latest_prunes_every_thread_and_the_archive_opens_like_a_database(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {t: _read(db, t) for t in ("a", "b")}
    archive = tmp_path / "archive.sqlite"
    assert main(["prune", "--db", db, "--keep-latest", "--archive", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "pruned 2 thread(s) (keep_latest)" in out
    assert "bytes of rows" in out and "archived 2 thread(s)" in out
    for tid in ("a", "b"):
        n, messages = _read(db, tid)
        assert n == 1 and messages == before[tid][1]
    # The archive: the threads whole, as they were, read by the inspector's commands.
    url = f"sqlite:///{archive}"
    for tid in ("a", "b"):
        assert _read(url, tid) == before[tid]
    assert main(["threads", "--db", str(archive)]) == 0
    listed = capsys.readouterr().out
    assert "2 thread(s)" in listed and "Paris?" in listed
    assert main(["inspect", "--db", str(archive), "--thread", "a"]) == 0
    assert "Shanghai and Chengdu?" in capsys.readouterr().out
    assert main(["export", "--db", str(archive), "--thread", "b"]) == 0
    assert "b-u2" in capsys.readouterr().out


def test_dry_run_prints_what_would_go_and_changes_nothing(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _read(db, "a")
    assert main(["prune", "--db", db, "--keep-latest", "--thread", "a", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would prune 1 thread(s) (keep_latest): ")
    assert f"{before[0] - 1} checkpoint(s)" in out and "bytes of rows" in out
    assert _read(db, "a") == before


def test_older_than_deletes_only_threads_idle_that_long(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prune", "--db", db, "--older-than", "30d"]) == 0
    assert "pruned 0 thread(s)" in capsys.readouterr().out
    assert _read(db, "a")[0] > 1
    time.sleep(1.1)
    assert main(["prune", "--db", db, "--older-than", "1s", "--thread", "a"]) == 0
    assert "pruned 1 thread(s) (delete)" in capsys.readouterr().out
    assert _read(db, "a") == (0, [])
    assert _read(db, "b")[0] > 1


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "choose one strategy"),
        (["--keep-latest", "--older-than", "30d"], "choose one strategy"),
        (["--older-than", "30 days"], "bad duration '30 days'"),
        (["--older-than", "0d"], "bad duration '0d'"),
        (["--keep-latest", "--thread", "nope"], "no thread 'nope'"),
        (["--keep-latest", "--archive", "EXISTING"], "exists; nothing was pruned"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    db: str, extra: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "there.sqlite"
    existing.write_bytes(b"")
    extra = [str(existing) if e == "EXISTING" else e for e in extra]
    before = {t: _read(db, t) for t in ("a", "b")}
    assert main(["prune", "--db", db, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and err.startswith("threadlog prune: error: ")
    assert {t: _read(db, t) for t in ("a", "b")} == before
    assert existing.read_bytes() == b""


def test_a_thread_held_by_a_run_is_refused_and_nothing_is_pruned(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {t: _read(db, t) for t in ("a", "b")}
    archive = tmp_path / "never.sqlite"
    with threadlog.checkpointer(db) as holder, holder.exclusive("b"):  # type: ignore[attr-defined]
        code = main(["prune", "--db", db, "--keep-latest", "--archive", str(archive)])
    assert code == 2
    err = capsys.readouterr().err
    assert (
        err
        == "threadlog prune: error: thread 'b' is held by a run; nothing was pruned (retry later)\n"
    )
    assert {t: _read(db, t) for t in ("a", "b")} == before
    assert not archive.exists()


def test_prune_says_what_the_file_weighs_after_vacuum_and_vacuum_shrinks_it(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import re

    _fill(sqlite_url, "a", "b", "c")
    path = sqlite_url.removeprefix("sqlite:///")

    def weight() -> int:
        return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))

    assert main(["prune", "--db", sqlite_url, "--keep-latest", "--dry-run"]) == 0
    dry = re.search(r"after the prune and VACUUM ([\d,]+) \(a rehearsal", capsys.readouterr().out)
    assert dry, "the dry run says what the file will weigh"

    assert main(["prune", "--db", sqlite_url, "--keep-latest", "--thread", "a"]) == 0
    out = capsys.readouterr().out
    said = r"the file weighs ([\d,]+) bytes; VACUUM would bring it to about ([\d,]+)"
    found = re.search(said, out)
    assert found, out
    on_disk, promised = (int(g.replace(",", "")) for g in found.groups())
    assert promised < on_disk == weight()  # prune alone does not shrink the file
    assert main(["prune", "--db", sqlite_url, "--keep-latest", "--vacuum"]) == 0
    out = capsys.readouterr().out
    assert f"vacuumed: the file weighs {weight():,} bytes" in out
    assert weight() < on_disk
    assert weight() == int(dry.group(1).replace(",", ""))  # the dry run's figure held
    assert [n for n, _ in (_read(sqlite_url, t) for t in "abc")] == [1, 1, 1]


def test_vacuum_on_postgres_runs_and_keeps_every_head(
    pg_backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(pg_backend, "a")
    before = _read(pg_backend, "a")[1]
    assert main(["prune", "--db", pg_backend, "--keep-latest", "--vacuum"]) == 0
    assert "vacuumed the checkpoint tables" in capsys.readouterr().out
    assert _read(pg_backend, "a") == (1, before)
