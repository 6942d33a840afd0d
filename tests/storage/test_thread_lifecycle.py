"""The thread lifecycle on threadlog's saver (`threadlog.checkpoint.lifecycle`), on real
agent threads — messages, tool pairs, compaction events, an approval pause — on memory,
SQLite and Postgres: `delete_for_runs` (LangGraph Server's rollback), `copy_thread` and
`prune` leave every thread readable, its checksums passing, its log fully paired, and the
next turn continuing from it; bad input changes nothing."""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

import threadlog
from threadlog.checkpoint.integrity import CHAIN_KEY
from threadlog.log.messages import digest
from threadlog.log.pairing import open_calls

ran: list[str] = []


class Counted(TypedDict):
    """A state with a `DeltaChannel` of the user's own (not one of threadlog's logs)."""

    n: Annotated[list[int], DeltaChannel(operator.add)]


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    ran.append(city)
    return f"{city}: sunny"


QUESTIONS = ["Beijing?", "Shanghai and Chengdu?", "Paris?"]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'c.db'}"
    return str(request.getfixturevalue("pg_databases").take())


def _agent(saver: Any, **kw: Any) -> Any:
    return threadlog.create_agent(
        threadlog.OfflineChatModel(),
        [get_weather],
        checkpointer=saver,
        context=threadlog.ContextPolicy(max_turns=2),
        **kw,
    )


def _cfg(tid: str, run: str | None = None) -> Any:
    cfg: Any = {"configurable": {"thread_id": tid}}
    if run is not None:
        cfg["metadata"] = {"run_id": run}
    return cfg


def _turns(app: Any, tid: str, questions: list[str], first: int = 0) -> None:
    for i, q in enumerate(questions, first):
        app.invoke(
            {"messages": [{"role": "user", "content": q, "id": f"u{i}"}]}, _cfg(tid, f"r{i}")
        )


def _read(app: Any, tid: str) -> tuple[list[tuple[str, str]], Any]:
    values = app.get_state(_cfg(tid)).values
    return [(m.id, digest(m)) for m in values["messages"]], values.get("compactions")


def _paired(app: Any, tid: str) -> bool:
    messages = app.get_state(_cfg(tid)).values["messages"]
    return not open_calls(messages)


def _checkpoints(saver: Any, tid: str) -> list[Any]:
    return list(saver.list(_cfg(tid)))


@pytest.fixture
def saver(url: str) -> Iterator[Any]:
    with threadlog.checkpointer(url) as s:
        yield s


def test_prune_keep_latest_keeps_the_head_reading_the_same_and_the_next_turn_continues(
    saver: Any, url: str
) -> None:
    app = _agent(saver)
    _turns(app, "t", QUESTIONS)
    before = _read(app, "t")
    assert before[1]  # the context policy recorded compaction events
    assert len(_checkpoints(saver, "t")) > 5
    saver.prune(["t"], strategy="keep_latest")
    (head,) = _checkpoints(saver, "t")
    assert head.parent_config is None
    assert CHAIN_KEY not in head.metadata or "messages" not in head.metadata[CHAIN_KEY]
    assert _read(app, "t") == before
    _turns(app, "t", ["Rome?"], first=3)
    assert _paired(app, "t")
    ids = [i for i, _ in _read(app, "t")[0]]
    assert ids[: len(before[0])] == [i for i, _ in before[0]]
    if url != "memory://":  # a cold process reads it, its checksums checked
        with threadlog.checkpointer(url) as cold:
            assert _read(_agent(cold), "t")[0][: len(before[0])] == before[0]


def test_prune_keep_latest_keeps_the_view_and_drops_what_a_removal_hid(
    saver: Any, url: str
) -> None:
    """A summarizing app's own node removes old messages (`RemoveMessage`): before the
    prune the inspector lists them with the removal; the head's snapshot holds the view
    the app reads (as LangGraph's own snapshots do), so after `keep_latest` the view and
    the next turn are unchanged and the hidden messages are gone with the pruned
    checkpoints (`threadlog prune --archive` keeps them)."""
    from langchain_core.messages import HumanMessage, RemoveMessage

    from threadlog import inspect

    def chat(state: Any) -> Any:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply {n}", id=f"a-{state['messages'][-1].id}")]}

    def forget(state: Any) -> Any:
        old = state["messages"][:-2]
        return {"messages": [RemoveMessage(id=m.id) for m in old]} if len(old) > 2 else {}

    builder = StateGraph(threadlog.MessagesState)
    builder.add_node("chat", chat)
    builder.add_node("forget", forget)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", "forget")
    builder.add_edge("forget", END)
    app = builder.compile(checkpointer=saver)
    for i in range(5):
        app.invoke({"messages": [HumanMessage(f"q{i}", id=f"h{i}")]}, _cfg("rm"))
    view = [m.id for m in app.get_state(_cfg("rm")).values["messages"]]
    assert view == ["h4", "a-h4"]
    assert {r.message.id for r in inspect.thread(app, _cfg("rm")).removed()} >= {"h0", "a-h0"}
    saver.prune(["rm"], strategy="keep_latest")
    assert [m.id for m in app.get_state(_cfg("rm")).values["messages"]] == view
    assert inspect.thread(app, _cfg("rm")).removed() == []
    app.invoke({"messages": [HumanMessage("q5", id="h5")]}, _cfg("rm"))
    assert [m.id for m in app.get_state(_cfg("rm")).values["messages"]] == [
        *view, "h5", "a-h5"
    ]


def test_prune_keep_latest_at_an_approval_pause_keeps_the_open_call_and_resumes_it_once(
    saver: Any,
) -> None:
    app = _agent(saver, requires_approval=["get_weather"])
    cfg = _cfg("t")
    app.invoke({"messages": [{"role": "user", "content": "Beijing?", "id": "u0"}]}, cfg)
    app.invoke(Command(resume={"action": "approve"}), cfg)
    app.invoke({"messages": [{"role": "user", "content": "Shanghai?", "id": "u1"}]}, cfg)
    paused = app.get_state(cfg)
    assert paused.next  # the approval interrupt waits
    calls_before = open_calls(paused.values["messages"])
    assert calls_before
    saver.prune(["t"])
    assert len(_checkpoints(saver, "t")) == 1
    still = app.get_state(cfg)
    assert still.next == paused.next
    assert open_calls(still.values["messages"]) == calls_before
    del ran[:]
    app.invoke(Command(resume={"action": "approve"}), cfg)
    assert ran == ["Shanghai"]
    assert _paired(app, "t")


def test_prune_delete_drops_the_thread_and_leaves_others(saver: Any) -> None:
    app = _agent(saver)
    _turns(app, "a", QUESTIONS[:1])
    _turns(app, "b", QUESTIONS[:1])
    other = _read(app, "b")
    saver.prune(["a"], strategy="delete")
    assert _checkpoints(saver, "a") == []
    assert _read(app, "b") == other


def test_an_unknown_prune_strategy_is_one_error_and_changes_nothing(saver: Any) -> None:
    app = _agent(saver)
    _turns(app, "t", QUESTIONS[:2])
    ids = [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")]
    with pytest.raises(ValueError, match="unknown prune strategy 'keep_oldest'"):
        saver.prune(["t"], strategy="keep_oldest")
    with pytest.raises(TypeError, match="not the str"):
        saver.prune("t")
    assert [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")] == ids


def test_rollback_of_the_newest_run_returns_the_thread_to_the_turn_before(saver: Any) -> None:
    app = _agent(saver)
    _turns(app, "t", QUESTIONS[:2])
    after_first = None
    for tup in _checkpoints(saver, "t"):
        if tup.metadata.get("run_id") == "r0":
            after_first = tup
            break
    assert after_first is not None
    _turns(app, "t", QUESTIONS[2:], first=2)
    kept_before = _read(app, "t")
    saver.delete_for_runs(["r2"])
    assert {c.metadata.get("run_id") for c in _checkpoints(saver, "t")} == {"r0", "r1"}
    head = _read(app, "t")
    assert head[0] == kept_before[0][: len(head[0])]
    assert [m for m, _ in head[0]][-1] != "u2"
    assert "u2" not in [m for m, _ in head[0]]
    assert _paired(app, "t")
    _turns(app, "t", ["Rome?"], first=3)
    assert _paired(app, "t")


def test_rollback_of_a_run_paused_inside_a_tool_call_leaves_a_paired_log(saver: Any) -> None:
    app = _agent(saver, requires_approval=["get_weather"])
    cfg0 = _cfg("t", "r0")
    app.invoke({"messages": [{"role": "user", "content": "Beijing?", "id": "u0"}]}, cfg0)
    app.invoke(Command(resume={"action": "approve"}), cfg0)
    done = _read(app, "t")
    assert _paired(app, "t")
    app.invoke(
        {"messages": [{"role": "user", "content": "Shanghai?", "id": "u1"}]}, _cfg("t", "r1")
    )
    assert not _paired(app, "t")  # r1's call waits for approval
    saver.delete_for_runs(["r1"])
    assert _read(app, "t") == done
    assert _paired(app, "t")
    _turns(app, "t", ["Rome?"], first=2)
    assert _paired(app, "t")


def test_rollback_of_a_middle_run_keeps_later_runs_reading_the_same_and_checksums_passing(
    saver: Any, url: str
) -> None:
    app = _agent(saver)
    _turns(app, "t", QUESTIONS)
    before = _read(app, "t")
    saver.delete_for_runs(["r1"])
    left = _checkpoints(saver, "t")
    assert {c.metadata.get("run_id") for c in left} == {"r0", "r2"}
    # Every kept checkpoint reads (each is checked against its re-sealed checksums).
    for tup in left:
        app.get_state(tup.config)
    assert _read(app, "t") == before
    _turns(app, "t", ["Rome?"], first=3)
    assert _paired(app, "t")
    if url != "memory://":
        with threadlog.checkpointer(url) as cold:
            capp = _agent(cold)
            for tup in _checkpoints(cold, "t"):
                capp.get_state(tup.config)


def test_rollback_of_a_run_on_no_thread_changes_nothing(saver: Any) -> None:
    app = _agent(saver)
    _turns(app, "t", QUESTIONS[:1])
    ids = [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")]
    saver.delete_for_runs(["no-such-run"])
    saver.delete_for_runs([])
    assert [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")] == ids


def test_copy_thread_reads_identically_and_continues_on_its_own(saver: Any) -> None:
    app = _agent(saver)
    _turns(app, "src", QUESTIONS)
    source = _read(app, "src")
    saver.copy_thread("src", "dst")
    assert _read(app, "dst") == source
    src_ids = [
        (c.config["configurable"]["checkpoint_id"], c.metadata) for c in _checkpoints(saver, "src")
    ]
    dst_ids = [
        (c.config["configurable"]["checkpoint_id"], c.metadata) for c in _checkpoints(saver, "dst")
    ]
    assert dst_ids == src_ids  # same ids, same metadata (checksums included)
    _turns(app, "dst", ["Rome?"], first=3)
    assert _paired(app, "dst")
    assert _read(app, "src") == source
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("src", "dst")


def test_a_held_thread_is_refused_under_reject_and_waited_for_under_enqueue(saver: Any) -> None:
    app = _agent(saver)
    _turns(app, "t", QUESTIONS[:2])
    ids = [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")]
    holding = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with saver.exclusive("t"):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        saver.set_multitask_strategy("t", "reject")
        with pytest.raises(threadlog.ConcurrentRunError, match="changed nothing"):
            saver.prune(["t"])
        with pytest.raises(threadlog.ConcurrentRunError):
            saver.delete_for_runs(["r1"])
        assert [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")] == ids
        saver.set_multitask_strategy("t", "enqueue")
        threading.Timer(0.3, release.set).start()
        started = time.monotonic()
        saver.prune(["t"])  # waits for the holder
        assert time.monotonic() - started >= 0.2
    finally:
        release.set()
        holder.join()
    assert len(_checkpoints(saver, "t")) == 1


def test_the_async_saver_runs_the_same_lifecycle(url: str) -> None:

    async def main() -> tuple[Any, Any, Any]:
        async with threadlog.acheckpointer(url) as s:
            app = _agent(s)
            for i, q in enumerate(QUESTIONS):
                msg = {"messages": [{"role": "user", "content": q, "id": f"u{i}"}]}
                await app.ainvoke(msg, _cfg("t", f"r{i}"))
            before = (await app.aget_state(_cfg("t"))).values["messages"]
            await s.acopy_thread("t", "c")
            await s.adelete_for_runs(["r2"])  # on the copy too: its checkpoints are r2's
            await s.aprune(["t"])
            head = (await app.aget_state(_cfg("t"))).values["messages"]
            copy = (await app.aget_state(_cfg("c"))).values["messages"]
            n = len([t async for t in s.alist(_cfg("t"))])
            return before, head, (copy, n)

    before, head, (copy, n) = asyncio.run(main())
    assert [m.id for m in copy] == [m.id for m in head]
    assert n == 1
    assert "u2" not in [m.id for m in head]
    assert [m.id for m in head] == [m.id for m in before][: len(head)]
    assert isinstance(head[-1], AIMessage | ToolMessage) or head[-1].id


def test_prune_keep_latest_keeps_a_finished_siblings_result_and_runs_only_the_paused_call(
    saver: Any,
) -> None:
    app = _agent(saver, requires_approval=["get_weather"], per_call_branches=True)
    cfg = _cfg("t")
    out = app.invoke(
        {"messages": [{"role": "user", "content": "Shanghai and Chengdu?", "id": "u0"}]}, cfg
    )
    first, second = out["__interrupt__"]
    del ran[:]
    app.invoke(Command(resume={first.id: {"action": "approve"}}), cfg)
    assert len(ran) == 1  # one sibling ran; its result is a write on the head
    saver.prune(["t"])
    assert len(_checkpoints(saver, "t")) == 1
    out = app.invoke(Command(resume={second.id: {"action": "approve"}}), cfg)
    assert sorted(ran) == ["Chengdu", "Shanghai"]  # the finished one did not run again
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 2 and _paired(app, "t")


def test_prune_keep_latest_keeps_a_reviewers_edit_and_its_audit(saver: Any) -> None:
    from threadlog.log.edits import edits_of

    app = _agent(saver, requires_approval=["get_weather"])
    cfg = _cfg("t")
    app.invoke({"messages": [{"role": "user", "content": "Beijing?", "id": "u0"}]}, cfg)
    app.invoke(Command(resume={"action": "edit", "args": {"city": "Nanjing"}}), cfg)
    app.invoke({"messages": [{"role": "user", "content": "Paris?", "id": "u1"}]}, cfg)
    app.invoke(Command(resume={"action": "approve"}), cfg)

    def edited() -> list[Any]:
        messages = app.get_state(cfg).values["messages"]
        return [(m.id, m.tool_calls, edits_of(m)) for m in messages if edits_of(m)]

    before = edited()
    assert before and before[0][1][0]["args"] == {"city": "Nanjing"}
    saver.prune(["t"])
    assert edited() == before
    _turns(app, "t", ["Rome?"], first=2)


def test_a_delta_channel_that_is_not_threadlogs_is_refused_and_nothing_changes(
    saver: Any,
) -> None:
    builder = StateGraph(Counted)
    builder.add_node("add", lambda state: {"n": [1]})
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    graph = builder.compile(checkpointer=saver)
    for _ in range(3):
        graph.invoke({"n": [0]}, _cfg("t"))
    value = graph.get_state(_cfg("t")).values
    ids = [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")]
    with pytest.raises(ValueError, match=r"channel 'n' is rebuilt .* nothing was changed"):
        saver.prune(["t"])
    assert [c.config["configurable"]["checkpoint_id"] for c in _checkpoints(saver, "t")] == ids
    assert graph.get_state(_cfg("t")).values == value


def test_prune_keep_latest_frees_the_rows_and_values_it_drops(saver: Any, url: str) -> None:
    from threadlog.checkpoint.backends import backend_of

    app = _agent(saver)
    _turns(app, "t", [f"Turn {i}: Beijing and Paris?" for i in range(6)])
    backend = backend_of(saver.inner)
    before = sum((backend.stored_bytes("t", "") or {}).values())
    saver.prune(["t"])
    after = sum((backend.stored_bytes("t", "") or {}).values())
    assert 0 < after < before
    if url.startswith("postgresql"):
        import psycopg

        (head,) = _checkpoints(saver, "t")
        versions = head.checkpoint["channel_versions"]
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT channel, version FROM checkpoint_blobs WHERE thread_id = 't'"
            ).fetchall()
        assert rows and all(versions.get(ch) == ver for ch, ver in rows)
    if url == "memory://":
        (head,) = _checkpoints(saver, "t")
        versions = head.checkpoint["channel_versions"]
        keys = [k for k in saver.inner.blobs if k[0] == "t"]
        assert keys and all(versions.get(ch) == ver for _, _, ch, ver in keys)
