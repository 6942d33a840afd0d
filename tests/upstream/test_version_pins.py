"""The README's tested versions are the ones CI tests: its "oldest allowed" list is exactly
the lower bounds `tests/upstream/version_matrix.py` installs from pyproject.toml, and each
LangGraph / LangChain runtime dependency stops before its next major release."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.upstream.version_matrix import lower_bounds

ROOT = Path(__file__).resolve().parents[2]


def test_readme_lists_exactly_the_oldest_versions_ci_tests() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    listed = re.search(r"the oldest allowed \(([^)]*)\)", text)
    assert listed, "README.md: no 'the oldest allowed (...)' list"
    readme = {tuple(item.strip().rsplit(" ", 1)) for item in listed.group(1).split(",")}
    pins = {tuple(pin.split("==")) for pin in lower_bounds()}
    assert readme == pins


def test_langgraph_and_langchain_dependencies_have_both_bounds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["postgres"]
    ours = [d for d in deps if d.startswith(("langgraph", "langchain"))]
    assert len(ours) >= 7
    for dep in ours:
        assert re.search(r">=\s*[0-9][^,]*,\s*<\s*[0-9]", dep), f"{dep}: needs >=lower,<next-major"


def test_the_version_matrix_runs_test_files_that_exist() -> None:
    from tests.upstream.version_matrix import DEFAULT_TESTS

    missing = [path for path in DEFAULT_TESTS if not (ROOT / path).is_file()]
    assert not missing, f"tests/upstream/version_matrix.py DEFAULT_TESTS: no such file {missing}"
