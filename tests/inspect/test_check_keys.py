"""`threadlog check` on every threadlog `Messages` key: an app written the
open_deep_research way (its own nodes writing `supervisor_messages` and
`researcher_messages`, each annotated with `threadlog.Messages`) whose graph ended
between a call and its result under a non-default key (nothing pending answers it) —
found with the right kind and key, the source unchanged; repaired by appending under
that key (the other keys read as before); re-checked clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

import threadlog
from tests.helpers.poisoned import snapshot
from threadlog import Messages
from threadlog.cli import main
from threadlog.inspect import check
from threadlog.log.pairing import not_completed


class ResearchState(TypedDict):
    messages: Messages
    supervisor_messages: Messages
    researcher_messages: Messages
    research_brief: str


def _call(aid: str, cid: str, name: str) -> AIMessage:
    return AIMessage("", id=aid, tool_calls=[{"name": name, "args": {"topic": "t"}, "id": cid}])


def write_research_brief(state: ResearchState) -> dict[str, Any]:
    topic = state["messages"][-1].text
    return {
        "research_brief": f"brief: {topic}",
        "supervisor_messages": [HumanMessage(f"plan: {topic}", id="sup-1")],
    }


def supervisor(state: ResearchState) -> dict[str, Any]:
    return {"supervisor_messages": [_call("sup-2", "sup-call", "ConductResearch")]}


def supervisor_tools(state: ResearchState) -> dict[str, Any]:
    # The researcher's own conversation, then the supervisor's call answered.
    return {
        "researcher_messages": [
            HumanMessage("research it", id="res-1"),
            _call("res-2", "res-call", "web_search"),
        ],
    }


def researcher_tools(state: ResearchState) -> dict[str, Any]:
    return {
        "researcher_messages": [
            ToolMessage("3 sources", tool_call_id="res-call", id="res-3"),
            AIMessage("found 3 sources", id="res-4"),
        ],
        "supervisor_messages": [
            ToolMessage("found 3 sources", tool_call_id="sup-call", id="sup-3"),
        ],
    }


def final_report(state: ResearchState) -> dict[str, Any]:
    return {"messages": [AIMessage("the report", id="ai-report")]}


def research_app(saver: Any) -> Any:
    b: StateGraph[Any, Any, Any, Any] = StateGraph(ResearchState)
    for node in (write_research_brief, supervisor, supervisor_tools, researcher_tools):
        b.add_node(node.__name__, node)
    b.add_node("final_report", final_report)
    b.add_edge(START, "write_research_brief")
    b.add_edge("write_research_brief", "supervisor")
    # An app bug that ends the run with the call open: no step is pending to answer it.
    b.add_conditional_edges("supervisor", _stop_if("stop supervisor", "supervisor_tools"))
    b.add_conditional_edges("supervisor_tools", _stop_if("stop researcher", "researcher_tools"))
    b.add_edge("researcher_tools", "final_report")
    return b.compile(checkpointer=saver)


def _stop_if(topic: str, then: str) -> Any:
    def route(state: ResearchState) -> str:
        return END if state["research_brief"].endswith(topic) else then

    return route


TOPICS = {
    "deep-clean": "quantum batteries",
    "deep-supervisor-open": "stop supervisor",
    "deep-researcher-open": "stop researcher",
}


def write_research_threads(url: str) -> None:
    with threadlog.checkpointer(url) as saver:
        app = research_app(saver)
        for tid, topic in TOPICS.items():
            app.invoke(
                {"messages": [HumanMessage(topic, id=f"{tid}-q")]},
                {"configurable": {"thread_id": tid}},
            )


def _values(url: str, tid: str) -> dict[str, list[tuple[str, str]]]:
    with threadlog.checkpointer(url) as saver:
        values = research_app(saver).get_state({"configurable": {"thread_id": tid}}).values
    return {
        k: [(type(m).__name__, m.id) for m in values.get(k) or []]
        for k in ("messages", "supervisor_messages", "researcher_messages")
    }


def test_check_finds_an_open_call_under_each_threadlog_key_and_names_the_key(
    backend: str,
) -> None:
    write_research_threads(backend)
    before = snapshot(backend)
    report = check(backend)
    found = {
        (p.thread_id, p.kind, p.channel, p.format, p.position, p.message_id, p.call_id)
        for p in report.problems
    }
    assert found == {
        (
            "deep-supervisor-open",
            "open_call",
            "supervisor_messages",
            "threadlog",
            1,
            "sup-2",
            "sup-call",
        ),
        # The researcher stopped inside the supervisor's call: both keys hold an open call.
        (
            "deep-researcher-open",
            "open_call",
            "supervisor_messages",
            "threadlog",
            1,
            "sup-2",
            "sup-call",
        ),
        (
            "deep-researcher-open",
            "open_call",
            "researcher_messages",
            "threadlog",
            1,
            "res-2",
            "res-call",
        ),
    }
    assert report.tally.threads == 3 and report.tally.clean == 1 and report.status == 1
    text = str(report)
    assert "supervisor_messages[1] id sup-2" in text and "researcher_messages[1] id res-2" in text
    assert snapshot(backend) == before  # a check only reads


def test_repair_appends_under_the_key_of_the_open_call_and_the_recheck_is_clean(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_research_threads(backend)
    kept = {tid: _values(backend, tid) for tid in TOPICS}
    assert main(["check", "--db", backend, "--repair"]) == 0  # every open call answered
    out = capsys.readouterr().out
    assert "thread deep-researcher-open: appended 1 result(s) to researcher_messages" in out
    assert "thread deep-researcher-open: appended 1 result(s) to supervisor_messages" in out
    assert "repaired 2 thread(s); 0 refused" in out
    assert check(backend).problems == []
    assert check(backend).tally.clean == 3

    sup = _values(backend, "deep-supervisor-open")
    want = not_completed(_call("sup-2", "sup-call", "ConductResearch").tool_calls[0])
    assert sup["supervisor_messages"] == [
        *kept["deep-supervisor-open"]["supervisor_messages"],
        ("ToolMessage", want.id),
    ]
    res = _values(backend, "deep-researcher-open")
    assert res["researcher_messages"] == [
        *kept["deep-researcher-open"]["researcher_messages"],
        ("ToolMessage", not_completed(_call("res-2", "res-call", "web_search").tool_calls[0]).id),
    ]
    assert res["supervisor_messages"] == sup["supervisor_messages"]
    # Only the open calls' keys changed; every other key reads as it did.
    for tid, keys in (
        ("deep-supervisor-open", {"supervisor_messages"}),
        ("deep-researcher-open", {"supervisor_messages", "researcher_messages"}),
    ):
        after = _values(backend, tid)
        assert {k: v for k, v in after.items() if k not in keys} == {
            k: v for k, v in kept[tid].items() if k not in keys
        }
    assert _values(backend, "deep-clean") == kept["deep-clean"]
    with threadlog.checkpointer(backend) as saver:
        # One new checkpoint per key, each recording the key it appended to.
        newest = list(saver.list({"configurable": {"thread_id": "deep-researcher-open"}}))[:2]
        events = [t.metadata["threadlog_repair"] for t in newest]  # type: ignore[typeddict-item]
    assert [(e["channel"], e["calls"]) for e in events] == [
        ("supervisor_messages", ["sup-call"]),
        ("researcher_messages", ["res-call"]),
    ]


def test_repair_json_lines_and_the_dry_run_plan_name_each_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'deep.db'}"
    write_research_threads(url)
    assert main(["check", "--db", url, "--repair", "--dry-run", "--json"]) == 1
    planned = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert planned.pop() == {"summary": {"results": 3, "threads": 2, "written": False}}
    assert sorted((p["thread_id"], p["channel"], p["format"]) for p in planned) == [
        ("deep-researcher-open", "researcher_messages", "threadlog"),
        ("deep-researcher-open", "supervisor_messages", "threadlog"),
        ("deep-supervisor-open", "supervisor_messages", "threadlog"),
    ]
    assert check(url).tally.with_problems == 2  # the dry run wrote nothing
    assert main(["check", "--db", url, "--repair", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    done = [json.loads(line) for line in lines[:-1]]
    assert sorted((d["thread_id"], d["channel"], len(d["written"])) for d in done) == [
        ("deep-researcher-open", "researcher_messages", 1),
        ("deep-researcher-open", "supervisor_messages", 1),
        ("deep-supervisor-open", "supervisor_messages", 1),
    ]
    assert all(d["refused"] is None for d in done)
    assert json.loads(lines[-1]) == {  # JSON only: the summary is a JSON line too
        "summary": {"repaired": 2, "refused": 0, "unanswerable_calls": 0}
    }
