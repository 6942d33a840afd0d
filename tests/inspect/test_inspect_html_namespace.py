"""The HTML page of a subgraph namespace: its own turns and call → result links only.

The weather agent runs as a subgraph. Turn 1 interrupts in Shanghai's branch and is
resumed, so its namespace finishes with both results and an answer; turn 2 stops at the
same interrupt in a new namespace, whose input is the whole log of turn 1 plus the new
question. `threadlog.inspect.thread(url, "t", namespace=NS).html()` (and the fragment
Jupyter shows, and `threadlog inspect --namespace NS --html FILE`) must show that
namespace's steps, link each of its calls to its result and back, and render nothing
the enclosing graph passed in: the input is one line, "input from the enclosing graph:
N message(s)".

SQLite and Postgres (the `backend` fixture).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

import threadlog
import threadlog.inspect
from tests.helpers.durability import user
from tests.helpers.recovery import CONFIG, TWO_CITIES, ask_about_shanghai, parent
from threadlog.cli import main

AGAIN = "And Beijing and Shanghai tomorrow?"


class Anchors(HTMLParser):
    """Element ids, link targets and text of a page."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "a" and a.get("href"):
            self.hrefs.append(str(a["href"]))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def with_prefix(self, prefix: str) -> set[str]:
        return {i[len(prefix):] for i in self.ids if i.startswith(prefix)}


def two_turns(url: str, tmp_path: Path) -> tuple[Any, Any]:
    """Returns the state of the finished turn-1 namespace and the stopped turn-2 one."""
    with threadlog.checkpointer(url) as saver:
        graph = parent(saver, tmp_path / "effects.jsonl", ask_about_shanghai)
        graph.invoke({"messages": [user(TWO_CITIES, "u1")]}, CONFIG)
        graph.invoke(Command(resume="yes"), CONFIG)
        graph.invoke({"messages": [user(AGAIN, "u2")]}, CONFIG)
        (task,) = graph.get_state(CONFIG, subgraphs=True).tasks
        stopped = task.state
        finished_ns = next(
            s["namespace"]
            for s in threadlog.inspect.thread(url, "t").subgraphs().rows()
            if s["status"] == "finished"
        )
        finished = graph.get_state(
            {"configurable": {"thread_id": "t", "checkpoint_ns": finished_ns}}
        )
    return finished, stopped


def test_a_namespace_page_shows_its_own_turns_and_links_and_nothing_from_the_parent(
    backend: str, tmp_path: Path
) -> None:
    finished, stopped = two_turns(backend, tmp_path)
    turn1 = list(finished.values["messages"])  # u1, the call, two results, the answer
    ns1 = finished.config["configurable"]["checkpoint_ns"]
    ns2 = stopped.config["configurable"]["checkpoint_ns"]

    page = threadlog.inspect.thread(backend, "t", namespace=ns1).html()
    seen = Anchors(page)
    assert f"thread t, namespace {ns1}" in seen.text
    assert seen.with_prefix("msg-") == {m.id for m in turn1[1:]}  # not u1, the input
    assert "input from the enclosing graph: 1 message(s)" in seen.text
    request = turn1[1]
    assert isinstance(request, AIMessage) and len(request.tool_calls) == 2
    calls = {c["id"] for c in request.tool_calls}
    results = {m.tool_call_id for m in turn1 if isinstance(m, ToolMessage)}
    assert seen.with_prefix("call-") == calls and seen.with_prefix("result-") == calls == results
    for cid in calls:  # each call links to its result and back
        assert {f"#result-{cid}", f"#call-{cid}"} <= set(seen.hrefs)
    assert all(h[1:] in seen.ids for h in seen.hrefs if h.startswith("#"))

    sub = threadlog.inspect.thread(backend, "t", namespace=ns2)
    seen = Anchors(sub.html())
    own = [m for m in stopped.values["messages"] if m.id not in {x.id for x in turn1}]
    asked = next(m for m in own if isinstance(m, AIMessage) and m.tool_calls)
    assert f"thread t, namespace {ns2}" in seen.text
    assert seen.with_prefix("msg-") == {asked.id}  # turn 1 and the question are the parent's
    assert "input from the enclosing graph: 6 message(s)" in seen.text
    assert seen.with_prefix("call-") == {c["id"] for c in asked.tool_calls}
    assert seen.with_prefix("result-") == set()  # stopped before its results were stored
    jupyter = Anchors(sub._repr_html_())  # the fragment Jupyter shows: the same page body
    assert (jupyter.with_prefix("msg-"), jupyter.with_prefix("call-")) == (
        {asked.id}, {c["id"] for c in asked.tool_calls})
    text = "".join(seen.text)
    for m in turn1:
        assert m.id not in "".join(seen.ids) and str(m.id) not in text
    assert TWO_CITIES not in text and AGAIN not in text and "Beijing: sunny" not in text
    pairs = sub.pairs()
    assert [r["call_id"] for r in pairs.rows()] == [c["id"] for c in asked.tool_calls]
    assert any("2 calls came with the input" in n for n in pairs.notes())

    root = Anchors(threadlog.inspect.thread(backend, "t").html())  # the control
    assert {"u1", "u2"} <= root.with_prefix("msg-")


def test_inspect_namespace_html_writes_the_namespace_page(
    sqlite_url: str, tmp_path: Path
) -> None:
    _, stopped = two_turns(sqlite_url, tmp_path)
    ns = stopped.config["configurable"]["checkpoint_ns"]
    out = tmp_path / "page.html"
    args = ["inspect", "--db", sqlite_url, "--thread", "t", "--namespace", ns, "--html", str(out)]
    assert main(args) == 0
    page = out.read_text(encoding="utf-8")
    # The command's page is the API's, with the thread's recorded model calls.
    assert page == threadlog.inspect.thread(sqlite_url, "t", namespace=ns, calls=True).html()
    assert 'class="tl-model-call"' in page
    assert f"<title>thread t, namespace {ns}</title>" in page
