"""The per-thread run guard (`threadlog.checkpoint.guard`), piece by piece."""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

import threadlog


def _slow_echo(saver: Any, delay: float = 0.5) -> Any:
    def model(state: dict[str, Any]) -> dict[str, Any]:
        time.sleep(delay)
        return {"messages": [("assistant", f"seen {len(state['messages'])}")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    g.add_edge("model", END)
    return g.compile(checkpointer=saver)


def test_concurrent_error_survives_pickling() -> None:
    err = threadlog.ConcurrentRunError("x moved", thread_id="t", checkpoint_id="a", head="b")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, threadlog.ConcurrentRunError)
    assert (back.thread_id, back.checkpoint_id, back.head) == ("t", "a", "b")
    assert str(back) == str(err) and "retry" in str(err)


@pytest.mark.parametrize("strategy", ["enqueue", "reject"])
@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_two_runs_started_together_take_whole_turns_or_the_second_is_refused(
    url: str, strategy: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}" if url == "sqlite" else url
    config = {"configurable": {"thread_id": "t"}}
    with threadlog.checkpointer(url, multitask_strategy=strategy) as saver:
        graph = _slow_echo(saver)
        graph.invoke({"messages": [("user", "first")]}, config)
        errors: list[threadlog.ConcurrentRunError] = []
        barrier = threading.Barrier(2)

        def go(text: str) -> None:
            barrier.wait()
            try:
                graph.invoke({"messages": [{"role": "user", "content": text, "id": text}]},
                             config)
            except threadlog.ConcurrentRunError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=go, args=(t,)) for t in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        messages = graph.get_state(config).values["messages"]
        history = list(graph.get_state_history(config))
    ids = [m.id for m in messages]
    users = [i for i in ids if i in ("a", "b")]
    if strategy == "enqueue":
        assert errors == [] and sorted(users) == ["a", "b"]  # the second waited its turn
    else:
        assert len(errors) == 1 and len(users) == 1  # the refused run stored nothing
        assert "multitask_strategy='reject'" in str(errors[0])
    # Whole turns: user, answer, user, answer — each answer saw its own input last.
    texts = [m.content for m in messages]
    assert texts[1::2] == [f"seen {n}" for n in range(1, len(texts), 2)]
    parents = [s.parent_config["configurable"]["checkpoint_id"]
               for s in history if s.parent_config]
    assert len(parents) == len(set(parents))  # linear


def test_update_state_fork_is_allowed_and_stale_writes_are_not(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "f"}}
    url = f"sqlite:///{tmp_path / 'f.db'}"
    with threadlog.checkpointer(url) as saver:
        graph = _slow_echo(saver, 0)
        graph.invoke({"messages": [("user", "one")]}, config)
        old = list(graph.get_state_history(config))[-2]  # after the first input
        graph.invoke({"messages": [("user", "two")]}, config)
        fork = graph.update_state(old.config, {"messages": []})  # source "update": allowed
        assert fork["configurable"]["checkpoint_id"] != old.config["configurable"][
            "checkpoint_id"]
    # Another worker's task write landing on a checkpoint that already has children is
    # refused (the saver that stored those children may still be finishing its own).
    stale = {"configurable": {**old.config["configurable"], "checkpoint_ns": ""}}
    with threadlog.checkpointer(url) as other_worker:
        with pytest.raises(threadlog.ConcurrentRunError, match="newer checkpoint"):
            other_worker.put_writes(stale, [("messages", [("user", "late")])], "some-task")


def _hold(url: str, ready: Any, release: Any) -> None:
    with threadlog.checkpointer(url) as saver:
        with saver.exclusive("x"):
            ready.set()
            release.wait(30)


def test_exclusive_refuses_a_second_holder_in_another_process(backend: str) -> None:
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(backend, ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with threadlog.checkpointer(backend) as saver:
            with pytest.raises(threadlog.ConcurrentRunError, match="holds this thread"):
                with saver.exclusive("x"):
                    pass
            with saver.exclusive("another-thread"):
                pass  # other threads are free
    finally:
        release.set()
        holder.join(30)
    with threadlog.checkpointer(backend) as saver:
        with saver.exclusive("x"):  # released with its holder
            pass


def test_exclusive_lock_dies_with_a_killed_holder(backend: str) -> None:
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(backend, ready, release))
    holder.start()
    assert ready.wait(30)
    holder.kill()  # SIGKILL: no cleanup code runs
    holder.join(30)
    with threadlog.checkpointer(backend) as saver:
        with saver.exclusive("x", wait=True):
            pass


@pytest.mark.parametrize("strategy", ["enqueue", "reject"])
async def test_async_saver_guards_concurrent_runs_too(backend: str, strategy: str) -> None:
    import asyncio

    config = {"configurable": {"thread_id": "as"}}
    async with threadlog.acheckpointer(backend, multitask_strategy=strategy) as saver:
        graph = _slow_echo(saver, 0)

        async def turn(text: str) -> str:
            try:
                await graph.ainvoke(
                    {"messages": [{"role": "user", "content": text, "id": text}]}, config
                )
            except threadlog.ConcurrentRunError:
                return "refused"
            return "ok"

        await graph.ainvoke({"messages": [("user", "first")]}, config)
        outcomes = await asyncio.gather(*(turn(f"m{i}") for i in range(4)))
        state = await graph.aget_state(config)
        history = [s async for s in graph.aget_state_history(config)]
    if strategy == "enqueue":
        assert outcomes == ["ok"] * 4
    else:
        assert "ok" in outcomes and "refused" in outcomes
    ids = [m.id for m in state.values["messages"]]
    assert len(ids) == len(set(ids))
    for i, outcome in enumerate(outcomes):
        assert (f"m{i}" in ids) == (outcome == "ok")  # a refused run stored nothing
    parents = [s.parent_config["configurable"]["checkpoint_id"]
               for s in history if s.parent_config]
    assert len(parents) == len(set(parents))  # linear


def test_new_input_is_refused_when_another_run_stored_results_after_it_read(
    tmp_path: Path,
) -> None:
    # Worker B reads the head, worker A then stores a task result on it, and B's new
    # input lands on that head. LangGraph drops the head's task writes from B's state
    # but readers replay them into B's branch: B must be told to re-read, not stored.
    url = f"sqlite:///{tmp_path / 'race.db'}"
    config = {"configurable": {"thread_id": "t"}}
    with threadlog.checkpointer(url) as saver_a, threadlog.checkpointer(url) as saver_b:
        graph = _slow_echo(saver_a, delay=0)
        graph.invoke({"messages": [("user", "first")]}, config)
        head = saver_b.get_tuple(config)
        assert head is not None
        saver_a.put_writes(
            head.config, [("messages", [("assistant", "late")])], "another-runs-task"
        )
        with pytest.raises(threadlog.ConcurrentRunError, match="after this run read it"):
            saver_b.put(
                head.config,
                {**head.checkpoint, "id": "1f0-input"},
                {"source": "input", "step": -1, "parents": {}},
                {},
            )
        # Having read the writes, B may go on.
        fresh = saver_b.get_tuple(config)
        assert fresh is not None
        saver_b.put(
            fresh.config,
            {**fresh.checkpoint, "id": "1f0-input-2"},
            {"source": "input", "step": -1, "parents": {}},
            {},
        )


def test_reading_a_thread_leaves_no_lock_files_next_to_the_database(tmp_path: Path) -> None:
    db = tmp_path / "read.db"
    config = {"configurable": {"thread_id": "r"}}
    with threadlog.checkpointer(f"sqlite:///{db}") as saver:
        _slow_echo(saver, 0).invoke({"messages": [("user", "hi")]}, config)
    for extra in tmp_path.glob("read.db.threadlog-*"):  # the writer's own lock files
        shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    with threadlog.checkpointer(f"sqlite:///{db}") as saver:
        graph = _slow_echo(saver, 0)
        assert [m.content for m in graph.get_state(config).values["messages"]] == [
            "hi", "seen 1"]
        assert len(list(graph.get_state_history(config))) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["read.db"]


def test_update_state_does_not_land_inside_a_running_turn(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "u"}}
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'u.db'}",
                                multitask_strategy="reject") as saver:
        graph = _slow_echo(saver, 0.5)
        graph.invoke({"messages": [("user", "first")]}, config)
        run = threading.Thread(
            target=graph.invoke, args=({"messages": [("user", "second")]}, config)
        )
        run.start()
        deadline = time.monotonic() + 10
        while graph.get_state(config).values["messages"][-1].content != "second":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(threadlog.ConcurrentRunError, match="stored nothing"):
            graph.update_state(config, {"messages": [("user", "edit")]})
        run.join()
        graph.update_state(config, {"messages": [("user", "edit")]})  # the turn is over
        texts = [m.content for m in graph.get_state(config).values["messages"]]
    assert texts == ["first", "seen 1", "second", "seen 3", "edit"]


@pytest.mark.parametrize("how", ["per thread", "per run"])
def test_the_strategy_can_be_chosen_per_thread_and_per_run(how: str) -> None:
    config: dict[str, Any] = {"configurable": {"thread_id": "s"}}
    with threadlog.checkpointer("memory://") as saver:  # the saver's default: enqueue
        graph = _slow_echo(saver, 0.3)
        if how == "per thread":
            saver.set_multitask_strategy("s", "reject")
        else:
            config = {"configurable": {"thread_id": "s", "multitask_strategy": "reject"}}
        first = threading.Thread(target=graph.invoke, args=({"messages": [("user", "a")]},
                                                             config))
        first.start()
        deadline = time.monotonic() + 10
        while not graph.get_state(config).values:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(threadlog.ConcurrentRunError, match="reject"):
            graph.invoke({"messages": [("user", "b")]}, config)
        first.join()
        assert [m.content for m in graph.get_state(config).values["messages"]] == [
            "a", "seen 1"]
        with pytest.raises(ValueError, match="enqueue, reject"):
            saver.set_multitask_strategy("s", "interleave")  # type: ignore[arg-type]


# -- which puts the guard orders (docs/durability.md, "Which writes the guard orders") --


def _checkpoint_ids(saver: Any, config: Any) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_direct_root_put_outside_any_run_is_stored_as_given(api: str, tmp_path: Path) -> None:
    # The low-level saver API, as LangGraph's conformance suite uses it: user code puts a
    # checkpoint with no parent on a thread that already has a history. Every LangGraph
    # saver stores it, and the thread goes on from it (it is the newest checkpoint).
    url = f"sqlite:///{tmp_path / 'd.db'}"
    config = {"configurable": {"thread_id": "d"}}
    root = {"configurable": {"thread_id": "d", "checkpoint_ns": ""}}
    meta: Any = {"source": "input", "step": -1, "parents": {}, "score": 42}

    def sync() -> tuple[Any, Any, list[Any], list[str]]:
        with threadlog.checkpointer(url) as saver:
            graph = _slow_echo(saver, 0)
            graph.invoke({"messages": [("user", "one")]}, config)
            cp = empty_checkpoint()
            stored = saver.put(root, cp, meta, {})
            head = saver.get_tuple(config)
            roots = [t for t in saver.list(config) if t.parent_config is None]
            after = graph.invoke({"messages": [("user", "two")]}, config)
            return (cp, stored, [head, roots], [m.content for m in after["messages"]])

    async def async_() -> tuple[Any, Any, list[Any], list[str]]:
        async with threadlog.acheckpointer(url) as saver:
            graph = _slow_echo(saver, 0)
            await graph.ainvoke({"messages": [("user", "one")]}, config)
            cp = empty_checkpoint()
            stored = await saver.aput(root, cp, meta, {})
            head = await saver.aget_tuple(config)
            roots = [t async for t in saver.alist(config) if t.parent_config is None]
            after = await graph.ainvoke({"messages": [("user", "two")]}, config)
            return (cp, stored, [head, roots], [m.content for m in after["messages"]])

    cp, stored, (head, roots), after = sync() if api == "sync" else asyncio.run(async_())
    assert stored["configurable"]["checkpoint_id"] == cp["id"]
    assert head.checkpoint["id"] == cp["id"] and head.metadata["score"] == 42
    assert len(roots) == 2  # the run's first checkpoint and the direct one
    assert after == ["two", "seen 1"]  # the next run went on from the direct root


def test_a_put_from_a_stale_parent_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    # The other side: a run's checkpoints and any put naming a parent must follow the
    # thread's head — a stale head not named on purpose is refused. (Issue 22: a *run*
    # from an old checkpoint it names is LangGraph's time-travel fork, and runs: below.)
    config = {"configurable": {"thread_id": "s"}}
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 's.db'}") as saver:
        graph = _slow_echo(saver, 0)
        graph.invoke({"messages": [("user", "one")]}, config)
        old = graph.get_state(config)  # the end of turn one
        graph.invoke({"messages": [("user", "two")]}, config)
        before = _checkpoint_ids(saver, config)
        stale = {"configurable": {**old.config["configurable"], "checkpoint_ns": ""}}
        with pytest.raises(threadlog.ConcurrentRunError, match="the thread's head is now"):
            saver.put(stale, empty_checkpoint(), {"source": "loop", "step": 9, "parents": {}}, {})
        assert _checkpoint_ids(saver, config) == before
        texts = [m.content for m in graph.get_state(config).values["messages"]]
        assert texts == ["one", "seen 1", "two", "seen 3"]


@pytest.mark.parametrize("scheme", ["sqlite", "postgres"])
def test_new_input_at_a_named_older_checkpoint_runs_as_a_fork(
    scheme: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # LangGraph's documented time travel: invoke with an older checkpoint's config.
    url = (f"sqlite:///{tmp_path / 'f.db'}" if scheme == "sqlite"
           else request.getfixturevalue("pg_backend"))
    config = {"configurable": {"thread_id": "f"}}
    with threadlog.checkpointer(url) as saver:
        graph = _slow_echo(saver, 0)
        graph.invoke({"messages": [("user", "one")]}, config)
        old = graph.get_state(config)
        graph.invoke({"messages": [("user", "two")]}, config)
        out = graph.invoke({"messages": [("user", "two, differently")]}, old.config)
        assert [m.content for m in out["messages"]][:3] == ["one", "seen 1", "two, differently"]
        # The fork is the newest branch; the first branch still reads as it was.
        head = graph.get_state(config)
        assert [m.content for m in head.values["messages"]][2] == "two, differently"
        first = [s for s in graph.get_state_history(config)
                 if [m.content for m in s.values.get("messages", [])][2:3] == ["two"]]
        assert first, "the original branch is kept"
        graph.invoke({"messages": [("user", "three")]}, config)  # the thread goes on
        assert [m.content for m in graph.get_state(config).values["messages"]][-2] == "three"


def test_a_finished_run_leaves_nothing_of_itself_in_the_guard(sqlite_url: str) -> None:
    # A long-lived server serves thread after thread: a finished run's Runtime (which
    # reaches its loop and the whole log) must not stay referenced by the saver.
    import gc

    from langgraph.runtime import Runtime

    def node(state: threadlog.MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", "hi")]}

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, Runtime))

    g = StateGraph(threadlog.MessagesState)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    with threadlog.checkpointer(sqlite_url) as saver:
        app = g.compile(checkpointer=saver)
        before = alive()
        for i in range(5):
            app.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": f"t{i}"}})
        assert alive() == before
