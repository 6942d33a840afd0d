"""`ModelNode`: context → repair → validate → call → append, as one LangGraph node.

Contract, in the order a call happens:

1. **Context.** `build_context` of the log, the `compactions` events and the node's
   `ContextPolicy` (default: everything). New compaction events are written to
   `compactions` when the state has that key; a summarizing policy requires it.
2. **Repair.** A call with no result (in the context or trimmed out of it) first gets its
   *stored* result, if the interrupted step saved one (`threadlog.checkpoint.recover`):
   same id, content and status; the tool never runs again. The rest by the policy:
   `repair="error-result"` (default) appends an error `ToolMessage` saying the call was
   not completed; `"refuse"` raises `ToolPairingError`. A call without an id raises under
   either policy (`threadlog.log.pairing`).
3. **Validate.** `threadlog.validate(context, profile, allow_pending_calls=False)`.
4. **Call.** The model (tools bound) gets `to_wire(context, profile)`; a server profile's
   wire rules apply to the request body; the turn's first call sends `tool_choice`.
   **Step cap.** When the turn already holds `max_model_calls` model replies, the node
   appends an assistant message saying the turn stopped
   (`response_metadata["threadlog_stop"] == "max_model_calls"`) instead, with no calls.
5. **Append.** The whole `AIMessage` goes to the log after any repair results, with what
   the node measured under `response_metadata["threadlog"]` (`threadlog.nodes.trace`).
   Call ids that are empty, repeated or already used are re-keyed first.

**Per run.** `model` and `system_prompt` may each be a callable of `(state, runtime)`
(sync or async) choosing them per run (`threadlog.nodes.choice`); every step applies to
the chosen model."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config

from threadlog._upstream import PREGEL, RunnableCallable
from threadlog.checkpoint.recover import recover_for_node_flow
from threadlog.context.compaction import acompact, compact, compact_flow
from threadlog.context.policy import ContextPolicy, ContextView, plan_context
from threadlog.errors import InvalidMessageError
from threadlog.flows import Flow, Io, arun, run
from threadlog.log.pairing import NOT_COMPLETED, OpenCalls, Repair, open_calls, repair_open_calls
from threadlog.nodes.choice import Chosen, Models, is_choice, resolve, runtime_of, system_message
from threadlog.nodes.state import read_state
from threadlog.nodes.trace import prompt_recorded, timed
from threadlog.nodes.turns import model_calls_in_turn, rekey_calls, step_cap_message, turn_started
from threadlog.providers.problems import validate
from threadlog.providers.profiles import Profile
from threadlog.providers.wire import to_wire

# Re-exported: calls without a result are defined in `threadlog.log.pairing`.
__all__ = [
    "DEFAULT_MAX_MODEL_CALLS",
    "NOT_COMPLETED",
    "ContextNode",
    "ModelNode",
    "open_calls",
    "repair_open_calls",
]

DEFAULT_MAX_MODEL_CALLS = 25

_log = logging.getLogger("threadlog")
# Wire copies a node keeps (`to_wire`'s cache): enough for a few hundred concurrent threads.
_WIRE_CACHED = 8192


class ModelNode(RunnableCallable):
    """A LangGraph node that calls a chat model on a pairing-safe context (module doc).

    model: a LangChain chat model, or a callable `(state, runtime) -> model` (sync or async).
    system_prompt: sent first on every call, not logged; a string or such a callable.
    profile: provider or server profile name or `Profile`; default inferred from the model.
    tool_choice: sent on each turn's first model call; default: the profile's.
    """

    def __init__(
        self,
        model: Any,
        tools: Sequence[Any] = (),
        *,
        system_prompt: str | Callable[..., Any] | None = None,
        context: ContextPolicy | None = None,
        profile: str | Profile | None = None,
        repair: Repair = "error-result",
        tool_choice: str | dict[str, Any] | None = None,
        max_model_calls: int | None = DEFAULT_MAX_MODEL_CALLS,
        name: str = "model",
    ) -> None:
        super().__init__(self._run, self._arun, name=name, trace=False)
        if repair not in ("error-result", "refuse"):
            raise ValueError(f"repair must be 'error-result' or 'refuse', got {repair!r}")
        if max_model_calls is not None and max_model_calls < 1:
            raise ValueError(f"max_model_calls must be at least 1 or None, got {max_model_calls}")
        self.tools = list(tools)
        self.max_model_calls = max_model_calls
        self._models = Models(self.tools, tool_choice, profile)
        # A fixed model is prepared once; a chooser's models when it returns them.
        self.choose_model: Callable[..., Any] | None = model if is_choice(model) else None
        self._fixed: Chosen | None = (
            None if self.choose_model is not None else self._models.prepare(model, fixed=True)
        )
        if self._fixed is not None:
            self.model = self._fixed.model
            self.profile: Profile | None = self._fixed.profile
            self.bound: Runnable[Any, Any] | None = self._fixed.bound
            self.bound_first: Runnable[Any, Any] | None = self._fixed.bound_first
        else:
            self.model, self.profile = model, self._models.profile
            self.bound = self.bound_first = None
        fallback = self.profile.tool_choice if self.profile is not None else None
        self.tool_choice = tool_choice if tool_choice is not None else fallback
        self.choose_prompt: Callable[..., Any] | None = (
            system_prompt if callable(system_prompt) and is_choice(system_prompt) else None
        )
        self.system_prompt = system_prompt
        self.policy = context or ContextPolicy()
        self.repair: Repair = repair
        self._wire_cache: dict[tuple[str, str], BaseMessage] = {}
        self._open_calls = OpenCalls()
        # The id names the text: caches are by id, and nodes may share a policy.
        self._system = system_message(system_prompt if isinstance(system_prompt, str) else None)

    def plan_for(
        self, messages: Sequence[BaseMessage], compactions: Sequence[Mapping[str, Any]] = ()
    ) -> ContextView:
        """The policy's view of `messages` (kept, cut, hidden), the system prompt reserved."""
        return plan_context(
            messages, compactions, self.policy, reserve_tokens=self._reserve(self._system)
        )

    def context_for(
        self, messages: Sequence[BaseMessage], compactions: Sequence[Mapping[str, Any]] = ()
    ) -> list[BaseMessage]:
        """The messages this node sends the model (before the wire conversion); pure."""
        return self._assemble(self.plan_for(messages, compactions).messages, {}, self._system)[0]

    def _inputs(self, state: Any) -> tuple[list[BaseMessage], list[dict[str, Any]], bool]:
        messages, events = read_state(state, "model")
        has_events = events is not None
        if self.policy.summarizer is not None and not has_events:
            raise InvalidMessageError(
                "ContextPolicy(summarizer=...) records its summaries in a 'compactions' "
                "state key, which this graph's state does not have",
                fix="use threadlog.AgentState, or add `compactions: threadlog.Compactions`",
            )
        return messages, events or [], has_events

    def _reserve(self, system: SystemMessage | None) -> int:
        return self.policy.count(system) if system else 0

    def _assemble(
        self,
        kept: Sequence[BaseMessage],
        recovered: Mapping[str, ToolMessage],
        system: SystemMessage | None,
    ) -> tuple[list[BaseMessage], list[ToolMessage]]:
        context, repairs = repair_open_calls(list(kept), repair=self.repair, recovered=recovered)
        return ([system, *context] if system is not None else context), repairs

    def _prepare(
        self,
        view: ContextView,
        recovered: Mapping[str, ToolMessage],
        system: SystemMessage | None,
        profile: Profile,
    ) -> tuple[list[BaseMessage], list[ToolMessage]]:
        context, repairs = self._assemble(view.messages, recovered, system)
        validate(context, profile, allow_pending_calls=False, checked=True)
        cache = self._wire_cache
        if len(cache) > max(2 * len(context) + 64, _WIRE_CACHED):
            # Keep the newest half: one node serves many threads at once.
            kept = list(cache.items())
            cache = self._wire_cache = dict(kept[len(kept) // 2 :])
        return to_wire(context, profile, cache=cache, checked=True), repairs

    @staticmethod
    def _update(
        ai: Any,
        repairs: list[ToolMessage],
        events: list[dict[str, Any]],
        has_events: bool,
        used: set[str] | None = None,
    ) -> dict[str, Any]:
        if not isinstance(ai, AIMessage):  # a chunk was made a message by `_timed`
            raise InvalidMessageError(
                f"the model returned {type(ai).__name__}, not an AIMessage",
                fix="pass a chat model (BaseChatModel), optionally with tools bound",
            )
        if ai.tool_calls or ai.invalid_tool_calls:
            ai = rekey_calls(ai, used if used is not None else set())
        update: dict[str, Any] = {"messages": [*repairs, ai]}
        if events and has_events:
            update["compactions"] = events
        return update

    def _timed(
        self,
        ai: Any,
        wire: list[BaseMessage],
        times: tuple[float, float, float],
        chosen: Chosen,
        system: SystemMessage | None,
        log: Sequence[BaseMessage],
    ) -> Any:
        if isinstance(ai, BaseMessageChunk):
            ai = message_chunk_to_message(ai)
        if not isinstance(ai, AIMessage):
            return ai  # _update names the problem
        step0, call0, wall0 = times
        done = time.perf_counter()
        return timed(
            ai,
            model=chosen.model,
            started=wall0,
            latency_s=done - call0,
            step_s=done - step0,
            context_messages=len(wire),
            system_prompt=system.id if system is not None else None,
            system=system,
            # A fixed prompt's text is the app's code; a chosen one is stored once per thread.
            text_recorded=system is None
            or self.choose_prompt is None
            or prompt_recorded(log, system),
        )

    def _chosen(
        self, state: Any, config: RunnableConfig
    ) -> Flow[tuple[Chosen, SystemMessage | None]]:
        chosen, system = self._fixed, self._system
        runtime = runtime_of(config)
        if self.choose_model is not None:
            picked = yield from resolve("model", self.choose_model, state, runtime)
            if picked is None:
                raise TypeError("the ModelNode's model callable returned None, not a chat model")
            chosen = self._models.prepare(picked)
        if self.choose_prompt is not None:
            text = yield from resolve("system_prompt", self.choose_prompt, state, runtime)
            system = self._system_for(text)
        assert chosen is not None
        # `bound` / `bound_first` stay the node's runnables (`threadlog replay` sets them).
        if self.bound is not None and self.bound_first is not None:
            chosen = dataclasses.replace(chosen, bound=self.bound, bound_first=self.bound_first)
        return chosen, system

    def _system_for(self, text: Any) -> SystemMessage | None:
        if isinstance(text, SystemMessage):
            text = text.text
        if text is not None and not isinstance(text, str):
            raise TypeError(
                f"the ModelNode's system_prompt callable returned {type(text).__name__}, "
                "not a str or None"
            )
        return system_message(text)

    def _open(
        self, messages: list[BaseMessage], view: ContextView, config: RunnableConfig
    ) -> tuple[dict[str, AIMessage], dict[str, AIMessage], set[str]]:
        """Open calls inside the context, those outside it, and every call id the log uses."""
        inside = open_calls(view.messages)
        everywhere, used = self._open_calls.scan(messages, _thread_key(config))
        return inside, {c: m for c, m in everywhere.items() if c not in inside}, used

    def _outside(
        self, outside: Mapping[str, AIMessage], recovered: Mapping[str, ToolMessage]
    ) -> list[ToolMessage]:
        # Calls the context no longer shows are answered too, so none stays open forever.
        if not outside:
            return []
        requests = list({id(m): m for m in outside.values()}.values())
        results = repair_open_calls(requests, repair=self.repair, recovered=recovered)[1]
        return [r for r in results if r.tool_call_id in outside]

    def _run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return run(self._call(state, config))

    async def _arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return await arun(self._call(state, config))

    def _call(self, state: Any, config: RunnableConfig) -> Flow[dict[str, Any]]:
        step0 = time.perf_counter()
        messages, events_in, has_events = self._inputs(state)
        chosen, system = yield from self._chosen(state, config)
        view, events = yield from compact_flow(
            messages, events_in, self.policy, self._reserve(system), config
        )
        inside, outside, used = self._open(messages, view, config)
        recovered = yield from recover_for_node_flow(config, {**outside, **inside})
        wire, repairs = self._prepare(view, recovered, system, chosen.profile)
        repairs = [*self._outside(outside, recovered), *repairs]
        capped = self._step_cap(messages)
        if capped is not None:
            return self._update(capped, repairs, events, has_events)
        runnable = chosen.bound_first if turn_started(messages) else chosen.bound
        wall0, call0 = time.time(), time.perf_counter()
        # Inside a graph the step's context already carries this config.
        given = None if var_child_runnable_config.get() is config else config
        reply = yield Io(runnable.invoke, runnable.ainvoke, (wire, given))
        ai = self._timed(reply, wire, (step0, call0, wall0), chosen, system, messages)
        return self._update(ai, repairs, events, has_events, used)

    def _step_cap(self, log: Sequence[BaseMessage]) -> AIMessage | None:
        limit = self.max_model_calls
        if limit is None:
            return None
        made = model_calls_in_turn(log)
        if made < limit:
            return None
        user = next((m for m in reversed(log) if m.type == "human"), None)
        _log.warning(
            "threadlog: turn stopped after %d model calls (max_model_calls=%d); "
            "the model was not called again",
            made,
            limit,
        )
        return step_cap_message(limit, f"{user.id if user else ''}:{len(log)}")


def _thread_key(config: RunnableConfig | None) -> tuple[str, str] | None:
    conf = (config or {}).get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None:
        return None
    # A task's namespace is its graph's namespace plus "node:task_id" (new every step).
    task_ns = str(conf.get("checkpoint_ns") or "")
    return str(thread_id), task_ns.rsplit(PREGEL.ns_sep, 1)[0] if PREGEL.ns_sep in task_ns else ""


def _inputs(state: Any) -> tuple[list[BaseMessage], list[dict[str, Any]]]:
    messages, events = read_state(state, "context")
    if events is None:
        raise InvalidMessageError(
            "the context node records events in the 'compactions' state key, which "
            "this graph's state does not have",
            fix="use threadlog.AgentState, or add `compactions: threadlog.Compactions`",
        )
    return messages, events


class ContextNode(RunnableCallable):
    """A LangGraph node that records compaction events for `policy` (no messages)."""

    def __init__(self, policy: ContextPolicy, *, name: str = "context") -> None:
        super().__init__(self._run, self._arun, name=name, trace=False)
        self.policy = policy

    def _run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages, compactions = _inputs(state)
        _, events = compact(messages, compactions, self.policy, config=config)
        return {"compactions": events} if events else {}

    async def _arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages, compactions = _inputs(state)
        _, events = await acompact(messages, compactions, self.policy, config=config)
        return {"compactions": events} if events else {}
