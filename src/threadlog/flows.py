"""One sans-IO flow, two thin drivers: how every storage operation is written once.

Contract (httpx's `_auth.py` pattern):

* A *flow* is a generator that does no I/O itself. Each time it needs storage it yields
  one `Io` — the call in both forms, `sync(*args)` and `async_(*args)` — and is sent the
  result (or has the call's exception thrown into it, so its `try`/`finally` run).
* `run(flow)` performs each `Io` with its sync form; `arun(flow)` awaits its async form
  (an `Io` with no async form runs in a worker thread).
* `call(saver, "get_tuple", config)` is the `Io` of a `BaseCheckpointSaver` method
  (`aget_tuple` in async); `listed(saver, config, ...)` reads `list` / `alist` whole.
* `drivers(flow_fn, name)`: an operation's sync and async functions, made from the one
  function that builds its flow (same parameters; each drives the flow it returns).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

__all__ = ["Flow", "Io", "arun", "call", "drivers", "listed", "run"]

T = TypeVar("T")
P = ParamSpec("P")


_NO_KWARGS: Mapping[str, Any] = MappingProxyType({})


@dataclass(slots=True, eq=False)
class Io:
    """One storage call a flow needs, in both forms."""

    sync: Callable[..., Any]
    async_: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=lambda: _NO_KWARGS)

    def __repr__(self) -> str:
        return f"Io({getattr(self.sync, '__qualname__', self.sync)!s}, args={self.args!r})"


Flow = Generator[Io, Any, T]


def run(flow: Flow[T]) -> T:
    """Drive `flow` with the sync form of each call."""
    send: Callable[[Any], Io] = flow.send
    value: Any = None
    while True:
        try:
            op = send(value)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            value = op.sync(*op.args, **op.kwargs)
            send = flow.send
        except BaseException as exc:  # handed to the flow, whose `with`/finally see it
            value, send = exc, flow.throw


async def arun(flow: Flow[T]) -> T:
    """Drive `flow` awaiting the async form of each call (blocking ones in a thread)."""
    send: Callable[[Any], Io] = flow.send
    value: Any = None
    while True:
        try:
            op = send(value)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            if op.async_ is not None:
                value = await op.async_(*op.args, **op.kwargs)
            else:
                value = await asyncio.to_thread(op.sync, *op.args, **op.kwargs)
            send = flow.send
        except BaseException as exc:
            value, send = exc, flow.throw


def call(saver: Any, name: str, *args: Any, **kwargs: Any) -> Flow[Any]:
    """`saver.<name>(...)`, or `await saver.a<name>(...)` under `arun`."""
    return (yield Io(getattr(saver, name), getattr(saver, "a" + name, None), args, kwargs))


def listed(saver: Any, config: Any, **kwargs: Any) -> Flow[list[Any]]:
    """`list(saver.list(config, ...))`, or the same of `alist` under `arun`."""

    def sync() -> list[Any]:
        return list(saver.list(config, **kwargs))

    async def async_() -> list[Any]:
        return [t async for t in saver.alist(config, **kwargs)]

    found: list[Any] = yield Io(sync, async_)
    return found


def drivers(
    flow: Callable[P, Flow[T]], name: str, doc: str | None = None
) -> tuple[Callable[P, T], Callable[P, Awaitable[T]]]:
    """`name` and `a<name>` driving `flow(...)`, with its parameters (and `doc`)."""

    def sync(*args: P.args, **kwargs: P.kwargs) -> T:
        return run(flow(*args, **kwargs))

    async def async_(*args: P.args, **kwargs: P.kwargs) -> T:
        return await arun(flow(*args, **kwargs))

    for fn, fn_name in ((sync, name), (async_, "a" + name)):
        functools.update_wrapper(fn, flow)
        fn.__name__ = fn.__qualname__ = fn_name
    if doc is not None:
        sync.__doc__ = doc
        async_.__doc__ = f"`{name}` through the async forms of its calls. {doc}"
    return sync, async_
