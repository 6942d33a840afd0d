"""Every private LangGraph / langchain name threadlog relies on, in one place.

`tests/upstream/test_upstream.py` resolves and exercises every row below on the installed
packages. One row per touch point (a sync method and its async twin are one row). Kinds: **name**
(a private class, function or constant), **format** (how LangGraph spells what it stores
and passes: `PREGEL`), **hook** (a method wrapped, see "Hooks"), **fork** (a method
overridden or a private helper called by `checkpoint/backends/postgres_inline.py`).

  #  kind    upstream (module.Name[.attribute]) / why threadlog needs it
 --  ------  ------------------------------------------------------------------------
  1  name    langgraph._internal._runnable.RunnableCallable
             every node's base: config/runtime injection, sync/async
  2  name    langgraph._internal._serde.collect_allowlist_from_schemas
             a strict serializer allows what `compile()` allows
  3  name    langgraph.checkpoint.serde.types._DeltaSnapshot
             the snapshot a `DeltaChannel` stores
  4  name    langgraph.channels.binop._get_overwrite
             `Overwrite` in every form, refused by the log
  5  name    langgraph.pregel._checkpoint.channels_from_checkpoint
             the input check loads a log as a run would (+ `a…`)
  6  name    langgraph.checkpoint.serde._msgpack.SAFE_MSGPACK_TYPES
             what a strict loader rebuilds (+ `SAFE_MSGPACK_METHODS`); `built_message`
             builds such a stored message as pydantic's constructors leave it
             (`__pydantic_fields_set__`, `__pydantic_extra__`, `__pydantic_private__`)
  7  name    langgraph.checkpoint.serde.jsonplus.JsonPlusSerializer._allowed_msgpack_modules
             a serializer's allowlist (+ `_unpack_ext_hook`, its msgpack record loader)
  8  name    langgraph.checkpoint.sqlite.SqliteSaver._has_task_path
             a read-only saver is told its table's shape
  9  name    langchain_core.language_models.BaseChatModel._get_ls_params
             which provider a model talks to
 10  name    langchain_openai.chat_models.base.BaseChatOpenAI._get_request_payload
             the body sent: rewritten, shown
 11  name    langgraph.prebuilt.tool_node._filter_validation_errors
             schema errors read like ToolNode's
 12  name    langgraph.prebuilt.tool_node._infer_handled_types
             a handler means what it means to ToolNode
 13  format  langgraph._internal._constants.CONFIG_KEY_RUNTIME
             a run's config (a run's read, its writes)
 14  format  langgraph._internal._constants.CONFIG_KEY_CHECKPOINT_MAP
             each enclosing graph's checkpoint
 15  format  langgraph._internal._constants.CONFIG_KEY_DURABILITY
             a task's durability (no marker under "exit")
 16  format  langgraph._internal._constants.NS_SEP
             namespaces: `node:task_id` (`NS_END`) joined by `|`
 17  format  langgraph._internal._constants.NULL_TASK_ID
             writes that are a step's input
 18  format  langgraph.graph.state.StateGraph
             `branch:to:<node>` channels trigger a node
 19  format  langgraph.pregel._algo.task_path_str
             a root pull task's `task_path`
 20  hook    langgraph.pregel._loop.SyncPregelLoop.__enter__
             a run reading its thread (+ `AsyncPregelLoop.__aenter__`)
 21  hook    langgraph.pregel._loop.PregelLoop
             the entering loop's `input`, `specs`, `stack`, `checkpointer`
 22  hook    langgraph.pregel.main.Pregel.get_state
             get_state's read (+ `aget_state`)
 23  hook    langgraph.pregel.main.Pregel._prepare_state_snapshot
             its preview of stored writes (+ `_a…`)
 24  hook    langgraph.pregel.main.Pregel.bulk_update_state
             update_state's values (+ `abulk_update_state`)
 25  hook    langgraph_api._checkpointer._adapter._CustomCheckpointerAdapter
             given delta-history reads of its `_inner`
 26  fork    langgraph.checkpoint.postgres.aio.AsyncPostgresSaver._load_checkpoint_tuple
             overridden
 27  fork    langgraph.checkpoint.postgres.base.BasePostgresSaver._dump_writes
             and `_load_writes`
 28  fork    langgraph.checkpoint.postgres.base.BasePostgresSaver._dump_blobs
             and `_load_blobs`
 29  fork    langgraph.checkpoint.postgres.aio.AsyncPostgresSaver._cursor
             its connection (`postgres_cursor`)
 30  fork    langgraph.checkpoint.postgres.base.BasePostgresSaver.UPSERT_CHECKPOINTS_SQL
             and its 3 other statements

**Hooks.** LangGraph has no callback for a run's loop reading its thread, `get_state`
reading it or previewing its writes, or `update_state`'s values, so those entry points are
wrapped, never at import: `install_hooks()` wraps them once per process when threadlog's
own objects are first used. A wrapper acts only for threadlog's graphs and savers (`own()`)
and publishes the call in a `ContextVar`; any other call goes straight to LangGraph.
`verify_hooks()` runs a canary graph once per process (`UpstreamChangedError` if one no
longer fires).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib
import importlib.metadata
import operator
import sys
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple, TypedDict

from langchain_core.messages import BaseMessage
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RUNTIME,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
)
from langgraph._internal._runnable import RunnableCallable
from langgraph._internal._serde import collect_allowlist_from_schemas
from langgraph.channels.binop import _get_overwrite
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde import _msgpack
from langgraph.checkpoint.serde.types import _DeltaSnapshot as DeltaSnapshot
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.pregel._checkpoint import achannels_from_checkpoint, channels_from_checkpoint
from langgraph.pregel._loop import AsyncPregelLoop, SyncPregelLoop
from langgraph.pregel.main import Pregel
from langgraph.types import StateUpdate

from threadlog.errors import UpstreamChangedError
from threadlog.flows import Flow, arun, call, run

__all__ = [
    "CONFIG_KEY_RUNTIME",
    "MISSING",
    "PREGEL",
    "DeltaSnapshot",
    "RunnableCallable",
    "achannels_from_checkpoint",
    "averify_hooks",
    "built_message",
    "channels_from_checkpoint",
    "declared_channels",
    "filter_validation_errors",
    "forward_server_delta_history",
    "in_get_state",
    "in_state_preview",
    "infer_handled_types",
    "install_hooks",
    "is_overwrite",
    "ls_provider",
    "msgpack_ext_hook",
    "msgpack_rebuilds",
    "on_run_input",
    "openai_message_json",
    "own",
    "postgres_cursor",
    "running_loop",
    "saver_task_path",
    "schema_types",
    "stamp_message_ids",
    "verify_hooks",
    "with_request_payload_rewrite",
]


# What `DeltaChannel.from_checkpoint` receives for "no value stored".
MISSING: Any = DeltaChannel(operator.add, list).checkpoint()


def is_overwrite(value: Any) -> bool:
    return bool(_get_overwrite(value)[0])


def saver_task_path(saver: Any, value: bool | None = None) -> bool:
    """A SqliteSaver's `task_path`-column flag; set first with `value` (read-only savers)."""
    if value is not None:
        saver._has_task_path = value
    return bool(saver._has_task_path)


def msgpack_rebuilds(serde: Any) -> Callable[[tuple[str, ...]], bool] | None:
    """Whether `serde`'s loader rebuilds a stored `(module, class[, method])`; None: all."""
    allowed = getattr(serde, "_allowed_msgpack_modules", True)
    if allowed is True:
        return None
    extra = allowed if isinstance(allowed, (set, frozenset)) else frozenset()

    def rebuilds(key: tuple[str, ...]) -> bool:
        if len(key) == 3:
            return key in _msgpack.SAFE_MSGPACK_METHODS
        return key in _msgpack.SAFE_MSGPACK_TYPES or key in extra

    return rebuilds


def built_message(module: Any, name: Any, fields: dict[str, Any]) -> BaseMessage | None:
    """`cls(**fields)` unvalidated for a stored record of a safe message class holding
    exactly its fields and a string id, else None: LangGraph's loader falls back to
    `model_construct` anyway, so this trusts nothing it would not."""
    found = _MESSAGE_CLASSES.get((module, name))
    if found is None:
        if (module, name) not in _msgpack.SAFE_MSGPACK_TYPES:
            return None
        cls = getattr(importlib.import_module(module), name)
        if not (isinstance(cls, type) and issubclass(cls, BaseMessage)):
            return None
        found = _MESSAGE_CLASSES[(module, name)] = (cls, frozenset(cls.model_fields))
    cls, names = found
    if fields.keys() != names or type(fields["id"]) is not str:
        return None
    msg = cls.__new__(cls)
    object.__setattr__(msg, "__dict__", fields)
    object.__setattr__(msg, "__pydantic_fields_set__", set(names))
    object.__setattr__(msg, "__pydantic_extra__", {})
    object.__setattr__(msg, "__pydantic_private__", None)
    return msg


_MESSAGE_CLASSES: dict[tuple[Any, Any], tuple[type[BaseMessage], frozenset[str]]] = {}


def msgpack_ext_hook(serde: Any) -> Callable[[int, bytes], Any] | None:
    hook = getattr(serde, "_unpack_ext_hook", None)
    return hook if callable(hook) else None


def schema_types(schemas: Sequence[Any], channels: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """The `(module, class)` pairs a strict serializer allows, as `compile()` collects them."""
    found: set[tuple[str, ...]] = collect_allowlist_from_schemas(
        schemas=[s for s in schemas if s is not None], channels=dict(channels)
    )
    return found


def ls_provider(model: Any) -> str | None:
    """The provider name LangSmith would record for a chat model, or None."""
    try:
        params = model._get_ls_params()
    except Exception:
        return None
    provider = params.get("ls_provider") if isinstance(params, dict) else None
    return provider if isinstance(provider, str) else None


@dataclass(frozen=True)
class _PregelFormat:
    """How LangGraph spells what it stores and passes (stored threads depend on it)."""

    ns_sep: str = NS_SEP  # joins nested checkpoint namespaces
    ns_end: str = NS_END  # ends the node name in a namespace segment, "<node>:<task_id>"
    null_task_id: str = NULL_TASK_ID  # writes that are a step's input, not a task's output
    checkpoint_map: str = CONFIG_KEY_CHECKPOINT_MAP  # {graph namespace: checkpoint id}
    durability: str = CONFIG_KEY_DURABILITY  # a running task's durability
    parents: str = "parents"  # the metadata key of that map of enclosing graphs
    branch_to: str = "branch:to:"  # the channel prefix a StateGraph edge writes
    task_run_tag: str = "graph:step:"  # how the tag a task's own run carries starts
    # The `task_path` of a root graph's pull task of node `{node}`.
    root_pull_task_path: str = "~__pregel_pull, {node}"


PREGEL = _PregelFormat()


# -- hooks: what LangGraph is doing right now, in this context --------------------------------


@dataclass(slots=True, eq=False)
class _Call:
    """One hooked call in progress: its target and the thread / task making it."""

    target: Any
    owner: tuple[int, object] = field(default_factory=lambda: _owner())
    live: bool = True


def _owner() -> tuple[int, object]:
    # A context copied during the call runs elsewhere and must not see it.
    try:
        task: object = asyncio.current_task()
    except RuntimeError:  # no event loop in this thread
        task = None
    return threading.get_ident(), task


_CALLS: dict[str, contextvars.ContextVar[_Call | None]] = {
    kind: contextvars.ContextVar(f"threadlog_upstream_{kind}", default=None)
    for kind in ("loop_enter", "get_state", "state_preview", "update_state")
}

# (class, attribute, kind, is async): while one runs, `_CALLS[kind]` holds it.
_ENTRY_POINTS: tuple[tuple[type, str, str, bool], ...] = (
    # The loop reads the thread's head while it enters: a saver can tell a run from a reader.
    (SyncPregelLoop, "__enter__", "loop_enter", False),
    (AsyncPregelLoop, "__aenter__", "loop_enter", True),
    # get_state's own read (not update_state's).
    (Pregel, "get_state", "get_state", False),
    (Pregel, "aget_state", "get_state", True),
    # get_state applying a checkpoint's stored writes to preview the state.
    (Pregel, "_prepare_state_snapshot", "state_preview", False),
    (Pregel, "_aprepare_state_snapshot", "state_preview", True),
)
_NOT_HOOKED: dict[str, str] = {}  # "Class.attr" -> why it could not be wrapped


def _active(kind: str) -> Any | None:
    call = _CALLS[kind].get()
    if call is None or not call.live or call.owner != _owner():
        return None
    return call.target


class RunningLoop(NamedTuple):
    """What threadlog reads off the Pregel loop whose enter is running (`running_loop()`)."""

    loop: object  # for its lifetime (`weakref.finalize`), nothing else
    stack: Any  # its (Async)ExitStack, unwound however the run ends
    input: Any  # new input, or None / a `Command` for a resume
    specs: Mapping[str, Any]  # channel name -> channel
    nodes: Mapping[str, Any]  # node name -> PregelNode
    manager: Any  # the run's callback manager: every task's callbacks are its children


def running_loop() -> RunningLoop | None:
    """The Pregel loop entering in this thread / task, else None."""
    loop = _active("loop_enter")
    if loop is None:
        return None
    try:
        return RunningLoop(loop, loop.stack, loop.input, loop.specs, loop.nodes, loop.manager)
    except AttributeError as exc:
        raise _lost_attribute(loop, exc.name) from exc


def _lost_attribute(owner: object, name: str | None) -> UpstreamChangedError:
    return UpstreamChangedError(
        f"{type(owner).__name__} has no `{name}` attribute any more",
        package="langgraph",
        version=_version(),
    )


def run_store(loop: RunningLoop) -> Any:
    try:
        return loop.loop.store  # type: ignore[attr-defined]
    except AttributeError as exc:
        raise _lost_attribute(loop.loop, "store") from exc


def set_run_store(loop: RunningLoop, store: Any) -> None:
    """Hand this run's tasks `store` instead (called while the loop enters)."""
    run_store(loop)  # the attribute is where it was
    loop.loop.store = store  # type: ignore[attr-defined]


def in_get_state() -> bool:
    """Whether `get_state` / `aget_state` is running in this context (not `update_state`)."""
    return _active("get_state") is not None


def in_state_preview() -> bool:
    """Whether `get_state` is previewing a checkpoint's pending writes in this context."""
    return _active("state_preview") is not None


def declared_channels() -> Mapping[str, Any] | None:
    """The channels of the graph whose LangGraph read runs in this context, or None."""
    for kind in ("state_preview", "get_state", "update_state"):
        graph = _active(kind)
        if graph is not None:
            channels = getattr(graph, "channels", None)
            return channels if isinstance(channels, Mapping) else None
    loop = running_loop()
    return None if loop is None else loop.specs


# LangGraph stores a run's input from a background thread while step 0 stamps message ids
# in place: these callbacks see `(input, specs)` before the loop enters, to stamp them first.
RunInputHook = Callable[[Any, Mapping[str, Any]], None]
_RUN_INPUT_HOOKS: list[RunInputHook] = []


def on_run_input(hook: RunInputHook) -> None:
    """Register a callback on each run's input, before its loop enters (once each)."""
    if hook not in _RUN_INPUT_HOOKS:
        _RUN_INPUT_HOOKS.append(hook)


def stamp_message_ids(specs: Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """Stamp LangGraph's uuid4 ids on message objects written to a `DeltaChannel`, now."""
    for key, value in values.items():
        if not isinstance(specs.get(key), DeltaChannel):
            continue
        found, inner = _get_overwrite(value)
        if found:
            value = inner
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, BaseMessage) and not item.id:
                item.id = str(uuid.uuid4())


def _before_enter(loop: Any) -> None:
    if not _RUN_INPUT_HOOKS:
        return
    run_input = getattr(loop, "input", None)
    specs = getattr(loop, "specs", None)
    if run_input is None or not isinstance(specs, Mapping):
        return  # a resume; or an upstream change, which `running_loop()` reports
    for hook in _RUN_INPUT_HOOKS:
        hook(run_input, specs)


@contextlib.contextmanager
def _published(kind: str, target: Any) -> Any:
    if kind == "loop_enter":
        _before_enter(target)
    call = _Call(target)
    token = _CALLS[kind].set(call)
    try:
        yield
    finally:
        call.live = False
        with contextlib.suppress(ValueError):  # reset from another context
            _CALLS[kind].reset(token)


def _hooked(original: Callable[..., Any], kind: str, is_async: bool) -> Callable[..., Any]:
    ours = _own_loop if kind == "loop_enter" else _own_graph
    if is_async:

        @functools.wraps(original)
        async def ahook(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not ours(self, args, kwargs):
                return await original(self, *args, **kwargs)
            args, kwargs = _updated(kind, self, args, kwargs)
            with _published(kind, self):
                return await original(self, *args, **kwargs)

        hook: Callable[..., Any] = ahook
    else:

        @functools.wraps(original)
        def shook(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not ours(self, args, kwargs):
                return original(self, *args, **kwargs)
            args, kwargs = _updated(kind, self, args, kwargs)
            with _published(kind, self):
                return original(self, *args, **kwargs)

        hook = shook
    hook._threadlog_hook = kind  # type: ignore[attr-defined]
    return hook


# Every `update_state` stores its writes through `bulk_update_state` before any channel sees
# them: a rewrite `(graph, values) -> values` lets the write say "a human revised this".
UpdateRewrite = Callable[[Any, Any], Any]
_UPDATE_REWRITES: list[UpdateRewrite] = []


def on_update_state(rewrite: UpdateRewrite) -> None:
    """Register a rewrite of `update_state`'s values (once per function)."""
    if rewrite not in _UPDATE_REWRITES:
        _UPDATE_REWRITES.append(rewrite)


def _rewritten(graph: Any, supersteps: Any) -> Any:
    if not _UPDATE_REWRITES:
        return supersteps
    out = []
    for step in supersteps:
        updates = []
        for update in step:  # a StateUpdate, or a plain (values, as_node[, task_id]) tuple
            values = update[0]
            for rewrite in _UPDATE_REWRITES:
                values = rewrite(graph, values)
            updates.append(StateUpdate(values, *tuple(update)[1:]))
        out.append(updates)
    return out


def _updated(kind: str, graph: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
    if kind != "update_state" or not _owns_channels(graph):
        return args, kwargs
    if "supersteps" in kwargs:
        return args, {**kwargs, "supersteps": _rewritten(graph, kwargs["supersteps"])}
    if len(args) > 1:
        return (args[0], _rewritten(graph, args[1]), *args[2:]), kwargs
    return args, kwargs


_UPDATE_ENTRY_POINTS: tuple[tuple[type, str, bool], ...] = (
    (Pregel, "bulk_update_state", False),
    (Pregel, "abulk_update_state", True),
)


def update_state_hooked() -> bool:
    """Whether `bulk_update_state` / `abulk_update_state` carry the rewrite hook."""
    install_hooks()
    return all(_is_hooked(getattr(cls, attr, None)) for cls, attr, _ in _UPDATE_ENTRY_POINTS)


def _is_hooked(fn: Any) -> bool:
    for _ in range(100):
        if fn is None:
            return False
        if getattr(fn, "_threadlog_hook", None) is not None:
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def _install_hooks() -> None:
    updates = ((cls, attr, "update_state", a) for cls, attr, a in _UPDATE_ENTRY_POINTS)
    for cls, attr, kind, is_async in (*_ENTRY_POINTS, *updates):
        name = f"{cls.__name__}.{attr}"
        original = getattr(cls, attr, None)
        if not callable(original):
            _NOT_HOOKED[name] = f"{name} no longer exists"
            continue
        _NOT_HOOKED.pop(name, None)
        if not _is_hooked(original):
            setattr(cls, attr, _hooked(original, kind, is_async))


@functools.cache
def install_hooks() -> None:
    """Wrap the entry points, once per process (module doc, "Hooks")."""
    with _INSTALL_LOCK:
        _install_hooks()


_INSTALL_LOCK = threading.Lock()


# A channel class or a saver object is threadlog's when it carries `OWN_MARK` (`own`).
OWN_MARK = "_threadlog_own"


def own(obj: Any) -> Any:
    """Mark `obj` (a saver, or a channel class) as threadlog's and install the hooks."""
    install_hooks()
    if isinstance(obj, type):
        setattr(obj, OWN_MARK, True)
    else:
        vars(obj)[OWN_MARK] = True
    return obj


def _is_own(obj: Any) -> bool:
    # Through wrappers: threadlog's own (`inner`), LangGraph Server's adapter (`_inner`).
    for _ in range(4):
        if obj is None or isinstance(obj, bool):
            return False
        if getattr(type(obj), OWN_MARK, False) is True:
            return True
        attrs = getattr(obj, "__dict__", None) or {}
        if attrs.get(OWN_MARK) is True:
            return True
        obj = attrs.get("inner", attrs.get("_inner"))
    return False


def _owns_channels(graph: Any, attr: str = "channels") -> bool:
    channels = getattr(graph, attr, None)  # a graph's `channels`, a loop's `specs`
    return isinstance(channels, Mapping) and any(
        getattr(type(c), OWN_MARK, False) is True for c in channels.values()
    )


def _own_loop(loop: Any, args: Any, kwargs: Any) -> bool:
    return _owns_channels(loop, "specs") or _is_own(getattr(loop, "checkpointer", None))


def _own_graph(graph: Any, args: Any, kwargs: Any) -> bool:
    if _owns_channels(graph) or _is_own(getattr(graph, "checkpointer", None)):
        return True
    if _is_own(kwargs.get("saver")):  # _prepare_state_snapshot's
        return True
    config = args[0] if args else kwargs.get("config")
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    return isinstance(conf, Mapping) and _is_own(conf.get(CONFIG_KEY_CHECKPOINTER))


# -- verifying the hooks: a canary graph, once per process -----------------------------------

_VERIFIED: set[bool] = set()  # is_async values whose canary passed in this process


def _version() -> str:
    try:
        return importlib.metadata.version("langgraph")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - it is installed
        return "(version unknown)"


def verify_hooks() -> None:
    """Prove the hooks fire on a canary graph, once per process, or raise."""
    if False in _VERIFIED:
        return
    install_hooks()
    contextvars.Context().run(run, _canary(is_async=False))
    _VERIFIED.add(False)


async def averify_hooks() -> None:
    """`verify_hooks` for the async entry points (`ainvoke` + `aget_state`)."""
    if True in _VERIFIED:
        return
    install_hooks()
    await asyncio.create_task(arun(_canary(is_async=True)), context=contextvars.Context())
    _VERIFIED.add(True)


@dataclass(eq=False)
class _Seen:
    """What the canary's saver, nodes and reducer saw, per phase (facts, never the loop)."""

    given: Any
    phase: str = "run"
    reads: list[tuple[str, _LoopFacts | None, bool]] = field(default_factory=list)
    in_nodes: list[tuple[str, bool]] = field(default_factory=list)  # (phase, loop published)
    updates: list[tuple[str, bool]] = field(default_factory=list)  # (phase, in_state_preview())
    unwound: bool = False
    error: UpstreamChangedError | None = None

    def read(self) -> None:
        try:
            loop = running_loop()
        except UpstreamChangedError as exc:
            self.error = exc
            return
        facts = None
        if loop is not None:
            facts = _LoopFacts(
                loop.input == self.given,
                isinstance(loop.specs, Mapping) and "n" in loop.specs,
                callable(getattr(loop.stack, "callback", None)),
            )
            if facts.has_callback and self.phase == "run":
                loop.stack.callback(setattr, self, "unwound", True)
        self.reads.append((self.phase, facts, in_get_state()))


class _LoopFacts(NamedTuple):
    input_is_the_runs: bool
    specs_name_the_channels: bool
    has_callback: bool


# Module-level, so nothing of a finished canary stays reachable.
_SEEN: contextvars.ContextVar[_Seen | None] = contextvars.ContextVar(
    "threadlog_canary", default=None
)


def _canary_keep(old: int, new: int) -> int:
    if (seen := _SEEN.get()) is not None:
        seen.updates.append((seen.phase, in_state_preview()))
    return new


class _CanaryState(TypedDict):
    n: Annotated[int, _canary_keep]


def _canary_write(state: _CanaryState) -> dict[str, int]:
    if (seen := _SEEN.get()) is not None:
        seen.in_nodes.append((seen.phase, running_loop() is not None))
    return {"n": 1}


def _canary_ask(state: _CanaryState) -> dict[str, int]:
    from langgraph.types import interrupt

    interrupt("canary")  # the step stops; `_canary_write`'s result stays a pending write
    return {}


class _CanarySaver(InMemorySaver):
    _threadlog_own = True  # the canary stands for a threadlog graph

    def get_tuple(self, config: Any) -> Any:  # aget_tuple calls it too
        if (seen := _SEEN.get()) is not None:
            seen.read()
        return super().get_tuple(config)


def _canary_graph() -> Any:
    from langgraph.graph import START, StateGraph

    g: Any = StateGraph(_CanaryState)
    g.add_node("write", _canary_write)
    g.add_node("ask", _canary_ask)
    g.add_edge(START, "write")
    g.add_edge(START, "ask")
    return g.compile(checkpointer=_CanarySaver())


def _canary(*, is_async: bool) -> Flow[None]:
    """A run (one node interrupts: the other's result is a pending write), then get_state."""
    from langsmith import tracing_context

    given = {"n": 0}
    seen = _Seen(given)
    _SEEN.set(seen)  # the drivers run this in a context of its own
    graph = _canary_graph()
    config = {"configurable": {"thread_id": "threadlog-canary"}}
    names = {k: f"{c.__name__}.{a}" for c, a, k, i in _ENTRY_POINTS if i == is_async}
    problems = [why for name, why in _NOT_HOOKED.items() if name in names.values()]
    with tracing_context(enabled=False):
        for phase, method, args in (
            ("run", "invoke", (given, config)),
            ("get_state", "get_state", (config,)),
        ):
            seen.phase = phase
            try:
                yield from call(graph, method, *args)
            except Exception as exc:  # named below, with what else stopped working
                problems.append(f"the canary graph's {method} failed: {exc!r}")
                break
    if seen.error is not None:
        raise seen.error
    problems += _problems(seen, names["loop_enter"], names["get_state"], names["state_preview"])
    if problems:
        raise UpstreamChangedError("; ".join(problems), package="langgraph", version=_version())


def _problems(seen: _Seen, enter: str, get_state: str, preview: str) -> list[str]:
    out: list[str] = []
    run_loops = [loop for phase, loop, _ in seen.reads if phase == "run"]
    loops = [loop for loop in run_loops if loop is not None]
    if not run_loops:
        out.append(f"{enter}: a run no longer reads its thread through the checkpointer")
    elif not loops:
        out.append(
            f"{enter}: a run's read of its thread is no longer inside the hooked call "
            "(no entering loop seen), so the run guard would not take the thread's lock"
        )
    else:
        loop = loops[0]
        if not loop.input_is_the_runs:
            out.append(f"{enter}: the entering loop's `input` is not the run's input")
        if not loop.specs_name_the_channels:
            out.append(f"{enter}: the entering loop's `specs` do not name the graph's channels")
        if not (loop.has_callback and seen.unwound):
            out.append(f"{enter}: the entering loop's `stack` was not unwound when the run ended")
    if any(published for _, published in seen.in_nodes):
        out.append(f"{enter}: the entering loop is still published while the run's nodes run")
    if any(state for phase, _, state in seen.reads if phase == "run"):
        out.append(f"{get_state}: a run's read of its thread counts as get_state's")
    if any(preview_ for phase, preview_ in seen.updates if phase == "run"):
        out.append(f"{preview}: a run's channel updates count as get_state's preview")
    state_reads = [(loop, state) for phase, loop, state in seen.reads if phase == "get_state"]
    if not any(state for _, state in state_reads):
        out.append(
            f"{get_state}: its read of the thread is no longer inside the hooked call, so "
            "get_state would not show refused writes as task errors"
        )
    if any(loop is not None for loop, _ in state_reads):
        out.append(f"{get_state}: get_state's read counts as a run's")
    if not any(preview_ for phase, preview_ in seen.updates if phase == "get_state"):
        out.append(
            f"{preview}: get_state's preview of stored writes is no longer inside the "
            "hooked call, so a failed step's refused writes would raise in get_state"
        )
    return out


@functools.cache  # imported on first use: it brings `openai`
def _payload_model(responses_api: bool) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="threadlog", api_key="unused", use_responses_api=responses_api)


def openai_message_json(messages: Sequence[Any], *, responses_api: bool) -> list[dict[str, Any]]:
    """The JSON langchain-openai sends for `messages` (Chat Completions or Responses API)."""
    body = _payload_model(responses_api)._get_request_payload(list(messages))
    return list(body["input" if responses_api else "messages"])


# No public hook sits between converting the messages and sending them, so a server
# profile's rules rewrite the body in a subclass per (model class, profile).
_REWRITING: dict[tuple[type, str], type] = {}


def with_request_payload_rewrite(model: Any, key: str, rewrite: Any) -> Any:
    """A copy of a langchain-openai model whose request body goes through `rewrite`;
    `key` names the rewrite (one subclass each)."""
    base = type(model)
    if getattr(base, "_threadlog_rewrite_key", None) is not None:
        base = base.__mro__[1]  # already rewritten: replace, never stack, the rule
    sub = _REWRITING.get((base, key))
    if sub is None:
        original = base._get_request_payload

        def _get_request_payload(self: Any, input_: Any, *, stop: Any = None, **kw: Any) -> Any:
            return type(self)._threadlog_rewrite(original(self, input_, stop=stop, **kw))

        sub = type(
            base.__name__,
            (base,),
            {
                "__module__": base.__module__,
                "_get_request_payload": _get_request_payload,
                "_threadlog_rewrite_key": key,
                "_threadlog_rewrite": staticmethod(rewrite),
            },
        )
        _REWRITING[(base, key)] = sub
    copy = model.model_copy()
    object.__setattr__(copy, "__class__", sub)
    return copy


def filter_validation_errors(validation_error: Any, injected_args: Any) -> list[Any]:
    """ToolNode's filter of injected arguments out of a validation error."""
    from langgraph.prebuilt.tool_node import _filter_validation_errors

    return list(_filter_validation_errors(validation_error, injected_args))


def infer_handled_types(handler: Callable[..., str]) -> tuple[type[Exception], ...]:
    """The exception types a `handle_tool_errors` callable handles, as ToolNode reads them."""
    from langgraph.prebuilt.tool_node import _infer_handled_types

    return _infer_handled_types(handler)


# LangGraph Server's checkpointer adapter does not forward `get_delta_channel_history`.
SERVER_ADAPTER = ("langgraph_api._checkpointer._adapter", "_CustomCheckpointerAdapter")
_DELTA_HISTORY = ("get_delta_channel_history", "aget_delta_channel_history")


def forward_server_delta_history() -> bool:
    """Make LangGraph Server's adapter forward delta-history reads to its saver; False when
    no server loaded it in this process (never imported here) or it changed."""
    module_name, class_name = SERVER_ADAPTER
    adapter: Any = getattr(sys.modules.get(module_name), class_name, None)
    if not isinstance(adapter, type) or not callable(getattr(adapter, "aget_tuple", None)):
        return False
    if all(name in vars(adapter) for name in _DELTA_HISTORY):
        return True  # forwarded already (by us, or by upstream itself)

    def get_delta_channel_history(self: Any, *, config: Any, channels: Any) -> Any:
        return self._inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(self: Any, *, config: Any, channels: Any) -> Any:
        return await self._inner.aget_delta_channel_history(config=config, channels=channels)

    setattr(adapter, "get_delta_channel_history", get_delta_channel_history)  # noqa: B010
    setattr(adapter, "aget_delta_channel_history", aget_delta_channel_history)  # noqa: B010
    return True


# What `checkpoint/backends/postgres_inline.py`'s fork calls and runs (rows 26-30).
POSTGRES_PRIVATE = (
    "_dump_blobs",
    "_dump_writes",
    "_load_writes",
    "_load_blobs",
    "_cursor",
    "_load_checkpoint_tuple",
    "UPSERT_CHECKPOINT_WRITES_SQL",
    "INSERT_CHECKPOINT_WRITES_SQL",
    "UPSERT_CHECKPOINT_BLOBS_SQL",
    "UPSERT_CHECKPOINTS_SQL",
)


def postgres_cursor(saver: Any, *, pipeline: bool) -> Any:
    """An `AsyncPostgresSaver`'s own cursor context (its lock, connection, pipeline)."""
    return saver._cursor(pipeline=pipeline)
