"""Which calls' tools started: a marker stored before a tool runs ("outcome unknown" vs
"not completed", `threadlog.log.pairing`; why: docs/durability.md).

Contract:

* `note_flow(config, call, "started")` is yielded by the tool node right before it runs a
  call's tool (each attempt); `"stopped"` right after the tool reported back by raising
  (an exception or an interrupt), so a paused or failed call stays "not completed". A
  returned result needs no marker: it is the report.
* The marker is one pending write (`checkpoint.recover.started_marker`, channel
  `STARTED_CHANNEL`) on the checkpoint the node's step runs from, stored through the
  run's own checkpointer; the tool runs only once it is stored.
* Not written outside a checkpointed run, with `durability="exit"`, or when the saver
  cannot store it (logged; the tool runs anyway).
* Under any durability but `"sync"` the marker first waits until the step's checkpoint is
  stored (at most `_STORED_WAIT`), so a kill cannot lose the checkpoint it hangs on.
* **Finished calls.** A call whose tool returned also gets a `"finished"` marker carrying
  the result, stored before the task ends: when a sibling branch fails, LangGraph can
  shut its executor down before storing the task's own write. On resume `finished_flow`
  finds the marker and the node returns the stored result instead of running the tool.
* Cost: one `put_writes` per call attempt, one more per call that returns. A marker
  changes no state (LangGraph applies only the writes of tasks it schedules)."""

from __future__ import annotations

import asyncio
import contextlib
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

_STORED_POLL = 0.005  # seconds between reads while the step's checkpoint is not stored
_STORED_WAIT = 5.0  # seconds a marker waits for its checkpoint at most


def note_flow(
    config: RunnableConfig | None,
    call: Mapping[str, Any],
    event: MarkerEvent,
    result: ToolMessage | None = None,
) -> Flow[None]:
    """Store `event` for `call` on the checkpoint the running node's step runs from."""
    cid = call.get("id")
    if not cid:
        return
    task_id, writes = started_marker(str(cid), event, result)
    what = f"that tool call {cid!r} ({call.get('name')}) {event}"
    yield from put_on_step(config, task_id, writes, what)


def put_on_step(
    config: RunnableConfig | None, task_id: str, writes: list[tuple[str, Any]], what: str
) -> Flow[bool]:
    """Store `writes` on the step's checkpoint as the markers are; False (and a warning
    naming `what`) when nothing could be stored."""
    conf = (config or {}).get("configurable") or {}
    if conf.get(PREGEL.durability) == "exit":
        return False
    found = node_checkpoint(config)
    if found is None:
        return False
    saver, at = found
    # The run's own config with the step's checkpoint: the guard passes it as the run's.
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
    """The result a "finished" marker stored for `call` on the step's checkpoint."""
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
    """Wait until the checkpoint `at` names is stored (module doc), read by plain id."""
    guard = layer_of(saver, GuardLayer)
    if guard is not None:
        # threadlog's saver wakes the marker when that put ends (no polling reads).
        with contextlib.suppress(Exception):  # as below: the marker is stored anyway
            yield from guard.stored_flow(saver, at, _STORED_WAIT, run)
        return
    deadline = time.monotonic() + _STORED_WAIT
    try:
        while (yield from saver_call(saver, "get_tuple", at)) is None:
            if time.monotonic() > deadline:
                return
            yield Io(time.sleep, asyncio.sleep, (_STORED_POLL,))
    except Exception:  # a read that fails decides nothing: the marker is stored anyway
        return
