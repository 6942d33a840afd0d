"""The `BaseStore` items each step of a thread read and wrote, read back for people.

`json_text()` escapes C1 and bidi controls; `str()` is terminal-safe; `_repr_html_()`
escapes everything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from threadlog.inspect.calls import RecordedRows, recorded_entries, task_place
from threadlog.terminal import safe

__all__ = ["StoreOp", "StoreUse", "store_items", "store_items_from"]


@dataclass
class StoreOp:
    namespace: str
    agent: str
    node: str
    step: int | None
    checkpoint_id: str
    op: str
    store_namespace: list[str]
    key: str | None = None
    value: Any = None
    found: bool | None = None
    query: str | None = None
    filter: Any = None
    items: list[dict[str, Any]] = field(default_factory=list)
    count: int | None = None
    started: float = 0.0
    ns: str = ""  # the task's own namespace, task ids included

    @property
    def written(self) -> bool:
        return self.op in ("put", "delete")

    def row(self) -> dict[str, Any]:
        where = ("namespace", "agent", "node", "step", "checkpoint_id", "op", "store_namespace")
        out = {k: getattr(self, k) for k in where}
        for name in ("key", "value", "found", "query", "filter", "count"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.op == "search":
            out["items"] = self.items
        return out

    def lines(self) -> list[str]:
        where = f"{self.namespace} > {self.node}" if self.namespace else self.node
        ns = "/".join(self.store_namespace)
        head = f"step {self.step} {where}: {self.op} {ns}"
        if self.key is not None:
            head += f" [{self.key}]"
        if self.op == "get" and not self.found:
            head += " (not found)"
        if self.query is not None:
            head += f" query {self.query!r}"
        if self.filter:
            head += f" filter {_json(self.filter)}"
        if self.count is not None:
            head += f" → {self.count} namespace(s)"
        out = [safe(head)]
        if self.value is not None:
            out.append("    " + safe(_json(self.value)))
        if self.op == "search":
            out.append(f"    → {len(self.items)} item(s)")
            out += [
                "      " + safe(f"{'/'.join(i['namespace'])} [{i['key']}] {_json(i['value'])}")
                for i in self.items
            ]
        return out

    def html(self) -> str:
        where = f"{self.namespace} > {self.node}" if self.namespace else self.node
        parts = [
            f"<li class='tl-store-op'><b>{escape(self.op)}</b> "
            f"{escape('/'.join(self.store_namespace))}"
            + (f" [{escape(str(self.key))}]" if self.key is not None else "")
            + (f" query {escape(repr(self.query))}" if self.query is not None else "")
            + f" <small>({escape(where)})</small>"
        ]
        if self.value is not None:
            parts.append(f"<pre>{escape(_json(self.value))}</pre>")
        if self.op == "get" and not self.found:
            parts.append(" (not found)")
        if self.items:
            parts.append("<ul>")
            for i in self.items:
                parts.append(
                    f"<li>{escape('/'.join(i['namespace']))} [{escape(str(i['key']))}] "
                    f"<pre>{escape(_json(i['value']))}</pre></li>"
                )
            parts.append("</ul>")
        parts.append("</li>")
        return "".join(parts)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class StoreUse(RecordedRows[StoreOp]):
    thread_id: str
    ops: list[StoreOp] = field(default_factory=list)

    def entries(self) -> list[StoreOp]:
        return self.ops

    def __str__(self) -> str:
        if not self.ops:
            return (
                f"store items of thread {safe(self.thread_id)}: none recorded (the graph "
                "had no store, or ran before threadlog.checkpointer(url) recorded them)"
            )
        reads = sum(not o.written for o in self.ops)
        out = [
            f"store items of thread {safe(self.thread_id)} "
            f"({reads} read(s), {len(self.ops) - reads} write(s))"
        ]
        for o in self.ops:
            out.extend(o.lines())
        return "\n".join(out)

    def _repr_html_(self) -> str:
        parts = [
            f"<div class='threadlog-store'><h4>store items of thread "
            f"{escape(self.thread_id)}</h4><ol>"
        ]
        parts.extend(o.html() for o in self.ops)
        parts.append("</ol></div>")
        return "".join(parts)


def store_items(source: Any, thread_id: str) -> StoreUse:
    from threadlog.inspect.calls import thread_tuples

    return store_items_from(thread_tuples(source, thread_id), thread_id)


def store_items_from(tuples: Iterable[CheckpointTuple], thread_id: str) -> StoreUse:
    found, blobs = recorded_entries(tuples, "store")
    out = StoreUse(thread_id)
    for cid, record in found:
        out.ops.extend(_ops(cid, record, blobs))
    return out


def _value(d: Any, blobs: Mapping[str, Any]) -> Any:
    blob = blobs.get(str(d))
    if isinstance(blob, Mapping) and blob.get("k") == "store_value":
        return blob.get("value")
    return {"missing": True}


def _ops(cid: str, record: Mapping[str, Any], blobs: Mapping[str, Any]) -> Iterator[StoreOp]:
    _, namespace, agent, node = task_place(record)
    step = record.get("step")
    for op in record.get("ops") or ():
        if not isinstance(op, Mapping):
            continue
        yield StoreOp(
            namespace=namespace,
            agent=agent,
            node=node,
            step=step if isinstance(step, int) else None,
            checkpoint_id=cid,
            op=str(op.get("op")),
            store_namespace=[str(p) for p in op.get("namespace") or ()],
            key=None if op.get("key") is None else str(op["key"]),
            value=_value(op["value"], blobs) if "value" in op else None,
            found=op.get("found"),
            query=op.get("query"),
            filter=op.get("filter"),
            items=[
                {
                    "namespace": [str(p) for p in i[0]],
                    "key": str(i[1]),
                    "value": _value(i[2], blobs),
                }
                for i in op.get("items") or ()
                if isinstance(i, (list, tuple)) and len(i) == 3
            ],
            count=op.get("count"),
            started=float(record.get("t") or 0.0),
            ns=str(record.get("ns") or ""),
        )
