"""LangGraph's checkpointer conformance suite (`langgraph-checkpoint-conformance`) passes
with 0 failures through threadlog's guarded savers on memory, SQLite and Postgres — the
async saver (`threadlog.acheckpointer`), and the sync one (`threadlog.checkpointer`) driven
through the suite's async calls — including the capability tests of copy_thread, prune
and delete_for_runs, which a guarded saver has on every backend (its own thread
lifecycle, `threadlog.checkpoint.lifecycle`) while the backend's class stays LangGraph's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities

import threadlog
from tests.helpers.postgres import fresh_database

# Tests of the suite's base capabilities (put, put_writes, get_tuple, list, delete_thread)
# in 0.0.2; copy_thread / prune / delete_for_runs add 23 (all of them run here).
BASE_TESTS = 58
EXTENDED_TESTS = 23
EXTENDED = {"copy_thread", "prune", "delete_for_runs"}


def _url(scheme: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if scheme == "memory":
        return "memory://"
    if scheme == "sqlite":
        return f"sqlite:///{tmp_path / 'c.db'}"
    return fresh_database(request.getfixturevalue("postgres_url"))


class _SyncDriven(BaseCheckpointSaver[Any]):
    """The suite calls only the async API: this serves each async call with the sync
    saver's method in a worker thread, so the sync guard (`_drive`) runs every test."""

    def __init__(self, sync: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=sync.serde)
        self.sync = sync

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.sync.put, *args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.sync.put_writes, *args, **kwargs)

    async def aget_tuple(self, config: Any) -> Any:
        return await asyncio.to_thread(self.sync.get_tuple, config)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for item in await asyncio.to_thread(lambda: list(self.sync.list(config, **kwargs))):
            yield item

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.sync.delete_thread, thread_id)

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        return self.sync.get_next_version(current, channel)


def _sync_driven(sync: BaseCheckpointSaver[Any]) -> _SyncDriven:
    """A `_SyncDriven` that claims the maintenance calls `sync`'s class has (the suite
    detects capabilities by class)."""
    extra: dict[str, Any] = {}
    for name in ("copy_thread", "prune", "delete_for_runs"):
        if getattr(type(sync), name) is not getattr(BaseCheckpointSaver, name):

            async def call(self: _SyncDriven, *args: Any, _n: str = name, **kw: Any) -> Any:
                return await asyncio.to_thread(getattr(self.sync, _n), *args, **kw)

            extra["a" + name] = call
    return type("_SyncDriven", (_SyncDriven,), extra)(sync)


async def _report(url: str, api: str) -> Any:
    @checkpointer_test(name=f"threadlog {url.split(':')[0]} {api}")
    async def saver() -> AsyncIterator[Any]:
        if api == "async":
            async with threadlog.acheckpointer(url) as s:
                yield s
        else:
            sync_cm = threadlog.checkpointer(url)
            s = await asyncio.to_thread(sync_cm.__enter__)
            try:
                yield _sync_driven(s)
            finally:
                await asyncio.to_thread(sync_cm.__exit__, None, None, None)

    return await validate(saver)


@pytest.mark.parametrize("api", ["async", "sync"])
@pytest.mark.parametrize("scheme", ["memory", "sqlite", "postgres"])
async def test_conformance_has_no_failures(
    scheme: str, api: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    report = await _report(_url(scheme, tmp_path, request), api)
    failures = [f for r in report.results.values() for f in r.failures]
    assert failures == []
    failed = sum(r.tests_failed for r in report.results.values())
    passed = sum(r.tests_passed for r in report.results.values())
    ran = {cap for cap, r in report.results.items() if r.detected}
    print(f"conformance {scheme} {api}: {passed} passed, {failed} failed, capabilities "
          f"{sorted(ran)}")  # fmt: skip
    assert failed == 0
    assert {"put", "put_writes", "get_tuple", "list", "delete_thread"} <= ran
    assert passed >= BASE_TESTS
    assert EXTENDED <= ran
    assert passed >= BASE_TESTS + EXTENDED_TESTS


@pytest.mark.parametrize("scheme", ["memory", "sqlite", "postgres"])
async def test_guarded_saver_claims_every_maintenance_call_and_leaves_the_backend_class(
    scheme: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(scheme, tmp_path, request)
    backend_classes = {
        "memory": ("InMemorySaver", "InMemorySaver"),
        "sqlite": ("SqliteSaver", "AsyncSqliteSaver"),
        "postgres": ("PostgresSaver", "AsyncPostgresSaver"),
    }[scheme]
    async with threadlog.acheckpointer(url) as guarded:
        ours = DetectedCapabilities.from_instance(guarded).detected
        assert {c.value for c in ours} >= EXTENDED
        inner = type(guarded.inner)
        if scheme == "postgres":
            # Upstream's class with its three dumping methods made loop-friendly
            # (`_upstream.inline_dump_async_postgres_saver`), no capability mixed in.
            own = {n for n in vars(inner) if not n.startswith("__")}
            assert own == {"aput", "aput_writes", "_load_checkpoint_tuple"}, own
            (inner,) = inner.__bases__
        assert inner.__name__ == backend_classes[1]
        assert inner.__module__.startswith("langgraph.checkpoint.")
    with threadlog.checkpointer(url) as guarded_sync:
        assert type(guarded_sync.inner).__name__ == backend_classes[0]
        assert type(guarded_sync.inner).__module__.startswith("langgraph.checkpoint.")
        for name in ("copy_thread", "prune", "delete_for_runs"):
            base = getattr(BaseCheckpointSaver, name)
            assert getattr(type(guarded_sync), name) is not base, name
            assert getattr(type(guarded_sync), "a" + name) is not getattr(
                BaseCheckpointSaver, "a" + name
            ), name
