"""Receipts: what an idempotent tool returned, stored the moment it returned.

Contract (for tools marked `threadlog.nodes.tools.idempotent`; later attempts are served it):

* A receipt is one pending write (`receipt_write`): its own task id, channel
  `RECEIPT_CHANNEL`, a plain dict `{"call_id", "key", "tool", "value", "format", "at"}`,
  on the checkpoint the tool's step runs from. It changes no state and follows the
  thread's lifecycle (copy, prune, rollback) as any write.
* `receipt_message(receipt)`: the `ToolMessage` a repair logs for a call whose step never
  stored its result: the value as the tool would have formatted it, `status="success"`,
  a deterministic id, the key in `response_metadata[KEY_METADATA]`; None for a value no
  message can hold (a `Command`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, PendingWrite

from threadlog.flows import Flow
from threadlog.log.pairing import Recovered

__all__ = [
    "KEY_METADATA",
    "RECEIPT_CHANNEL",
    "find_receipt",
    "is_receipt",
    "is_receipt_task",
    "receipt_message",
    "receipt_write",
    "rerun_flow",
    "set_rerun",
]

RECEIPT_CHANNEL = "__threadlog_receipt__"
"""Never a channel of a graph: LangGraph applies nothing from it."""

_TASK_PREFIX = "threadlog-receipt:"

KEY_METADATA = "threadlog_idempotency_key"
"""`response_metadata` key of a result served from, or rebuilt from, a receipt."""


def receipt_write(
    call_id: str, key: str, tool: str, value: Any, response_format: str = "content"
) -> tuple[str, list[tuple[str, Any]]]:
    """(task id, writes) of one receipt; the task id is unique per receipt, as a marker's."""
    at = time.time_ns()
    record = {
        "call_id": call_id,
        "key": key,
        "tool": tool,
        "value": value,
        "format": response_format,
        "at": at,
    }
    return f"{_TASK_PREFIX}{call_id}:{at}", [(RECEIPT_CHANNEL, record)]


def is_receipt_task(task_id: str, call_id: str) -> bool:
    """Whether `task_id` is the task id of a receipt of `call_id` (`receipt_write`)."""
    return task_id.startswith(f"{_TASK_PREFIX}{call_id}:")


def find_receipt(writes: Iterable[PendingWrite], call_id: str) -> Mapping[str, Any] | None:
    """The newest receipt of `call_id` among `writes`, or None."""
    best: Mapping[str, Any] | None = None
    for _task, channel, value in writes:
        if channel != RECEIPT_CHANNEL or not is_receipt(value):
            continue
        if value["call_id"] == call_id and (best is None or value["at"] > best["at"]):
            best = value
    return best


def is_receipt(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("call_id"), str)
        and isinstance(value.get("key"), str)
        and isinstance(value.get("at"), int)
        and "value" in value
    )


def receipt_message(receipt: Mapping[str, Any]) -> ToolMessage | None:
    """The result a repair logs for a receipt (module doc), or None."""
    value = receipt["value"]
    artifact = None
    if receipt.get("format") == "content_and_artifact":
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            return None
        value, artifact = value
    if isinstance(value, str):
        content: Any = value
    elif isinstance(value, list) and all(isinstance(v, (str, dict)) for v in value):
        content = value
    else:
        try:
            content = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            return None  # a Command or an object: no message can stand for it
    cid = str(receipt["call_id"])
    digest = hashlib.blake2b(cid.encode(), digest_size=12).hexdigest()
    return ToolMessage(
        content=content,
        artifact=artifact,
        name=str(receipt.get("tool") or ""),
        tool_call_id=cid,
        id=f"tl-receipt-{digest}",
        status="success",
        response_metadata={KEY_METADATA: receipt["key"]},
    )


RerunArgs = tuple[
    Mapping[str, Any],  # the graph's nodes
    BaseCheckpointSaver[Any],
    Mapping[str, Any],  # the head checkpoint
    Mapping[str, AIMessage],  # the open calls' requests, by call id
    Recovered,
]
Rerun = Callable[[*RerunArgs], Flow[Recovered]]
_RERUN: list[Rerun] = []


def set_rerun(fn: Rerun) -> None:
    """Set the new-input re-run of idempotent calls (`threadlog.nodes.tools.rerun`)."""
    _RERUN[:] = [fn]


def rerun_flow(*args: *RerunArgs) -> Flow[Recovered]:
    """`recovered` with idempotent calls run again (`set_rerun`'s hook), else unchanged."""
    if not _RERUN:
        return args[-1]
    return (yield from _RERUN[0](*args))
