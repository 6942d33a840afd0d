"""`_InFlight`, what a task's writes (and the tool node's marker) wait on while their
checkpoint is being stored: woken by the put's end from its own loop, another thread or
a sync waiter's thread; a waiter that times out is forgotten."""

from __future__ import annotations

import asyncio
import threading
import time

from threadlog.checkpoint.guard import _InFlight


async def test_an_async_waiter_is_woken_by_a_put_ending_on_its_own_loop() -> None:
    put = _InFlight()
    asyncio.get_running_loop().call_later(0.05, put.set)
    t0 = time.monotonic()
    assert await put.wait_async(5.0) is True
    assert time.monotonic() - t0 < 1.0
    assert put.is_set() and await put.wait_async(0.01) is True  # at once, once set


async def test_an_async_waiter_is_woken_by_a_put_ending_in_another_thread() -> None:
    put = _InFlight()
    threading.Timer(0.05, put.set).start()
    t0 = time.monotonic()
    assert await put.wait_async(5.0) is True
    assert time.monotonic() - t0 < 1.0


async def test_a_waiter_that_times_out_is_forgotten() -> None:
    put = _InFlight()
    assert await put.wait_async(0.05) is False
    assert put._waiters == []
    put.set()  # wakes nobody, raises nothing
    assert put.is_set()


def test_a_thread_waits_on_an_event_made_only_for_it() -> None:
    put = _InFlight()
    assert put._event is None  # no waiter yet: no event
    threading.Timer(0.05, put.set).start()
    assert put.wait(5.0) is True
    assert put.wait(0.0) is True
    assert _InFlight().wait(0.05) is False
