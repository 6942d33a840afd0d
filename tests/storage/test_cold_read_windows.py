"""The history cache's cold read on SQLite reads a thread newest first, a window at a time,
and stops at the snapshot its walk needs: opening the newest checkpoints of a long thread
does not scan its older rows — and every state it rebuilds is the one the writer saw.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

import threadlog
from threadlog.channel import MessageLogChannel
from threadlog.checkpoint.backends import sqlite as sqlite_backend


class SnappyState(TypedDict):
    # A log that stores a full snapshot every 4 updates, as a plain saver's does.
    messages: Annotated[list[AnyMessage], MessageLogChannel(snapshot_frequency=4)]


def reply(state: SnappyState) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(f"reply {n}", id=f"ai-{n}")]}


def write_thread(url: str, turns: int) -> dict[str, list[str | None]]:
    b: StateGraph[Any, Any, Any, Any] = StateGraph(SnappyState)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    cfg: Any = {"configurable": {"thread_id": "long"}}
    with threadlog.checkpointer(url) as saver:
        graph = b.compile(checkpointer=saver)
        for i in range(turns):
            graph.invoke({"messages": [("user", f"q{i}")]}, cfg)
        return {
            s.config["configurable"]["checkpoint_id"]: [m.id for m in s.values.get("messages", [])]
            for s in graph.get_state_history(cfg)
        }


@pytest.mark.parametrize("window", [3, 2000])
def test_a_cold_read_by_windows_rebuilds_every_state_the_writer_saw(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    seen = write_thread(sqlite_url, 12)
    monkeypatch.setattr(sqlite_backend, "_WINDOW", window)

    t = threadlog.inspect.thread(sqlite_url, "long", schema=SnappyState)
    assert {r.checkpoint_id: [m.id for m in r.messages] for r in t.records} == seen
    last = threadlog.inspect.thread(sqlite_url, "long", last=5, schema=SnappyState)
    assert all([m.id for m in r.messages] == seen[r.checkpoint_id] for r in last.records)


def test_the_cold_read_of_a_late_checkpoint_stops_at_its_snapshot(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = write_thread(sqlite_url, 30)  # 90 checkpoints, a snapshot every 4 updates
    monkeypatch.setattr(sqlite_backend, "_WINDOW", 5)
    scanned: list[int] = []
    keys = sqlite_backend._value_keys
    monkeypatch.setattr(
        sqlite_backend, "_value_keys", lambda *a: scanned.append(1) or keys(*a)
    )

    last = threadlog.inspect.thread(sqlite_url, "long", last=3, schema=SnappyState)

    assert all([m.id for m in r.messages] == seen[r.checkpoint_id] for r in last.records)
    # The head is a snapshot; the checkpoint before it is one more cold read, stopped at
    # its own snapshot (the cache does not step back over stored writes: a write that
    # re-sent messages reads like one that added them). Still not the whole thread.
    assert 0 < len(scanned) < 90
