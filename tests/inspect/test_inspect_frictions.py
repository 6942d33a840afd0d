"""What the inspector says about apps written as their users write them: an edit that
changed a message's text reads as that text, not as calls; the state view lists only the
keys the app's state has."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

import threadlog
from threadlog.cli import main


def chatbot(state: Any) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"you said {last.content}", id=f"a-{last.id}")]}


def test_an_edit_of_content_reads_as_the_text_it_changed(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    g = StateGraph(threadlog.MessagesState)
    g.add_node("chatbot", chatbot)
    g.add_edge(START, "chatbot")
    g.add_edge("chatbot", END)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = g.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("helo", id="u1")]}, cfg)
        graph.update_state(cfg, {"messages": [HumanMessage("hello", id="u1")]})
    assert main(["inspect", "--db", sqlite_url, "--thread", "t"]) == 0
    text = capsys.readouterr().out
    assert "no calls supersede no calls" not in text
    assert "content 'helo' → 'hello'" in text


class Notes(MessagesState):
    user_name: str


def test_the_state_view_lists_only_the_keys_the_app_has(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    g = StateGraph(Notes)
    g.add_node("chatbot", chatbot)
    g.add_edge(START, "chatbot")
    g.add_edge("chatbot", END)
    cfg: Any = {"configurable": {"thread_id": "n"}}
    with threadlog.checkpointer(sqlite_url) as saver:
        g.compile(checkpointer=saver).invoke(
            {"messages": [HumanMessage("hi")], "user_name": "Ada"}, cfg
        )
    assert main(["inspect", "--db", sqlite_url, "--thread", "n", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)["state"]
    assert sorted(r["key"] for r in state) == ["messages", "user_name"]


def test_swarm_handoffs_read_as_handoffs_between_agents_named_by_their_nodes(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import recorded_apps as apps

    with threadlog.checkpointer(sqlite_url) as saver:
        graph = apps.swarm(saver)
        apps.one_turn(graph, "s", "hello")
        apps.one_turn(graph, "s", "again")
    assert main(["inspect", "--db", sqlite_url, "--thread", "s", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["handoffs"]
    assert [(r["from"], r["to"], r["call_id"]) for r in rows] == [
        ("flight_assistant", "hotel_assistant", "flight_assistant-1"),
        ("hotel_assistant", "flight_assistant", "hotel_assistant-2"),
    ]
    assert main(["inspect", "--db", sqlite_url, "--thread", "s"]) == 0
    text = capsys.readouterr().out
    assert "2 handoff(s): flight_assistant → hotel_assistant → flight_assistant" in text


def test_supervisor_handoffs_and_handoffs_back_read_as_handoffs(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import recorded_apps as apps

    with threadlog.checkpointer(sqlite_url) as saver:
        apps.one_turn(apps.supervisor(saver), "v", "hello")
    assert main(["inspect", "--db", sqlite_url, "--thread", "v", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["handoffs"]
    assert [(r["from"], r["to"], r["back"]) for r in rows] == [
        ("supervisor", "research_expert", False),
        ("research_expert", "supervisor", True),
        ("supervisor", "math_expert", False),
        ("math_expert", "supervisor", True),
    ]


def test_err_counts_a_failed_tool_not_a_result_the_app_marked_error_on_purpose(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    @tool
    def flaky(city: str) -> str:
        """Look the weather up."""
        raise RuntimeError("service down")

    def agent(state: MessagesState) -> dict[str, Any]:
        call = {"name": "flaky", "args": {"city": "Paris"}, "id": "c1"}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    def reflect(state: MessagesState) -> dict[str, Any]:
        # A validator, as reflection apps write it: the verdict is an error result.
        call = {"name": "check_draft", "args": {}, "id": "c2"}
        return {"messages": [
            AIMessage("", tool_calls=[call]),
            ToolMessage("draft too long; revise", tool_call_id="c2", status="error"),
        ]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([flaky], handle_tool_errors=True))
    g.add_node("reflect", reflect)
    g.add_edge(START, "agent")
    g.add_edge("agent", "tools")
    g.add_edge("tools", "reflect")
    g.add_edge("reflect", END)
    with threadlog.checkpointer(sqlite_url) as saver:
        g.compile(checkpointer=saver).invoke(
            {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "e"}}
        )
    assert main(["threads", "--db", sqlite_url, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert len(row["errors"]) == 1 and "flaky [c1]" in row["errors"][0]
    assert row["reported_errors"] == ["tool [c2]: draft too long; revise"]


def test_the_last_user_message_is_the_users_not_a_nudge_a_node_wrote(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("thinking"), HumanMessage("Please continue.")]}

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("done")]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("answer", answer)
    g.add_edge(START, "agent")
    g.add_edge("agent", "answer")
    g.add_edge("answer", END)
    cfg: Any = {"configurable": {"thread_id": "m"}}
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = g.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("remember my cat")]}, cfg)
        graph.invoke({"messages": [("user", "what is my cat's name?")]}, cfg)
    assert main(["threads", "--db", sqlite_url, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["last_user"] == "what is my cat's name?"
