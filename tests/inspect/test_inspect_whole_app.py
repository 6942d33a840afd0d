"""The inspector sees the whole app (issue 22 item 6): apps written the way LangGraph
tutorials write them — their own nodes, their own state keys — read back whole.

Each test builds the app's graph with its own node code on a real database (SQLite and
Postgres where storage is involved) and reads it back through `threadlog.inspect` /
the `threadlog` CLI, as a user would.
"""

from __future__ import annotations

import operator
import subprocess
import sys
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

import threadlog
from tests.helpers.inspect import raw_saver
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


# -- every message key; per-step state values -------------------------------------------


class ResearchState(TypedDict):
    # open_deep_research's shape: the user's chat, the supervisor's and the researcher's
    # conversations, and plain values the graph routes on.
    messages: Messages
    supervisor_messages: Messages
    researcher_messages: Annotated[list[AnyMessage], add_messages]
    research_brief: str
    name: str
    notes: Annotated[list[str], operator.add]


def write_research_brief(state: ResearchState) -> dict[str, Any]:
    topic = state["messages"][-1].text
    return {
        "research_brief": f"brief: {topic}",
        "supervisor_messages": [HumanMessage(f"plan: {topic}", id="sup-1")],
    }


def supervisor(state: ResearchState) -> dict[str, Any]:
    return {
        "supervisor_messages": [AIMessage("delegate to the <script> researcher", id="sup-2")],
        "researcher_messages": [HumanMessage("research it", id="res-1")],
        "name": "researcher\x1b[2J",  # stored text is untrusted: shown escaped
    }


def route_by_name(state: ResearchState) -> str:
    return "researcher" if state["name"].startswith("researcher") else "final_report"


def researcher(state: ResearchState) -> dict[str, Any]:
    return {"researcher_messages": [AIMessage("found 3 sources", id="res-2")], "notes": ["n1"]}


def final_report(state: ResearchState) -> dict[str, Any]:
    return {"messages": [AIMessage("the report", id="ai-report")]}


def write_research_thread(url: str) -> None:
    with raw_saver(url) as saver:
        b: StateGraph[Any, Any, Any, Any] = StateGraph(ResearchState)
        b.add_node("write_research_brief", write_research_brief)
        b.add_node("supervisor", supervisor)
        b.add_node("researcher", researcher)
        b.add_node("final_report", final_report)
        b.add_edge(START, "write_research_brief")
        b.add_edge("write_research_brief", "supervisor")
        b.add_conditional_edges("supervisor", route_by_name, ["researcher", "final_report"])
        b.add_edge("researcher", "final_report")
        b.compile(checkpointer=saver).invoke(
            {"messages": [("user", "quantum batteries")]}, {"configurable": {"thread_id": "r-1"}}
        )


def test_every_message_key_is_listed_counted_and_selectable(backend: str) -> None:
    write_research_thread(backend)

    t = threadlog.inspect.thread(backend, "r-1")
    assert t.message_keys == ["messages", "researcher_messages", "supervisor_messages"]
    assert t.key == "messages" and [m.id for m in t.head.messages][-1] == "ai-report"
    sup = threadlog.inspect.thread(backend, "r-1", key="supervisor_messages")
    assert [m.id for m in sup.head.messages] == ["sup-1", "sup-2"]
    assert "key supervisor_messages" in str(sup.timeline())
    res = threadlog.inspect.thread(backend, "r-1", key="researcher_messages")  # add_messages
    assert [m.id for m in res.head.messages] == ["res-1", "res-2"]
    with pytest.raises(ValueError, match=r"'notes' is not a message key.*supervisor_messages"):
        threadlog.inspect.thread(backend, "r-1", key="notes")

    (row,) = threadlog.inspect.threads(backend).rows()
    assert row["message_keys"] == {"researcher_messages": 2, "supervisor_messages": 2}
    assert row["messages"] == 6 and row["turns"] == 1


def test_the_timeline_and_state_views_show_the_values_each_step_set(backend: str) -> None:
    write_research_thread(backend)
    t = threadlog.inspect.thread(backend, "r-1")

    by_writer = {tuple(r["writers"]): r for r in t.timeline().rows()}
    brief = by_writer[("write_research_brief",)]
    assert brief["state"] == [
        {"key": "research_brief", "before": "(unset)", "after": "'brief: quantum batteries'"}
    ]
    assert [m["id"] for m in brief["other_messages"]["supervisor_messages"]] == ["sup-1"]
    routed = by_writer[("supervisor",)]
    assert [s["key"] for s in routed["state"]] == ["name"]
    text = str(t.timeline())
    assert "• research_brief = 'brief: quantum batteries'" in text
    assert "• name = 'researcher\\x1b[2J'" in text and "\x1b" not in text
    assert "↳ supervisor_messages: assistant sup-2: delegate to the <script> researcher" in text

    state = t.state()
    rows = {r["key"]: r for r in state.rows()}
    assert rows["name"]["value"] == repr("researcher\x1b[2J")
    assert rows["notes"]["value"] == "['n1']" and rows["notes"]["kind"] == "value"
    assert rows["supervisor_messages"]["kind"] == "messages"
    assert rows["messages"]["changed"] is True and rows["name"]["changed"] is False
    assert "\x1b" not in str(state)
    html = t.html() + state._repr_html_() + t.timeline()._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "• research_brief = &#x27;brief: quantum batteries&#x27;" in t.html()

    diff = t.diff(t.records[1].checkpoint_id)
    keyed = [r for r in diff.rows() if r["key"] == "supervisor_messages"]
    assert [r["id"] for r in keyed] == ["sup-1", "sup-2"]
    assert {r["key"] for r in diff.rows() if r["kind"] == "value"} == {
        "name", "notes", "research_brief"
    }


def test_the_cli_reads_another_key_and_shows_the_state(sqlite_url: str, capsys: Any) -> None:
    from threadlog.cli import main

    write_research_thread(sqlite_url)
    db = sqlite_url[len("sqlite:///") :]

    assert main(["inspect", "--db", db, "--thread", "r-1", "--key", "supervisor_messages"]) == 0
    out = capsys.readouterr().out
    assert "thread r-1, key supervisor_messages · timeline" in out
    assert "state at" in out and "research_brief" in out
    assert all(len(line) <= 100 for line in out.splitlines())
    assert main(["inspect", "--db", db, "--thread", "r-1", "--key", "nope"]) == 2  # bad input
    assert "'nope' is not a message key" in capsys.readouterr().err
    assert main(["threads", "--db", db]) == 0
    assert "supervisor_messages" in capsys.readouterr().out


# -- pauses named; failed tasks by node -------------------------------------------------


class HitlState(TypedDict):
    messages: Messages


def call_model(state: HitlState) -> dict[str, Any]:
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage("sent", id="ai-done")]}
    call = {"name": "send_email", "args": {"to": "bob"}, "id": "call-mail", "type": "tool_call"}
    return {"messages": [AIMessage("", id="ai-ask", tool_calls=[call])]}


def run_tools(state: HitlState) -> dict[str, Any]:
    return {"messages": [ToolMessage("ok", tool_call_id="call-mail", id="tool-mail")]}


def human_review(state: HitlState) -> dict[str, Any]:
    from langgraph.types import interrupt

    interrupt({"question": "send this email?"})
    return {}


def should_continue(state: HitlState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"


def review_first(state: HitlState) -> str:
    return "human_review" if should_continue(state) == "tools" else "__end__"


def hitl_graph(saver: Any, *, review: bool) -> Any:
    # The LangGraph tutorial's agent: a pause before its tools, or a review node that
    # calls interrupt() before them.
    b: StateGraph[Any, Any, Any, Any] = StateGraph(HitlState)
    b.add_node("agent", call_model)
    b.add_node("tools", run_tools)
    b.add_edge(START, "agent")
    if review:
        b.add_node("human_review", human_review)
        b.add_conditional_edges("agent", review_first, ["human_review", "__end__"])
        b.add_edge("human_review", "tools")
    else:
        b.add_conditional_edges("agent", should_continue, ["tools", "__end__"])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=saver, interrupt_before=None if review else ["tools"])


def test_pauses_are_named_in_the_listing_timeline_and_page(backend: str) -> None:
    with raw_saver(backend) as saver:
        graph = hitl_graph(saver, review=False)
        graph.invoke({"messages": [("user", "mail bob")]}, {"configurable": {"thread_id": "p-1"}})
        reviewed = hitl_graph(saver, review=True)
        reviewed.invoke({"messages": [("user", "mail al")]}, {"configurable": {"thread_id": "p-2"}})
        from_graph = threadlog.inspect.thread(graph, "p-1")
        assert from_graph.head.paused == "paused before tools"  # its interrupt_before

    found = {s["thread_id"]: s for s in threadlog.inspect.threads(backend).rows()}
    assert found["p-1"]["paused"] == "paused before tools"
    assert found["p-2"]["paused"] == "interrupted in human_review"
    listing = str(threadlog.inspect.threads(backend))
    assert "⏸ paused before tools · mail bob" in listing
    assert "⏸ interrupted in human_review · mail al" in listing

    t = threadlog.inspect.thread(backend, "p-1")
    assert t.head.paused == "paused before tools" and t.head.next == ("tools",)
    assert t.timeline().rows()[-1]["paused"] == "paused before tools"
    assert "⏸ paused before tools" in str(t.timeline()) and "⏸ paused before tools" in t.html()
    assert all(r.paused is None for r in t.records[:-1])  # only where the thread waits
    t2 = threadlog.inspect.thread(backend, "p-2")
    assert t2.head.paused == "interrupted in human_review"
    assert "⏸ interrupted in human_review" in str(t2.timeline())


def plan(state: HitlState) -> dict[str, Any]:
    return {"messages": [AIMessage("fan out", id="ai-plan")]}


def fetch_prices(state: HitlState) -> dict[str, Any]:
    return {}


def fetch_rates(state: HitlState) -> dict[str, Any]:
    def parse(text: str) -> float:
        return float(text)

    parse("<b>n/a</b>\x1b[31m")
    return {}


def test_a_failed_task_read_from_a_database_is_named_by_its_node(backend: str) -> None:
    # Two different nodes run in one step and one fails: no heuristic can tell which
    # from the checkpoint alone; LangGraph's task id can.
    with raw_saver(backend) as saver:
        b: StateGraph[Any, Any, Any, Any] = StateGraph(HitlState)
        b.add_node("plan", plan)
        b.add_node("fetch_prices", fetch_prices)
        b.add_node("fetch_rates", fetch_rates)
        b.add_edge(START, "plan")
        b.add_edge("plan", "fetch_prices")
        b.add_edge("plan", "fetch_rates")
        with pytest.raises(ValueError, match="could not convert"):
            b.compile(checkpointer=saver).invoke(
                {"messages": [("user", "go")]}, {"configurable": {"thread_id": "f-1"}}
            )

    t = threadlog.inspect.thread(backend, "f-1")
    (error,) = t.head.errors
    assert error.task == "fetch_rates" and "could not convert string to float" in error.error
    text = str(t.timeline())
    assert "⚠ fetch_rates failed: ValueError" in text and "\x1b" not in text
    assert "&lt;b&gt;n/a&lt;/b&gt;" in t.html() and "<b>n/a" not in t.html()
    (row,) = threadlog.inspect.threads(backend).rows()
    assert row["errors"][0].startswith("fetch_rates: ValueError(")
    assert row["paused"] is None


# -- errors the log raised: refused writes ------------------------------------------------


def chat(state: HitlState) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(f"answer {n}", id=f"ai-{n}")]}


def status_line(state: HitlState) -> dict[str, Any]:
    # The app keeps one "status" message and rewrites it each turn under the same id:
    # the log refuses new content under an id it holds (ConflictingIdError), every turn.
    n = len(state["messages"])
    return {"messages": [AIMessage(f"<i>{n} messages</i>", id="status-line")]}


def test_writes_the_log_refused_are_counted_and_shown_on_every_failing_turn(
    backend: str,
) -> None:
    cfg: Any = {"configurable": {"thread_id": "e-1"}}
    with raw_saver(backend) as saver:
        b: StateGraph[Any, Any, Any, Any] = StateGraph(HitlState)
        b.add_node("chat", chat)
        b.add_node("status_line", status_line)
        b.add_edge(START, "chat")
        b.add_edge("chat", "status_line")
        graph = b.compile(checkpointer=saver)
        graph.invoke({"messages": [("user", "hi")]}, cfg)  # the status line is new: accepted
        for question in ("and now?", "still there?"):
            with pytest.raises(threadlog.ConflictingIdError):
                graph.invoke({"messages": [("user", question)]}, cfg)

    (row,) = threadlog.inspect.threads(backend).rows()
    assert len(row["errors"]) == 1 and row["errors"][0].startswith(
        "status_line: the log refused the write to messages: ConflictingIdError"
    )
    assert row["paused"] is None
    (shown,) = threadlog.inspect.threads(backend).display_rows()
    assert (shown["open"], shown["errors"]) == ("0", "1")  # the err column counts it

    t = threadlog.inspect.thread(backend, "e-1")
    refusals = [e for r in t.records for e in r.errors]
    assert [e.task for e in refusals] == ["status_line", "status_line"]  # both later turns
    assert all("ConflictingIdError" in e.error and "status-line" in e.error for e in refusals)
    text = str(t.timeline())
    assert text.count("⚠ status_line failed: the log refused the write to messages") == 2
    rows = [r for r in t.timeline().rows() if r["errors"]]
    assert len(rows) == 2 and all(r["paused"] is None for r in rows)
    assert t.html().count("the log refused the write to messages") == 2
    assert "<i>" not in t.html()


# -- the long-thread shortcuts read what a full scan reads ---------------------------------


def test_per_step_figures_from_the_parent_equal_a_full_scan_of_each_log(
    sqlite_url: str,
) -> None:
    from tests.helpers.inspect import ScriptedAgent, run_two_turns
    from threadlog.inspect.steps import appended, open_calls, usage

    with raw_saver(sqlite_url) as saver:
        run_two_turns(ScriptedAgent().build(saver))
        failing = ScriptedAgent(failing={"Rome"}).build(saver)
        with pytest.raises(RuntimeError):
            failing.invoke(
                {"messages": [("user", "Paris and Rome?")]}, {"configurable": {"thread_id": "f"}}
            )
    for tid in ("t-1", "f"):
        t = threadlog.inspect.thread(sqlite_url, tid)
        rows = t.timeline().rows()
        assert any(r["open_calls"] for r in rows)  # calls open mid-turn, then answered
        for rec, row in zip(t.records, rows, strict=True):
            parent = t.parent(rec)
            assert row["open_calls"] == open_calls(rec.messages)
            assert row["cum_total_tokens"] == usage(rec.messages)["total_tokens"]
            before = {m.id for m in parent.messages} if parent else set()
            assert appended(rec, parent) == [m for m in rec.messages if m.id not in before]


class ResearcherState(TypedDict):
    researcher_messages: Annotated[list[AnyMessage], add_messages]
    topic: str


class SupervisorState(TypedDict):
    messages: Messages
    topic: str


def research(state: ResearcherState) -> dict[str, Any]:
    return {"researcher_messages": [AIMessage(f"notes on {state['topic']}", id="res-notes")]}


def pick_topic(state: SupervisorState) -> dict[str, Any]:
    return {"topic": state["messages"][-1].text}


def test_a_subgraph_s_own_message_key_reads_from_its_namespace(backend: str) -> None:
    # open_deep_research's researcher: a compiled subgraph with its own message key.
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(ResearcherState)
    inner.add_node("research", research)
    inner.add_edge(START, "research")
    researcher = inner.compile()

    def run_researcher(state: SupervisorState) -> dict[str, Any]:
        researcher.invoke({"topic": state["topic"], "researcher_messages": []})
        return {"messages": [AIMessage("done", id="ai-done")]}

    with raw_saver(backend) as saver:
        outer: StateGraph[Any, Any, Any, Any] = StateGraph(SupervisorState)
        outer.add_node("pick_topic", pick_topic)
        outer.add_node("researcher", run_researcher)
        outer.add_edge(START, "pick_topic")
        outer.add_edge("pick_topic", "researcher")
        outer.compile(checkpointer=saver).invoke(
            {"messages": [("user", "batteries")]}, {"configurable": {"thread_id": "n-1"}}
        )

    root = threadlog.inspect.thread(backend, "n-1")
    (sub,) = root.subgraphs().rows()
    t = threadlog.inspect.thread(
        backend, "n-1", namespace=sub["namespace"], key="researcher_messages"
    )
    assert [m.id for m in t.head.messages] == ["res-notes"]
    assert {r["key"]: r["value"] for r in t.state().rows()}["topic"] == "'batteries'"
    assert any(s["key"] == "topic" for r in t.timeline().rows() for s in r["state"])
