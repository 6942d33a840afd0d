"""The `compactions` key stores each step's new events, not the whole list again (issue 12).

Measured from what the real savers store: SQLite's checkpoint rows and writes, Postgres'
checkpoint blobs and writes. With a plain list channel every checkpoint after an event
carried the whole list (quadratic storage); now a checkpoint carries at most its own step's
events, so its bytes do not grow with the number of events already recorded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import threadlog
from threadlog import ContextPolicy, OfflineChatModel, create_agent
from threadlog.context.compaction import append_compactions

THREAD = {"configurable": {"thread_id": "t"}}


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"{city}: sunny, 23C"


def _ask(turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"Turn {turn}: weather in Beijing and Shanghai?",
                                      id=f"h{turn}")]}


def _per_checkpoint_bytes(url: str) -> list[int]:
    """Stored bytes of the `compactions` key per checkpoint, oldest first: the value a
    checkpoint stores for it (inline or as a blob at its version) plus its writes."""
    serde = JsonPlusSerializer()
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):])
        out = []
        rows = conn.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = 't' "
            "AND checkpoint_ns = '' ORDER BY checkpoint_id"
        ).fetchall()
        for cid, type_tag, blob in rows:
            values = serde.loads_typed((type_tag, blob))["channel_values"]
            inline = (
                len(serde.dumps_typed(values["compactions"])[1]) if "compactions" in values else 0
            )
            (written,) = conn.execute(
                "SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = 't' "
                "AND checkpoint_id = ? AND channel = 'compactions'",
                (cid,),
            ).fetchone()
            out.append(inline + written)
        conn.close()
        return out
    import psycopg

    with psycopg.connect(url) as pg:
        rows = pg.execute(
            "SELECT coalesce(length(b.blob), 0) + coalesce((SELECT sum(length(w.blob)) "
            "FROM checkpoint_writes w WHERE w.thread_id = c.thread_id "
            "AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id "
            "AND w.channel = 'compactions'), 0) "
            "FROM checkpoints c LEFT JOIN checkpoint_blobs b ON b.thread_id = c.thread_id "
            "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'compactions' "
            "AND b.version = c.checkpoint -> 'channel_versions' ->> 'compactions' "
            "WHERE c.thread_id = 't' AND c.checkpoint_ns = '' ORDER BY c.checkpoint_id"
        ).fetchall()
    return [int(r[0]) for r in rows]


def test_compactions_bytes_per_checkpoint_do_not_grow_with_the_events(backend: str) -> None:
    turns = 24
    with threadlog.checkpointer(backend) as saver:
        graph = create_agent(OfflineChatModel(), [get_weather],
                             context=ContextPolicy(max_turns=1), checkpointer=saver)
        for t in range(turns):
            graph.invoke(_ask(t), THREAD)
        events = graph.get_state(THREAD).values["compactions"]
    assert len(events) >= turns - 2  # a new cut (one event) nearly every turn

    sizes = _per_checkpoint_bytes(backend)
    per_turn = len(sizes) // turns
    early = max(sizes[per_turn * 2 : per_turn * 6])  # a few events recorded
    late = max(sizes[-per_turn * 4 :])  # twenty-odd events recorded
    assert early > 0  # the events are stored...
    # ...and a late checkpoint stores no more than an early one: one event's write (the
    # events differ only in ids and counts, so allow their small size differences).
    assert late <= early * 1.2, (early, late, sizes)


class _OldState(TypedDict):
    messages: threadlog.Messages
    compactions: Annotated[list[dict[str, Any]], append_compactions]


def _event(i: int, cut_to: str, **extra: Any) -> dict[str, Any]:
    return {"id": f"cmp-{i}", "kind": "trim", "cut_to": cut_to, "hidden": [], "ts": "t", **extra}


def test_a_thread_stored_with_the_old_list_channel_reads_and_grows_as_before(
    sqlite_url: str,
) -> None:
    def old(state: _OldState) -> dict[str, Any]:
        n = len(state["compactions"])
        return {"compactions": [_event(n, state["messages"][-1].id)]}

    builder = StateGraph(_OldState)
    builder.add_node("old", old)
    builder.add_edge(START, "old")
    builder.add_edge("old", END)
    with threadlog.checkpointer(sqlite_url) as saver:
        before = builder.compile(checkpointer=saver)
        for t in range(3):
            before.invoke({"messages": [HumanMessage(f"q{t}", id=f"q{t}")]}, THREAD)
        stored = before.get_state(THREAD).values["compactions"]

        def new(state: threadlog.AgentState) -> dict[str, Any]:
            n = len(state["compactions"])
            # a replay of a stored event (new ts) and one new event
            return {"compactions": [{**stored[-1], "ts": "later"},
                                    _event(n, state["messages"][-1].id)]}

        after_builder = StateGraph(threadlog.AgentState)
        after_builder.add_node("new", new)
        after_builder.add_edge(START, "new")
        after_builder.add_edge("new", END)
        after = after_builder.compile(checkpointer=saver)
        assert after.get_state(THREAD).values["compactions"] == stored
        after.invoke({"messages": [HumanMessage("q3", id="q3")]}, THREAD)
        events = after.get_state(THREAD).values["compactions"]
    assert [e["id"] for e in events] == ["cmp-0", "cmp-1", "cmp-2", "cmp-3"]
    assert events[:3] == stored


def _channel() -> Any:
    from threadlog.context.events import CompactionsChannel

    return CompactionsChannel()


def _fold(batches: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    ch = _channel().from_checkpoint(None)
    for b in batches:
        ch.update([b])
    return list(ch.get())


def test_events_append_in_order_however_the_writes_are_batched() -> None:
    a, b, c = _event(0, "m1"), _event(1, "m2"), _event(2, "m3")
    one_by_one = _fold([[a], [b], [c]])
    together = _fold([[a, b, c]])
    replayed = _channel().from_checkpoint(None)
    replayed.replay_writes([("t1", "compactions", [a]), ("t2", "compactions", [b, c])])
    assert one_by_one == together == list(replayed.get()) == [a, b, c]


def test_an_event_written_again_is_a_replay_whatever_its_timestamp() -> None:
    a = _event(0, "m1")
    assert _fold([[a], [{**a, "ts": "another time"}]]) == [a]


def test_the_same_event_id_with_other_content_is_refused_and_changes_nothing() -> None:
    ch = _channel().from_checkpoint(None)
    ch.update([[_event(0, "m1")]])
    with pytest.raises(threadlog.ConflictingIdError, match=r"cmp-0.*cut_to"):
        ch.update([[_event(1, "m2"), _event(0, "m9")]])
    assert [e["id"] for e in ch.get()] == ["cmp-0"]


def test_a_write_that_is_not_an_event_is_refused_naming_its_position() -> None:
    ch = _channel().from_checkpoint(None)
    with pytest.raises(threadlog.InvalidMessageError, match=r"compactions\[1\]"):
        ch.update([[_event(0, "m1"), {"id": "x"}]])
    with pytest.raises(threadlog.InvalidMessageError, match="unknown kind"):
        ch.update([[{"id": "y", "kind": "delete", "cut_to": "m1"}]])
    assert ch.get() == []


def test_overwriting_the_events_is_refused() -> None:
    from langgraph.types import Overwrite

    ch = _channel().from_checkpoint(None)
    with pytest.raises(threadlog.AppendOnlyError):
        ch.update([Overwrite([])])


def test_a_copy_and_its_original_never_see_each_others_events() -> None:
    ch = _channel().from_checkpoint(None)
    ch.update([[_event(0, "m1")]])
    twin = ch.copy()
    ch.update([[_event(1, "m2")]])
    twin.update([[_event(2, "m3")]])
    assert [e["id"] for e in ch.get()] == ["cmp-0", "cmp-1"]
    assert [e["id"] for e in twin.get()] == ["cmp-0", "cmp-2"]


def test_the_pure_reducer_follows_the_same_rules() -> None:
    a = _event(0, "m1")
    assert append_compactions([a], [{**a, "ts": "x"}, _event(1, "m2")]) == [
        a, _event(1, "m2")]
    with pytest.raises(threadlog.ConflictingIdError):
        append_compactions([a], _event(0, "other"))


def test_context_rebuilt_from_every_checkpoint_is_what_the_model_saw(sqlite_url: str) -> None:
    seen: list[list[tuple[str, str]]] = []

    class Recording(OfflineChatModel):
        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            seen.append([(m.type, str(m.content)) for m in messages if m.type != "system"])
            return super()._generate(messages, *args, **kwargs)

    policy = ContextPolicy(max_turns=2)
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = create_agent(Recording(), [get_weather], context=policy, checkpointer=saver)
        for t in range(6):
            graph.invoke(_ask(t), THREAD)
        rebuilt = []
        for snap in reversed(list(graph.get_state_history(THREAD))):
            if snap.next == ("model",):
                ctx = threadlog.build_context(snap.values["messages"],
                                              snap.values.get("compactions", []), policy)
                rebuilt.append([(m.type, str(m.content)) for m in ctx if m.type != "system"])
    assert len(seen) == 12 and rebuilt == seen
    assert max(len(s) for s in seen) < 5 * 3  # the policy did hide older turns
