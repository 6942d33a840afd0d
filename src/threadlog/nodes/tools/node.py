"""`ToolNode`: run the open calls of the last AIMessage in parallel, one result per call.

Contract (a drop-in for `langgraph.prebuilt.ToolNode` over a `threadlog.Messages` state):

* **Input.** Graph state (the open calls of its last AIMessage, `tool_calls` then
  `invalid_tool_calls`), a list of messages, or a per-call `Send` payload from
  `send_tool_calls` (a list holding one call). Calls that already have a result are
  skipped, so a step never answers a call twice.
* **Output.** `{"messages": [ToolMessage, ...]}` with exactly one result per call, in call
  order, each with the call's id, the tool's name and `status` "success" or "error";
  a tool returning a `Command` yields LangGraph's list-of-updates form, as upstream.
* **Parallel.** Sync tools run in threads (`invoke`), async tools on the event loop
  (`ainvoke`); sync tools under `ainvoke` run in this node's threads, async-only tools
  under `invoke` on a private event loop in a worker thread. At most `max_concurrency`
  calls run at once (default: all of them).
* **Errors are results** (see `tools_results`): the tool raised, ran past its
  `timeout` (seconds for every tool, or a `{tool_name: seconds}` mapping), is unknown,
  got arguments that fail its schema or are malformed JSON, answered another call, tried
  to write instructions, or returned something the checkpointer cannot store. With
  `handle_errors=False` the node raises instead: the tool's own exception for "raised"
  and schema failures, `ToolCallError` for the rest. See `tools_running` for what a
  timeout does to a sync or an async tool.
* **Interrupts** (`interrupt()`, approvals) always propagate, after every started call
  has finished. In this one-node mode a resume re-runs the node, so tools that call
  `interrupt()` themselves should run as per-call branches (`send_tool_calls`), where
  finished siblings are kept. Approvals (`requires_approval`) are asked before any tool
  runs, so they never cause a re-run (see `tools_approval`).
* **Content vs artifact.** Artifacts stay on `ToolMessage.artifact` (in the log, never
  model-visible); content above `max_content_chars` is cut with a marker and kept whole
  in the artifact.

Injection of `InjectedState`, `InjectedStore`, `InjectedToolCallId` and `ToolRuntime`
is LangGraph's own (`_inject_tool_args`), so tools written for its node keep working.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from langchain_core.messages import InvalidToolCall, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor, get_config_list
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode as _LangGraphToolNode
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.runtime import DEFAULT_RUNTIME
from langgraph.types import Command

from threadlog._upstream import CONFIG_KEY_RUNTIME
from threadlog.nodes.tools.approval import ask_approval
from threadlog.nodes.tools.results import Outcome, classify, refuse_or_raise
from threadlog.nodes.tools.routing import AnyCall, messages_of, open_calls
from threadlog.nodes.tools.running import Job, run_async, run_sync

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

__all__ = ["ToolNode"]

InputType = Literal["list", "dict", "tool_calls"]


class ToolNode(_LangGraphToolNode):
    """Runs tool calls in parallel and answers every call exactly once (see module doc).

    Args:
        tools: the tools this node can call (`BaseTool`s or plain functions, which
            LangChain turns into tools).
        name: the node's name in the graph.
        max_concurrency: at most this many calls run at once (default: all of a step).
        timeout: seconds a call may run — one number for every tool, or a
            `{tool_name: seconds}` mapping; a call past it becomes an error result.
        handle_errors: `True` (default): every failure is an error `ToolMessage` the
            model can read; `False`: raise (the tool's own exception, or `ToolCallError`).
        requires_approval: tool names whose calls pause with `interrupt()` for a
            reviewer's approve / edit / reject before any tool of the step runs.
        max_content_chars: cut longer text results (the full output stays in the
            message's `artifact`, never sent to a model).
        messages_key: the state key holding the message log.
        tags: tags for the node's runnable (tracing).
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        name: str = "tools",
        max_concurrency: int | None = None,
        timeout: float | Mapping[str, float] | None = None,
        handle_errors: bool = True,
        requires_approval: Sequence[str] = (),
        max_content_chars: int | None = None,
        messages_key: str = "messages",
        tags: list[str] | None = None,
    ) -> None:
        super().__init__(tools, name=name, tags=tags, messages_key=messages_key)
        _check_positive("max_concurrency", max_concurrency)
        for tool_name, seconds in _timeouts(timeout).items():
            _check_positive(f"timeout[{tool_name!r}]" if tool_name else "timeout", seconds)
        _check_positive("max_content_chars", max_content_chars)
        if isinstance(requires_approval, str):
            requires_approval = (requires_approval,)
        for setting, names in (
            ("requires_approval", list(requires_approval)),
            ("timeout", [n for n in _timeouts(timeout) if n]),
        ):
            unknown = [n for n in names if n not in self.tools_by_name]
            if unknown:
                raise ValueError(
                    f"{setting} names {unknown} that are not tools of this node; "
                    f"its tools are {sorted(self.tools_by_name)}"
                )
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.handle_errors = handle_errors
        self.requires_approval = frozenset(requires_approval)
        self.max_content_chars = max_content_chars

    # -- the node ---------------------------------------------------------------

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return super().invoke(input, _with_runtime(config), **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await super().ainvoke(input, _with_runtime(config), **kwargs)

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        calls, input_type, state = self._parse(input, config)
        slots, jobs = self._plan(calls, state, config, runtime)
        workers = self._workers(config, len(jobs))
        pool = ContextThreadPoolExecutor(max_workers=max(workers, 1))
        try:
            futures = [pool.submit(run_sync, job) for job in jobs]
            outcomes = [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False)  # a timed-out sync tool may still be running
        return self._finish(slots, jobs, outcomes, input_type, config)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        calls, input_type, state = self._parse(input, config)
        slots, jobs = self._plan(calls, state, config, runtime)
        workers = self._workers(config, len(jobs))
        gate = asyncio.Semaphore(max(workers, 1))
        pool = ContextThreadPoolExecutor(max_workers=max(workers, 1))
        try:
            outcomes = await asyncio.gather(*(run_async(j, gate, pool) for j in jobs))
        finally:
            pool.shutdown(wait=False)
        return self._finish(slots, jobs, list(outcomes), input_type, config)

    # -- input and planning -----------------------------------------------------

    def _parse(self, input: Any, config: RunnableConfig) -> tuple[list[AnyCall], InputType, Any]:
        if isinstance(input, list) and input and isinstance(input[-1], dict):
            if input[-1].get("type") in ("tool_call", "invalid_tool_call"):
                calls = cast(list[AnyCall], input)
                valid = [c for c in calls if c.get("type") == "tool_call"]
                state = self._extract_state(cast(Any, valid), config) if valid else {}
                return self._unanswered(calls, state), "tool_calls", state
        if isinstance(input, dict) and input.get("__type") == "tool_call_with_context":
            return [input["tool_call"]], "tool_calls", input["state"]
        messages = messages_of(input, self._messages_key)
        return open_calls(messages), "list" if isinstance(input, list) else "dict", input

    def _unanswered(self, calls: list[AnyCall], state: Any) -> list[AnyCall]:
        # A per-call branch re-entered after its result was written must not answer twice.
        try:
            messages = messages_of(state, self._messages_key)
        except ValueError:
            return calls
        done = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        return [c for c in calls if c.get("id") not in done]

    def _plan(
        self, calls: list[AnyCall], state: Any, config: RunnableConfig, runtime: Runtime[Any]
    ) -> tuple[list[ToolMessage | Job], list[Job]]:
        """Each call becomes a ready result (an error) or a job; approvals are asked here."""
        slots: list[ToolMessage | Job] = []
        configs = get_config_list(config, len(calls))
        for call, cfg in zip(calls, configs, strict=True):
            ready = self._refusal(call)
            if ready is not None:
                slots.append(ready)
                continue
            valid = cast(ToolCall, call)
            decision = ask_approval(valid) if valid["name"] in self.requires_approval else None
            if decision is not None and decision.action == "reject":
                slots.append(refuse_or_raise(Outcome.rejected(valid, decision.reason), True))
                continue
            if decision is not None and decision.action == "edit":
                valid = {**valid, "args": decision.args or {}}
            tool = self.tools_by_name[valid["name"]]
            tool_runtime = ToolRuntime(
                state=state,
                tool_call_id=valid["id"],
                config=cfg,
                context=runtime.context,
                store=runtime.store,
                stream_writer=runtime.stream_writer,
                tools=list(self.tools_by_name.values()),
                execution_info=runtime.execution_info,
                server_info=runtime.server_info,
            )
            injected = self._inject_tool_args(valid, tool_runtime, tool)
            tool_input = {**injected, "type": "tool_call"}
            slots.append(Job(valid, tool, tool_input, cfg, decision, self._timeout_for(tool)))
        return slots, [s for s in slots if isinstance(s, Job)]

    def _refusal(self, call: AnyCall) -> ToolMessage | None:
        """The error result for a call that cannot run at all, or None."""
        if call.get("type") == "invalid_tool_call":
            outcome = Outcome.malformed(cast(InvalidToolCall, call))
        elif call["name"] not in self.tools_by_name:
            outcome = Outcome.unknown(cast(ToolCall, call), sorted(self.tools_by_name))
        else:
            return None
        return refuse_or_raise(outcome, self.handle_errors)

    def _timeout_for(self, tool: BaseTool) -> float | None:
        if isinstance(self.timeout, Mapping):
            return self.timeout.get(tool.name)
        return self.timeout

    def _workers(self, config: RunnableConfig, n: int) -> int:
        limit = self.max_concurrency or config.get("max_concurrency") or n
        return min(limit, n)

    # -- output -----------------------------------------------------------------

    def _finish(
        self,
        slots: list[ToolMessage | Job],
        jobs: list[Job],
        outcomes: list[Outcome],
        input_type: InputType,
        config: RunnableConfig,
    ) -> Any:
        for o in outcomes:  # interrupts win, once every started call has finished
            if isinstance(o.error, GraphBubbleUp):
                raise o.error
        by_job = {id(j): o for j, o in zip(jobs, outcomes, strict=True)}
        outputs: list[ToolMessage | Command[Any] | list[ToolMessage | Command[Any]]] = []
        for slot in slots:
            if isinstance(slot, ToolMessage):
                outputs.append(slot)
                continue
            outputs.append(
                classify(
                    by_job[id(slot)],
                    slot.call,
                    injected=self._injected_args.get(slot.call["name"]),
                    decision=slot.decision,
                    messages_key=self._messages_key,
                    handle_errors=self.handle_errors,
                    max_content_chars=self.max_content_chars,
                    config=config,
                )
            )
        return self._combine_tool_outputs(outputs, input_type)


def _with_runtime(config: RunnableConfig | None) -> RunnableConfig:
    # Outside a graph there is no Runtime; upstream's node then fails with "Missing
    # required config key 'N/A'". Calling the node directly (tests, scripts) should work.
    conf = (config or {}).get("configurable", {})
    if CONFIG_KEY_RUNTIME in conf:
        return config or {}
    return {**(config or {}), "configurable": {**conf, CONFIG_KEY_RUNTIME: DEFAULT_RUNTIME}}


def _timeouts(timeout: float | Mapping[str, float] | None) -> dict[str, float | None]:
    # "" stands for the one timeout of all tools.
    return dict(timeout) if isinstance(timeout, Mapping) else {"": timeout}


def _check_positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"ToolNode({name}={value!r}): must be a positive number or None")
