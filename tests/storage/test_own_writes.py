"""The history walk answered from the saver's own writes never serves a stale history.

A warm turn on `threadlog.checkpointer(url)` reads the writes between the cached
checkpoint and the head from what this saver stored itself (`checkpoint/own_writes.py`),
with no query. These tests let a second OS process write the same thread between the
first process's turns — a guarded `threadlog.checkpointer`, a plain LangGraph saver with
`threadlog.MessagesState` (no guard, no cache), and a plain saver storing a task write on
the first process's head — and check that the first process's next turns see exactly
what a fresh process reads from the database.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

import threadlog
from threadlog.checkpoint.cache import history_cache_of
from threadlog.checkpoint.own_writes import own_writes_of

THREAD = {"configurable": {"thread_id": "shared"}}


def _graph(saver: Any) -> Any:
    def reply(state: threadlog.MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply to {last.content} at {n}", id=f"ai-{last.id}")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def _turn(graph: Any, tag: str) -> None:
    graph.invoke({"messages": [HumanMessage(tag, id=f"h-{tag}")]}, THREAD)


def _plain_saver(url: str) -> Any:
    """The backend saver as LangGraph ships it: no guard, no cache, no own-writes."""
    if url.startswith("sqlite:///"):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect(url[len("sqlite:///"):], check_same_thread=False))
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    return PostgresSaver(conn)


def _other_process(url: str, how: str, tag: str) -> None:
    if how == "guarded":
        with threadlog.checkpointer(url) as saver:
            _turn(_graph(saver), tag)
        return
    saver = _plain_saver(url)
    if how == "plain":
        _turn(_graph(saver), tag)
    else:  # "write-on-head": a task write stored on the thread's head, no new checkpoint
        head = saver.get_tuple(THREAD)
        assert head is not None
        msg = AIMessage(f"late result {tag}", id=f"late-{tag}")
        saver.put_writes(head.config, [("messages", [msg])], "task-of-another-process")


def _run_elsewhere(url: str, how: str, tag: str) -> None:
    proc = multiprocessing.get_context("spawn").Process(
        target=_other_process, args=(url, how, tag)
    )
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0, f"the second process failed ({how})"


def _fresh_read(url: str) -> list[str]:
    with threadlog.checkpointer(url) as saver:
        values = _graph(saver).get_state(THREAD).values
    return [m.id for m in values["messages"]]


def _ids(graph: Any) -> list[str]:
    return [m.id for m in graph.get_state(THREAD).values["messages"]]


@pytest.mark.parametrize("how", ["guarded", "plain", "write-on-head"])
def test_warm_turns_see_what_another_process_wrote(backend: str, how: str) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver)
        for tag in ("a1", "a2", "a3"):
            _turn(graph, tag)
        cache = history_cache_of(saver.inner)
        assert cache is not None and own_writes_of(saver.inner) is not None
        hits = cache.hits
        _run_elsewhere(backend, how, "b1")
        for tag in ("a4", "a5"):
            _turn(graph, tag)
        assert cache.hits > hits  # the warm path ran, it was not bypassed
        mine = _ids(graph)
    assert mine == _fresh_read(backend)
    expected_other = "late-b1" if how == "write-on-head" else "h-b1"
    assert expected_other in mine
    assert mine.index("h-a3") < mine.index(expected_other) < mine.index("h-a4")
    assert mine[-4:] == ["h-a4", "ai-h-a4", "h-a5", "ai-h-a5"]


def test_a_warm_turn_walks_without_a_query(sqlite_url: str) -> None:
    """Between two turns of one process the walk is answered from memory: the stored
    writes are the same list the database walk returns."""
    from threadlog.checkpoint.backends import backend_of

    with threadlog.checkpointer(sqlite_url) as saver:
        graph = _graph(saver)
        for tag in ("a1", "a2"):
            _turn(graph, tag)
        inner = saver.inner
        own = own_writes_of(inner)
        cache = history_cache_of(inner)
        assert own is not None and cache is not None
        cached_id = cache.get(("shared", "", "messages"))[0]  # type: ignore[index]
        head = saver.get_tuple(THREAD).config["configurable"]["checkpoint_id"]
        db = backend_of(inner).walk("shared", "", ["messages"], head, cached_id, 64)
        mem = own.walk(("shared", ""), ["messages"], head, cached_id, 64)
    assert db is not None and mem is not None
    assert [(t, c, [m.id for m in v]) for t, c, v in mem["messages"]] == [
        (t, c, [m.id for m in v]) for t, c, v in db["messages"]
    ]
    assert [m.id for _, _, v in mem["messages"] for m in v] == ["h-a2", "ai-h-a2"]


def test_a_turn_knows_the_head_from_its_own_read_and_a_named_checkpoint_is_still_checked(
    backend: str,
) -> None:
    """The run read the head right after taking the thread's lock: its input checkpoint
    needs no head query. A run from a named older checkpoint is LangGraph's time travel
    (issue 22; it was refused before): a fork from that checkpoint, no head to check."""
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver)
        _turn(graph, "a1")
        old = saver.get_tuple(THREAD)
        assert old is not None
        _turn(graph, "a2")
        calls: list[tuple[str, str]] = []
        store = saver.store
        real_head = store.head

        def counted(thread_id: str, ns: str) -> str | None:
            calls.append((thread_id, ns))
            return real_head(thread_id, ns)

        store.head = counted
        _turn(graph, "a3")
        assert calls == []
        named = {"configurable": {**THREAD["configurable"],
                                  "checkpoint_id": old.config["configurable"]["checkpoint_id"]}}
        graph.invoke({"messages": [HumanMessage("from the past", id="h-past")]}, named)
        assert calls == []
        store.head = real_head
        ids = [m.id for m in graph.get_state(THREAD).values["messages"]]
        assert "h-a2" not in ids and ids[-2:] == ["h-past", "ai-h-past"]


def _count_reads(monkeypatch: pytest.MonkeyPatch, saver: Any) -> dict[str, int]:
    """Counts the backend class's own checkpoint reads (under every threadlog layer)."""
    from threadlog.checkpoint.backends import unwrap

    cls = type(unwrap(saver))
    counts = {"get_tuple": 0, "get_delta_channel_history": 0}
    for name in counts:
        original = getattr(cls, name)

        def counted(self: Any, *args: Any, _name: str = name, _f: Any = original,
                    **kwargs: Any) -> Any:
            counts[_name] += 1
            return _f(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, counted)
    return counts


def test_a_thread_begun_here_reads_no_history_on_its_second_turn(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread this process started has its whole history in the own-writes record,
    from its first checkpoint on: the second turn is served from memory (it used to make
    the saver's full history read), and what it sees is what the database holds."""
    from threadlog.checkpoint.backends import unwrap

    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver)
        _turn(graph, "a1")
        cache = history_cache_of(saver.inner)
        assert cache is not None and cache.misses == 0
        reads = _count_reads(monkeypatch, saver)
        _turn(graph, "a2")
        assert reads["get_delta_channel_history"] == 0 and cache.misses == 0
        mine = _ids(graph)
        head = saver.get_tuple(THREAD).config
        monkeypatch.undo()
        # the database's own read of the same history
        raw = type(unwrap(saver)).get_delta_channel_history(
            unwrap(saver), config=head, channels=["messages"]
        )["messages"]["writes"]
    assert mine == _fresh_read(backend) == ["h-a1", "ai-h-a1", "h-a2", "ai-h-a2"]
    assert [m.id for _, _, v in raw for m in v] == mine


def test_a_thread_begun_by_another_process_is_read_from_the_database(backend: str) -> None:
    _run_elsewhere(backend, "guarded", "b1")
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver)
        _turn(graph, "a1")
        cache = history_cache_of(saver.inner)
        assert cache is not None and cache.misses == 1  # its first checkpoint is not ours
        mine = _ids(graph)
    assert mine == _fresh_read(backend) == ["h-b1", "ai-h-b1", "h-a1", "ai-h-a1"]


def test_the_whole_history_walk_refuses_a_seed_a_gap_and_a_foreign_write() -> None:
    from threadlog.checkpoint.own_writes import OwnWrites

    def record(root_values: dict[str, Any]) -> OwnWrites:
        own = OwnWrites()
        key = ("t", "")
        own.put(key, "c1", None, root_values)
        own.put_writes(key, "c1", [("messages", ["m1"])], "task-1", "")
        own.put(key, "c2", "c1", {})
        own.put_writes(key, "c2", [("messages", ["m2"])], "task-2", "")
        own.put(key, "c3", "c2", {})
        return own

    assert record({}).walk(("t", ""), ["messages"], "c3", None, 64) == {
        "messages": [("task-1", "messages", ["m1"]), ("task-2", "messages", ["m2"])]
    }
    # the first checkpoint holds a value (a snapshot, a copied thread): the saver reads
    assert record({"messages": ["m0"]}).walk(("t", ""), ["messages"], "c3", None, 64) is None
    assert record({}).walk(("t", ""), ["messages"], "c3", None, 1) is None  # past max_walk
    gap = record({})
    gap._threads[("t", "")].pop("c1")  # trimmed: the root is no longer known
    assert gap.walk(("t", ""), ["messages"], "c3", None, 64) is None
    foreign = record({})
    foreign.seen(("t", ""), "c2", [("task-of-another", "messages", ["x"])])
    assert foreign.walk(("t", ""), ["messages"], "c3", None, 64) is None
    # a cached checkpoint that is not on the chain: a root is reached, nothing is answered
    assert record({}).walk(("t", ""), ["messages"], "c3", "elsewhere", 64) is None


def test_a_new_threads_input_is_checked_without_reading_its_first_checkpoint(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = _graph(saver)
        reads = _count_reads(monkeypatch, saver)
        graph.invoke({"messages": [HumanMessage("hi", id="h-1")]},
                     {"configurable": {"thread_id": "fresh"}})
        # the run's read of the (empty) head only: no read of a checkpoint by id
        assert reads["get_tuple"] == 1 and reads["get_delta_channel_history"] == 0
        with pytest.raises(threadlog.ConflictingIdError, match="h-2"):
            graph.invoke(
                {"messages": [HumanMessage("a", id="h-2"), HumanMessage("b", id="h-2")]},
                {"configurable": {"thread_id": "fresh-2"}},
            )
        assert graph.get_state({"configurable": {"thread_id": "fresh-2"}}).values == {}
