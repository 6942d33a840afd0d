"""SIGKILL inside `prune`, `copy_thread` and `delete_for_runs` on SQLite and Postgres, sync
and async (`aprune`, `acopy_thread`, `adelete_for_runs` on `threadlog.acheckpointer`, the
same flow through `Backend.amaintain`): a forked worker runs the operation and kills
itself right after a seeded statement of its transaction (`backends.*.maintain_steps`,
counted); the thread is then exactly as before or exactly as after — never unreadable,
never a split pair — and the next turn continues. A trial whose seeded point lies past
the last statement completes: the "after" state."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
from pathlib import Path
from typing import Any

import pytest

import threadlog
from tests.helpers.lifecycle import QUESTIONS, lifecycle_agent
from threadlog.checkpoint.backends import postgres as pg_backend
from threadlog.checkpoint.backends import sqlite as sqlite_backend
from threadlog.log.messages import digest
from threadlog.log.pairing import open_calls

SEED = 21
_agent = lifecycle_agent


def _cfg(tid: str, run: str | None = None) -> Any:
    cfg: Any = {"configurable": {"thread_id": tid}}
    if run is not None:
        cfg["metadata"] = {"run_id": run}
    return cfg


def _state(url: str, tid: str) -> tuple[list[str], list[tuple[str, str]], bool]:
    """(checkpoint ids, head messages (id, digest), paired) read by a cold saver."""
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver)
        ids = sorted(str(t.config["configurable"]["checkpoint_id"]) for t in saver.list(_cfg(tid)))
        if not ids:
            return [], [], True
        messages = app.get_state(_cfg(tid)).values["messages"]
        return ids, [(m.id, digest(m)) for m in messages], not open_calls(messages)


def _setup(url: str, tid: str) -> None:
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver)
        for i, q in enumerate(QUESTIONS):
            msg = {"messages": [{"role": "user", "content": q, "id": f"{tid}-u{i}"}]}
            app.invoke(msg, _cfg(tid, f"{tid}-r{i}"))


def _operate(url: str, op: str, tid: str) -> None:
    with threadlog.checkpointer(url) as saver:
        if op == "prune":
            saver.prune([tid], strategy="keep_latest")
        elif op == "copy":
            saver.copy_thread(tid, tid + "-copy")
        else:
            saver.delete_for_runs([f"{tid}-r1"])


async def _aoperate(url: str, op: str, tid: str) -> None:
    async with threadlog.acheckpointer(url) as saver:
        if op == "prune":
            await saver.aprune([tid], strategy="keep_latest")
        elif op == "copy":
            await saver.acopy_thread(tid, tid + "-copy")
        else:
            await saver.adelete_for_runs([f"{tid}-r1"])


def _worker(url: str, op: str, tid: str, kill_at: int, mode: str) -> None:
    # Kill right after the `kill_at`-th statement of the maintenance transaction.
    for module in (sqlite_backend, pg_backend):
        real = module.maintain_steps

        def counting(saver: Any, plan: Any, _real: Any = real) -> Any:
            steps = _real(saver, plan)
            rows: Any = None
            done = 0
            while True:
                try:
                    query = steps.send(rows)
                except StopIteration as stop:
                    return stop.value
                rows = yield query
                done += 1
                if done == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)

        module.maintain_steps = counting  # type: ignore[assignment]
    if mode == "async":
        asyncio.run(_aoperate(url, op, tid))
    else:
        _operate(url, op, tid)
    os._exit(0)


def _trial(url: str, op: str, tid: str, kill_at: int, mode: str = "sync") -> tuple[bool, str]:
    """(whether the worker was killed, "before" or "after")."""
    _setup(url, tid)
    before = _state(url, tid)
    worker = multiprocessing.get_context("fork").Process(
        target=_worker, args=(url, op, tid, kill_at, mode)
    )
    worker.start()
    worker.join(60)
    killed = worker.exitcode == -signal.SIGKILL
    assert killed or worker.exitcode == 0, worker.exitcode
    ids, messages, paired = _state(url, tid)
    assert paired, "a split pair"
    if op == "copy":
        copy = _state(url, tid + "-copy")
        assert (ids, messages) == before[:2]  # the source never changes
        assert copy[2]
        if copy[0] == []:
            return killed, "before"
        assert copy[:2] == before[:2], "a partial copy"
        return killed, "after"
    if ids == before[0]:
        assert messages == before[1]
        return killed, "before"
    if op == "prune":
        assert len(ids) == 1 and messages == before[1], "a partial prune"
    else:
        assert set(ids) < set(before[0])
        assert messages == before[1], "later runs must read as they did"
        with threadlog.checkpointer(url) as saver:
            runs = {t.metadata.get("run_id") for t in saver.list(_cfg(tid))}
        assert f"{tid}-r1" not in runs, "a partial rollback"
    return killed, "after"


def _continues(url: str, tid: str) -> None:
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver)
        app.invoke(
            {"messages": [{"role": "user", "content": "Rome?", "id": f"{tid}-u9"}]}, _cfg(tid)
        )
        assert not open_calls(app.get_state(_cfg(tid)).values["messages"])


@pytest.mark.parametrize("op", ["prune", "copy", "delete_for_runs"])
def test_a_kill_inside_a_lifecycle_call_leaves_the_thread_before_or_after_and_readable(
    backend: str, op: str, tmp_path: Path
) -> None:
    rng = random.Random(f"{SEED}-{op}-{backend.split(':')[0]}")
    points = [rng.randint(1, 4) for _ in range(3)] + [10_000]
    seen: list[tuple[int, bool, str]] = []
    for n, kill_at in enumerate(points):
        tid = f"{op}-{n}"
        killed, state = _trial(backend, op, tid, kill_at)
        seen.append((kill_at, killed, state))
        _continues(backend, tid)
    killed_trials = [s for s in seen if s[1]]
    assert len(killed_trials) >= 2, seen  # the seeded points land inside the transaction
    assert all(state == "before" for _, k, state in seen if k), seen  # uncommitted: undone
    assert seen[-1][1:] == (False, "after"), seen


@pytest.mark.parametrize("op", ["prune", "copy", "delete_for_runs"])
def test_a_kill_inside_an_async_lifecycle_call_leaves_the_thread_before_or_after_and_readable(
    backend: str, op: str, tmp_path: Path
) -> None:
    rng = random.Random(f"{SEED}-async-{op}-{backend.split(':')[0]}")
    points = [rng.randint(1, 4) for _ in range(3)] + [10_000]
    seen: list[tuple[int, bool, str]] = []
    for n, kill_at in enumerate(points):
        tid = f"a{op}-{n}"
        killed, state = _trial(backend, op, tid, kill_at, "async")
        seen.append((kill_at, killed, state))
        _continues(backend, tid)
    killed_trials = [s for s in seen if s[1]]
    assert len(killed_trials) >= 2, seen  # the seeded points land inside the transaction
    assert all(state == "before" for _, k, state in seen if k), seen  # uncommitted: undone
    assert seen[-1][1:] == (False, "after"), seen
