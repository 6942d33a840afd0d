"""docs/check-and-replay.md's worked examples stay true: their code runs, and each pasted
`threadlog check` / `threadlog replay` transcript is what the command prints, exit status
included (ids, which differ from run to run, blanked out)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from threadlog.cli import main

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "check-and-replay.md").read_text(
    encoding="utf-8"
)


def section(title: str) -> str:
    start = PAGE.index(title)
    end = PAGE.find("\n### ", start + len(title))
    return PAGE[start : end if end > 0 else None]


def blocks(text: str) -> list[tuple[str, str, str]]:
    """Each fenced block: (its language, its text, the page's text before it)."""
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M):
        found.append((m.group(1), m.group(2), text[: m.start()]))
    return found


def transcripts(text: str) -> list[str]:
    return [b for lang, b, _ in blocks(text) if not lang and b.startswith("$ threadlog")]


def normalize(text: str) -> str:
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", text)
    text = re.sub(r"call_[0-9a-f]{12}_", "call_ID_", text)
    return re.sub(r"offline-[0-9a-f]{24}", "offline-ID", text)


def replays(transcript: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Runs each `$ threadlog …` line; the lines up to the next `$` are its output, and
    `$ echo $?` the status of the one before."""
    status = None
    for chunk in re.split(r"^\$ ", transcript, flags=re.M)[1:]:
        command, _, expected = chunk.partition("\n")
        if command == "echo $?":
            assert str(status) == expected.strip()
            continue
        capsys.readouterr()
        status = main(shlex.split(command)[1:])
        out = capsys.readouterr().out
        if not command.startswith("threadlog demo"):  # the page leaves the demo's out
            assert normalize(out) == normalize(expected), command


def test_the_create_react_agent_example_finds_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = section("### Worked example: a plain `create_react_agent` database")
    (code,) = [b for lang, b, _ in blocks(text) if lang == "python"]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "check-and-replay.md", "exec"), {"__name__": "example"})
    repair = section("### `--repair`: fix by appending")
    (check,) = transcripts(text)
    (dry_run_then_repair,) = transcripts(repair)
    replays(check, capsys)
    replays(dry_run_then_repair, capsys)


def test_the_demo_replay_example_prints_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = section("### Worked example: the demo database")
    modules = [
        (re.findall(r"`(\w+)\.py`", before)[-1], b)
        for lang, b, before in blocks(text)
        if lang == "python"
    ]
    assert [name for name, _ in modules] == ["myagent", "terse"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, source in modules:
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
        monkeypatch.delitem(sys.modules, name, raising=False)
    shown = transcripts(text)
    assert len(shown) == 3
    for transcript in shown:
        replays(transcript, capsys)
