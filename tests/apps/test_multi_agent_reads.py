"""Every checkpoint of a multi-agent thread (langgraph-swarm, langgraph-supervisor), in
every namespace, reads back the same through `threadlog.checkpointer(url)` in a new
process, through `threadlog.checkpointer(url, cache=False)` (the handoffs' re-sent
histories are stored as what they add, and must be rebuilt without the cache too), and
as the same turns read on LangGraph's own saver; SQLite and Postgres."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import threadlog
from scripts.kill_multi_agent import APPS, build, shape, snapshot


def _ask(graph: Any, turns: int) -> None:
    for turn in range(turns):
        message = HumanMessage(f"question {turn}", id=f"u{turn}")
        graph.invoke({"messages": [message]}, {"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize("app", APPS)
def test_every_checkpoint_reads_the_same_with_and_without_the_cache_and_as_on_langgraph(
    backend: str, app: str
) -> None:
    with threadlog.checkpointer(backend) as saver:
        _ask(build(app, saver), 3)
    reads = {}
    for cache in (True, False):
        with threadlog.checkpointer(backend, cache=cache) as saver:
            reads[cache] = snapshot(build(app, saver), saver, "t")
    assert len(reads[True]) > 20  # the parent's and each agent's checkpoints
    assert reads[False] == reads[True]
    reference = InMemorySaver()
    _ask(build(app, reference), 3)
    assert shape(reads[True]) == shape(snapshot(build(app, reference), reference, "t"))
