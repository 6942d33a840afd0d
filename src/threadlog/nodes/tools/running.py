"""Running one tool call, sync or async, under a timeout: `Job` in, `Outcome` out.

Contract: `run_sync` / `run_async` never raise (short of `BaseException`s such as
cancellation): a return value, an exception, `sys.exit()` (as a `RuntimeError`), the
timeout all come back as an `Outcome` with the time the call took.

* `run_sync` runs in a node worker thread. With a timeout the tool runs in a thread of
  its own, abandoned on timeout (Python cannot stop a thread; the result says the
  outcome is unknown). An async-only tool runs on a private event loop in that thread.
* `run_async` awaits async tools on the running loop and sends sync tools to the node's
  thread pool (with a timeout, to a thread of their own, so a timed-out one never holds
  a thread the next call waits for). A timed-out async tool is cancelled."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor, run_in_executor
from langchain_core.tools import BaseTool, StructuredTool

from threadlog.nodes.tools.results import Outcome

__all__ = ["Job", "LazyPool", "run_async", "run_sync"]


class LazyPool:
    """A step's worker threads, made when a sync tool (or interceptor) first needs one."""

    __slots__ = ("_pool", "_workers")

    def __init__(self, workers: int) -> None:
        self._workers = max(workers, 1)
        self._pool: ContextThreadPoolExecutor | None = None

    def get(self) -> ContextThreadPoolExecutor:
        if self._pool is None:
            self._pool = ContextThreadPoolExecutor(max_workers=self._workers)
        return self._pool

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)  # a timed-out sync tool may still be running


@dataclass(slots=True)
class Job:
    call: ToolCall
    tool: BaseTool
    tool_input: dict[str, Any]
    config: RunnableConfig
    timeout: float | None


def run_sync(job: Job) -> Outcome:
    started = time.perf_counter()
    try:
        outcome = _run_sync(job)
    except (Exception, SystemExit) as e:
        outcome = Outcome(error=_failure(e))
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    return outcome


async def run_async(job: Job, pool: LazyPool) -> Outcome:
    started = time.perf_counter()
    try:
        outcome = await _run_async(job, pool)
    except (Exception, SystemExit) as e:
        outcome = Outcome(error=_failure(e))
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    return outcome


def _run_sync(job: Job) -> Outcome:
    if job.timeout is None:
        return Outcome(response=_invoke(job))
    own_thread = ContextThreadPoolExecutor(max_workers=1)
    try:
        return Outcome(response=own_thread.submit(_invoke, job).result(job.timeout))
    except concurrent.futures.TimeoutError:
        return Outcome.timed_out(job.call, job.timeout, still_running=True)
    finally:
        own_thread.shutdown(wait=False)


async def _run_async(job: Job, pool: LazyPool) -> Outcome:
    sync_only = _sync_only(job.tool)
    # With a timeout, a sync tool gets a thread of its own: timed out, it holds no node thread.
    own_thread = (
        ContextThreadPoolExecutor(max_workers=1) if sync_only and job.timeout is not None else None
    )
    try:
        if sync_only:
            threads = own_thread or pool.get()
            run = run_in_executor(threads, job.tool.invoke, job.tool_input, job.config)
        else:
            run = job.tool.ainvoke(job.tool_input, job.config)
        if job.timeout is None:
            return Outcome(response=await run)
        scope = asyncio.timeout(job.timeout)
        try:
            async with scope:
                return Outcome(response=await run)
        except TimeoutError as e:
            if scope.expired():  # ours, not a TimeoutError the tool raised
                # A sync tool's thread goes on; an async tool was cancelled.
                return Outcome.timed_out(job.call, job.timeout, still_running=sync_only)
            return Outcome(error=e)
    finally:
        if own_thread is not None:
            own_thread.shutdown(wait=False)


def _failure(e: Exception | SystemExit) -> Exception:
    if not isinstance(e, SystemExit):
        return e
    # sys.exit() in a tool is one failed call, not the end of the run.
    error = RuntimeError(f"the tool called sys.exit({e.code!r})")
    error.__cause__ = e
    return error


def _invoke(job: Job) -> Any:
    tool = job.tool
    if isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None:
        # An async-only tool under `invoke`: this worker thread has no event loop.
        return asyncio.run(tool.ainvoke(job.tool_input, job.config))
    return tool.invoke(job.tool_input, job.config)


def _sync_only(tool: BaseTool) -> bool:
    if isinstance(tool, StructuredTool):
        return tool.coroutine is None
    return type(tool)._arun is BaseTool._arun
