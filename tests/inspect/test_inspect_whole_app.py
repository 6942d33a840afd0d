"""The inspector sees the whole app (issue 22 item 6): apps written the way LangGraph
tutorials write them — their own nodes, their own state keys — read back whole.

Each test builds the app's graph with its own node code on a real database (SQLite and
Postgres where storage is involved) and reads it back through `threadlog.inspect` /
the `threadlog` CLI, as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

import threadlog
from tests.inspect.test_inspect_cli import raw_saver
from threadlog import Messages

LONG_CALL = "call_<b>x</b>_" + "9" * 40 + "_end"


class CallState(TypedDict):
    messages: Messages


def asks_one_tool(state: CallState) -> dict[str, Any]:
    # The app's own model node: one call with a long id a provider might send.
    call = {"name": "lookup", "args": {"q": "<i>"}, "id": LONG_CALL, "type": "tool_call"}
    return {"messages": [AIMessage("", id="ai-1", tool_calls=[call])]}


def answers_it(state: CallState) -> dict[str, Any]:
    return {"messages": [ToolMessage("found", tool_call_id=LONG_CALL, id="tool-1")]}


def write_call_thread(url: str) -> None:
    with raw_saver(url) as saver:
        b: StateGraph[Any, Any, Any, Any] = StateGraph(CallState)
        b.add_node("model", asks_one_tool)
        b.add_node("tools", answers_it)
        b.add_edge(START, "model")
        b.add_edge("model", "tools")
        b.compile(checkpointer=saver).invoke(
            {"messages": [("user", "look it up")]}, {"configurable": {"thread_id": "c-1"}}
        )


# -- import threadlog; threadlog.inspect ------------------------------------------------


def test_threadlog_inspect_is_an_attribute_of_a_plain_import() -> None:
    probe = (
        "import sys\nimport threadlog\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] == 'langgraph']\n"
        "print('BEFORE', len(heavy))\n"
        "print('THREAD', threadlog.inspect.thread.__name__)\n"
        "print('DIR', 'inspect' in dir(threadlog))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "BEFORE 0" in out  # `import threadlog` alone still loads no LangGraph
    assert "THREAD thread" in out and "DIR True" in out
    assert threadlog.inspect.thread is threadlog.inspect.thread  # bound once


# -- full call ids in every HTML view ---------------------------------------------------


def test_html_views_show_whole_call_ids_escaped_while_text_shortens_them(
    sqlite_url: str,
) -> None:
    write_call_thread(sqlite_url)
    t = threadlog.inspect.thread(sqlite_url, "c-1")
    pairs = t.pairs()
    whole = LONG_CALL.replace("<", "&lt;").replace(">", "&gt;")

    html = pairs._repr_html_()
    assert f"<td>{whole}</td>" in html  # the cell holds the id, whole, copyable
    assert "<b>" not in html and "<i>" not in html
    text = str(pairs)
    assert LONG_CALL not in text and "call_<b…99_end" in text  # text cuts it to fit
    assert all(len(line) <= 100 for line in text.splitlines())
    page = t.html()
    assert f"[{whole}]" in page  # the page's call and its result, whole
    assert page.count(f"[{whole}]") >= 2 and "<b>x</b>" not in page


# -- README papercuts ---------------------------------------------------------------------


def test_readme_names_acheckpointer_and_takes_the_server_url_langgraph_dev_printed() -> None:
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    assert "acheckpointer(" in readme
    served = readme.split("## Serve the demo with `langgraph dev`", 1)[1].split("\n## ", 1)[0]
    snippets = re.findall(r"```python\n(.*?)```", served, re.S)
    assert snippets and all(":2024" not in s for s in snippets)
    assert "port" in served and "taken" in served
