"""A delta channel that is not threadlog's (LangGraph's delta messages channel) snapshots its
whole value every few updates; threadlog's saver stores each such snapshot as a reference to
the previous one plus what it adds (`threadlog.checkpoint.resent`), and every read —
after each turn, every checkpoint of the history, warm and on a cold saver, threads written
in the old whole-snapshot form or half in each — gives exactly what LangGraph's own saver
gives. SQLite and Postgres."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

import threadlog
from tests.helpers.delta_apps import (
    bytes_per_turn,
    cfg,
    langgraph_saver,
    message_rows,
    run_turns,
    threadlog_saver,
)
from tests.helpers.echo import one_node_graph
from threadlog.checkpoint import resent


class Snapshotted(TypedDict):
    messages: Annotated[
        list[BaseMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=2)
    ]


def _reply(state: Snapshotted) -> dict[str, Any]:
    last, n = state["messages"][-1].id, len(state["messages"])
    return {"messages": [AIMessage(f"reply to {n} " + "x" * 200, id=f"re-{last}")]}


def _app(saver: Any) -> Any:
    return one_node_graph(Snapshotted, _reply, saver)


def _turns(n: int) -> list[Any]:
    turns: list[Any] = [{"messages": [HumanMessage(f"q{i}", id=f"h{i}")]} for i in range(n)]
    # The reducer's own rules mid-thread: an edit and a removal change a snapshot's prefix.
    turns[4] = {"messages": [HumanMessage("q1, edited", id="h1"), RemoveMessage(id="re-h2")]}
    return turns


def _rows(values: dict[str, Any]) -> list[tuple[Any, ...]]:
    return message_rows(values.get("messages"))


@pytest.fixture
def reference_url(backend: str, request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if backend.startswith("sqlite:///"):
        return f"sqlite:///{tmp_path / 'langgraph.sqlite'}"
    return str(request.getfixturevalue("pg_databases").take())


async def _cold(url: str, is_async: bool) -> tuple[Any, list[Any]]:
    async with threadlog_saver(url, is_async) as saver:
        app = _app(saver)
        if is_async:
            state = await app.aget_state(cfg("t"))
            history = [_rows(s.values) async for s in app.aget_state_history(cfg("t"))]
        else:
            state = app.get_state(cfg("t"))
            history = [_rows(s.values) for s in app.get_state_history(cfg("t"))]
    return _rows(state.values), history


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_snapshots_stored_as_references_read_back_as_on_langgraphs_saver(
    backend: str, reference_url: str, is_async: bool
) -> None:
    turns = _turns(12)
    async with langgraph_saver(reference_url, is_async) as saver:
        expected = await run_turns(_app(saver), turns, "t", is_async, read=_rows)
    async with threadlog_saver(backend, is_async) as saver:
        got = await run_turns(_app(saver), turns, "t", is_async, read=_rows)
    assert got == expected
    assert any(row[2] == "q1, edited" for row in expected[0][4])
    assert await _cold(backend, is_async) == (expected[0][-1], expected[1])


def test_snapshot_bytes_per_turn_stay_flat_where_langgraphs_grow(
    backend: str, reference_url: str
) -> None:
    """A turn stores what it adds (the median turn: one snapshot in `SNAPSHOT_CHAIN + 1`
    is stored whole, bounding a read's chain)."""
    from statistics import median

    from langgraph.checkpoint.sqlite import SqliteSaver

    turns = _turns(30)
    with threadlog_saver_sync(backend) as saver:
        ours = bytes_per_turn(_app(saver), backend, turns, "t")
    if reference_url.startswith("sqlite:///"):
        with SqliteSaver.from_conn_string(reference_url[len("sqlite:///") :]) as ref:
            ref.setup()
            theirs = bytes_per_turn(_app(ref), reference_url, turns, "t")
        assert median(theirs[20:]) > 1.5 * median(theirs[5:15])  # whole snapshots grow
    assert median(ours[20:]) < 1.1 * median(ours[5:15])
    whole = [n for n in ours[5:] if n > 2 * median(ours[5:])]
    assert len(whole) <= len(ours[5:]) // resent.SNAPSHOT_CHAIN


def threadlog_saver_sync(url: str) -> Any:
    return threadlog.checkpointer(url)


@pytest.mark.parametrize("switch_at", [12, 5], ids=["old-form", "old-then-new"])
def test_threads_with_whole_snapshots_read_back_the_same(
    backend: str, reference_url: str, monkeypatch: pytest.MonkeyPatch, switch_at: int
) -> None:
    """Snapshots stored whole (the form before references, which users' databases hold)
    read as before, and a thread continued by this version references them."""
    import asyncio

    turns = _turns(12)

    async def reference() -> Any:
        async with langgraph_saver(reference_url, False) as saver:
            return await run_turns(_app(saver), turns, "t", False, read=_rows)

    expected = asyncio.run(reference())
    with monkeypatch.context() as old:
        old.setattr(resent, "SNAPSHOT_CHAIN", 0)  # every snapshot whole: the old form
        with threadlog_saver_sync(backend) as saver:
            app = _app(saver)
            for turn in turns[:switch_at]:
                app.invoke(turn, cfg("t"))
    with threadlog_saver_sync(backend) as saver:
        app = _app(saver)
        for turn in turns[switch_at:]:
            app.invoke(turn, cfg("t"))
    assert asyncio.run(_cold(backend, False)) == (expected[0][-1], expected[1])


def test_a_listed_checkpoint_storing_a_reference_reads_its_snapshot_with_no_writes(
    backend: str,
) -> None:
    """`list` leaves a referenced snapshot out (it cannot read); the delta history LangGraph
    then asks for at that checkpoint is the snapshot itself, as `get_tuple` rebuilds it —
    not a replay of the writes before it, which a forced snapshot need not equal."""
    with threadlog_saver_sync(backend) as saver:
        app = _app(saver)
        for turn in _turns(8):
            app.invoke(turn, cfg("t"))
        referenced = 0
        for tup in list(saver.list(cfg("t"))):
            whole = saver.get_tuple(tup.config)
            assert whole is not None
            if "messages" in tup.checkpoint["channel_values"]:
                continue
            snapshot = whole.checkpoint["channel_values"].get("messages")
            if snapshot is None:
                continue
            history = saver.get_delta_channel_history(config=tup.config, channels=["messages"])
            assert history["messages"]["writes"] == []
            assert history["messages"]["seed"].value == snapshot.value
            referenced += 1
        assert referenced >= 4


def test_turns_after_a_rollback_read_back_as_if_the_run_never_happened(
    backend: str, reference_url: str
) -> None:
    """A rollback (`delete_for_runs`) removes snapshots later ones could refer to: the
    saver forgets them, and what it stores next reads as LangGraph's thread without that
    run."""
    import asyncio

    turns = _turns(10)
    kept = turns[:6] + turns[7:]

    async def reference() -> Any:
        async with langgraph_saver(reference_url, False) as saver:
            return await run_turns(_app(saver), kept, "t", False, read=_rows)

    expected = asyncio.run(reference())
    with threadlog_saver_sync(backend) as saver:
        app = _app(saver)
        for i, turn in enumerate(turns):
            app.invoke(turn, {**cfg("t"), "metadata": {"run_id": f"r{i}"}})
            if i == 6:
                saver.delete_for_runs(["r6"])  # type: ignore[attr-defined]
        assert _rows(app.get_state(cfg("t")).values) == expected[0][-1]
    assert asyncio.run(_cold(backend, False)) == (expected[0][-1], expected[1])
