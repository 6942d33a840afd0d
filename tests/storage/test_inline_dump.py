"""The async Postgres saver `threadlog.acheckpointer` builds dumps a step's small writes
(and loads a checkpoint's small pending writes) on the event loop instead of in a worker
thread, and keeps the thread for large values; what it stores and reads is byte for byte
what LangGraph's own `AsyncPostgresSaver` stores and reads (issue 24: at 256 concurrent
runs the thread hop was the largest cost threadlog's lane paid more often)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

import threadlog
from threadlog.checkpoint.backends import postgres_inline, unwrap
from threadlog.examples.weather import get_weather
from threadlog.models import OfflineChatModel

pytestmark = pytest.mark.postgres


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the functions sent to a worker thread by `asyncio.to_thread`."""
    seen: list[str] = []
    original = asyncio.to_thread

    async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(func, "__name__", repr(func)))
        return await original(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    yield seen


async def _same_reads(url: str, ours: Any, thread_id: str) -> int:
    """Every checkpoint of the thread, read by ours and by a stock `AsyncPostgresSaver`
    (threadlog's serializer: its types), is the same tuple; returns how many there are."""
    cfg = {"configurable": {"thread_id": thread_id}}
    async with AsyncPostgresSaver.from_conn_string(url) as stock:
        stock.serde = ours.serde
        theirs = [t async for t in stock.alist(cfg)]
        mine = [t async for t in ours.alist(cfg)]
        assert [t.config for t in mine] == [t.config for t in theirs]
        for tup in theirs:
            by_id = await ours.aget_tuple(tup.config)
            assert by_id is not None
            stock_by_id = await stock.aget_tuple(tup.config)
            assert by_id.pending_writes == stock_by_id.pending_writes  # type: ignore[union-attr]
            assert by_id.checkpoint == stock_by_id.checkpoint  # type: ignore[union-attr]
            assert by_id.metadata == stock_by_id.metadata  # type: ignore[union-attr]
            assert by_id.parent_config == stock_by_id.parent_config  # type: ignore[union-attr]
    return len(theirs)


async def test_a_turns_writes_and_reads_take_no_worker_thread_and_read_as_upstreams(
    pg_backend: str, hops: list[str]
) -> None:
    async with threadlog.acheckpointer(pg_backend) as saver:
        raw = unwrap(saver)
        assert isinstance(raw, AsyncPostgresSaver)
        assert type(raw).__name__ == "InlineDumpAsyncPostgresSaver"
        graph = threadlog.create_agent(OfflineChatModel(), [get_weather], checkpointer=saver)
        cfg = {"configurable": {"thread_id": "t"}}
        for text in ("weather in Paris?", "weather in Tokyo?"):
            await graph.ainvoke({"messages": [HumanMessage(text)]}, cfg)
        messages = (await graph.aget_state(cfg)).values["messages"]
        assert [type(m).__name__ for m in messages].count("ToolMessage") == 2
        assert hops == []  # no write, blob (the run's input) or read went to a thread
        assert await _same_reads(pg_backend, raw, "t") >= 8


async def test_a_large_write_or_blob_goes_to_a_worker_thread_and_reads_back_the_same(
    pg_backend: str, hops: list[str]
) -> None:
    big = "x" * (postgres_inline.INLINE_DUMP_BYTES + 1)
    result = ToolMessage("done", tool_call_id="c1", artifact={"rows": big}, id="m2")
    request = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="m1")
    async with threadlog.acheckpointer(pg_backend) as saver:
        raw = unwrap(saver)
        cfg = await raw.aput(
            {"configurable": {"thread_id": "big", "checkpoint_ns": ""}},
            empty_checkpoint(), {"source": "loop", "step": 0}, {},
        )
        await raw.aput_writes(cfg, [("messages", [request])], "task-small")
        assert hops == []
        await raw.aput_writes(cfg, [("messages", [result])], "task-big")
        assert hops == ["_dump_writes"]
        tup = await raw.aget_tuple(cfg)
        assert hops == ["_dump_writes", "_load_writes"]  # the pending writes are large too
        assert tup is not None
        stored = {task: value[0] for task, _, value in tup.pending_writes}
        assert {task: m.id for task, m in stored.items()} == {"task-small": "m1",
                                                              "task-big": "m2"}
        assert stored["task-big"].artifact == {"rows": big}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"notes": [big]}
        checkpoint["channel_versions"] = {"notes": 1}
        await raw.aput(cfg, checkpoint, {"source": "loop", "step": 1}, {"notes": 1})
        assert hops[-1] == "_dump_blobs"
        assert await _same_reads(pg_backend, raw, "big") == 2


@tool(response_format="content_and_artifact")
def city_records(city: str) -> tuple[str, dict[str, Any]]:
    """A short summary for the model; the whole record (large) for programs."""
    raw = "r" * (postgres_inline.INLINE_DUMP_BYTES + 10)
    return f"{city}: 1 record", {"city": city, "raw": raw}


async def test_an_agents_large_artifact_is_dumped_in_a_thread_and_kept_whole(
    pg_backend: str, hops: list[str]
) -> None:
    """As an app runs it: `create_agent` with a context policy on `acheckpointer`, a tool
    whose artifact is past the limit. That one write goes to a thread; the turn's small
    ones do not; the artifact reads back whole and stays out of the model's context."""
    async with threadlog.acheckpointer(pg_backend) as saver:
        graph = threadlog.create_agent(OfflineChatModel(), [city_records],
                                       context=threadlog.ContextPolicy(max_turns=3),
                                       checkpointer=saver)
        cfg = {"configurable": {"thread_id": "artifact"}}
        await graph.ainvoke({"messages": [HumanMessage("records for Paris?")]}, cfg)
        assert hops.count("_dump_writes") == 1  # the tool step's write, nothing else
        messages = (await graph.aget_state(cfg)).values["messages"]
        result = next(m for m in messages if isinstance(m, ToolMessage))
        assert result.content == "Paris: 1 record"
        assert len(result.artifact["raw"]) == postgres_inline.INLINE_DUMP_BYTES + 10
        assert await _same_reads(pg_backend, unwrap(saver), "artifact") >= 4


def test_small_means_messages_containers_and_atoms_under_the_byte_and_item_limits() -> None:
    small = postgres_inline.small
    message = AIMessage("hi", tool_calls=[{"name": "f", "args": {"city": "Oslo"}, "id": "c"}])
    assert small([("messages", [message]), ("branch:to:tools", None)])
    assert small([("a", b"x" * (postgres_inline.INLINE_DUMP_BYTES - 1))])
    assert not small([("a", b"x" * (postgres_inline.INLINE_DUMP_BYTES + 1))])
    assert not small([("messages", [ToolMessage("ok", tool_call_id="c",
                                                artifact="y" * 70_000)])])
    assert not small([("a", object())])  # its dump cost is unknown
    assert not small([("a", list(range(postgres_inline.INLINE_DUMP_ITEMS + 1)))])
