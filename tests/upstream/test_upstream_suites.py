"""LangGraph's own tests, run with threadlog's parts, fail exactly where docs/compatibility.md
says they do: a new failure or a new pass fails here (see tests/upstream/fetch_suites.py).

The tests come from the sdists of the installed `langgraph` and `langgraph-prebuilt`
(downloaded with pip once, cached in ~/.cache/threadlog-upstream); only their imports of
`ToolNode`, `tools_condition`, `MessagesState` and `add_messages` are swapped."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.upstream import fetch_suites as fs

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, str]]:
    ours = fs.run_all("threadlog")
    if os.environ.get("THREADLOG_UPSTREAM_BASELINE"):
        # The version matrix: at other versions some upstream tests fail with LangGraph's
        # own parts too (tests of one release run against another); they say nothing
        # about threadlog, so they are left out of the comparison.
        theirs = fs.run_all("langgraph")
        for suite, outcomes in ours.items():
            for t, o in theirs.get(suite, {}).items():
                if o == "failed":
                    outcomes.pop(t, None)
    return ours


@pytest.mark.parametrize("suite", fs.SUITES)
def test_langgraph_suite_fails_only_where_documented(
    suite: str, results: dict[str, dict[str, str]]
) -> None:
    outcomes = results[suite]
    passed, _, _ = fs.counts(outcomes)
    assert passed > 0, f"{suite}: no upstream test passed; the suite did not really run"
    new_failures, new_passes = fs.compare(outcomes, fs.expected_failures(fs.load_manifest(), suite))
    assert not new_failures, (
        f"{suite}: LangGraph tests that now fail with threadlog's parts (fix, or document "
        f"the difference in docs/compatibility.md and tests/upstream/expected.toml): "
        f"{new_failures}"
    )
    assert not new_passes, (
        f"{suite}: tests listed as expected failures now pass; remove them from "
        f"tests/upstream/expected.toml (and docs/compatibility.md): {new_passes}"
    )


def test_every_expected_failure_names_a_documented_difference() -> None:
    documented = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', DOC.read_text()))
    manifest = fs.load_manifest()
    used = {diff for by_diff in manifest.values() for diff in by_diff}
    assert "unclassified" not in used
    assert used <= documented, f"undocumented differences: {sorted(used - documented)}"


def test_each_documented_difference_states_how_many_expected_failures_it_files() -> None:
    manifest = fs.load_manifest()
    sections = re.split(r'<a id="([a-z0-9-]+)"></a>', DOC.read_text())
    stated = {}
    for diff, text in zip(sections[1::2], sections[2::2], strict=True):
        count = re.search(r"\((\d+) (?:upstream )?tests?\b", text.split("\n## ")[0])
        stated[diff] = int(count.group(1)) if count else 0
    filed = {
        diff: sum(len(by_diff.get(diff, [])) for by_diff in manifest.values()) for diff in stated
    }
    assert stated == filed


def test_swapping_replaces_only_the_langgraph_parts() -> None:
    source = (
        "from langgraph.graph import START, MessagesState, StateGraph\n"
        "from langgraph.prebuilt import ToolNode, InjectedState\n"
        "def f():\n"
        "    from langgraph.graph.message import add_messages as am\n"
        "    class MessagesState: ...\n"
    )
    swapped = fs.swap_imports(source)
    assert "from langgraph.graph import START, StateGraph\n" in swapped
    assert "from threadlog import MessagesState as MessagesState\n" in swapped
    assert "from langgraph.prebuilt import InjectedState\n" in swapped
    assert "from threadlog import ToolNode as ToolNode\n" in swapped
    assert "    from threadlog import append_messages as am\n" in swapped
    assert "    class MessagesState: ..." in swapped  # a local class is left alone
    compile(swapped, "<swapped>", "exec")


def test_graph_tests_are_chosen_through_helpers_that_use_the_swapped_names() -> None:
    source = (
        "from langgraph.graph import MessagesState\n"
        "class State(MessagesState): ...\n"
        "def build(): return State\n"
        "def test_direct(): MessagesState\n"
        "def test_via_helpers(): build()\n"
        "def test_unrelated(): pass\n"
        "class TestGroup:\n"
        "    def test_method(self): State\n"
    )
    assert fs.tests_using_swapped_names(source) == [
        "test_direct",
        "test_via_helpers",
        "TestGroup::test_method",
    ]
