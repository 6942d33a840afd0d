"""New input on a thread whose head still has a task to run abandons that task; the
checkpointer answers the calls it leaves open "not completed", in any graph.

A plain `StateGraph` on threadlog's state whose model node does not repair open calls
(like LangChain's or LangGraph's prebuilt agents): an approval `interrupt()` in the tools
node, then a new user message instead of the resume. And the counter-case: a turn that
*finished* with open calls (client-side tools) keeps them open for the next input, which
may be their results. SQLite and Postgres (`backend`).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

import threadlog


def _reply(state: threadlog.MessagesState, strict: bool) -> dict[str, list[BaseMessage]]:
    """Asks for the weather after each user message, answers after a result; sends the
    log as it is (no repair), as LangChain's model node does."""
    messages = state["messages"]
    if strict:  # what a provider checks of the history it is sent
        threadlog.validate(messages, allow_pending_calls=False)
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    if isinstance(messages[-1], HumanMessage):
        call = {"name": "get_weather", "args": {"city": "Rome"}, "id": f"call-{turn}"}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"ai-{turn}")]}
    return {"messages": [AIMessage(f"answer {turn}", id=f"answer-{turn}")]}


def _graph(saver: Any, runs: list[str], *, tools: bool = True) -> Any:
    def run_tools(state: threadlog.MessagesState) -> dict[str, list[BaseMessage]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        (call,) = last.tool_calls
        interrupt({"approve": call["id"]})
        runs.append(call["id"] or "")
        return {"messages": [ToolMessage("sunny", tool_call_id=call["id"], id=f"r-{call['id']}")]}

    def route(state: threadlog.MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls and tools else END

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("model", lambda state: _reply(state, strict=tools))
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


def test_new_message_at_an_interrupted_tool_step_answers_its_call_not_completed(
    backend: str,
) -> None:
    cfg: Any = {"configurable": {"thread_id": "abandoned"}}
    runs: list[str] = []
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver, runs)
        assert graph.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)["__interrupt__"]
        out = graph.invoke({"messages": [HumanMessage("again", id="u2")]}, cfg)
    assert out["__interrupt__"]  # turn 2's own call pauses in turn
    ids = [m.id for m in out["messages"]]
    assert ids[:2] + ids[3:] == ["u1", "ai-1", "u2", "ai-2"]
    abandoned = out["messages"][2]
    assert isinstance(abandoned, ToolMessage) and abandoned.tool_call_id == "call-1"
    assert abandoned.status == "error" and "not completed" in str(abandoned.content)
    assert runs == []  # the abandoned call never ran


def test_a_finished_turns_open_calls_stay_open_for_the_next_input(backend: str) -> None:
    """Client-side tools: the turn ends on the model's calls; the next input is their
    result, or a new message — no "not completed" result is made up either way."""
    runs: list[str] = []
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver, runs, tools=False)
        cfg: Any = {"configurable": {"thread_id": "client-tools"}}
        graph.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        given = ToolMessage("sunny", tool_call_id="call-1", id="r1")
        out = graph.invoke({"messages": [given]}, cfg)
        assert [m.id for m in out["messages"]] == ["u1", "ai-1", "r1", "answer-1"]

        cfg = {"configurable": {"thread_id": "client-tools-2"}}
        graph.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        assert graph.get_state(cfg).next == ()
        out = graph.invoke({"messages": [HumanMessage("again", id="u2")]}, cfg)
    assert [m.id for m in out["messages"]] == ["u1", "ai-1", "u2", "ai-2"]  # call-1 open
    assert runs == []
