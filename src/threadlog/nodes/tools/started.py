"""Which calls' tools started: a marker stored before a tool runs, so a repair can tell.

Why. A call whose tool started but never reported back — the process
was SIGKILLed, the run cancelled or timed out while a sync tool ran — used to be repaired
like a call that never ran: "not completed". The tool may well have finished its side
effect after the run stopped (a thread cannot be stopped), and the model was told the
action did not happen. With this marker the repair (`threadlog.log.pairing`) answers such a
call "outcome unknown" instead, and keeps "not completed" for calls that never started.

Contract:

* `note_flow(config, call, "started")` is yielded by the tool node right before it runs
  a call's tool (each attempt: an interceptor's retry notes again); `"stopped"` right
  after the tool reported back by raising — an exception the node re-raises, or an
  interrupt — so a paused or failed call stays "not completed": LangGraph re-runs the
  code before `interrupt()` on resume, which must therefore be safe to repeat, and a
  failed call failed. A result the node returns needs no marker: it is the report.
* The marker is one pending write (`checkpoint.recover.started_marker`: its own task id,
  channel `STARTED_CHANNEL`, a plain dict) on the checkpoint the node's step runs from,
  stored through the run's own checkpointer, and the tool runs only once it is stored.
* Not written outside a checkpointed run (no checkpointer in the config), with
  `durability="exit"` (nothing of the run is stored before it ends, so no repair would
  ever read it), or when the saver cannot store it: the failure is logged and the tool
  runs anyway (that call then reads "not completed" after a crash, as before).
* With `durability="async"` (LangGraph's default) the step's checkpoint is stored in the
  background while its tasks run: a marker on a checkpoint not stored yet would be lost
  with it by a kill (no reader reaches a write through a missing checkpoint), and the
  call would read "not completed" though its tool ran. So under any mode but `"sync"`
  the marker first waits until that checkpoint is stored (at most `_STORED_WAIT`; past it
  the marker is stored anyway, as before): the tool never starts before the checkpoint
  its marker hangs on exists. On threadlog's saver the wait is the guard's
  (`GuardLayer.stored_flow`: no read for a checkpoint it stored or read, the put's end
  awaited otherwise); on any other saver, `get_tuple` every `_STORED_POLL` seconds.
* **Finished calls.** A call whose tool returned a result also gets a `"finished"`
  marker carrying that result (`note_flow(config, call, "finished", result)`), stored
  by the node before its task ends. LangGraph stores the task's own write from a
  done-callback of its future, and when a sibling branch fails the step ends at once:
  the loop's executor can shut down before that callback submits the write
  ("cannot schedule new futures after shutdown"), and the result is never stored. On
  resume the branch re-runs; `finished_flow` finds the marker (on threadlog's saver,
  which remembers the writes it read: no read unless the marker is there) and the node
  returns the stored result instead of running the tool again. Readers of results
  (`checkpoint.recover`) take it as the call's stored result too.
* Cost: one `put_writes` (one row; on Postgres one round trip) per call attempt, and
  one more per call that returns a result; under
  `"async"` on another saver also a `get_tuple` of the step's checkpoint (more while it
  is not stored).

Why through the checkpointer, and not a write of the node's task. LangGraph stores what a
node writes — its return value, `Send`s, anything sent through the task's `CONFIG_KEY_SEND`
— only when the task ends: the runner's `commit` calls `put_writes` once per finished,
failed or interrupted task. The writes of a task that is SIGKILLed, cancelled or cut off
by a step timeout are never stored, which are exactly the cases the marker is for; a
custom channel or a `StreamWriter` event has the same fate (a stream is not stored at
all). A `put_writes` the node makes itself through `config["configurable"]
[CONFIG_KEY_CHECKPOINTER]` (as `checkpoint.recover.node_checkpoint` finds it) is stored
when the call returns, before the tool starts, so it survives:

* a SIGKILL — the row is committed (SQLite, Postgres) before the tool's first line runs;
* a cancel (`asyncio` cancellation of `ainvoke`) and a step timeout — the row is in, and
  nothing the cancelled run does afterwards removes it;
* the tool node's own `timeout` — the call gets its timeout result, stored as the task's
  write; only if that is lost too does the marker decide;
* an interrupt — the `"stopped"` marker is stored before the interrupt propagates.

Under `threadlog.checkpointer()`, the write is the run's own (its config carries the run's
runtime, inside the run's hold on the thread), so the guard passes it like the task's own
writes, after the put of its checkpoint when one is under way. LangGraph applies only the
writes of the tasks it schedules (and `NULL_TASK_ID`'s), so a marker changes no state, on
any saver; readers of messages (`recover`, `stopped_work`, checksums) skip its value.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig

from threadlog._upstream import PREGEL
from threadlog.checkpoint.guard import GuardLayer
from threadlog.checkpoint.layered import layer_of
from threadlog.checkpoint.recover import (
    MarkerEvent,
    finished_result,
    marker_prefix,
    node_checkpoint,
    started_marker,
)
from threadlog.flows import Flow, Io
from threadlog.flows import call as saver_call

__all__ = ["finished_flow", "note_flow", "put_on_step"]

_log = logging.getLogger("threadlog.tools")

_STORED_POLL = 0.005
"""Seconds between reads while the step's checkpoint is not stored yet ("async")."""
_STORED_WAIT = 5.0
"""Seconds a marker waits for its checkpoint at most (a stalled background put)."""


def note_flow(
    config: RunnableConfig | None,
    call: Mapping[str, Any],
    event: MarkerEvent,
    result: ToolMessage | None = None,
) -> Flow[None]:
    """Store `event` for `call` on the checkpoint the running node's step runs from
    (module doc); a no-op outside a checkpointed run or with `durability="exit"`.
    `result`: what a "finished" marker carries."""
    cid = call.get("id")
    if not cid:
        return
    task_id, writes = started_marker(str(cid), event, result)
    what = f"that tool call {cid!r} ({call.get('name')}) {event}"
    yield from put_on_step(config, task_id, writes, what)


def put_on_step(
    config: RunnableConfig | None,
    task_id: str,
    writes: list[tuple[str, Any]],
    what: str,
) -> Flow[bool]:
    """Store `writes` under `task_id` on the checkpoint the running node's step runs from,
    as the markers are stored (module doc: waited for under any mode but "sync"); False
    (and a warning naming `what`) when nothing could be stored, or there is no step
    checkpoint (outside a checkpointed run, `durability="exit"`)."""
    conf = (config or {}).get("configurable") or {}
    if conf.get(PREGEL.durability) == "exit":
        return False
    found = node_checkpoint(config)
    if found is None:
        return False
    saver, at = found
    # The run's own config (its runtime, its hold on the thread) with the step's
    # checkpoint: the guard passes the write as the run's own.
    target: RunnableConfig = {"configurable": {**conf, **at["configurable"]}}
    if "checkpoint_id" not in at["configurable"]:
        return False  # no step checkpoint to hang it on
    try:
        if conf.get(PREGEL.durability, "async") != "sync":
            yield from _stored(saver, at, target)
        yield from saver_call(saver, "put_writes", target, writes, task_id)
    except NotImplementedError:
        return False  # a saver without this form (a sync-only saver under ainvoke)
    except Exception as e:  # the tool still runs: this only sharpens a later repair
        _log.warning("threadlog: could not record %s: %s: %s", what, type(e).__name__, e)
        return False
    return True


def finished_flow(
    config: RunnableConfig | None, call: Mapping[str, Any]
) -> Flow[ToolMessage | None]:
    """The result a "finished" marker stored for `call` on the checkpoint the node's step
    runs from (module doc: "Finished calls"), or None. Read only when threadlog's saver
    saw such a marker there when the run read the checkpoint: no read otherwise."""
    cid = call.get("id")
    found = node_checkpoint(config) if cid else None
    if found is None:
        return None
    saver, at = found
    guard = layer_of(saver, GuardLayer)
    if guard is None or "checkpoint_id" not in at["configurable"]:
        return None
    if not guard.saw_marker(at, marker_prefix(str(cid), "finished")):
        return None
    tup = yield from saver_call(saver, "get_tuple", at)
    return None if tup is None else finished_result(tup.pending_writes or (), str(cid))


def _stored(saver: Any, at: RunnableConfig, run: RunnableConfig) -> Flow[None]:
    """Wait until the checkpoint `at` names is stored (module doc: "async"). Read without
    the run's runtime: a plain read by id, no run's hold on the thread."""
    guard = layer_of(saver, GuardLayer)
    if guard is not None:
        # threadlog's saver knows what it stored and what it is storing: it wakes the
        # marker when that put ends (no reads while the put is queued behind another).
        try:
            yield from guard.stored_flow(saver, at, _STORED_WAIT, run)
        except Exception:  # as below: the marker is stored anyway
            pass
        return
    deadline = time.monotonic() + _STORED_WAIT
    try:
        while (yield from saver_call(saver, "get_tuple", at)) is None:
            if time.monotonic() > deadline:
                return
            yield Io(time.sleep, asyncio.sleep, (_STORED_POLL,))
    except Exception:  # a read that fails decides nothing: the marker is stored anyway
        return
