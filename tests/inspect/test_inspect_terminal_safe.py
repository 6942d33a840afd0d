"""Stored text reaches no terminal raw: every text view escapes its control characters.

The thread (`tests/helpers/terminal.py`, SQLite through `threadlog.checkpointer`) holds
ESC sequences, C1 bytes, CR/BS and a right-to-left override in its thread id, message
ids and texts, tool name, call ids, arguments, a tool's error result, a failed task's
error and a subgraph's namespace. Each text view (`str(view)`, what `print` shows) and
each `repr` must hold none of them raw, show them as visible escapes, and keep every line
within 100 columns measured after escaping; `.rows()` keep the exact strings and the HTML
page stays HTML-escaped.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest

from tests.helpers.terminal import (
    AI_3,
    ANSWER,
    CALL,
    CITY,
    ERROR_KIND,
    ERROR_TEXT,
    SUBGRAPH,
    TASK_ERROR,
    THREAD,
    TOOL,
    USER_TEXT,
    raw_controls,
    visible,
    write_hostile_thread,
)
from threadlog import inspect
from threadlog.inspect.table import Table
from threadlog.terminal import display_width


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("hostile") / "threads.sqlite"
    write_hostile_thread(f"sqlite:///{path}")
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def thread(url: str) -> inspect.Thread:
    return inspect.thread(url, THREAD)


@pytest.fixture(scope="module")
def views(url: str, thread: inspect.Thread) -> dict[str, Table]:
    t, sub = thread, thread.subgraph_list[0]  # one subgraph run per turn
    return {
        "timeline": t.timeline(),
        "pairs": t.pairs(),
        "context": t.context(-1),
        "diff": t.diff(t.records[0].checkpoint_id),
        "forks": t.forks(),
        "subgraphs": t.subgraphs(),
        "namespace timeline": inspect.thread(url, THREAD, namespace=sub.namespace).timeline(),
        "threads": inspect.threads(url),
    }


# What each view shows of the stored text (each as its visible escape).
SHOWN = {
    "timeline": [THREAD, ERROR_TEXT, TASK_ERROR, ANSWER],
    "pairs": [THREAD, TOOL, "\x9b2J", ERROR_KIND],
    "context": [THREAD, AI_3, ANSWER, ERROR_TEXT],
    "diff": [ERROR_TEXT, ANSWER],
    "forks": [THREAD, AI_3],
    "subgraphs": [THREAD, SUBGRAPH],
    "namespace timeline": [THREAD, SUBGRAPH],
    "threads": [THREAD],
}


@pytest.mark.parametrize("name", list(SHOWN))
def test_a_text_view_shows_stored_control_characters_as_visible_escapes_within_100_columns(
    views: dict[str, Table], name: str
) -> None:
    text = str(views[name])

    assert raw_controls(text) == [], text  # no ESC, C1, bidi, CR, BS, tab: only line breaks
    for stored in SHOWN[name]:
        assert visible(stored) in text, (visible(stored), text)
    assert all(display_width(line) <= 100 for line in text.splitlines()), text


def test_the_escapes_read_as_the_sequences_they_replace(thread: inspect.Thread) -> None:
    text = str(thread.timeline()) + str(thread.pairs())

    assert r"\x1b[2J" in text and r"\x1b]0;pwned\x07" in text and r"\u202e" in text
    assert r"\x9b2J" in text and r"\x0d" in text  # C1 CSI; the bare CR of the error kind


def test_the_listing_shows_a_thread_id_whole_measured_after_escaping(url: str) -> None:
    # The id column is as wide as the widest id as printed: the escaped id is not cut.
    (line,) = [x for x in str(inspect.threads(url)).splitlines() if x.endswith("again")]
    assert visible(THREAD) in line and "…" not in line


def test_repr_of_the_thread_and_of_every_view_is_escaped(
    thread: inspect.Thread, views: dict[str, Table]
) -> None:
    # In a REPL or a notebook's text/plain output: repr(), not str().
    for shown in [repr(thread), *(repr(v) for v in views.values())]:
        assert raw_controls(shown) == [], shown
    assert visible(THREAD) in repr(thread.timeline())


def test_rows_keep_the_exact_stored_strings(url: str, thread: inspect.Thread) -> None:
    timeline = thread.timeline().rows()
    appended = [m for row in timeline for m in row["appended"]]
    (pair, *_) = thread.pairs().rows()
    (listed,) = inspect.threads(url).rows()

    assert USER_TEXT in [m["content"] for m in appended]
    # The saver stores a failed task's error as its repr (already escaped by Python).
    assert [e["error"] for row in timeline for e in row["errors"]] == [
        repr(RuntimeError(TASK_ERROR))
    ]
    assert (pair["call_id"], pair["tool"], pair["args"]) == (CALL, TOOL, {"city": CITY})
    assert (pair["result"], pair["error_kind"]) == (ERROR_TEXT, ERROR_KIND)
    assert listed["thread_id"] == THREAD


def test_the_html_page_stays_html_escaped_and_unchanged(thread: inspect.Thread) -> None:
    page = thread.html()

    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert escape(ERROR_TEXT) in page  # the text as stored, HTML-escaped
    assert visible(ERROR_TEXT) not in page  # the terminal's escapes are not the page's
