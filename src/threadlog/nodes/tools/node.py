"""`ToolNode`: run the open calls of the last AIMessage in parallel, one result per call.

Contract (a drop-in for `langgraph.prebuilt.ToolNode` over a `threadlog.Messages` state):

* **Input.** Graph state (the open calls of its last AIMessage), a list of messages, or a
  per-call `Send` payload from `send_tool_calls`. Calls that already have a result are
  skipped; a call without an id raises `ToolPairingError` before any tool runs.
* **Output.** `{"messages": [ToolMessage, ...]}`, one result per call in call order, each
  with the call's id, the tool's name and `status`; a tool returning a `Command` yields
  LangGraph's list-of-updates form.
* **Parallel.** Sync tools run in threads, async tools on the event loop (async-only
  tools under `invoke` on a private loop); at most `max_concurrency` calls at once.
* **Errors are results** (`checks`, `results`): the tool raised, ran past its `timeout`,
  is unknown, got bad arguments, answered another call, tried to write instructions, or
  returned something the checkpointer cannot store. `handle_tool_errors` takes every form
  LangGraph's does (`handling`); `False` raises.
* **Interceptors.** `wrap_tool_call(request, execute)` / `awrap_tool_call` are LangGraph's:
  called once per call (unknown tools included); `execute` is all of threadlog's per-call
  work, so every result a wrapper returns went through it or is its own.
* **Runtime.** Invoked inside a node without a config, the node inherits the running
  graph's config and runtime, as LangGraph's does.
* **Interrupts** always propagate, after every started call has finished; tools that call
  `interrupt()` themselves should run as per-call branches (`send_tool_calls`). Approvals
  (`requires_approval`) are asked before any tool runs (`tools_approval`).
* **Started calls.** Before a call's tool runs the node stores a "started" marker, and a
  "stopped" one when the tool raised or paused (`started`): an abandoned call is answered
  "outcome unknown" when its tool started, "not completed" when it never did.
* **Idempotent tools** (`idempotent=[names]` or `threadlog.idempotent`): each call gets a
  key that is the same on every attempt and its return is stored as a receipt at once, so
  no later attempt runs the tool again (`idempotent`). A marked call past its `timeout`
  is run again with the same key, up to `timeout_retries` times; an unmarked call never.
* **Content vs artifact.** Artifacts stay on `ToolMessage.artifact` (never model-visible);
  content above `max_content_chars` is cut with a marker and kept whole in the artifact.

Injection (`InjectedState`, `InjectedStore`, `InjectedToolCallId`, `ToolRuntime`) is
LangGraph's own, so tools written for its node keep working."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ContextThreadPoolExecutor,
    ensure_config,
    get_config_list,
    run_in_executor,
)
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode as _LangGraphToolNode
from langgraph.prebuilt.tool_node import (
    AsyncToolCallWrapper,
    ToolCallRequest,
    ToolCallWrapper,
    ToolRuntime,
)
from langgraph.runtime import DEFAULT_RUNTIME

from threadlog._upstream import CONFIG_KEY_RUNTIME
from threadlog.checkpoint.receipts import KEY_METADATA
from threadlog.flows import Flow, Io, arun, run
from threadlog.log.pairing import call_id, unanswerable
from threadlog.nodes.tools.approval import Decision, approval_edits, ask_approval
from threadlog.nodes.tools.checks import InputType, Output
from threadlog.nodes.tools.handling import ErrorHandling, HandleToolErrors
from threadlog.nodes.tools.idempotent import check_unique, is_idempotent, mark_by_name
from threadlog.nodes.tools.keys import config_key
from threadlog.nodes.tools.results import Outcome, classify, from_error, refuse_or_raise
from threadlog.nodes.tools.routing import AnyCall, last_request, messages_of, open_calls
from threadlog.nodes.tools.running import Job, LazyPool, run_async, run_sync
from threadlog.nodes.tools.started import finished_flow, note_flow

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

__all__ = ["ToolNode"]


@dataclass(slots=True)
class _Planned:
    """A call that will go through `execute` (and the interceptor, if any)."""

    call: ToolCall
    tool: BaseTool | None  # None: not a tool of this node (execute answers "unknown")
    runtime: ToolRuntime
    decision: Decision | None

    def request(self) -> ToolCallRequest:
        return ToolCallRequest(
            tool_call=self.call, tool=self.tool, state=self.runtime.state, runtime=self.runtime
        )


@dataclass(slots=True)
class _Raised:
    error: Exception


class ToolNode(_LangGraphToolNode):
    """Runs tool calls in parallel and answers every call exactly once (module doc). Every
    argument of `langgraph.prebuilt.ToolNode` is accepted with the same meaning.

    Args:
        max_concurrency: at most this many calls at once (default: all of a step).
        timeout: seconds a call may run, or a `{tool_name: seconds}` mapping.
        requires_approval: tool names whose calls pause with `interrupt()` for review.
        max_content_chars: cut longer text results (kept whole in the `artifact`).
        record_durations: put each call's duration in
            `response_metadata["threadlog_duration_ms"]` (off by default).
        handle_errors: threadlog 0.1's name for a bool `handle_tool_errors`.
        idempotent: tool names to mark with `threadlog.idempotent`.
        timeout_retries: further runs of a marked call past its `timeout` (default 2)."""

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: HandleToolErrors = True,
        messages_key: str = "messages",
        wrap_tool_call: ToolCallWrapper | None = None,
        awrap_tool_call: AsyncToolCallWrapper | None = None,
        max_concurrency: int | None = None,
        timeout: float | Mapping[str, float] | None = None,
        requires_approval: Sequence[str] = (),
        max_content_chars: int | None = None,
        record_durations: bool = False,
        handle_errors: bool | None = None,
        idempotent: Sequence[str] = (),
        timeout_retries: int = 2,
    ) -> None:
        if handle_errors is not None:
            if handle_tool_errors is not True:
                raise ValueError(
                    "ToolNode: give handle_tool_errors or its older name handle_errors, not both"
                )
            handle_tool_errors = handle_errors
        super().__init__(
            tools,
            name=name,
            tags=tags,
            handle_tool_errors=handle_tool_errors,
            messages_key=messages_key,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
        )
        self._handling = ErrorHandling.of(handle_tool_errors)
        given = [t for t in tools if isinstance(t, BaseTool)]
        check_unique(given, idempotent, where="ToolNode")
        mark_by_name(list(self.tools_by_name.values()), idempotent, where="ToolNode")
        _check_positive("max_concurrency", max_concurrency)
        for tool_name, seconds in _timeouts(timeout).items():
            _check_positive(f"timeout[{tool_name!r}]" if tool_name else "timeout", seconds)
        _check_positive("max_content_chars", max_content_chars)
        whole = isinstance(timeout_retries, int) and not isinstance(timeout_retries, bool)
        if not whole or timeout_retries < 0:
            raise ValueError(
                f"ToolNode(timeout_retries={timeout_retries!r}): must be a whole number >= 0"
            )
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
        self.timeout_retries = timeout_retries
        self.requires_approval = frozenset(requires_approval)
        self.max_content_chars = max_content_chars
        self.record_durations = record_durations
        self._changes_warned: set[tuple[str, str]] = set()

    @property
    def handle_tool_errors(self) -> HandleToolErrors:
        return self._handling.flag

    @property
    def handle_errors(self) -> bool:
        """Whether failures become results at all (`handle_tool_errors` is not False)."""
        return self._handling.flag is not False

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return super().invoke(input, _with_runtime(config), **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await super().ainvoke(input, _with_runtime(config), **kwargs)

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        return run(self._step(input, config, runtime))

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        return await arun(self._step(input, config, runtime))

    def _step(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Flow[Any]:
        calls, input_type, state, request = self._calls_in(input, config)
        if (no_id := next((c for c in calls if not call_id(c)), None)) is not None:
            raise unanswerable(no_id, request)
        slots = self._plan(calls, state, config, runtime)
        planned = [s for s in slots if isinstance(s, _Planned)]
        n = len(planned)
        workers = max(min(self.max_concurrency or config.get("max_concurrency") or n, n), 1)
        run_all = Io(self._in_threads, self._as_tasks, (planned, input_type, workers))
        results: list[Output | _Raised] = yield run_all
        return self._finish(slots, results, input_type)

    def _in_threads(
        self, planned: list[_Planned], input_type: InputType, workers: int
    ) -> list[Output | _Raised]:
        pool = ContextThreadPoolExecutor(max_workers=workers)
        try:
            futures = [pool.submit(self._run_one_sync, p, input_type) for p in planned]
            return [_settle(f.result) for f in futures]
        finally:
            pool.shutdown(wait=False)  # a timed-out sync tool may still be running

    async def _as_tasks(
        self, planned: list[_Planned], input_type: InputType, workers: int
    ) -> list[Output | _Raised]:
        gate = asyncio.Semaphore(workers)
        pool = LazyPool(workers)
        try:
            results = await asyncio.gather(
                *(self._run_one_async(p, input_type, gate, pool) for p in planned),
                return_exceptions=True,
            )
        finally:
            pool.shutdown()
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, Exception):
                raise r  # cancellation and the like
        return [_Raised(r) if isinstance(r, Exception) else cast(Output, r) for r in results]

    def _run_one_sync(self, p: _Planned, input_type: InputType) -> Output:
        request = p.request()

        def execute(req: ToolCallRequest) -> Any:
            return run(self._execute(req, p.decision, input_type, None))

        if self._wrap_tool_call is None:
            return cast(Output, execute(request))
        try:
            return cast(Output, self._wrap_tool_call(request, execute))
        except Exception as e:
            return self._interceptor_failed(e, request)

    async def _run_one_async(
        self, p: _Planned, input_type: InputType, gate: asyncio.Semaphore, pool: LazyPool
    ) -> Output:
        request = p.request()

        async def aexecute(req: ToolCallRequest) -> Any:
            return await arun(self._execute(req, p.decision, input_type, pool))

        async with gate:
            if self._awrap_tool_call is None:
                if self._wrap_tool_call is None:
                    return cast(Output, await aexecute(request))
                # A sync interceptor runs in the node's threads, not on the event loop.
                return await run_in_executor(pool.get(), self._run_one_sync, p, input_type)
            try:
                return cast(Output, await self._awrap_tool_call(request, aexecute))
            except Exception as e:
                return self._interceptor_failed(e, request)

    def _interceptor_failed(self, e: Exception, request: ToolCallRequest) -> Output:
        # LangGraph's rule: any truthy handle_tool_errors handles an interceptor's error.
        return from_error(e, request.tool_call, None, self._handling, filter_types=False)

    def _execute(
        self,
        request: ToolCallRequest,
        decision: Decision | None,
        input_type: InputType,
        pool: LazyPool | None,
    ) -> Flow[Output]:
        """One call's work: note that its tool starts, run it, classify what happened."""
        job = self._job(request)
        if isinstance(job, ToolMessage):
            return job
        # An idempotent tool needs no marker: its receipt says it returned.
        marked = is_idempotent(job.tool)
        if not marked:
            # Finished in an earlier attempt whose write was lost: the stored result.
            stored = yield from finished_flow(job.config, job.call)
            if stored is not None:
                return stored
            yield from note_flow(job.config, job.call, "started")
        async_run = None if pool is None else functools.partial(run_async, pool=pool)
        outcome: Outcome = yield Io(run_sync, async_run, (job,))
        if marked and outcome.kind == "timeout":
            outcome = yield from self._retry_timed_out(job, outcome, async_run)
        try:
            out = classify(
                outcome,
                job.call,
                injected=self._injected_args.get(job.call["name"]),
                decision=decision,
                messages_key=self._messages_key,
                handling=self._handling,
                max_content_chars=self.max_content_chars,
                config=job.config,
                input_type=input_type,
                record_duration=self.record_durations,
                state=request.state,
                warned=self._changes_warned,
                # The key next to the result, for `threadlog inspect` and programs.
                meta={KEY_METADATA: config_key(job.config, call_id(job.call))} if marked else {},
            )
        except BaseException:
            if outcome.error is not None and not marked:
                yield from note_flow(job.config, job.call, "stopped")
            raise
        if isinstance(out, ToolMessage) and not marked and input_type == "tool_calls":
            # Stored now: a failing sibling task can cut off the task's own write.
            if not out.id:  # the task's write and the marker's copy: one message, one id
                out = out.model_copy(update={"id": str(uuid.uuid4())})
            yield from note_flow(job.config, job.call, "finished", out)
        return out

    def _retry_timed_out(
        self, job: Job, outcome: Outcome, async_run: Callable[..., Any] | None
    ) -> Flow[Outcome]:
        attempts = 1
        spent = outcome.duration_ms or 0.0
        while outcome.kind == "timeout" and attempts <= self.timeout_retries:
            outcome = yield Io(run_sync, async_run, (job,))
            attempts += 1
            spent += outcome.duration_ms or 0.0
        outcome.duration_ms = spent
        if outcome.kind != "timeout":
            return outcome
        seconds = job.timeout or 0.0
        failed = Outcome.timed_out_keyed(
            job.call, seconds, attempts, config_key(job.config, call_id(job.call))
        )
        failed.duration_ms = spent
        return failed

    def _job(self, request: ToolCallRequest) -> Job | ToolMessage:
        """The job running `request`, or the result for a call that cannot run."""
        call = request.tool_call
        tool = request.tool
        if tool is None:
            tool = self.tools_by_name.get(call["name"])
        if tool is None:
            # Always a result, as in LangGraph: the model can fix a wrong tool name.
            return refuse_or_raise(Outcome.unknown(call, sorted(self.tools_by_name)), False)
        injected = self._inject_tool_args(call, request.runtime, tool)
        tool_input = {**injected, "type": "tool_call"}
        timeout = self.timeout
        if isinstance(timeout, Mapping):
            timeout = timeout.get(tool.name)
        return Job(call, tool, tool_input, request.runtime.config, timeout)

    def _calls_in(
        self, input: Any, config: RunnableConfig
    ) -> tuple[list[AnyCall], InputType, Any, AIMessage | None]:
        last = input[-1] if isinstance(input, list) and input else None
        if isinstance(last, dict) and last.get("type") in ("tool_call", "invalid_tool_call"):
            calls = cast(list[AnyCall], input)
            valid = [c for c in calls if c.get("type") == "tool_call"]
            state = self._extract_state(cast(Any, valid), config) if valid else {}
            return self._unanswered(calls, state), "tool_calls", state, None
        if isinstance(input, dict) and input.get("__type") == "tool_call_with_context":
            return [input["tool_call"]], "tool_calls", input["state"], None
        messages = messages_of(input, self._messages_key)
        found = last_request(messages)
        return (
            open_calls(messages),
            "list" if isinstance(input, list) else "dict",
            input,
            found[1] if found else None,
        )

    def _unanswered(self, calls: list[AnyCall], state: Any) -> list[AnyCall]:
        # A per-call branch re-entered after its result was written must not answer twice.
        try:
            messages = messages_of(state, self._messages_key)
        except ValueError:
            return calls
        done = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        # A call without an id is never answered (not even by a result with an empty id).
        return [c for c in calls if not (cid := call_id(c)) or cid not in done]

    def _plan(
        self, calls: list[AnyCall], state: Any, config: RunnableConfig, runtime: Runtime[Any]
    ) -> list[ToolMessage | _Planned]:
        slots: list[ToolMessage | _Planned] = []
        configs = get_config_list(config, len(calls))
        for call, cfg in zip(calls, configs, strict=True):
            if call.get("type") == "invalid_tool_call":
                outcome = Outcome.malformed(cast(InvalidToolCall, call))
                slots.append(refuse_or_raise(outcome, self._handling.raises_refusals))
                continue
            valid = cast(ToolCall, call)
            decision = ask_approval(valid) if valid["name"] in self.requires_approval else None
            if decision is not None and decision.action == "reject":
                slots.append(refuse_or_raise(Outcome.rejected(valid, decision.reason), False))
                continue
            if decision is not None and decision.action == "edit":
                valid = {**valid, "args": decision.args or {}}
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
            tool = self.tools_by_name.get(valid["name"])
            slots.append(_Planned(valid, tool, tool_runtime, decision))
        return slots

    def _finish(
        self,
        slots: list[ToolMessage | _Planned],
        results: list[Output | _Raised],
        input_type: InputType,
    ) -> Any:
        raised = [r.error for r in results if isinstance(r, _Raised)]
        if raised:  # interrupts win, once every started call has finished
            raise next((e for e in raised if isinstance(e, GraphBubbleUp)), raised[0])
        done = iter(results)
        outputs: list[Output] = [
            slot if isinstance(slot, ToolMessage) else cast(Output, next(done)) for slot in slots
        ]
        # A reviewer's edits go first, so the results answer the edited calls.
        return self._combine_tool_outputs([*self._edits(slots), *outputs], input_type)

    def _edits(self, slots: list[ToolMessage | _Planned]) -> list[Any]:
        planned = [s for s in slots if isinstance(s, _Planned)]
        decisions = {
            p.call["id"] or "": p.decision
            for p in planned
            if p.decision is not None and p.decision.action == "edit"
        }
        if not decisions:
            return []
        try:
            messages = messages_of(planned[0].runtime.state, self._messages_key)
        except (ValueError, KeyError, TypeError):
            return []  # no log in the input: the decision stays on the result only
        return list(approval_edits(decisions, messages))


def _settle(result: Callable[[], Output]) -> Output | _Raised:
    try:
        return result()
    except Exception as e:
        return _Raised(e)


def _with_runtime(config: RunnableConfig | None) -> RunnableConfig:
    """`config` (or the running graph's) with a Runtime, so direct calls work."""
    merged = ensure_config(config) if config is None else config
    conf = merged.get("configurable", {})
    if CONFIG_KEY_RUNTIME in conf:
        return merged
    return {**merged, "configurable": {**conf, CONFIG_KEY_RUNTIME: DEFAULT_RUNTIME}}


def _timeouts(timeout: float | Mapping[str, float] | None) -> dict[str, float | None]:
    # "" stands for the one timeout of all tools.
    return dict(timeout) if isinstance(timeout, Mapping) else {"": timeout}


def _check_positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"ToolNode({name}={value!r}): must be a positive number or None")
