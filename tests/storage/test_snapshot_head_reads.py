"""A thread whose newest checkpoint is a stored snapshot, read by a fresh process (the
inspector's `--last N`, issue 22): the log built from that snapshot becomes the history
cache's entry, and the checkpoints before it are that log stepped back over the writes
in between — chat input stored as `(role, content)` pairs and replies without ids
included — with no cold read of the snapshot before, and the same states a plain saver
reads."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

import threadlog
from threadlog._upstream import DeltaSnapshot
from threadlog.channel import MessageLogChannel
from threadlog.checkpoint.cache import history_cache_of

CFG: Any = {"configurable": {"thread_id": "t"}}
TURNS = 6  # with a snapshot every 4 updates, the head (step 16) holds one


class SnappyState(TypedDict):
    messages: Annotated[list[AnyMessage], MessageLogChannel(snapshot_frequency=4)]


def reply(state: SnappyState) -> dict[str, Any]:
    return {"messages": [AIMessage(f"reply {len(state['messages'])}")]}  # no id


def build(saver: Any) -> Any:
    b: StateGraph[Any, Any, Any, Any] = StateGraph(SnappyState)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    return b.compile(checkpointer=saver)


def at(checkpoint_id: str) -> Any:
    return {"configurable": {**CFG["configurable"], "checkpoint_id": checkpoint_id}}


def shape(messages: list[BaseMessage]) -> list[tuple[str, str | None, Any]]:
    return [(m.type, m.id, m.content) for m in messages]


def _cache(saver: Any) -> Any:
    while history_cache_of(saver) is None:
        saver = saver.inner
    return history_cache_of(saver)


@pytest.fixture
def thread(sqlite_url: str) -> tuple[str, list[str], dict[str, Any]]:
    """The thread's url, its checkpoint ids newest first, and the states a plain saver
    reads at the newest four."""
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build(saver)
        for i in range(TURNS):
            graph.invoke({"messages": [("user", f"question {i}")]}, CFG)
    with threadlog.checkpointer(sqlite_url, cache=False) as plain:
        tuples = list(plain.list(CFG))
        graph = build(plain)
        ids = [t.config["configurable"]["checkpoint_id"] for t in tuples]
        want = {cid: shape(graph.get_state(at(cid)).values["messages"]) for cid in ids[:4]}
    head_value = tuples[0].checkpoint["channel_values"].get("messages")
    assert isinstance(head_value, DeltaSnapshot)  # the premise: the head is a snapshot
    assert not any("messages" in t.checkpoint["channel_values"] for t in tuples[1:4])
    return sqlite_url, ids, want


def test_a_snapshot_head_read_cold_becomes_the_cache_entry(
    thread: tuple[str, list[str], dict[str, Any]],
) -> None:
    url, ids, want = thread
    with threadlog.checkpointer(url) as saver:
        graph = build(saver)
        cache = _cache(saver)
        assert cache.get(("t", "", "messages")) is None
        got = shape(graph.get_state(at(ids[0])).values["messages"])
        entry = cache.get(("t", "", "messages"))
    assert got == want[ids[0]]
    assert entry is not None and entry[0] == ids[0] and entry[2] == len(got)


def test_checkpoints_before_a_snapshot_head_cost_one_cold_read_together(
    thread: tuple[str, list[str], dict[str, Any]],
) -> None:
    url, ids, want = thread
    with threadlog.checkpointer(url) as saver:
        graph = build(saver)
        cache = _cache(saver)
        graph.get_state(at(ids[0]))
        misses = cache.misses
        got = {cid: shape(graph.get_state(at(cid)).values["messages"]) for cid in ids[1:4]}
        # The first is read cold (stepping back over stored writes cannot tell a re-sent
        # message from an added one); its walk passed the older two, which need no read.
        assert cache.misses == misses + 1
    assert got == {cid: want[cid] for cid in ids[1:4]}
    assert len({len(m) for m in got.values()}) > 1  # the states really differ


def test_the_inspectors_last_n_of_a_snapshot_head_reads_what_a_plain_saver_reads(
    thread: tuple[str, list[str], dict[str, Any]],
) -> None:
    url, _, want = thread
    last = threadlog.inspect.thread(url, "t", last=4, schema=SnappyState)
    assert {r.checkpoint_id: shape(r.messages) for r in last.records} == want
