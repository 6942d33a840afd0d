"""Deletions as events (`threadlog.log.removals`): `RemoveMessage` and `REMOVE_ALL_MESSAGES`
hide messages from what the app reads; the log keeps them, marked with the event.

Written as apps write them: a node returning `RemoveMessage`s ("keep the last N"), and a
node returning `[RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *kept]`. Read back in a
fresh saver (the stored writes replayed), from a stored snapshot, and through LangGraph's
serializers.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES

import threadlog
from threadlog import MessageLog, MessageLogChannel, MessagesState, append_messages
from threadlog._upstream import DeltaSnapshot
from threadlog.channel import PLAIN_SAVER_SNAPSHOT_FREQUENCY
from threadlog.log.removals import removed_by


def _cfg(thread: str = "t") -> Any:
    return {"configurable": {"thread_id": thread}}


def keep_last_two(state: MessagesState) -> dict[str, Any]:
    return {"messages": [RemoveMessage(id=m.id) for m in state["messages"][:-2]]}


def chat(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"re {last.content}", id=f"a-{last.id}")]}


def trimming_app(saver: Any) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("chat", chat)
    g.add_node("trim", keep_last_two)
    g.add_edge(START, "chat")
    g.add_edge("chat", "trim")
    g.add_edge("trim", END)
    return g.compile(checkpointer=saver)


def test_a_keep_the_last_two_node_hides_the_rest_and_the_log_keeps_it(backend: str) -> None:
    with threadlog.checkpointer(backend) as saver:
        app = trimming_app(saver)
        for k in range(3):
            out = app.invoke({"messages": [HumanMessage(f"q{k}", id=f"u{k}")]}, _cfg())
            assert [m.id for m in out["messages"]] == [f"u{k}", f"a-u{k}"]
    with threadlog.checkpointer(backend) as again:  # replayed from the database
        app = trimming_app(again)
        assert [m.id for m in app.get_state(_cfg()).values["messages"]] == ["u2", "a-u2"]
        ever = {m.id for s in app.get_state_history(_cfg()) for m in s.values["messages"]}
    assert ever == {"u0", "a-u0", "u1", "a-u1", "u2", "a-u2"}


def test_removing_one_side_of_a_tool_pair_hides_the_whole_pair() -> None:
    ai = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1"},
                                            {"name": "f", "args": {}, "id": "c2"}])
    log = MessageLog([HumanMessage("q", id="u1"), ai,
                      ToolMessage("r1", tool_call_id="c1", id="t1")])
    log.extend([RemoveMessage(id="t1")])
    assert [m.id for m in log.view] == ["u1"]
    # The open call's result, written later, is hidden by the same event.
    log.extend([ToolMessage("r2", tool_call_id="c2", id="t2")])
    assert [m.id for m in log.view] == ["u1"]
    events = {eid for _, eid in log.removed()}
    assert len(events) == 1 and [m.id for m, _ in log.removed()] == ["a1", "t1", "t2"]
    threadlog.validate(log.view, allow_pending_calls=False)


def test_remove_all_with_a_kept_result_but_not_its_request_is_refused_naming_both() -> None:
    ai = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    result = ToolMessage("r", tool_call_id="c1", id="t1")
    left = [HumanMessage("q", id="u1"), ai, result]
    with pytest.raises(threadlog.ToolPairingError, match="'t1' but not 'a1'"):
        append_messages(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES), result])


def test_remove_all_then_a_summary_and_kept_messages_reads_in_the_writes_order() -> None:
    left = [HumanMessage(f"q{k}", id=f"u{k}") for k in range(4)]
    summary = HumanMessage("summary of q0, q1", id="s1")
    out = append_messages(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *left[2:]])
    assert [m.id for m in out] == ["s1", "u2", "u3"]
    with pytest.raises(threadlog.AppendOnlyError, match="cannot move"):
        append_messages(left, [RemoveMessage(id=REMOVE_ALL_MESSAGES), left[3], left[2]])


def test_a_removal_reads_the_same_through_every_serializer_and_a_snapshot() -> None:
    log = MessageLog([HumanMessage("q0", id="u0"), AIMessage("a0", id="a0")])
    log.extend([RemoveMessage(id="u0"), HumanMessage("q1", id="u1")])
    for serde in (JsonPlusSerializer(), JsonPlusSerializer(pickle_fallback=False)):
        blob = serde.dumps_typed(log.messages)
        back: list[BaseMessage] = serde.loads_typed(blob)
        again = MessageLog(back)
        assert [m.id for m in again.view] == ["a0", "u1"]
        assert removed_by(back[0]) == removed_by(log.messages[0])
    # LangGraph snapshots `get()` (the view): a log that hides messages takes no
    # count-based snapshot, and one read back from a snapshot reads the same view.
    channel = MessageLogChannel(snapshot_frequency=None)
    channel._loaded_by([])  # rebuilt by a plain saver's walk: snapshots every 100 updates
    channel.update([[HumanMessage("q0", id="u0"), AIMessage("a0", id="a0")]])
    assert channel.snapshot_frequency == PLAIN_SAVER_SNAPSHOT_FREQUENCY
    channel.update([[RemoveMessage(id="u0")]])
    assert channel.snapshot_frequency > PLAIN_SAVER_SNAPSHOT_FREQUENCY
    restored = MessageLogChannel().from_checkpoint(DeltaSnapshot(channel.get()))
    assert [m.id for m in restored.get()] == ["a0"]


def test_a_removal_from_update_state_is_an_event_on_a_plain_saver() -> None:
    app = trimming_app(InMemorySaver(serde=JsonPlusSerializer()))
    app.invoke({"messages": [HumanMessage("q0", id="u0")]}, _cfg())
    app.update_state(_cfg(), {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]})
    assert app.get_state(_cfg()).values["messages"] == []
    out = app.invoke({"messages": [HumanMessage("q1", id="u1")]}, _cfg())
    assert [m.id for m in out["messages"]] == ["u1", "a-u1"]


def test_remove_then_the_same_id_in_one_write_revises_it_and_the_audit_keeps_both() -> None:
    # An explicit delete-and-rewrite (LangGraph's own test writes it with two versions):
    # the message is shown again, revised by edit events; the last version wins.
    left = [HumanMessage("q", id="u1"), AIMessage("Hello!", id="a1")]
    out = append_messages(left, [RemoveMessage(id="a1"), AIMessage("Hi there!", id="a1"),
                                 AIMessage("Hi there again!", id="a1")])
    assert [(m.id, m.content) for m in out] == [("u1", "q"), ("a1", "Hi there again!")]
    assert threadlog.original_of(out[1]).content == "Hello!"
    assert [e["source"] for e in threadlog.edits_of(out[1])] == ["replace", "replace"]
    with pytest.raises(threadlog.ConflictingIdError, match="keeps the message's role"):
        append_messages(left, [RemoveMessage(id="a1"), HumanMessage("Hi", id="a1")])
    # Without the removal first, the same id with other content stays a conflict.
    with pytest.raises(threadlog.ConflictingIdError):
        append_messages(left, [AIMessage("Hi there!", id="a1")])


def test_a_reply_reusing_a_removed_messages_call_id_keeps_it_live_and_read_back() -> None:
    # A model that numbers calls per reply (`call_0`), after a summary removed the earlier
    # turn: the view holds one owner of the id, so the reply keeps it — as a log read back
    # from a snapshot of the view (which never saw the removed call) does.
    first = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "call_0"}])
    log = MessageLog([HumanMessage("q", id="u1"), first,
                      ToolMessage("r", tool_call_id="call_0", id="t1"), AIMessage("ok", id="a2")])
    log.extend([RemoveMessage(id="u1"), RemoveMessage(id="a1"), RemoveMessage(id="a2")])
    again = AIMessage("", id="a3", tool_calls=[{"name": "f", "args": {}, "id": "call_0"}])
    result = ToolMessage("r2", tool_call_id="call_0", id="t3")
    for read in (log.copy(), MessageLog(log.view), MessageLog(log.messages)):
        read.extend([HumanMessage("q2", id="u2"), again])
        read.extend([result])
        assert [m.id for m in read.view] == ["u2", "a3", "t3"]
        assert read.view[1].tool_calls[0]["id"] == "call_0"
        threadlog.validate(read.view, allow_pending_calls=False)
