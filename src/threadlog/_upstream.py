"""Every private LangGraph / langchain name threadlog relies on, in one place.

Upstream may rename or change any of these in a minor release. Keeping them here means one
file to read when that happens, and `tests/test_upstream.py` checks that each one still
exists and behaves as used, so a breaking release fails our suite instead of users' apps.
Each name carries why we need it; "checked" is the version it was last verified against
(langgraph 1.2.24, langgraph-checkpoint 4.3.2, langgraph-checkpoint-sqlite 3.1.2,
langgraph-prebuilt 1.1.3, langchain-core 1.8.3). Prefer a public hook where one exists.
"""

from __future__ import annotations

import sys
from typing import Any

# Config keys LangGraph puts in `config["configurable"]` for a running task.
# A task's failure and interrupt channels in its pending writes (a task with either did
# not finish), and the task id of writes that are input to a step rather than a task's
# output: the loop applies them first, for resumes and new input alike. Used to carry
# work a crash left without its checkpoint (`checkpoint/finished.py`); and for
# `get_state`, to show a refused write as its task's error (`checkpoint/guard.py`).
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_RUNTIME,
    ERROR,
    INTERRUPT,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
)

# -- langgraph runtime ---------------------------------------------------------------------
# `RunnableCallable` is the base of every LangGraph node (upstream's own ToolNode is one):
# it injects `config`/`runtime` by signature and handles sync/async dispatch. No public
# equivalent: a plain function node cannot carry the node's options and async twin.
from langgraph._internal._runnable import RunnableCallable

# `MISSING` is the sentinel `DeltaChannel.from_checkpoint` receives for "no value stored".
from langgraph._internal._typing import MISSING

# `_get_overwrite` recognises LangGraph's `Overwrite(...)` in every form it accepts
# (object and dict), so the append-only log can refuse it with a clear error.
from langgraph.channels.binop import _get_overwrite

# The safe-type tables of LangGraph's msgpack loader: whether a strict serializer would
# rebuild a type on load (asked before a tool result is stored).
from langgraph.checkpoint.serde import _msgpack as msgpack_tables

# The snapshot value a `DeltaChannel` stores every N supersteps; our channel must read it.
from langgraph.checkpoint.serde.types import _DeltaSnapshot as DeltaSnapshot

# The channel LangGraph stores `Send` packets in, in a checkpoint's pending writes.
from langgraph.constants import TASKS

# How upstream's ToolNode filters injected arguments out of a validation error, and the
# type of its injected-argument map: reused so schema errors read like upstream's.
from langgraph.prebuilt.tool_node import _filter_validation_errors as filter_validation_errors

# Which exception types a `handle_tool_errors` callable handles, read from its annotation:
# reused so a handler means exactly what it means to upstream's ToolNode.
from langgraph.prebuilt.tool_node import _infer_handled_types as infer_handled_types
from langgraph.prebuilt.tool_node import _InjectedArgs as InjectedArgs

# LangGraph's own loader of a checkpoint's channels (replaying delta channels' writes):
# the input check rebuilds the log exactly as a run would see it.
from langgraph.pregel._checkpoint import achannels_from_checkpoint, channels_from_checkpoint

# A run's Pregel loop reads the thread's head through the saver from its `__enter__` /
# `__aenter__`: the one moment a saver can tell a run from a reader, and the loop's
# `stack` (an ExitStack) is the one hook that runs however the run ends. `get_state`
# previews pending writes from `_prepare_state_snapshot`. Found by their code objects
# on the stack (`entering_loop`, `reading_state`, `in_state_preview`).
from langgraph.pregel._loop import AsyncPregelLoop, SyncPregelLoop
from langgraph.pregel.main import Pregel

# The channel a StateGraph edge writes to trigger a node (`branch:to:<node>`): a head that
# still holds one has a task to run, so a subgraph may have stored work below it
# (`checkpoint/finished_subgraphs.py`). A literal in `langgraph/graph/state.py`.
BRANCH_TO = "branch:to:"

__all__ = [
    "BRANCH_TO",
    "CONFIG_KEY_CHECKPOINTER",
    "CONFIG_KEY_CHECKPOINT_MAP",
    "CONFIG_KEY_CHECKPOINT_NS",
    "CONFIG_KEY_RUNTIME",
    "ERROR",
    "INTERRUPT",
    "MISSING",
    "NS_END",
    "NS_SEP",
    "NULL_TASK_ID",
    "TASKS",
    "DeltaSnapshot",
    "InjectedArgs",
    "RunnableCallable",
    "achannels_from_checkpoint",
    "allowed_msgpack_modules",
    "channels_from_checkpoint",
    "construct_responses_api_input",
    "convert_message_to_dict",
    "entering_loop",
    "filter_validation_errors",
    "in_state_preview",
    "infer_handled_types",
    "is_overwrite",
    "ls_provider",
    "msgpack_tables",
    "reading_state",
    "saver_has_task_path",
    "set_saver_has_task_path",
    "with_request_payload_rewrite",
]


def is_overwrite(value: Any) -> bool:
    """Whether `value` is LangGraph's `Overwrite` (object or dict form)."""
    return bool(_get_overwrite(value)[0])


def saver_has_task_path(saver: Any) -> bool:
    """Whether a SqliteSaver's writes table has the `task_path` column (newer schema);
    the saver's delta SQL builder needs to know."""
    return bool(saver._has_task_path)


def set_saver_has_task_path(saver: Any, value: bool) -> None:
    """Tell a SqliteSaver opened read-only (its `setup()` migration never runs) whether
    its writes table has `task_path`; `setup()` is what normally finds out."""
    saver._has_task_path = value


def allowed_msgpack_modules(serde: Any) -> Any:
    """A serializer's strict-msgpack allowlist (`True` = not strict); no public accessor."""
    return getattr(serde, "_allowed_msgpack_modules", True)


def ls_provider(model: Any) -> str | None:
    """The provider name LangSmith would record for a chat model (`_get_ls_params`): the
    only place langchain states which provider a model object talks to."""
    try:
        params = model._get_ls_params()
    except Exception:
        return None
    provider = params.get("ls_provider") if isinstance(params, dict) else None
    return provider if isinstance(provider, str) else None


_LOOP_ENTRIES = frozenset({SyncPregelLoop.__enter__.__code__, AsyncPregelLoop.__aenter__.__code__})
_STATE_READS = frozenset({Pregel.get_state.__code__, Pregel.aget_state.__code__})
_PREVIEWS = frozenset(
    {Pregel._prepare_state_snapshot.__code__, Pregel._aprepare_state_snapshot.__code__}
)


def _caller_in(codes: frozenset[Any], depth: int) -> Any:
    """The frame among our caller's `depth` callers that runs one of `codes`, if any."""
    frame: Any = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        if frame.f_code in codes:
            return frame
        frame = frame.f_back
    return None


def entering_loop(depth: int = 5) -> Any | None:
    """The Pregel loop whose `__enter__` / `__aenter__` is calling us, if any (its `stack`
    attribute is the ExitStack unwound when the run ends)."""
    frame = _caller_in(_LOOP_ENTRIES, depth)
    return None if frame is None else frame.f_locals.get("self")


def reading_state(depth: int = 5) -> bool:
    """Whether `get_state` / `aget_state` itself is calling us (not `update_state`)."""
    return _caller_in(_STATE_READS, depth) is not None


def in_state_preview(depth: int = 8) -> bool:
    """Whether `get_state` is previewing a checkpoint's pending writes (we are below it)."""
    return _caller_in(_PREVIEWS, depth) is not None
# -- langchain-openai ------------------------------------------------------------------------
# Its own message → JSON converters (Chat Completions dicts, Responses API input items):
# `threadlog.openai_payload` shows exactly what langchain-openai sends, so it must use them.
from langchain_openai.chat_models.base import (  # noqa: E402
    _construct_responses_api_input as construct_responses_api_input,
)
from langchain_openai.chat_models.base import (  # noqa: E402
    _convert_message_to_dict as convert_message_to_dict,
)

# The request body, after conversion, before it is sent.
# `BaseChatOpenAI._get_request_payload(input, stop=..., **kwargs) -> dict` builds the body
# every sync/async, streamed or not, request sends. langchain-openai has no public hook
# between converting the messages and sending them, and its conversion cannot express some
# servers' rules (it always turns "" beside tool calls into null), so a server profile's
# rules are applied to the body here: a subclass per (model class, profile) overrides it.
_REWRITING: dict[tuple[type, str], type] = {}


def with_request_payload_rewrite(model: Any, key: str, rewrite: Any) -> Any:
    """A copy of a langchain-openai chat model whose request body goes through
    `rewrite(body) -> body` before it is sent; `key` names the rewrite (one subclass each)."""
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
