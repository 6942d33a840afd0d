"""A call without an id: open everywhere, refused by every path that would answer it.

LangChain allows `tool_calls[i]["id"] is None`; a result pairs only by id and every provider
requires one, so no result can ever answer such a call (`threadlog.log.pairing`). The same log
goes through each public path; they must agree on what is open, and the ones that would
answer refuse before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph import MessagesState as PlainMessagesState

from tests.helpers.model import user
from threadlog import (
    MessageLog,
    ModelNode,
    OfflineChatModel,
    ToolNode,
    ToolPairingError,
    inspect,
    send_tool_calls,
    tools_condition,
)
from threadlog.inspect.steps import open_calls as inspector_open_calls
from threadlog.log.pairing import NOT_COMPLETED, OpenCalls, not_completed, open_in
from threadlog.nodes.model import open_calls as model_open_calls
from threadlog.nodes.model import repair_open_calls
from threadlog.nodes.tools.routing import open_calls as step_calls

ROME = {"name": "get_weather", "args": {"city": "Rome"}, "id": None, "type": "tool_call"}


def request() -> AIMessage:
    return AIMessage(
        "",
        id="a1",
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"},
            ROME,
        ],
    )


def log_messages() -> list[BaseMessage]:
    return [HumanMessage("Paris and Rome?", id="h1"), request()]


runs: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    runs.append(city)
    return "sunny"


def _stored_writes_replayed(messages: list[BaseMessage]) -> list[str]:
    log = MessageLog()
    log.extend_writes([messages], stored=True)  # a stored thread read back
    return [c["id"] or "" for _, c in log.open_calls()]


def _incremental(messages: list[BaseMessage]) -> list[str]:
    scans = OpenCalls()
    scans.of(messages[:1], ("t", ""))
    return list(scans.of(messages, ("t", "")))  # resumed where the first scan stopped


def _inspector_pairs(messages: list[BaseMessage]) -> list[str]:
    # A plain `add_messages` thread (LangGraph stores the id-less call as it is), read
    # through threadlog's channel by the inspector.
    saver = InMemorySaver()
    g = StateGraph(PlainMessagesState)
    g.add_node("noop", lambda state: {})
    g.add_edge(START, "noop")
    g.compile(checkpointer=saver).update_state(
        {"configurable": {"thread_id": "t"}}, {"messages": messages}
    )
    rows = inspect.thread(saver, "t").pairs().rows()
    return [r["call_id"] for r in rows if r["status"] == "open"]


OPEN_VIEWS: dict[str, Callable[[list[BaseMessage]], list[str]]] = {
    "log: stored history": lambda ms: [c["id"] or "" for _, c in MessageLog(ms).open_calls()],
    "model node: open_calls": lambda ms: list(model_open_calls(ms)),
    "model node: incremental OpenCalls": _incremental,
    "tool step: its calls": lambda ms: [c["id"] or "" for c in step_calls(ms)],
    "routing: send_tool_calls": lambda ms: [
        s.arg[0]["id"] or "" for s in send_tool_calls({"messages": ms})
    ],
    "inspector: open calls": inspector_open_calls,
    "inspector: pairs view": _inspector_pairs,
}


@pytest.mark.parametrize("view", OPEN_VIEWS, ids=list(OPEN_VIEWS))
def test_every_view_lists_a_call_without_an_id_as_open_under_the_empty_id(view: str) -> None:
    assert OPEN_VIEWS[view](log_messages()) == ["c1", ""]


def test_tools_condition_routes_a_call_without_an_id_to_the_tool_step() -> None:
    assert tools_condition({"messages": log_messages()}) == "tools"


def _repair(repair: Any) -> Callable[[list[BaseMessage]], Any]:
    return lambda ms: repair_open_calls([*ms, user("h2")], repair=repair)


def _model_node(messages: list[BaseMessage]) -> Any:
    return ModelNode(OfflineChatModel(), [get_weather]).invoke(
        {"messages": [*messages, user("h2", "never mind")]}
    )


def _tool_node(messages: list[BaseMessage]) -> Any:
    return ToolNode([get_weather]).invoke({"messages": messages})


def _tool_branch(messages: list[BaseMessage]) -> Any:
    (send,) = [s for s in send_tool_calls({"messages": messages}) if not s.arg[0]["id"]]
    return ToolNode([get_weather]).invoke(send.arg)


ANSWERERS: dict[str, Callable[[list[BaseMessage]], Any]] = {
    "repair_open_calls(error-result)": _repair("error-result"),
    "repair_open_calls(refuse)": _repair("refuse"),
    "ModelNode": _model_node,
    "ToolNode: state": _tool_node,
    "ToolNode: a Send branch": _tool_branch,
}


@pytest.mark.parametrize("path", ANSWERERS, ids=list(ANSWERERS))
def test_every_path_that_would_answer_a_call_without_an_id_refuses_it(path: str) -> None:
    runs.clear()
    with pytest.raises(ToolPairingError, match=r"\('get_weather', args \{'city': 'Rome'\}\) "
                       r"has no id, so no result can answer it") as err:
        ANSWERERS[path](log_messages())
    assert runs == []  # refused before any tool ran, the answerable sibling included
    if path != "ToolNode: a Send branch":  # a branch gets the call alone, not its request
        assert err.value.message_id == "a1"


def test_a_result_with_an_empty_id_answers_no_call_without_an_id() -> None:
    # A plain LangGraph state may hold `ToolMessage(tool_call_id="")`; it pairs with nothing.
    empty = ToolMessage("?", tool_call_id="", id="t-empty")
    assert [o.call["name"] for o in open_in([*log_messages(), empty])] == ["get_weather"] * 2
    assert list(model_open_calls([*log_messages(), empty])) == ["c1", ""]


def test_the_log_gives_a_new_call_without_an_id_a_derived_id_live_and_replayed() -> None:
    # Issue 22 item 5 (was: refused with InvalidMessageError). One rule for every writer
    # (`threadlog.log.call_ids`): the id comes from the message id and the call's index, so the
    # stored write replayed re-keys the same way, and the result pairs with the new id.
    live = MessageLog()
    live.extend(log_messages())
    replayed = _stored_writes_replayed(log_messages())
    ids = [c["id"] or "" for _, c in live.open_calls()]
    assert ids[0] == "c1" and ids[1].startswith("call_") and ids == replayed
    ai = live.messages[-1]
    assert ai.response_metadata["threadlog_call_ids_rekeyed"] == {ids[1]: None}
    live.extend([log_messages()[1]])  # the reply re-sent as the node returned it: a replay
    live.extend([ToolMessage("sunny", tool_call_id=ids[1], id="t-rome")])
    assert [c["id"] for _, c in live.open_calls()] == ["c1"]


def test_a_prebuilt_tool_node_answers_a_rekeyed_call_through_the_view() -> None:
    from langgraph.prebuilt import ToolNode as PrebuiltToolNode
    from langgraph.prebuilt import tools_condition as prebuilt_condition

    from threadlog import MessagesState

    replies = iter([request(), AIMessage("done", id="a2")])
    g = StateGraph(MessagesState)
    g.add_node("agent", lambda state: {"messages": [next(replies)]})
    g.add_node("tools", PrebuiltToolNode([get_weather]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", prebuilt_condition)
    g.add_edge("tools", "agent")
    out = g.compile(checkpointer=InMemorySaver()).invoke(
        {"messages": [HumanMessage("Paris and Rome?", id="h1")]},
        {"configurable": {"thread_id": "t"}},
    )["messages"]
    ai = out[1]
    assert [r.tool_call_id for r in out[2:4]] == [c["id"] for c in ai.tool_calls]
    assert ai.tool_calls[1]["id"].startswith("call_")
    assert out[-1].content == "done"


def test_a_reply_reusing_an_answered_call_id_is_rekeyed_for_any_node() -> None:
    # Issue 22 item 5: a model that says `call_0` every reply (was: ToolPairingError).
    log = MessageLog([HumanMessage("q", id="h1"), AIMessage("", id="a1", tool_calls=[
        {"name": "f", "args": {}, "id": "call_0"}]), ToolMessage("r", tool_call_id="call_0",
                                                                 id="t1")])
    log.extend([HumanMessage("q2", id="h2"),
                AIMessage("", id="a2", tool_calls=[{"name": "f", "args": {}, "id": "call_0"}])])
    new = log.messages[-1]
    assert isinstance(new, AIMessage) and new.tool_calls[0]["id"] != "call_0"
    assert new.response_metadata["threadlog_call_ids_rekeyed"] == {
        new.tool_calls[0]["id"]: "call_0"}
    assert [c["id"] for _, c in log.open_calls()] == [new.tool_calls[0]["id"]]


def test_the_not_completed_result_keeps_its_stored_id_and_text() -> None:
    # Threads written before this module store exactly this message: a repair made again
    # (another process, a replay) must be the same message, or it would conflict.
    msg = not_completed({"name": "get_weather", "args": {}, "id": "c-rome"})
    assert (msg.id, msg.tool_call_id, msg.name, msg.status) == (
        "tl-repair-295f80cdefc3482a5181",
        "c-rome",
        "get_weather",
        "error",
    )
    assert msg.content == NOT_COMPLETED == (
        "Error: call was not completed (the run stopped before its result was recorded)"
    )
