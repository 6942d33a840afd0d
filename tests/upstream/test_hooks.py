"""threadlog's hooks into LangGraph (`threadlog._upstream`, "Hooks"): wrapped once, published
only while the hooked call runs, verified before a guarded saver is handed out — and an
incompatible LangGraph is refused with `UpstreamChangedError` instead of running unguarded."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib.metadata
import pathlib
import pickle
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.pregel._loop import SyncPregelLoop

import threadlog
from threadlog import _upstream

ENTRY_POINTS = [
    pytest.param(cls, attr, is_async, id=f"{cls.__name__}.{attr}")
    for cls, attr, _, is_async in _upstream._ENTRY_POINTS
]


@pytest.fixture(autouse=True)
def hooks_installed() -> None:
    """The hooks are in place, as once any threadlog graph or saver has been built in the
    process (nothing is wrapped at import: `test_no_global_patching.py`)."""
    _upstream.install_hooks()


@pytest.fixture
def unverified(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process has not verified the hooks yet (restored afterwards)."""
    monkeypatch.setattr(_upstream, "_VERIFIED", set())


def _langgraphs_own(fn: Any) -> Any:
    """LangGraph's function under threadlog's hook (the hook is the outermost wrapper)."""
    assert getattr(fn, "_threadlog_hook", None) is not None
    return fn.__wrapped__


def _thin_wrappers(fn: Callable[..., Any]) -> Callable[..., Any]:
    # Three distinct functions, as a decorator or two in a LangGraph release would add.
    def one(self: Any, *a: Any, **k: Any) -> Any:
        return fn(self, *a, **k)

    def two(self: Any, *a: Any, **k: Any) -> Any:
        return one(self, *a, **k)

    def three(self: Any, *a: Any, **k: Any) -> Any:
        return two(self, *a, **k)

    return three


@pytest.mark.parametrize(("cls", "attr", "is_async"), ENTRY_POINTS)
async def test_a_hook_that_no_longer_fires_makes_checkpointer_refuse_naming_version_and_entry(
    cls: type, attr: str, is_async: bool, unverified: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if LangGraph had replaced the hooked function after threadlog wrapped it (or no
    # longer called it): the hook never fires.
    monkeypatch.setattr(cls, attr, _langgraphs_own(getattr(cls, attr)))
    version = importlib.metadata.version("langgraph")
    with pytest.raises(threadlog.UpstreamChangedError) as caught:
        if is_async:
            async with threadlog.acheckpointer("memory://"):
                pass
        else:
            with threadlog.checkpointer("memory://"):
                pass
    err = caught.value
    assert (err.package, err.version) == ("langgraph", version)
    assert f"langgraph {version}" in str(err)
    assert f"{cls.__name__}.{attr}" in str(err)
    # Not cached: it fails again, and an explicitly unguarded saver is still handed out.
    with pytest.raises(threadlog.UpstreamChangedError):
        if is_async:
            await _upstream.averify_hooks()
        else:
            _upstream.verify_hooks()
    if is_async:
        async with threadlog.acheckpointer("memory://", guard=False):
            pass
    else:
        with threadlog.checkpointer("memory://", guard=False):
            pass


@pytest.mark.parametrize("wrapped", ["after threadlog's hook", "before threadlog's hook"])
def test_two_turns_at_once_take_whole_turns_when_langgraph_wraps_the_loops_enter(
    wrapped: str, tmp_path: Path, unverified: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 20's probe: the hook does not depend on how deep the loop's read of its thread
    # sits below `SyncPregelLoop.__enter__`, and re-installing wraps a new function again.
    hooked = SyncPregelLoop.__enter__
    if wrapped.startswith("after"):
        monkeypatch.setattr(SyncPregelLoop, "__enter__", _thin_wrappers(hooked))
    else:
        thin = _thin_wrappers(_langgraphs_own(hooked))
        monkeypatch.setattr(SyncPregelLoop, "__enter__", thin)
        _upstream._install_hooks()
        assert SyncPregelLoop.__enter__.__wrapped__ is thin  # type: ignore[attr-defined]

    spans: list[tuple[float, float]] = []

    def model(state: dict[str, Any]) -> dict[str, Any]:
        start = time.monotonic()
        time.sleep(0.4)
        spans.append((start, time.monotonic()))
        return {"messages": [("assistant", f"seen {len(state['messages'])}")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    g.add_edge("model", END)
    config: Any = {"configurable": {"thread_id": "t"}}
    errors: list[BaseException] = []
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'probe.db'}") as saver:
        graph = g.compile(checkpointer=saver)
        barrier = threading.Barrier(2)

        def turn(text: str) -> None:
            barrier.wait()
            try:
                graph.invoke({"messages": [{"role": "user", "content": text, "id": text}]},
                             config)
            except BaseException as exc:
                errors.append(exc)

        runs = [threading.Thread(target=turn, args=(t,)) for t in ("a", "b")]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
        texts = [m.content for m in graph.get_state(config).values["messages"]]
    assert errors == []  # enqueue: no ConcurrentRunError
    (first, second) = sorted(spans)
    assert second[0] >= first[1]  # the second run waited for the first turn to end
    assert sorted(texts[0::2]) == ["a", "b"]  # both turns stored...
    assert texts[1::2] == ["seen 1", "seen 3"]  # ...in order: each answer saw its own input


def test_an_entry_point_that_is_gone_is_named_by_the_check(
    unverified: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Gone:  # as if LangGraph had renamed the loop class's enter
        pass

    monkeypatch.setattr(_upstream, "_NOT_HOOKED", {})
    gone = (Gone, "__enter__", "loop_enter", False)
    monkeypatch.setattr(_upstream, "_ENTRY_POINTS", (*_upstream._ENTRY_POINTS, gone))
    _upstream._install_hooks()
    with pytest.raises(threadlog.UpstreamChangedError, match=r"Gone\.__enter__ no longer exists"):
        _upstream.verify_hooks()
    asyncio.run(_upstream.averify_hooks())  # the async entry points are all there


def test_a_loop_without_what_threadlog_reads_is_refused_naming_the_attribute() -> None:
    token = _upstream._CALLS["loop_enter"].set(_upstream._Call(object()))
    try:
        with pytest.raises(threadlog.UpstreamChangedError, match="object has no `stack`"):
            _upstream.running_loop()
    finally:
        _upstream._CALLS["loop_enter"].reset(token)


def test_installing_the_hooks_again_wraps_nothing_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {(cls, attr): getattr(cls, attr) for cls, attr, _, _ in _upstream._ENTRY_POINTS}
    _upstream._install_hooks()
    assert {key: getattr(*key) for key in before} == before
    # A decorator that keeps `__wrapped__` (functools.wraps) around the hook: still hooked.
    outer = functools.wraps(before[(SyncPregelLoop, "__enter__")])(_thin_wrappers(
        before[(SyncPregelLoop, "__enter__")]
    ))
    monkeypatch.setattr(SyncPregelLoop, "__enter__", outer)
    _upstream._install_hooks()
    assert SyncPregelLoop.__enter__ is outer


def test_the_loop_is_published_only_to_its_own_call_while_it_enters() -> None:
    seen: dict[str, Any] = {}

    class Probe(InMemorySaver):
        def get_tuple(self, config: Any) -> Any:
            seen["read"] = _upstream.running_loop()
            copied = contextvars.copy_context()  # as LangGraph's background writes do
            seen["copy"] = copied
            elsewhere = threading.Thread(
                target=lambda: seen.setdefault("other thread", copied.run(_upstream.running_loop))
            )
            elsewhere.start()
            elsewhere.join()
            return super().get_tuple(config)

    def node(state: dict[str, Any]) -> dict[str, Any]:
        seen["node"] = _upstream.running_loop()
        return {"messages": [("assistant", "ok")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.compile(checkpointer=Probe()).invoke(
        {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}}
    )
    assert seen["read"] is not None and isinstance(seen["read"].loop, SyncPregelLoop)
    assert seen["other thread"] is None  # a copy running elsewhere meanwhile
    assert seen["node"] is None  # the run's steps, after __enter__ returned
    assert seen["copy"].run(_upstream.running_loop) is None  # the copy, once it returned
    assert _upstream.running_loop() is None


async def test_the_async_loop_is_published_to_its_own_task_only() -> None:
    seen: dict[str, Any] = {}

    class Probe(InMemorySaver):
        async def aget_tuple(self, config: Any) -> Any:
            seen["read"] = _upstream.running_loop()
            other = asyncio.create_task(_current_loop())  # copies this context
            await asyncio.sleep(0)
            seen["other task"] = await other
            return await super().aget_tuple(config)

    async def node(state: dict[str, Any]) -> dict[str, Any]:
        seen["node"] = _upstream.running_loop()
        return {"messages": [("assistant", "ok")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("node", node)
    g.add_edge(START, "node")
    await g.compile(checkpointer=Probe()).ainvoke(
        {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}}
    )
    assert seen["read"] is not None and seen["read"].input is not None
    assert seen["other task"] is None
    assert seen["node"] is None


async def _current_loop() -> Any:
    return _upstream.running_loop()


async def test_verification_runs_once_per_process(
    unverified: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[bool] = []
    canary = _upstream._canary

    def counted(*, is_async: bool) -> Any:
        runs.append(is_async)
        return canary(is_async=is_async)

    monkeypatch.setattr(_upstream, "_canary", counted)
    for _ in range(3):
        _upstream.verify_hooks()
        await _upstream.averify_hooks()
        async with threadlog.acheckpointer("memory://"):
            pass
    assert runs == [False, True]


async def test_verifying_inside_a_running_node_leaves_no_trace_in_that_run(
    unverified: None,
) -> None:
    # The canary runs in an empty context: the caller's run lends it no callbacks, so
    # neither its events (nor a tracer's runs) nor its checkpoints show up in the caller's.
    outer = InMemorySaver()

    def node(state: dict[str, Any]) -> dict[str, Any]:
        _upstream.verify_hooks()  # e.g. a node that opens threadlog.checkpointer(...)
        return {"messages": [("assistant", "ok")]}

    g = StateGraph(threadlog.MessagesState)
    g.add_node("node", node)
    g.add_edge(START, "node")
    events = [
        e["name"]
        async for e in g.compile(checkpointer=outer).astream_events(
            {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}}, version="v2"
        )
    ]
    assert False in _upstream._VERIFIED
    assert set(events) == {"LangGraph", "node"}
    stored = {(c.config["configurable"]["thread_id"], c.config["configurable"]["checkpoint_ns"])
              for c in outer.list(None)}
    assert stored == {("t", "")}


def test_upstream_changed_error_survives_pickling() -> None:
    err = threadlog.UpstreamChangedError("X.y stopped", package="langgraph", version="9.9")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, threadlog.UpstreamChangedError)
    assert isinstance(back, threadlog.ThreadlogError) and isinstance(back, RuntimeError)
    assert (back.problem, back.package, back.version) == ("X.y stopped", "langgraph", "9.9")
    assert str(back) == str(err) and "langgraph 9.9: X.y stopped" in str(err)


def test_no_module_walks_stack_frames() -> None:
    root = pathlib.Path(threadlog.__file__).parent
    frames = re.compile(r"_getframe|\bf_back\b|\bf_locals\b|currentframe|inspect\.stack\(")
    offenders = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in root.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if frames.search(line)
    ]
    assert offenders == []


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_saver_is_told_the_channels_of_the_graph_loading_its_state(is_async: bool) -> None:
    seen: list[tuple[str, Any]] = []

    class Probe(InMemorySaver):
        def get_delta_channel_history(self, *, config: Any, channels: Any) -> Any:
            seen.append((_phase[0], _upstream.declared_channels()))
            return super().get_delta_channel_history(config=config, channels=channels)

        async def aget_delta_channel_history(self, *, config: Any, channels: Any) -> Any:
            seen.append((_phase[0], _upstream.declared_channels()))
            return await super().aget_delta_channel_history(config=config, channels=channels)

    _phase = ["run"]
    g = StateGraph(threadlog.MessagesState)
    g.add_node("node", lambda state: {"messages": [("assistant", "ok")]})
    g.add_edge(START, "node")
    app = g.compile(checkpointer=Probe())
    cfg: Any = {"configurable": {"thread_id": "t"}}
    turn = {"messages": [("user", "hi")]}
    for phase in ("run", "again", "get_state", "update_state"):
        _phase[0] = phase
        if phase in ("run", "again"):
            await app.ainvoke(turn, cfg) if is_async else app.invoke(turn, cfg)
        elif phase == "get_state":
            await app.aget_state(cfg) if is_async else app.get_state(cfg)
        else:
            update = {"messages": [("user", "more")]}
            await app.aupdate_state(cfg, update) if is_async else app.update_state(cfg, update)
    phases = {phase for phase, _ in seen}
    assert {"again", "get_state", "update_state"} <= phases
    assert all(
        declared is not None and isinstance(declared["messages"], threadlog.MessageLogChannel)
        for _, declared in seen
    )
    assert _upstream.declared_channels() is None  # nothing is loading now
