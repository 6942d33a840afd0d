"""Idempotent tools: one key per tool call, the same on every attempt; receipts served.

Contract:

* `idempotent(tool)` marks a tool and returns it (a plain function is made a tool first);
  marking twice is marking once; anything else is an `IdempotencyError`.
  `mark_by_name(tools, names)` marks the named ones (`ToolNode(..., idempotent=[...])`);
  a name no tool or two tools have is an `IdempotencyError`.
* **The key.** Inside a marked tool, `idempotency_key()` returns
  `"tl-idem-" + blake2b(thread_id, namespace, tool_call_id)` (32 hex digits, fields joined
  by NUL; the namespace without task ids, since a re-run task may get another id). Every
  attempt of one call gets the same key; any other call, or a `copy_thread` copy, another.
  Outside a marked tool's run, or without a tool call id, it raises `IdempotencyError`.
* The tool learns its call from a callback handler marking adds (`on_tool_start`'s
  `tool_call_id`), so threadlog's and LangGraph's `ToolNode` both work.
* **Receipts.** Marking also wraps what the tool runs. Each attempt first looks at the
  checkpoint its step runs from: a receipt of this call (`threadlog.checkpoint.receipts`)
  is returned without running the tool. Otherwise the tool runs with the key set, and its
  return is stored as a receipt before the run ends. A tool that raised stores nothing.
  Receipts are stored only inside a checkpointed run whose step is stored."""

from __future__ import annotations

import collections
import contextvars
import functools
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools import tool as make_tool

import threadlog.nodes.tools.rerun  # noqa: F401  (sets the new-input re-run of marked calls)
from threadlog.checkpoint.guard import GuardLayer
from threadlog.checkpoint.layered import layer_of
from threadlog.checkpoint.receipts import find_receipt, is_receipt_task, receipt_write
from threadlog.checkpoint.recover import node_checkpoint
from threadlog.errors import IdempotencyError
from threadlog.flows import Flow, Io, call, drivers
from threadlog.nodes.tools.keys import IDEMPOTENT_KEY, call_key, config_key, is_idempotent
from threadlog.nodes.tools.started import put_on_step

__all__ = [
    "IDEMPOTENT_KEY",
    "call_key",
    "check_unique",
    "idempotency_key",
    "idempotent",
    "is_idempotent",
    "mark_by_name",
]

T = TypeVar("T")

_log = logging.getLogger("threadlog.tools")
_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "threadlog_idempotency_key", default=None
)


def idempotency_key() -> str:
    """The key of the tool call running now (module doc); `IdempotencyError` outside one."""
    key = _KEY.get()
    if key is None:
        raise IdempotencyError(
            "threadlog.idempotency_key() was called outside the run of a tool marked with "
            "threadlog.idempotent() for a tool call (with a tool call id): mark the tool, "
            "and call this from inside it while a ToolNode runs it"
        )
    return key


class _CallIds(BaseCallbackHandler):
    """Remembers each running tool run's `tool_call_id`."""

    run_inline = True
    raise_error = True

    def __init__(self) -> None:
        self._ids: dict[uuid.UUID, str] = {}
        self._lock = threading.Lock()

    def on_tool_start(
        self, serialized: Any, input_str: str, *, run_id: uuid.UUID, **kwargs: Any
    ) -> None:
        cid = kwargs.get("tool_call_id")
        if isinstance(cid, str) and cid:
            with self._lock:
                self._ids[run_id] = cid

    def on_tool_end(self, output: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._forget(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._forget(run_id)

    def _forget(self, run_id: uuid.UUID) -> None:
        with self._lock:
            self._ids.pop(run_id, None)

    def current(self, config: RunnableConfig) -> str | None:
        manager = config.get("callbacks")
        parent = getattr(manager, "parent_run_id", None)
        if parent is None:
            return None
        with self._lock:
            return self._ids.get(parent)


_CALL_IDS = _CallIds()


def idempotent(tool: T) -> T:
    """Mark `tool` idempotent and return it (module doc)."""
    if callable(tool) and not isinstance(tool, (BaseTool, type)):
        tool = cast(T, make_tool(cast(Callable[..., Any], tool)))
    if not isinstance(tool, BaseTool):
        raise IdempotencyError(
            f"threadlog.idempotent() takes a tool (a @tool function, a BaseTool or a plain "
            f"function), not {type(tool).__name__} {_shown(tool)}"
        )
    if is_idempotent(tool):
        return cast(T, tool)
    _wrap(tool)
    tool.metadata = {**(tool.metadata or {}), IDEMPOTENT_KEY: True}
    _add_handler(tool)
    return cast(T, tool)


def mark_by_name(tools: Sequence[BaseTool], names: Iterable[str], *, where: str) -> None:
    """Mark the tools named in `names`; `where` names the caller in errors."""
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        if not isinstance(name, str):
            raise IdempotencyError(
                f"{where}(idempotent=...) takes tool names; {_shown(name)} is a "
                f"{type(name).__name__} (mark a tool object with threadlog.idempotent())"
            )
    check_unique(tools, names, where=where)
    by_name = {t.name: t for t in tools}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise IdempotencyError(
            f"{where}(idempotent={names!r}) names {unknown} that are not tools of it; "
            f"its tools are {sorted(by_name)}"
        )
    for name in names:
        idempotent(by_name[name])


def check_unique(tools: Sequence[BaseTool], names: Iterable[str] = (), *, where: str) -> None:
    """Refuse two tools of one name where either is marked or named: a key names no tool."""
    wanted = set(names)
    seen = collections.Counter(t.name for t in tools)
    for t in tools:
        if seen[t.name] > 1 and (is_idempotent(t) or t.name in wanted):
            raise IdempotencyError(
                f"{where}: {seen[t.name]} tools are named {t.name!r} and one of them is "
                "idempotent; a call names its tool only by name, so give each a name of its own"
            )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def _add_handler(tool: BaseTool) -> None:
    callbacks = tool.callbacks
    if callbacks is None:
        tool.callbacks = [_CALL_IDS]
    elif isinstance(callbacks, BaseCallbackManager):
        callbacks.add_handler(_CALL_IDS, inherit=False)
    elif _CALL_IDS not in callbacks:
        tool.callbacks = [*callbacks, _CALL_IDS]


def _wrap(tool: BaseTool) -> None:
    fmt = str(tool.response_format)
    if isinstance(tool, StructuredTool) or (hasattr(tool, "func") and hasattr(tool, "coroutine")):
        func = getattr(tool, "func", None)
        coroutine = getattr(tool, "coroutine", None)
        if func is not None:
            tool.func = _sync_wrapper(func, tool, fmt)
        if coroutine is not None:
            tool.coroutine = _async_wrapper(coroutine, tool, fmt)
        return
    cls = type(tool)
    body: dict[str, Any] = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "_run": _sync_wrapper(cls._run, None, fmt),
    }
    if cls._arun is not BaseTool._arun:
        body["_arun"] = _async_wrapper(cls._arun, None, fmt)
    tool.__class__ = type(cls.__name__, (cls,), body)


def _sync_wrapper(func: Callable[..., Any], tool: BaseTool | None, fmt: str) -> Callable[..., Any]:
    # `tool` None: `func` is a method of the tool's class, called with the tool first.
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _once(args[0] if tool is None else tool, fmt, lambda: func(*args, **kwargs))

    return wrapper


def _async_wrapper(func: Callable[..., Any], tool: BaseTool | None, fmt: str) -> Callable[..., Any]:
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await _aonce(args[0] if tool is None else tool, fmt, lambda: func(*args, **kwargs))

    return wrapper


class _Attempt:
    """One attempt of one call: its config, call id and key (None: not a tool call)."""

    __slots__ = ("cid", "config", "key")

    def __init__(self) -> None:
        self.config = ensure_config()
        self.cid = _CALL_IDS.current(self.config)
        self.key = None if self.cid is None else config_key(self.config, self.cid)

    def served(self) -> Flow[Mapping[str, Any] | None]:
        """The receipt of this call on its step's checkpoint, if the tool returned before."""
        if self.cid is None:
            return None
        found = node_checkpoint(self.config)
        if found is None or "checkpoint_id" not in found[1]["configurable"]:
            return None
        saver, at = found
        guard = layer_of(saver, GuardLayer)
        try:
            if guard is not None:
                # threadlog's saver: the checkpoint is read only when a receipt is there.
                keys = yield from guard.write_keys_flow(at)
                if not any(is_receipt_task(task, self.cid) for task, _ in keys):
                    return None
            tup = yield from call(saver, "get_tuple", at)
        except NotImplementedError:
            return None
        except Exception as e:  # no receipt read: the tool runs, with its key
            _log.warning(
                "threadlog: could not look for the receipt of tool call %r: %s: %s",
                self.cid,
                type(e).__name__,
                e,
            )
            return None
        if tup is None:
            return None  # the step's checkpoint is not stored yet: a first attempt
        return find_receipt(tup.pending_writes or (), self.cid)

    def store(self, tool: BaseTool, fmt: str, value: Any) -> Flow[None]:
        if self.cid is None or self.key is None:
            return
        task_id, writes = receipt_write(self.cid, self.key, tool.name, value, fmt)
        what = f"the receipt of tool call {self.cid!r} ({tool.name})"
        yield from put_on_step(self.config, task_id, writes, what)


def _once_flow(tool: BaseTool, fmt: str, body: Callable[[], Any]) -> Flow[Any]:
    # `body` is the tool's sync call, or (under `arun`) a coroutine function awaited.
    attempt = _Attempt()
    receipt = yield from attempt.served()
    if receipt is not None:
        return receipt["value"]
    token = _KEY.set(attempt.key)
    try:
        value = yield Io(body, body)
    finally:
        _KEY.reset(token)
    yield from attempt.store(tool, fmt, value)
    return value


_once, _aonce = drivers(_once_flow, "_once")
