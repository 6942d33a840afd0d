"""Reading a thread's history newest-first (`get_state_history`, the inspector) through
the history cache: each older checkpoint is the cached log stepped back over the writes
in between, and reads exactly what an uncached saver reads."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

import threadlog
from tests.helpers.perf import build_loop, say, shape
from threadlog.checkpoint.cache import history_cache_of

CFG: Any = {"configurable": {"thread_id": "t1"}}


def _cache(saver: Any) -> Any:
    while history_cache_of(saver) is None:
        saver = saver.inner
    return history_cache_of(saver)


def test_get_state_history_steps_back_from_the_cache_and_reads_what_a_plain_saver_reads(
    backend: str,
) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = build_loop(saver)
        for i in range(8):
            graph.invoke(say(f"turn {i}"), CFG)
        graph.update_state(CFG, {"messages": [HumanMessage("a note", id="note-1")]})
        graph.invoke(say("turn 8"), CFG)
        cache = _cache(saver)
        misses = cache.misses
        warm = [(s.config["configurable"]["checkpoint_id"], shape(s.values["messages"]))
                for s in graph.get_state_history(CFG, limit=12)]
        assert cache.misses == misses  # every older checkpoint came from the cache
        # The cache still sits at the head: the next turn walks forward from it.
        graph.invoke(say("turn 9"), CFG)
        assert cache.misses == misses
        head = shape(graph.get_state(CFG).values["messages"])
    with threadlog.checkpointer(backend, cache=False) as plain:
        graph = build_loop(plain)
        cold = [(s.config["configurable"]["checkpoint_id"], shape(s.values["messages"]))
                for s in graph.get_state_history(CFG, limit=17)][5:]
        assert shape(graph.get_state(CFG).values["messages"]) == head
    assert len(warm) == 12 and warm == cold
    assert len({len(m) for _, m in warm}) > 3  # the states really differ
