"""`LayeredSaver`: one wrapper class, the saver's capabilities as an ordered tuple of layers.

* A `Layer` defines some of the hooks named in `HOOKS`, each a flow (`threadlog.flows`):
  `hook(below, *args)` yields the I/O it needs and returns the operation's result. `below`
  is the saver from under the layer: `yield from below.flow("get_tuple", cfg)` passes the
  operation on, or it is handed as a `BaseCheckpointSaver` to code that wants one. `put` /
  `put_writes` hooks take `*PutArgs` / `*PutWritesArgs` (`task_path` always given). A layer
  may define `listed(tup)`, applied to each checkpoint `list` / `alist` yields.
* `layers[0]` is outermost; an operation enters at the first layer that hooks it. Layers
  never look each other up (`threadlog.checkpoint.saver` builds them, in order).
* `bind_layers(saver, layers)` gives a saver object the same layers in place (its class
  untouched), for the calls documented to return the caller's saver itself.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from threadlog._upstream import install_hooks, own
from threadlog.flows import Flow, arun, call, run

__all__ = [
    "HOOKS",
    "Layer",
    "LayeredSaver",
    "PutArgs",
    "PutWritesArgs",
    "SaverView",
    "bind_layers",
    "layer_of",
]

HOOKS = ("get_tuple", "put", "put_writes", "get_delta_channel_history", "delete_thread")
"""The operations a layer may hook (each also covers its `a…` async form)."""

PutArgs = tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]
"""A `put` hook's arguments after `below`: (config, checkpoint, metadata, new_versions)."""

PutWritesArgs = tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]
"""A `put_writes` hook's arguments after `below`: (config, writes, task_id, task_path)."""

L = TypeVar("L", bound="Layer")
S = TypeVar("S", bound=BaseCheckpointSaver[Any])


class Layer:
    """One capability of a saver: some of `HOOKS` as flows, and/or `listed`."""

    name: ClassVar[str] = ""

    def listed(self, tup: CheckpointTuple) -> CheckpointTuple:
        return tup


def _hooks(layer: Layer) -> frozenset[str]:
    return frozenset(h for h in HOOKS if callable(getattr(layer, h, None)))


class _Stack:
    """The backend and its layers, with each hook's entry resolved once."""

    def __init__(self, inner: Any, layers: Sequence[Layer], *, bound: bool) -> None:
        self.inner = inner
        self.layers = tuple(layers)
        # A saver with bound layers is its own backend: the class's methods are the end.
        self.end = _ClassMethods(inner) if bound else inner
        n = len(self.layers)
        hooked = [_hooks(layer) for layer in self.layers]
        # entry[name][level]: the first layer at or after `level` hooking `name`, or None.
        self.entry: dict[str, list[int | None]] = {}
        for name in HOOKS:
            row: list[int | None] = [None] * (n + 1)
            for level in range(n - 1, -1, -1):
                row[level] = level if name in hooked[level] else row[level + 1]
            self.entry[name] = row
        self.listers = [i for i, x in enumerate(self.layers) if type(x).listed is not Layer.listed]
        self.views = [SaverView(self, level) for level in range(n + 1)]

    def flow(
        self, name: str, level: int, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Flow[Any]:
        at = self.entry[name][level]
        if at is None:
            return call(self.end, name, *args, **kwargs)
        hook = getattr(self.layers[at], name)
        return hook(self.views[at + 1], *args, **kwargs)  # type: ignore[no-any-return]

    def listed(self, level: int, tup: CheckpointTuple) -> CheckpointTuple:
        for i in self.listers:
            if i >= level:
                tup = self.layers[i].listed(tup)
        return tup


class _ClassMethods:
    # A bound saver's own class methods (its instance attributes are the layers').

    __slots__ = ("_saver",)

    def __init__(self, saver: Any) -> None:
        self._saver = saver

    def __getattr__(self, name: str) -> Any:
        return getattr(type(self._saver), name).__get__(self._saver)


class SaverView(BaseCheckpointSaver[Any]):
    """The saver from `level` down: every method is the same flow, driven sync or async."""

    def __init__(self, stack: _Stack, level: int) -> None:
        super().__init__(serde=stack.inner.serde)
        self._stack = stack
        self._level = level
        # What `backends.unwrap` follows (a saver with bound layers: the saver itself).
        self.inner: Any = stack.inner

    def flow(self, name: str, *args: Any, **kwargs: Any) -> Flow[Any]:
        """This operation as a flow, for a layer above to `yield from`."""
        return self._stack.flow(name, self._level, args, kwargs)

    @property
    def config_specs(self) -> list[Any]:
        return self._stack.inner.config_specs  # type: ignore[no-any-return]

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        return self._stack.inner.get_next_version(current, channel)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return run(self.flow("get_tuple", config))  # type: ignore[no-any-return]

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await arun(self.flow("get_tuple", config))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return run(self.flow("put", config, checkpoint, metadata, new_versions))  # type: ignore[no-any-return]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await arun(self.flow("put", config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run(self.flow("put_writes", config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await arun(self.flow("put_writes", config, writes, task_id, task_path))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return run(self.flow("get_delta_channel_history", config=config, channels=channels))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await arun(self.flow("get_delta_channel_history", config=config, channels=channels))

    def delete_thread(self, thread_id: str) -> None:
        run(self.flow("delete_thread", thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await arun(self.flow("delete_thread", thread_id))

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        stack, level = self._stack, self._level
        for tup in stack.end.list(config, **kwargs):
            yield stack.listed(level, tup)

    async def alist(
        self, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        stack, level = self._stack, self._level
        async for tup in stack.end.alist(config, **kwargs):
            yield stack.listed(level, tup)


_SERVING: weakref.WeakKeyDictionary[Any, _Stack] = weakref.WeakKeyDictionary()


class LayeredSaver(SaverView):
    """A backend saver wrapped in `layers` (module doc); `inner` is the backend."""

    layers: tuple[Layer, ...]

    def __init__(self, inner: BaseCheckpointSaver[Any], layers: Sequence[Layer]) -> None:
        self._join(inner, layers)

    _threadlog_own = True  # `_upstream.OWN_MARK`: LangGraph's hooks act for this saver

    def _join(self, inner: BaseCheckpointSaver[Any], layers: Sequence[Layer]) -> None:
        install_hooks()
        SaverView.__init__(self, _Stack(inner, layers, bound=False), 0)
        self.layers = tuple(layers)
        with contextlib.suppress(TypeError):  # not weak-referenceable: layer_of finds nothing
            _SERVING[inner] = self._stack

    def __getattr__(self, name: str) -> Any:
        # setup(), conn, … of the backend ("inner" is missing only mid-construction).
        if name in ("inner", "_stack"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def with_allowlist(self, extra_allowlist: Any) -> LayeredSaver:
        inner = self.inner.with_allowlist(extra_allowlist)
        if inner is self.inner:
            return self
        # The same layers (their state is the thread's, not the serializer's).
        out: LayeredSaver = object.__new__(type(self))
        out._join(inner, self.layers)
        return out


def bind_layers(saver: S, layers: Sequence[Layer]) -> S:
    """Give `saver` these layers in place, on top of any it has."""
    below = saver.__dict__.get("_threadlog_stack")
    stack = _Stack(saver, [*layers, *(below.layers if below else ())], bound=True)
    top = stack.views[0]
    names = {n for layer in stack.layers for n in _hooks(layer)}
    if stack.listers:
        names.add("list")
    for name in names:
        saver.__dict__[name] = getattr(top, name)
        saver.__dict__["a" + name] = getattr(top, "a" + name)
    saver.__dict__["_threadlog_stack"] = stack
    own(saver)  # LangGraph's hooks act for this saver from now on
    return saver


def _stack_of(saver: Any) -> _Stack | None:
    for _ in range(8):  # through users' wrappers that keep the saver as `.inner`
        if saver is None:
            return None
        found = saver.__dict__.get("_stack") if isinstance(saver, SaverView) else None
        found = found or getattr(saver, "__dict__", {}).get("_threadlog_stack")
        if found is None:
            with contextlib.suppress(TypeError):
                found = _SERVING.get(saver)
        if found is not None:
            return found
        saver = getattr(saver, "__dict__", {}).get("inner")
    return None


def layer_of(saver: Any, cls: type[L]) -> L | None:
    """The `cls` layer serving `saver` (a wrapper, a bound saver, or a wrapper's backend)."""
    stack = _stack_of(saver)
    while stack is not None:
        for layer in stack.layers:
            if isinstance(layer, cls):
                return layer
        # A wrapper over a saver with bound layers: those serve it too.
        stack = _stack_of(stack.inner) if stack.inner is not saver else None
        saver = None if stack is None else stack.inner
    return None
