"""`RecordingStore`: the `BaseStore` items each step of a run read and wrote.

Contract:

* **Per run, threadlog's graphs only.** The calls layer hands a run's tasks a
  `RecordingStore` around the run's store (`_upstream.set_run_store`); nothing is patched.
* **Transparent.** Every operation goes to the app's store and returns what it returned;
  recording never fails the operation.
* **What is recorded**, inside a task: `get`, `search` (with the items returned), `put`,
  `delete`, `list_namespaces` (a count), stored with the step that made it as a model call
  is (the format in `call_records`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
)

__all__ = ["RecordingStore", "op_records"]

log = logging.getLogger("threadlog.calls")


class RecordingStore(BaseStore):
    """The app's store for one run, telling its recorder what each task read and wrote."""

    def __init__(self, inner: BaseStore, recorder: Any) -> None:
        # `recorder`: the run's `calls.CallRecorder` (its `layer.store_used` is told).
        self.inner = inner
        self.recorder = recorder
        # What `BaseStore.put` checks before it builds an operation: the app's store's.
        self.supports_ttl = inner.supports_ttl
        self.ttl_config = inner.ttl_config

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = self.inner.batch(ops)
        self._seen(ops, results)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = await self.inner.abatch(ops)
        self._seen(ops, results)
        return results

    def _seen(self, ops: list[Op], results: list[Result]) -> None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # used outside a task of the run: nothing to store it with
            return
        try:
            self.recorder.layer.store_used(self.recorder, config, op_records(ops, results))
        except Exception as exc:  # recording never fails the app's operation
            log.warning("threadlog: store items not recorded: %s: %s", type(exc).__name__, exc)


def _item(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, Item):
        return None
    return {"namespace": list(item.namespace), "key": item.key, "value": item.value}


def op_records(ops: list[Op], results: list[Result]) -> list[dict[str, Any]]:
    """Each operation with what it returned, as plain data (values not yet digested)."""
    out: list[dict[str, Any]] = []
    for op, result in zip(ops, results, strict=False):
        if isinstance(op, GetOp):
            got = _item(result)
            rec: dict[str, Any] = {
                "op": "get",
                "namespace": list(op.namespace),
                "key": op.key,
                "found": got is not None,
            }
            if got is not None:
                rec["value"] = got["value"]
        elif isinstance(op, SearchOp):
            rec = {"op": "search", "namespace": list(op.namespace_prefix)}
            if op.query is not None:
                rec["query"] = op.query
            if op.filter:
                rec["filter"] = op.filter
            rec["items"] = [i for i in map(_item, result or ()) if i is not None]  # type: ignore[arg-type]
        elif isinstance(op, PutOp):
            rec = {
                "op": "delete" if op.value is None else "put",
                "namespace": list(op.namespace),
                "key": op.key,
            }
            if op.value is not None:
                rec["value"] = op.value
        elif isinstance(op, ListNamespacesOp):
            rec = {"op": "list_namespaces", "count": len(result or ())}  # type: ignore[arg-type]
        else:
            rec = {"op": type(op).__name__}
        out.append(rec)
    return out
