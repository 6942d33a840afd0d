"""A call id an edit dropped stays taken: some servers number calls per reply ("call_0",
"call_1" in every reply), so a later reply can reuse the id of a call a reviewer dropped
or renamed — an id the edited message's audit record still holds.

* `ModelNode` re-keys such an id like any other id already in the thread (the log's ids
  stay unique, the audit record included), on a cold start (a new saver and node, the
  open-call scan starting from the edited log) as on a warm one; the later reply can be
  reviewed and edited in turn, its results pair, the model sees a valid history.
* A user's own node (LangGraph's prebuilt `ToolNode` path, no `ModelNode`) that appends
  such a message gets a `ToolPairingError` naming the message, the call id and the edit,
  the same rule as for reusing a live id; nothing is stored.
* A thread stored before this rule (a reply that already reuses a dropped id) still
  loads, and its later message owns the id.

Graph tests run on real SQLite and Postgres (`backend`), each step in a new saver.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode as PrebuiltToolNode
from langgraph.prebuilt import tools_condition as prebuilt_tools_condition

import threadlog
from tests.helpers.multi_agent import Scripted
from tests.helpers.review import review_app as edit_review_app
from threadlog import Edit, MessageLog, edits_of, original_of
from threadlog.cli import main
from threadlog.examples.weather import get_weather

CFG: Any = {"configurable": {"thread_id": "reuse"}}
CITIES = ("Beijing", "Tokyo")


class PerReplyIds:
    """A server that numbers its calls per reply: every reply that calls tools says
    `call_0`, `call_1`. Asks for two cities after a user message, then answers."""

    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

    def __call__(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self.seen.append(list(messages))
        n = len(messages)  # the reply's id: the same for the same history
        if isinstance(messages[-1], HumanMessage):
            calls = [
                {"name": "get_weather", "args": {"city": c}, "id": f"call_{i}"}
                for i, c in enumerate(CITIES)
            ]
            return AIMessage("", id=f"ai-{n}", tool_calls=calls)
        return AIMessage(f"answer {n}", id=f"ai-{n}")


def review_app(model: PerReplyIds, saver: Any) -> Any:
    return edit_review_app(model, saver, tools=[get_weather])


def step(url: str, model: PerReplyIds, *, edit: Any = None, send: Any = None) -> list[Any]:
    """One step in a new saver and a new graph (a restarted process): an optional edit
    through `update_state`, then `invoke(send)`; the stored messages after it."""
    with threadlog.checkpointer(url) as saver:
        app = review_app(model, saver)
        if edit is not None:
            app.update_state(CFG, {"messages": [edit]})
        app.invoke(send, CFG)
        return list(app.get_state(CFG).values["messages"])


def keep_first_call(request: AIMessage, **args: Any) -> Edit:
    """The reviewer drops the second call and may change the first one's args."""
    first = {**request.tool_calls[0], "args": args or request.tool_calls[0]["args"]}
    return Edit(request.model_copy(update={"tool_calls": [first]}), by="alice")


def all_call_ids(messages: Sequence[BaseMessage]) -> list[str]:
    """Every call id of the log, live and superseded (audit records included)."""
    out: list[str] = []
    for m in messages:
        if isinstance(m, AIMessage):
            ids = {c["id"] for v in [original_of(m), m] for c in v.tool_calls}  # type: ignore[union-attr]
            ids |= {c["id"] for e in edits_of(m) for c in e["tool_calls"]}
            out += sorted(ids)
    return out


def test_a_later_reply_reusing_a_dropped_call_id_is_rekeyed_and_can_be_edited(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = PerReplyIds()
    # Turn 1: the reply asks for two cities; the reviewer drops call_1; call_0 runs.
    first = step(backend, model, send={"messages": [HumanMessage("hi", id="u1")]})
    stored = step(backend, model, edit=keep_first_call(first[-1]), send=None)
    assert [c["id"] for c in stored[1].tool_calls] == ["call_0"]
    assert [c["id"] for c in original_of(stored[1]).tool_calls] == ["call_0", "call_1"]

    # Turn 2, cold (a new saver and node): the server says call_0 and call_1 again.
    paused = step(backend, model, send={"messages": [HumanMessage("again", id="u2")]})
    reply = paused[-1]
    assert isinstance(reply, AIMessage) and reply.id == f"ai-{len(paused) - 1}"
    new_ids = [c["id"] for c in reply.tool_calls]
    assert not {"call_0", "call_1"} & set(new_ids)  # both taken: live and superseded
    assert set(reply.response_metadata["threadlog_call_ids_rekeyed"].values()) == {
        "call_0", "call_1"
    }
    # The reviewer edits the new reply in turn: its second call (the one that said call_1)
    # asks for Beijing instead of Tokyo.
    calls = [reply.tool_calls[0], {**reply.tool_calls[1], "args": {"city": "Beijing"}}]
    edit = Edit(reply.model_copy(update={"tool_calls": calls}), by="bob")
    stored = step(backend, model, edit=edit, send=None)

    threadlog.validate(stored, allow_pending_calls=False)
    ids = all_call_ids(stored)
    assert len(ids) == len(set(ids)), ids  # unique in the thread, the audit included
    results = [m for m in stored if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == ["call_0", *new_ids]
    assert "70%" in str(results[2].content)  # the edited call (Beijing) is what ran
    assert [c["args"] for c in original_of(stored[5]).tool_calls] == [
        {"city": "Beijing"}, {"city": "Tokyo"}]
    # What the model was last sent: a paired history holding the edited calls only.
    sent = model.seen[-1]
    threadlog.validate(sent, allow_pending_calls=False)
    sent_calls = [c["args"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls]
    assert sent_calls == [{"city": "Beijing"}] * 3

    assert main(["inspect", "--db", backend, "--thread", "reuse", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["call_id"] for p in doc["pairs"]] == ["call_0", *new_ids]
    edits = [e for row in doc["timeline"] for e in row["edited"]]
    assert [[c["id"] for c in e["superseded_calls"]] for e in edits] == [
        ["call_0", "call_1"], new_ids]
    assert [e["by"] for e in edits] == ["alice", "bob"]


def test_the_rekeying_is_the_same_warm_and_cold() -> None:
    """One node across both turns (its open-call scan resumed) and a fresh node for turn
    2 (a full scan of the edited log) choose the same ids."""
    model = PerReplyIds()
    node = threadlog.ModelNode(Scripted(script=model), [get_weather])
    cfg: Any = {"configurable": {"thread_id": "warm"}}
    log = MessageLog([HumanMessage("hi", id="u1")])
    log.extend(node.invoke({"messages": log.messages}, cfg)["messages"])
    log.extend([keep_first_call(log.messages[-1])])  # type: ignore[arg-type]
    log.extend([ToolMessage("sunny", tool_call_id="call_0", id="r0"),
                HumanMessage("again", id="u2")])
    warm = node.invoke({"messages": log.messages}, cfg)["messages"][-1]
    fresh = threadlog.ModelNode(Scripted(script=model), [get_weather])
    cold = fresh.invoke({"messages": log.messages}, cfg)["messages"][-1]
    assert [c["id"] for c in warm.tool_calls] == [c["id"] for c in cold.tool_calls]
    assert not {"call_0", "call_1"} & {c["id"] for c in cold.tool_calls}


def user_node_app(saver: Any, reply: AIMessage) -> Any:
    """No ModelNode: a user's own node returns `reply` after each user message, with
    LangGraph's prebuilt `ToolNode` and `tools_condition` on threadlog's state."""

    def agent(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            return {"messages": [reply]}
        return {"messages": [AIMessage(f"answer: {last.content}", id=f"done-{last.id}")]}

    g = StateGraph(threadlog.AgentState)
    g.add_node("agent", agent)
    g.add_node("tools", PrebuiltToolNode([get_weather]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", prebuilt_tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver, interrupt_before=["tools"])


def test_a_users_own_node_reusing_a_dropped_call_id_gets_a_clear_error(backend: str) -> None:
    calls = [{"name": "get_weather", "args": {"city": c}, "id": f"call_{i}"}
             for i, c in enumerate(CITIES)]
    first = AIMessage("", id="ai-1", tool_calls=calls)
    with threadlog.checkpointer(backend) as saver:
        app = user_node_app(saver, first)
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, CFG)
        app.update_state(CFG, {"messages": [keep_first_call(first)]})
        app.invoke(None, CFG)
        edit_id = edits_of(app.get_state(CFG).values["messages"][1])[0]["id"]
    # Turn 2's reply reuses call_1, which the edit dropped from ai-1.
    again = AIMessage("", id="ai-2", tool_calls=[{**calls[1], "args": {"city": "Paris"}}])
    with threadlog.checkpointer(backend) as saver:  # resumed from the database
        app = user_node_app(saver, again)
        before = app.get_state(CFG)
        with pytest.raises(threadlog.ToolPairingError) as refused:
            app.invoke({"messages": [HumanMessage("again", id="u2")]}, CFG)
        after = app.get_state(CFG)
    err = refused.value
    assert err.message_id == "ai-2"
    for named in ("'call_1'", "'ai-1'", repr(edit_id)):
        assert named in str(err), (named, str(err))
    assert "unique" in str(err)
    # The user message went in (its own step); the refused reply did not.
    assert [m.id for m in after.values["messages"]] == [
        *[m.id for m in before.values["messages"]], "u2"]
    threadlog.validate(after.values["messages"], allow_pending_calls=False)


def test_a_stored_reply_that_already_reuses_a_dropped_id_still_loads_and_owns_it() -> None:
    """Stored history is trusted: a log written before the rule reads back, whether
    rebuilt from its messages or by replaying the stored write, and the later message
    owns the id (its results pair, it can be edited)."""
    calls = [{"name": "get_weather", "args": {"city": c}, "id": f"call_{i}"}
             for i, c in enumerate(CITIES)]
    log = MessageLog([HumanMessage("hi", id="u1"), AIMessage("", id="ai-1", tool_calls=calls)])
    log.extend([keep_first_call(log.messages[-1]),  # type: ignore[arg-type]
                ToolMessage("sunny", tool_call_id="call_0", id="r0"),
                HumanMessage("again", id="u2")])
    reused = AIMessage("", id="ai-2", tool_calls=[calls[1]])
    with pytest.raises(threadlog.ToolPairingError, match="dropped"):
        log.copy().extend([reused])
    replayed = log.copy()
    replayed.extend_writes([[reused]], stored=True)
    rebuilt = MessageLog([*log.messages, reused])
    for read in (replayed, rebuilt):
        again = read.copy()
        again.extend([Edit(reused.model_copy(update={"tool_calls": [
            {**calls[1], "args": {"city": "Paris"}}]}))])
        again.extend([ToolMessage("rain", tool_call_id="call_1", id="r1")])
        threadlog.validate(again.messages, allow_pending_calls=False)
        assert again.messages[-1].id == "r1"
