"""LangGraph's checkpointer conformance suite (`langgraph-checkpoint-conformance`) passes
through `threadlog.acheckpointer` on memory, SQLite and Postgres, and a guarded saver
claims exactly the maintenance capabilities (copy_thread, prune, delete_for_runs) of the
saver it wraps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities

import threadlog
from tests.conftest import fresh_database


async def _report(url: str) -> Any:
    @checkpointer_test(name=f"threadlog {url.split(':')[0]}")
    async def saver() -> AsyncIterator[Any]:
        async with threadlog.acheckpointer(url) as s:
            yield s

    return await validate(saver)


# The run guard's deliberate refusal (docs/compatibility.md#guard-refuses-forks): these
# tests put a second root checkpoint on a thread that already has a head, which the
# guard refuses as a silent fork. Every other conformance test passes.
GUARD_REFUSALS = {"test_list_metadata_filter_multiple_keys", "test_list_metadata_custom_keys"}


def _assert_green(report: Any) -> None:
    failed: dict[str, str] = {}
    for result in report.results.values():
        for failure in result.failures:
            name, _, why = failure.partition(": ")
            failed[name] = why
    assert set(failed) == GUARD_REFUSALS, failed
    assert all("the thread's head is now" in why for why in failed.values()), failed
    passed = sum(r.tests_passed for r in report.results.values())
    assert passed >= 56, passed


async def test_conformance_memory() -> None:
    report = await _report("memory://")
    _assert_green(report)


async def test_conformance_sqlite(tmp_path: Path) -> None:
    report = await _report(f"sqlite:///{tmp_path / 'c.db'}")
    _assert_green(report)


async def test_conformance_postgres(postgres_url: str) -> None:
    report = await _report(fresh_database(postgres_url))
    _assert_green(report)


@pytest.mark.parametrize("scheme", ["memory", "sqlite", "postgres"])
async def test_guarded_saver_claims_the_wrapped_savers_maintenance_calls(
    scheme: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if scheme == "memory":
        url = "memory://"
    elif scheme == "sqlite":
        url = f"sqlite:///{tmp_path / 'c.db'}"
    else:
        url = fresh_database(request.getfixturevalue("postgres_url"))
    async with threadlog.acheckpointer(url) as guarded:
        inner = guarded.inner
        ours = DetectedCapabilities.from_instance(guarded).detected
        theirs = DetectedCapabilities.from_instance(inner).detected
        assert ours == theirs
    with threadlog.checkpointer(url) as guarded_sync:
        for name in ("copy_thread", "prune", "delete_for_runs"):
            base = getattr(BaseCheckpointSaver, name)
            inner_has = getattr(type(guarded_sync.inner), name) is not base
            assert (getattr(type(guarded_sync), name) is not base) == inner_has, name
