"""The tool boundary of a replay: every `BaseTool` invoked inside it is answered by the
replay's stand-in, whatever node, subgraph or agent calls it.

`serving(stand_in)`: inside it (and in threads and tasks that copy its context)
`BaseTool.run` / `arun` run `stand_in(tool)` (a `StandIn`: same name, schema and output
format). `replying(reply)`: `BaseChatModel.invoke` / `ainvoke` return `reply(model, input)`
as a cache hit (callbacks see request and reply), `stream` / `astream` as one chunk.
`outside()` runs a block with no replay in force. The hooks are set only while a block is
open and read a `ContextVar`: a graph running elsewhere meanwhile runs as usual.
`unreachable(tool)` names why the hook cannot reach a tool (its class overrides
`invoke`/`run` or their async twins); replay refuses a graph that holds one.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatGeneration
from langchain_core.tools import BaseTool, StructuredTool, Tool

__all__ = ["StandIn", "outside", "replying", "serving", "unreachable"]

StandInFor = Callable[[BaseTool], BaseTool]

_SESSION: contextvars.ContextVar[StandInFor | None] = contextvars.ContextVar(
    "threadlog_replay_tools", default=None
)
_REPLY: contextvars.ContextVar[Callable[[BaseChatModel, Any], Any] | None] = contextvars.ContextVar(
    "threadlog_replay_model", default=None
)
_RUN = BaseTool.run
_ARUN = BaseTool.arun
_INVOKE = BaseChatModel.invoke
_AINVOKE = BaseChatModel.ainvoke
_STREAM = BaseChatModel.stream
_ASTREAM = BaseChatModel.astream
_lock = threading.Lock()
_users = 0


class StandIn(StructuredTool):
    """A tool answering for another during a replay (the hook runs it as it is)."""


def _hooked_run(self: BaseTool, *args: Any, **kwargs: Any) -> Any:
    stand_in = _SESSION.get()
    if stand_in is None or isinstance(self, StandIn):
        return _RUN(self, *args, **kwargs)
    return _RUN(stand_in(self), *args, **kwargs)


async def _hooked_arun(self: BaseTool, *args: Any, **kwargs: Any) -> Any:
    stand_in = _SESSION.get()
    if stand_in is None or isinstance(self, StandIn):
        return await _ARUN(self, *args, **kwargs)
    return await _ARUN(stand_in(self), *args, **kwargs)


class _Answer(BaseCache):
    """A cache whose one lookup is the replay's reply: the model is never called."""

    def __init__(self, answer: Callable[[], Any]) -> None:
        self.answer = answer

    def lookup(self, prompt: str, llm_string: str) -> Any:
        return [ChatGeneration(message=self.answer())]

    def update(self, prompt: str, llm_string: str, return_val: Any) -> None:
        pass

    def clear(self, **kwargs: Any) -> None:
        pass


def _answered(self: BaseChatModel, input: Any, reply: Callable[[BaseChatModel, Any], Any]) -> Any:
    return self.model_copy(update={"cache": _Answer(lambda: reply(self, input))})


def _hooked_invoke(self: BaseChatModel, input: Any, *args: Any, **kwargs: Any) -> Any:
    reply = _REPLY.get()
    if reply is None:
        return _INVOKE(self, input, *args, **kwargs)
    return _INVOKE(_answered(self, input, reply), input, *args, **kwargs)


async def _hooked_ainvoke(self: BaseChatModel, input: Any, *args: Any, **kwargs: Any) -> Any:
    reply = _REPLY.get()
    if reply is None:
        return await _AINVOKE(self, input, *args, **kwargs)
    return await _AINVOKE(_answered(self, input, reply), input, *args, **kwargs)


def _hooked_stream(self: BaseChatModel, input: Any, *args: Any, **kwargs: Any) -> Any:
    if _REPLY.get() is None:
        yield from _STREAM(self, input, *args, **kwargs)
    else:
        yield _hooked_invoke(self, input, *args, **kwargs)


async def _hooked_astream(self: BaseChatModel, input: Any, *args: Any, **kwargs: Any) -> Any:
    if _REPLY.get() is None:
        async for chunk in _ASTREAM(self, input, *args, **kwargs):
            yield chunk
    else:
        yield await _hooked_ainvoke(self, input, *args, **kwargs)


# (class, method, the replay's hook, the original): set and restored as one table.
_HOOKS: list[tuple[type, str, Any, Any]] = [
    (BaseTool, "run", _hooked_run, _RUN),
    (BaseTool, "arun", _hooked_arun, _ARUN),
    (BaseChatModel, "invoke", _hooked_invoke, _INVOKE),
    (BaseChatModel, "ainvoke", _hooked_ainvoke, _AINVOKE),
    (BaseChatModel, "stream", _hooked_stream, _STREAM),
    (BaseChatModel, "astream", _hooked_astream, _ASTREAM),
]


def _hooked(step: int) -> None:
    """Count a block in (1) or out (-1): the first in sets the hooks, the last out unsets."""
    global _users
    with _lock:
        _users += step
        if _users == (1 if step > 0 else 0):
            for cls, name, hooked, original in _HOOKS:
                setattr(cls, name, hooked if step > 0 else original)


@contextlib.contextmanager
def _in_force(var: contextvars.ContextVar[Any], value: Any) -> Iterator[None]:
    _hooked(1)
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
        _hooked(-1)


def serving(stand_in: StandInFor) -> contextlib.AbstractContextManager[None]:
    """Answer every tool invoked in this block (and what it starts) with `stand_in(tool)`."""
    return _in_force(_SESSION, stand_in)


def replying(reply: Callable[[BaseChatModel, Any], Any]) -> contextlib.AbstractContextManager[None]:
    """Answer every chat model invoked in this block with `reply(model, input)`."""
    return _in_force(_REPLY, reply)


@contextlib.contextmanager
def outside() -> Iterator[None]:
    """Run a block as if no replay were in force (a live call of the real tool)."""
    token, model = _SESSION.set(None), _REPLY.set(None)
    try:
        yield
    finally:
        _REPLY.reset(model)
        _SESSION.reset(token)


_REACHING = (BaseTool, StructuredTool, Tool)  # their invoke/ainvoke end in run/arun


def unreachable(tool: BaseTool) -> str:
    """Why the hook cannot answer for `tool` ("" when it can)."""
    cls = type(tool)
    for name in ("run", "arun", "invoke", "ainvoke"):
        owner = next(k for k in cls.__mro__ if name in vars(k))
        # Another class's override may never reach `BaseTool.run`.
        if owner not in _REACHING:
            return f"its class {cls.__name__} overrides {name}()"
    return ""
