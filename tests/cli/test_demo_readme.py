"""The README's demo sections stay true: its snippets run, its pasted output is real."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.demo import REPO
from threadlog.cli import main

README = (REPO / "README.md").read_text(encoding="utf-8")
MARK = "<!-- tested: tests/cli/test_demo_readme.py -->"


def snippets() -> list[str]:
    return re.findall(re.escape(MARK) + r"\n```python\n(.*?)```", README, re.S)


def normalize(text: str) -> str:
    """Blank out what differs between runs (ids, timings) or with tuning (token counts)."""
    text = re.sub(r"call_[0-9a-f]+_(\d)", r"call_ID_\1", text)
    text = re.sub(r"demo-[0-9a-f]{8}", "demo-THREAD", text)
    text = re.sub(r"\d+ ms$", "N ms", text, flags=re.M)
    text = re.sub(r"^checkpoint .*$", "checkpoint ID", text, flags=re.M)
    text = re.sub(r"\d+ in · \d+ out · \d+ total", "N in · N out · N total", text)
    return text


def test_the_readme_has_tested_snippets() -> None:
    assert len(snippets()) == 2


@pytest.mark.parametrize("snippet", snippets(), ids=["create_agent", "by_hand"])
def test_readme_snippet_runs(
    snippet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "README.md", "exec"), {"__name__": "readme"})


def test_the_pasted_demo_output_is_what_the_demo_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block = re.search(r"```text\n\$ threadlog demo \"(.+?)\"\n(.*?)```", README, re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    assert main(["demo", block.group(1)]) == 0
    assert normalize(capsys.readouterr().out) == normalize(block.group(2))


def test_readme_fits_200_lines_and_the_zero_change_path_follows_the_quickstart() -> None:
    assert len(README.splitlines()) <= 200
    # The quickstart keeps its two commands; the zero-change path is the very next section.
    quickstart, after = README.split("## Quickstart", 1)[1].split("\n## ", 1)
    assert quickstart.count("```bash") == 2
    zero_change = after.split("\n## ", 1)[0]
    assert zero_change.startswith("Inspect an app's database, with no change to the app")
    assert "threadlog threads --db threadlog-demo.db" in zero_change
    assert "--calls" in zero_change
