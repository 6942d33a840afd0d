"""What a `ModelNode` calls for one run: its model and system prompt, fixed or chosen
(LangChain's dynamic model).

* `model` is a chat model, or a callable `(state, runtime) -> model` (sync or async)
  called at every model step. A returned `BaseChatModel` gets the node's tools bound and
  its profile's wire rules (cached per model object); any other `Runnable` is called as
  it is.
* `system_prompt` is a string, None, or a callable `(state, runtime) -> str | None`. Its
  `SystemMessage` id is `tl-system-<blake2b of the text>`.
* An `async def` callable needs an async run: a sync run raises `TypeError`.
* Outside a graph a callable gets `Runtime()` (context None).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import Runtime

from threadlog._upstream import CONFIG_KEY_RUNTIME
from threadlog.flows import Flow, Io
from threadlog.providers.profiles import Profile, get_profile
from threadlog.providers.wire import profile_for, with_profile

__all__ = ["Chosen", "Models", "is_choice", "resolve", "runtime_of", "system_message"]


@dataclass(frozen=True, slots=True)
class Chosen:
    """One model as a node calls it, with the runnables for a turn's later and first call."""

    model: Any
    profile: Profile
    bound: Runnable[Any, Any]
    bound_first: Runnable[Any, Any]


def is_choice(value: Any) -> bool:
    """Whether `value` is a callable choosing per run, not a model or a text itself."""
    return callable(value) and not isinstance(value, (Runnable, str))


def _bind(model: Any, tools: list[Any], **kwargs: Any) -> Runnable[Any, Any]:
    try:
        bound: Runnable[Any, Any] = model.bind_tools(tools, **kwargs)
    except (AttributeError, NotImplementedError) as exc:
        raise TypeError(
            f"{type(model).__name__} cannot bind tools ({exc}); pass a chat model with "
            "tool calling (e.g. ChatOpenAI, threadlog.OfflineChatModel), or bind the "
            "tools yourself and pass tools=()"
        ) from exc
    return bound


class Models:
    """Prepares models for one node; remembers the few a chooser returns, bound once each."""

    _KEEP = 16

    def __init__(
        self,
        tools: Sequence[Any],
        tool_choice: str | dict[str, Any] | None,
        profile: str | Profile | None,
    ) -> None:
        self.tools = list(tools)
        self.tool_choice = tool_choice
        self.profile = get_profile(profile) if profile is not None else None
        self._seen: dict[int, tuple[Any, Chosen]] = {}

    def prepare(self, model: Any, *, fixed: bool = False) -> Chosen:
        """`model` ready to call; `fixed`: the node's own model, bound whatever its type."""
        original = model
        hit = self._seen.get(id(original))
        if hit is not None and hit[0] is original:
            return hit[1]
        profile = self.profile if self.profile is not None else profile_for(model)
        if fixed or isinstance(model, BaseChatModel):
            model = with_profile(model, profile)  # the server's body rules, if any
            # A server that cannot stream tool calls gets requests with tools unstreamed.
            extra: dict[str, Any] = {} if profile.stream_tool_calls else {"stream": False}
            choice = self.tool_choice if self.tool_choice is not None else profile.tool_choice
            bound = _bind(model, self.tools, **extra) if self.tools else model
            first = (
                _bind(model, self.tools, tool_choice=choice, **extra)
                if self.tools and choice is not None
                else bound
            )
            chosen = Chosen(model, profile, bound, first)
        else:
            chosen = Chosen(model, profile, model, model)
        if not fixed:
            if len(self._seen) >= self._KEEP:
                self._seen.pop(next(iter(self._seen)))
            self._seen[id(original)] = (original, chosen)  # kept alive: its id stays its own
        return chosen


@functools.lru_cache(maxsize=64)  # one message per prompt text: caches key on its id
def system_message(text: str | None) -> SystemMessage | None:
    if not text:
        return None
    digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    return SystemMessage(content=text, id=f"tl-system-{digest}")


def runtime_of(config: RunnableConfig | None) -> Runtime[Any]:
    """The run's `Runtime` (what LangGraph injects as a node's `runtime`), or `Runtime()`."""
    found = ((config or {}).get("configurable") or {}).get(CONFIG_KEY_RUNTIME)
    return found if isinstance(found, Runtime) else Runtime()


def resolve(what: str, choose: Callable[..., Any], state: Any, runtime: Runtime[Any]) -> Flow[Any]:
    """`choose(state, runtime)`, awaited under the async driver when it is `async def`."""
    call = getattr(choose, "__call__", None)  # noqa: B004 - an object with an async __call__
    if not (inspect.iscoroutinefunction(choose) or inspect.iscoroutinefunction(call)):
        return choose(state, runtime)

    def in_sync_run(*_: Any) -> Any:
        raise TypeError(
            f"the ModelNode's {what} is an async function; run the graph with "
            "ainvoke / astream, or pass a plain function"
        )

    return (yield Io(in_sync_run, choose, (state, runtime)))
