"""The model calls a thread recorded, read back for people: `recorded_calls(source, tid)`.

A message stored by reference is read from the thread's messages by id and digest
(`missing` when pruned). `json_text()` escapes C1 and bidi controls; `str()` is
terminal-safe; `_repr_html_()` escapes everything.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any, Generic, Protocol, TypeVar

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from threadlog._upstream import PREGEL, DeltaSnapshot
from threadlog.checkpoint.backends import unwrap
from threadlog.checkpoint.call_records import CALLS_CHANNEL, messages_in, stored_digests
from threadlog.log.messages import fingerprint
from threadlog.terminal import CONTROLS, safe

__all__ = ["CallList", "RecordedCall", "calls_from", "recorded_calls", "thread_tuples"]

JSON_ESCAPES = {cp: f"\\u{cp:04x}" for cp in CONTROLS if cp >= 0x7F}


@dataclass
class RecordedCall:
    namespace: str
    agent: str
    node: str
    step: int | None
    model: str
    provider: str | None
    params: dict[str, Any]
    messages: list[dict[str, Any]]
    tools: list[str]
    tool_schemas: list[Any] | None
    reply_id: str | None
    reply: dict[str, Any] | None
    error: str | None
    checkpoint_id: str
    task: str
    started: float = 0.0
    run_id: str = ""
    ns: str = ""  # the task's own namespace, task ids included
    other_replies: list[dict[str, Any]] = field(default_factory=list)  # generations 2.. (n>1)

    @property
    def system_prompt(self) -> str | None:
        for m in self.messages:
            if m.get("role") in ("system", "developer"):
                return content_text(m.get("content"))
        return None

    def row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _CALL_ROW}


_CALL_ROW = """namespace agent node step model provider params messages tools tool_schemas reply_id
reply other_replies error checkpoint_id task run_id""".split()


class _Row(Protocol):
    def row(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=_Row)


class RecordedRows(Generic[R]):
    """What a thread's steps recorded, as a sequence and as JSON rows."""

    def entries(self) -> list[R]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.entries())

    def __iter__(self) -> Iterator[R]:
        return iter(self.entries())

    def __getitem__(self, i: int) -> R:
        return self.entries()[i]

    def rows(self) -> list[dict[str, Any]]:
        return [e.row() for e in self.entries()]

    def json_text(self) -> str:
        text = json.dumps(self.rows(), ensure_ascii=False, indent=1, default=str)
        return text.translate(JSON_ESCAPES)


@dataclass
class CallList(RecordedRows[RecordedCall]):
    thread_id: str
    calls: list[RecordedCall] = field(default_factory=list)

    def entries(self) -> list[RecordedCall]:
        return self.calls

    def __str__(self) -> str:
        if not self.calls:
            return (
                f"model calls of thread {safe(self.thread_id)}: none recorded (recording "
                "needs threadlog.checkpointer(url); runs before it stored none)"
            )
        out = [f"model calls of thread {safe(self.thread_id)} ({len(self.calls)})"]
        for i, c in enumerate(self.calls, 1):
            where = f"{c.namespace} > {c.node}" if c.namespace else c.node
            head = f"#{i} {where} (step {c.step})  model: {c.model}"
            if c.provider:
                head += f" ({c.provider})"
            out.append("")
            out.append(safe(head))
            if c.tools:
                out.append("  tools: " + safe(", ".join(c.tools)))
            for m in c.messages:
                out.extend(_message_lines(m, "  "))
            if c.error:
                out.append("  ✗ error: " + safe(c.error))
            if c.reply is None and c.reply_id:
                out.append(f"  → reply {safe(c.reply_id)} (not stored)")
            for label, reply in _replies(c):
                out.extend(_message_lines(reply, f"  {label}"))
        return "\n".join(out)

    def _repr_html_(self) -> str:
        parts = [
            f"<div class='threadlog-calls'><h4>model calls of thread {escape(self.thread_id)}</h4>"
        ]
        for i, c in enumerate(self.calls, 1):
            where = f"{c.namespace} > {c.node}" if c.namespace else c.node
            parts.append(
                f"<details open><summary>#{i} step {c.step} {escape(where)} — model "
                f"{escape(c.model)}"
                + (f"; tools: {escape(', '.join(c.tools))}" if c.tools else "")
                + "</summary><ol>"
            )
            for m in c.messages:
                parts.append(
                    f"<li><b>{escape(str(m.get('role')))}</b> "
                    f"<pre>{escape(content_text(m.get('content')))}</pre>"
                    f"{escape(calls_text(m))}</li>"
                )
            parts.append("</ol>")
            parts += [
                f"<p>{label}<pre>{escape(content_text(reply.get('content')))}"
                f"{escape(calls_text(reply))}</pre></p>"
                for label, reply in _replies(c)
            ]
            if c.error:
                parts.append(f"<p>error: {escape(c.error)}</p>")
            parts.append("</details>")
        parts.append("</div>")
        return "".join(parts)


def _replies(c: RecordedCall) -> list[tuple[str, dict[str, Any]]]:
    first = [("→ ", c.reply)] if c.reply is not None else []
    return first + [(f"→ generation {k}: ", o) for k, o in enumerate(c.other_replies, 2)]


def content_text(content: Any) -> str:
    """A message's content as text: text blocks joined, other blocks as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        bits = []
        for block in content:
            if isinstance(block, str):
                bits.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                bits.append(block["text"])
            else:
                bits.append(json.dumps(block, ensure_ascii=False, default=str))
        return "\n".join(bits)
    return str(content)


def calls_text(m: Mapping[str, Any]) -> str:
    calls = m.get("tool_calls") or []
    return "".join(
        f"\n[call {c.get('name')}({json.dumps(c.get('args'), ensure_ascii=False, default=str)})"
        f" id={c.get('id')}]"
        for c in calls
    )


def _message_lines(m: Mapping[str, Any], indent: str) -> list[str]:
    role = str(m.get("role"))
    if m.get("missing"):
        return [f"{indent}{safe(role)}: (not stored any more: id {safe(str(m.get('id')))})"]
    label = role
    if m.get("tool_call_id"):
        label += f"[{m['tool_call_id']}]"
    if m.get("name"):
        label += f" ({m['name']})"
    text = content_text(m.get("content")) + calls_text(m)
    lines = safe(text, keep="\n\t").split("\n") or [""]
    pad = " " * (len(indent) + 2)
    return [f"{indent}{safe(label)}: {lines[0]}", *(pad + line for line in lines[1:])]


def recorded_calls(source: Any, thread_id: str) -> CallList:
    """The model calls `thread_id` recorded, from a saver or a checkpointer URL."""
    return calls_from(thread_tuples(source, thread_id), thread_id)


def thread_tuples(source: Any, thread_id: str) -> list[CheckpointTuple]:
    """Every checkpoint of `thread_id` (all namespaces) with its writes, recorded calls
    included."""
    from threadlog.inspect.readonly import local_saver

    refusal = (
        "cannot read recorded calls from a {}: pass a checkpointer, a compiled graph or a "
        "checkpointer URL"
    )
    graph_saver = getattr(source, "checkpointer", None)
    if isinstance(graph_saver, BaseCheckpointSaver):
        source = graph_saver
    with local_saver(source, refusal) as saver:
        # The backend's own listing: threadlog's layers hide the recorded calls.
        raw = unwrap(saver)
        return list(type(raw).list(raw, {"configurable": {"thread_id": thread_id}}))


def calls_from(tuples: Iterable[CheckpointTuple], thread_id: str) -> CallList:
    tuples = list(tuples)
    found, blobs = recorded_entries(tuples, "calls")
    if not found:
        return CallList(thread_id)
    _expand_slices(found)
    wanted: set[str] = set()
    for _, call in found:
        for entry in call.get("messages") or ():
            if isinstance(entry, Mapping) and entry.get("d") not in blobs and entry.get("id"):
                wanted.add(str(entry["id"]))
        if call.get("reply_id"):
            wanted.add(str(call["reply_id"]))
    stored = _stored_messages(tuples, wanted)
    index: dict[str, BaseMessage] = {}

    def by_digest() -> Mapping[str, BaseMessage]:  # for a copy sent without id
        if not index:
            for m in _all_messages(tuples):
                digests = stored_digests(m)
                for i, d in enumerate(digests):  # after the first: sent without its name
                    index.setdefault(d, m if i == 0 else m.model_copy(update={"name": None}))
        return index

    calls = [_call(cid, call, blobs, stored, by_digest) for cid, call in found]
    calls.sort(key=lambda c: c.started)
    return CallList(thread_id, calls)


def recorded_entries(
    tuples: Iterable[CheckpointTuple], key: str
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """`(checkpoint id, entry)` for each `key` entry (`calls`, `store`) in start order, and
    the blobs the writes carry."""
    found: list[tuple[str, dict[str, Any]]] = []
    blobs: dict[str, Any] = {}
    for tup in tuples:
        cid = str(tup.config["configurable"].get("checkpoint_id"))
        for _, channel, value in tup.pending_writes or ():
            if channel != CALLS_CHANNEL or not isinstance(value, Mapping):
                continue
            b = value.get("blobs")
            if isinstance(b, Mapping):
                blobs.update(b)
            found += [(cid, dict(e)) for e in value.get(key) or () if isinstance(e, Mapping)]
    found.sort(key=lambda f: float(f[1].get("t") or 0.0))
    return found, blobs


def task_place(entry: Mapping[str, Any]) -> tuple[list[str], str, str, str]:
    """`(ns parts, namespace, agent, node)` of the task an entry was recorded in."""
    ns = str(entry.get("ns") or "")
    parts = ns.split(PREGEL.ns_sep) if ns else []
    names = [p.rsplit(PREGEL.ns_end, 1)[0] for p in parts]
    node = str(entry.get("node") or (names[-1] if names else "?"))
    outer = names[:-1]
    return parts, PREGEL.ns_sep.join(outer), outer[-1] if outer else node, node


def _expand_slices(found: list[tuple[str, dict[str, Any]]]) -> None:
    """Each call's `{"slice": [run id, start, end]}` entries as the entries they name."""
    by_run: dict[str, list[Any]] = {}
    waiting = [call for _, call in found]
    while waiting:
        later = []
        for call in waiting:
            names = [
                str(e["slice"][0])
                for e in call.get("messages") or ()
                if isinstance(e, Mapping) and _is_slice(e.get("slice"))
            ]
            if any(n not in by_run and n != str(call.get("run_id")) for n in names):
                later.append(call)
                continue
            _expand(call, by_run)
        if len(later) == len(waiting):  # a slice of a call no longer stored
            for call in later:
                _expand(call, by_run)
            break
        waiting = later


def _is_slice(piece: Any) -> bool:
    return isinstance(piece, (list, tuple)) and len(piece) == 3


def _expand(call: dict[str, Any], by_run: dict[str, list[Any]]) -> None:
    out: list[Any] = []
    for entry in call.get("messages") or ():
        piece = entry.get("slice") if isinstance(entry, Mapping) else None
        if piece is not None and _is_slice(piece):
            start, end = int(piece[1]), int(piece[2])
            earlier = by_run.get(str(piece[0]))
            if earlier is None or end > len(earlier):
                out.extend({"missing": True} for _ in range(max(end - start, 0)))
            else:
                out.extend(earlier[start:end])
        else:
            out.append(entry)
    call["messages"] = out
    by_run[str(call.get("run_id"))] = out


def _all_messages(tuples: Iterable[CheckpointTuple]) -> Iterator[BaseMessage]:
    seen: set[int] = set()
    for tup in tuples:
        for _, channel, value in tup.pending_writes or ():
            if channel != CALLS_CHANNEL:
                for m in messages_in(value, lists=3):
                    if id(m) not in seen:
                        seen.add(id(m))
                        yield m


def _stored_messages(
    tuples: Iterable[CheckpointTuple], wanted: set[str]
) -> dict[str, list[BaseMessage]]:
    """Every stored version of each message whose id is in `wanted` (writes and values)."""
    out: dict[str, list[BaseMessage]] = {}
    if not wanted:
        return out

    def take(value: Any, depth: int = 0) -> None:
        if isinstance(value, BaseMessage):
            if value.id in wanted:
                versions = out.setdefault(str(value.id), [])
                if not any(v is value for v in versions):
                    versions.append(value)
        elif isinstance(value, DeltaSnapshot):
            take(value.value, depth + 1)
        elif depth < 3 and isinstance(value, (list, tuple)):
            for item in value:
                take(item, depth + 1)
        elif depth < 2 and isinstance(value, Mapping):
            for item in value.values():
                take(item, depth + 1)
        elif depth < 3 and hasattr(value, "messages") and not isinstance(value, type):
            with contextlib.suppress(Exception):  # a log-like value: its messages
                take(list(value.messages), depth + 1)

    for tup in tuples:
        for _, channel, value in tup.pending_writes or ():
            if channel != CALLS_CHANNEL:
                take(value)
        for value in (tup.checkpoint.get("channel_values") or {}).values():
            take(value)
    return out


def _fp(message: BaseMessage) -> dict[str, Any]:
    try:
        return fingerprint(message)
    except Exception:  # a message the log has no role for
        role = getattr(message, "role", None) or type(message).__name__
        return {"role": str(role), "content": message.content}


def shown_message(fp: Mapping[str, Any], mid: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": fp.get("role"), "content": fp.get("content")}
    if mid is not None:
        out["id"] = str(mid)
    if fp.get("name") is not None:
        out["name"] = fp["name"]
    if fp.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c[0], "name": c[1], "args": c[2]} if isinstance(c, (list, tuple)) else c
            for c in fp["tool_calls"]
        ]
    if fp.get("tool_call_id") is not None:
        out["tool_call_id"] = fp["tool_call_id"]
        out["status"] = fp.get("status")
    return out


def _resolve(
    entry: Mapping[str, Any],
    blobs: Mapping[str, Any],
    stored: Mapping[str, list[BaseMessage]],
    by_digest: Callable[[], Mapping[str, BaseMessage]] | None = None,
) -> dict[str, Any]:
    d, mid = entry.get("d"), entry.get("id")
    if not entry.get("missing"):
        blob = blobs.get(str(d))
        if isinstance(blob, Mapping):
            return shown_message(blob, mid)
        for m in stored.get(str(mid), []) if mid else []:
            if d in stored_digests(m)[:1]:
                return shown_message(_fp(m), mid)
        same = by_digest().get(str(d)) if not mid and by_digest is not None else None
        if same is not None:
            return shown_message(_fp(same))
    return {"role": "?", "content": None, "id": mid, "missing": True}


def _call(
    cid: str,
    call: Mapping[str, Any],
    blobs: Mapping[str, Any],
    stored: Mapping[str, list[BaseMessage]],
    by_digest: Callable[[], Mapping[str, BaseMessage]],
) -> RecordedCall:
    parts, namespace, agent, node = task_place(call)
    params_blob = blobs.get(str(call.get("params")))
    params = (params_blob.get("value") or {}) if isinstance(params_blob, Mapping) else {}
    tools_blob = blobs.get(str(call.get("tools_d")))
    reply_id = call.get("reply_id")
    versions = (stored.get(str(reply_id)) or []) if reply_id else []

    def resolved(key: str) -> list[dict[str, Any]]:
        entries = call.get(key) or ()
        return [_resolve(e, blobs, stored, by_digest) for e in entries if isinstance(e, Mapping)]

    step = call.get("step")
    return RecordedCall(
        namespace=namespace,
        agent=agent,
        node=node,
        step=step if isinstance(step, int) else None,
        model=str(call.get("model") or "?"),
        provider=call.get("provider") or params.get("ls_provider"),
        params=dict(params),
        messages=resolved("messages"),
        tools=[str(t) for t in call.get("tools") or ()],
        tool_schemas=(
            list(tools_blob.get("value") or []) if isinstance(tools_blob, Mapping) else None
        ),
        reply_id=None if reply_id is None else str(reply_id),
        reply=shown_message(_fp(versions[0]), reply_id) if versions else None,
        error=call.get("error"),
        checkpoint_id=cid,
        task=parts[-1].rsplit(PREGEL.ns_end, 1)[-1] if parts else "",
        started=float(call.get("t") or 0.0),
        run_id=str(call.get("run_id") or ""),
        ns=str(call.get("ns") or ""),
        other_replies=resolved("others"),
    )
