"""`CallsLayer`: what every chat-model call of a run saw, stored with the thread.

Contract:

* **Who is recorded.** Every chat-model call inside a run on this saver, whoever makes it,
  at any subgraph depth: when a run's loop reads its thread, the layer adds a
  `CallRecorder` callback handler to the run manager's `inheritable_handlers` (a new
  list). Nothing is patched; a model called outside a run is not seen.
* **What**: the messages as sent; tool names and a digest of their schemas; model name,
  provider and parameters; the reply's id and every other generation (`n>1`); namespace,
  node and step; an error.
* **Where.** One `CALLS_CHANNEL` write under a task id of its own (`threadlog-calls:…`),
  just before the task's writes, or before the step's checkpoint for calls not stored by
  then; lifecycle calls treat it as any write. Recording never fails a step.
* **O(new)** (the format: `call_records`): a message the thread stores, or that the task
  read from its state, is a reference; other content a blob once per thread and process;
  what the agent's previous call also sent, one slice of it.
* **Invisible to runs.** Reads through this layer leave the channel out;
  `record_calls=False` leaves the layer out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any
from uuid import UUID, uuid4

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from threadlog._upstream import PREGEL, RunningLoop, run_store, running_loop, set_run_store
from threadlog.checkpoint.call_records import (
    CALLS_CHANNEL,
    CALLS_TASK_PREFIX,
    FORMAT,
    PARAM_SKIP,
    Key,
    blob_digest,
    compress,
    fingerprint_of,
    messages_in,
    model_name,
    plain,
    tool_name,
    unnamed_digest,
)
from threadlog.checkpoint.layered import Layer, PutArgs, PutWritesArgs, SaverView
from threadlog.checkpoint.store_ops import RecordingStore
from threadlog.flows import Flow
from threadlog.log.messages import digest

__all__ = ["CallRecorder", "CallsLayer"]

log = logging.getLogger("threadlog.calls")

_MAX_THREADS = 1024  # threads whose stored digests a process remembers
_MAX_DIGESTS = 8192  # messages whose digest is kept (by id, else by identity)
_MAX_TASKS = 256  # tasks whose input state is kept while they run


@dataclass(slots=True, eq=False)
class _Memo:
    """What this process knows one thread has stored."""

    # One build at a time: two must not add the same blob.
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_log: set[tuple[str, str]] = field(default_factory=set)
    # Message objects already noted (a reused identity only costs a blob).
    noted: set[int] = field(default_factory=set)
    digests: set[str] = field(default_factory=set)  # of every message in `in_log`
    blobs: set[str] = field(default_factory=set)
    # agent -> (run id, (id, digest) keys, the message objects it sent)
    last: dict[str, tuple[str, list[Key], list[BaseMessage]]] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class _Call:
    """One model call in flight or done, waiting for its task's writes."""

    thread: str
    task_ns: InitVar[str]
    record: dict[str, Any]
    owner: CallRecorder
    messages: list[BaseMessage] = field(default_factory=list)
    tools: Any = None
    params: list[tuple[str, Any]] = field(default_factory=list)
    ops: list[dict[str, Any]] | None = None  # store operations, not a model call
    done: bool = False
    read: Any = None  # the state its task read (task_started)
    chain: tuple[str, ...] = field(init=False)  # the task ids, outermost first
    agent: str = field(init=False)  # the node names, joined as namespaces are
    graph_ns: str = field(init=False)  # the namespace of the graph whose task made it
    _read_ids: set[int] | None = field(init=False, default=None)

    def __post_init__(self, task_ns: str) -> None:
        parts = task_ns.split(PREGEL.ns_sep)
        self.chain = tuple(part.rsplit(PREGEL.ns_end, 1)[-1] for part in parts)
        self.agent = PREGEL.ns_sep.join(part.rsplit(PREGEL.ns_end, 1)[0] for part in parts)
        self.graph_ns = PREGEL.ns_sep.join(parts[:-1])

    def sent_from_state(self, message: BaseMessage) -> bool:
        if self.read is None:
            return False
        if self._read_ids is None:
            self._read_ids = _object_ids(self.read)
        return id(message) in self._read_ids


def _object_ids(value: Any) -> set[int]:
    out: set[int] = set()
    values = value.values() if isinstance(value, dict) else (value,)
    for v in values:
        if isinstance(v, BaseMessage):
            out.add(id(v))
        elif isinstance(v, (list, tuple)):
            out.update(map(id, v))
    return out


def _unnamed(message: BaseMessage) -> str:
    try:
        return unnamed_digest(message)
    except Exception:  # a message the log has no role for: found by id only
        return ""


def _record(run_id: str, task_ns: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": run_id, "t": time.time(), "ns": task_ns, "step": meta.get("langgraph_step")}


def _step(c: _Call) -> int:
    step = c.record.get("step")
    return step if isinstance(step, int) else -(2**31)


class CallRecorder(BaseCallbackHandler):
    """The callback handler one run carries: hands each chat-model call to its layer."""

    run_inline = True  # no executor hop under asyncio: the handler only builds a dict
    raise_error = False  # recording never fails the app's call
    ignore_agent = True
    ignore_retriever = True
    ignore_retry = True
    ignore_custom_event = True

    def __init__(self, layer: CallsLayer) -> None:
        self.layer = layer

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: Any,
        *,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if tags and metadata and any(t.startswith(PREGEL.task_run_tag) for t in tags):
            self.layer.task_started(self, metadata, inputs)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        self.layer.started(self, serialized, messages, run_id, metadata or {}, kwargs)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> Any:
        # One prompt: its generations are the call's candidates (`n>1`).
        made: list[BaseMessage] = []
        try:
            made = [g.message for g in response.generations[0]]
        except (AttributeError, IndexError, TypeError):
            pass
        made = [m for m in made if isinstance(m, BaseMessage)]
        reply = made[0] if made else None
        self.layer.ended(run_id, getattr(reply, "id", None), None, made[1:])

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> Any:
        self.layer.ended(run_id, None, f"{type(error).__name__}: {error}")


class CallsLayer(Layer):
    """Records each run's model calls with the steps that made them (module doc)."""

    name = "calls"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[UUID, _Call] = {}

        self._memos: OrderedDict[str, _Memo] = OrderedDict()
        self._digests: OrderedDict[int | str, tuple[BaseMessage, str]] = OrderedDict()
        self._tool_digests: dict[int, tuple[Any, str, list[str], Any]] = {}
        self._params_seen: dict[tuple[Any, ...], tuple[list[Any], dict[str, Any], str]] = {}
        # task id -> (the run's recorder, the state the task read)
        self._inputs: OrderedDict[str, tuple[CallRecorder, Any]] = OrderedDict()

    def attach(self, loop: RunningLoop) -> None:
        manager = loop.manager
        if manager is None:
            return
        handlers = list(getattr(manager, "inheritable_handlers", None) or ())
        recorder = next(
            (h for h in handlers if isinstance(h, CallRecorder) and h.layer is self), None
        )
        if recorder is None:  # else a subgraph's run: its parent's recorder is inherited
            recorder = CallRecorder(self)
            # A new list: the run manager may share its list with the caller's manager.
            manager.inheritable_handlers = [*handlers, recorder]
            loop.stack.callback(self._drop, recorder)
        store = run_store(loop)
        if store is not None and not isinstance(store, RecordingStore):
            # This run's tasks only (a subgraph's run has its parent task's already).
            set_run_store(loop, RecordingStore(store, recorder))

    def _drop(self, recorder: CallRecorder) -> None:
        # Calls and task inputs whose task stored no writes are not kept past their run.
        with self._lock:
            for run_id, c in list(self._calls.items()):
                if c.owner is recorder:
                    del self._calls[run_id]
            for task, (owner, _) in list(self._inputs.items()):
                if owner is recorder:
                    del self._inputs[task]

    def task_started(self, recorder: CallRecorder, metadata: dict[str, Any], inputs: Any) -> None:
        # The messages a task read are in its thread (or on their way): calls refer to them.
        task_ns = metadata.get("langgraph_checkpoint_ns")
        if not isinstance(task_ns, str) or metadata.get("thread_id") is None:
            return
        with self._lock:
            self._inputs[task_ns.rsplit(PREGEL.ns_end, 1)[-1]] = (recorder, inputs)
            if len(self._inputs) > _MAX_TASKS:
                self._inputs.popitem(last=False)

    def started(
        self,
        recorder: CallRecorder,
        serialized: dict[str, Any],
        batches: list[list[BaseMessage]],
        run_id: UUID,
        metadata: dict[str, Any],
        extra: dict[str, Any],
    ) -> None:
        thread = metadata.get("thread_id")
        task_ns = metadata.get("langgraph_checkpoint_ns")
        if thread is None or not isinstance(task_ns, str) or not task_ns:
            return  # not a task of a run (nothing to store it with)
        params = extra.get("invocation_params") or {}
        if not isinstance(params, dict):
            params = {}
        raw = [(k, v) for k, v in params.items() if k not in PARAM_SKIP]
        raw += [(k, v) for k, v in metadata.items() if k.startswith("ls_")]
        record = _record(str(run_id), task_ns, metadata)
        record["model"] = model_name(serialized, params, metadata)
        # Decided when stored: by then more of the messages are references.
        messages = list(batches[0]) if batches else []
        c = _Call(str(thread), task_ns, record, recorder, messages, params.get("tools"), raw)
        node = metadata.get("langgraph_node")
        named = task_ns.split(PREGEL.ns_sep)[-1].rsplit(PREGEL.ns_end, 1)[0]
        if node is not None and node != named:
            record["node"] = node
        with self._lock:
            read = self._inputs.get(c.chain[-1])
            c.read = None if read is None else read[1]
            self._calls[run_id] = c

    def store_used(self, recorder: CallRecorder, config: Any, ops: list[dict[str, Any]]) -> None:
        """A task's store operations, stored as its calls are."""
        meta = config.get("metadata") or {}
        conf = config.get("configurable") or {}
        thread = conf.get("thread_id", meta.get("thread_id"))
        task_ns = meta.get("langgraph_checkpoint_ns") or conf.get("checkpoint_ns")
        if thread is None or not isinstance(task_ns, str) or not task_ns:
            return
        record = _record(f"store-{uuid4().hex}", task_ns, meta)
        record["ops"] = ops
        if (node := meta.get("langgraph_node")) is not None:
            record["node"] = node
        c = _Call(str(thread), task_ns, record, recorder, ops=ops, done=True)
        with self._lock:
            self._calls[uuid4()] = c

    def ended(
        self, run_id: UUID, reply_id: Any, error: str | None, others: Sequence[BaseMessage] = ()
    ) -> None:
        """A call ended: its reply's id or error, and its other generations."""
        with self._lock:
            c = self._calls.get(run_id)
            if c is None:
                return
            if others:
                c.record["others"] = list(others)
            if reply_id is not None:
                c.record["reply_id"] = str(reply_id)
            if error is not None:
                c.record["error"] = error
            c.done = True

    def _memo(self, thread: str) -> _Memo:
        memo = self._memos.get(thread)
        if memo is None:
            memo = self._memos[thread] = _Memo()
            if len(self._memos) > _MAX_THREADS:
                self._memos.popitem(last=False)
        else:
            self._memos.move_to_end(thread)
        return memo

    def _digest(self, message: BaseMessage) -> str:
        # Once per message id (a delta channel decodes anew each turn; `==` beats a hash).
        key: int | str = message.id if isinstance(message.id, str) else id(message)
        with self._lock:
            hit = self._digests.get(key)
        if hit is not None and (hit[0] is message or hit[0] == message):
            return hit[1]
        try:
            d = digest(message)
        except Exception:  # a message the log has no role for: its text as stored
            d = blob_digest([type(message).__name__, repr(message.content)])
        with self._lock:
            self._digests[key] = (message, d)
            if len(self._digests) > _MAX_DIGESTS:
                self._digests.popitem(last=False)
        return d

    def _message_entry(
        self, message: BaseMessage, memo: _Memo, blobs: dict[str, Any], c: _Call
    ) -> dict[str, Any]:
        d = self._digest(message)
        mid = message.id
        if mid is not None and ((str(mid), d) in memo.in_log or c.sent_from_state(message)):
            return {"id": str(mid), "d": d, "ref": True}
        if mid is None and d in memo.digests:  # a copy without its id: by content
            return {"d": d, "ref": True}
        return self._blob(message, d, memo, blobs)

    def _blob(
        self, message: BaseMessage, d: str, memo: _Memo, blobs: dict[str, Any]
    ) -> dict[str, Any]:
        if d not in memo.blobs and d not in blobs:
            blobs[d] = {"k": "message", **plain(fingerprint_of(message))}
        return {"d": d, "id": str(message.id)} if message.id is not None else {"d": d}

    def _params(self, raw: list[tuple[str, Any]]) -> tuple[dict[str, Any], str]:
        # The same objects call after call: digested once (values kept, so ids stay theirs).
        key = tuple((k, id(v)) for k, v in raw)
        with self._lock:
            hit = self._params_seen.get(key)
        if hit is not None:
            return hit[1], hit[2]
        made = {k: plain(v) for k, v in raw}
        d = blob_digest(made)
        with self._lock:
            if len(self._params_seen) > 256:
                self._params_seen.clear()
            self._params_seen[key] = ([v for _, v in raw], made, d)
        return made, d

    def _tools_entry(
        self, tools: Any, memo: _Memo, blobs: dict[str, Any]
    ) -> tuple[list[str], str | None]:
        if not tools:
            return [], None
        # A bound model hands the same list object to every call: digested once.
        with self._lock:
            hit = self._tool_digests.get(id(tools))
        if hit is not None and hit[0] is tools:
            _, d, names, schemas = hit
        else:
            schemas = plain(list(tools))
            d = blob_digest(schemas)
            names = [tool_name(t) for t in tools]
            with self._lock:
                if len(self._tool_digests) > 256:
                    self._tool_digests.clear()
                self._tool_digests[id(tools)] = (tools, d, names, schemas)
        if d not in memo.blobs:
            blobs[d] = {"k": "tools", "value": schemas}
        return list(names), d

    def get_tuple(self, below: SaverView, config: RunnableConfig) -> Flow[Any]:
        loop = running_loop()
        if loop is not None:
            self.attach(loop)
        tup: CheckpointTuple | None = yield from below.flow("get_tuple", config)
        return None if tup is None else self.listed(tup)

    def listed(self, tup: CheckpointTuple) -> CheckpointTuple:
        writes = tup.pending_writes
        if not writes or not any(w[1] == CALLS_CHANNEL for w in writes):
            return tup
        return tup._replace(pending_writes=[w for w in writes if w[1] != CALLS_CHANNEL])

    def put_writes(self, below: SaverView, *args: *PutWritesArgs) -> Flow[None]:
        config, writes, task_id, task_path = args
        thread = str(config.get("configurable", {}).get("thread_id"))
        if self._inputs:
            with self._lock:
                self._inputs.pop(task_id, None)
        self._note_stored(thread, writes)
        taken = self._take(thread, task_id) if self._calls else []
        if taken:
            yield from self._put_calls(below, config, taken, task_id, task_path)
        yield from below.flow("put_writes", config, writes, task_id, task_path)

    def _stored_form(self, thread: str, taken: list[_Call]) -> dict[str, Any]:
        try:
            with self._lock:
                memo = self._memo(thread)
            with memo.lock:
                return self._build(memo, taken)
        except Exception as exc:  # recording never costs the app its step's writes
            log.warning("threadlog: model calls not recorded: %s: %s", type(exc).__name__, exc)
            return {"v": FORMAT, "calls": [], "blobs": {}, "error": repr(exc)}

    def _build(self, memo: _Memo, taken: list[_Call]) -> dict[str, Any]:
        blobs: dict[str, Any] = {}
        records = []
        used: list[dict[str, Any]] = []
        for c in taken:
            if c.ops is not None:
                record = dict(c.record)
                record["ops"] = [self._store_op(op, memo, blobs) for op in c.ops]
                used.append(record)
                continue
            prev = memo.last.get(c.agent)
            # The agent's previous context, sent again first: one slice, no digest each.
            same = _same_prefix(c.messages, prev[2]) if prev is not None else 0
            sent = [self._message_entry(m, memo, blobs, c) for m in c.messages[same:]]
            keys: list[Key] = [(e.get("id"), e["d"]) for e in sent]
            record = dict(c.record)
            record["messages"] = compress(sent, keys, None if prev is None or same else prev[:2])
            if prev is not None and same:
                record["messages"].insert(0, {"slice": [prev[0], 0, same]})
                keys = [*prev[1][:same], *keys]
            names, tools_d = self._tools_entry(c.tools, memo, blobs)
            if names:
                record["tools"], record["tools_d"] = names, tools_d
            values, params_d = self._params(c.params)
            if params_d not in memo.blobs:
                blobs[params_d] = {"k": "params", "value": values}
            record["params"] = params_d
            if c.record.get("others"):
                others = c.record["others"]
                record["others"] = [self._blob(m, self._digest(m), memo, blobs) for m in others]
            records.append(record)
            # Stored in this same write: a later call of the agent may slice it.
            memo.last[c.agent] = (str(record["run_id"]), keys, c.messages)
        memo.blobs.update(blobs)
        value: dict[str, Any] = {"v": FORMAT, "calls": records, "blobs": blobs}
        if used:
            value["store"] = used
        return value

    def _value_d(self, value: Any, memo: _Memo, blobs: dict[str, Any]) -> str:
        made = plain(value)
        d = blob_digest(made)
        if d not in memo.blobs and d not in blobs:
            blobs[d] = {"k": "store_value", "value": made}
        return d

    def _store_op(self, op: dict[str, Any], memo: _Memo, blobs: dict[str, Any]) -> dict[str, Any]:
        # Values as blobs, once per thread: a memory read every turn is stored once.
        out = dict(op)
        if "value" in out:
            out["value"] = self._value_d(out["value"], memo, blobs)
        if "items" in out:
            out["items"] = [
                [i["namespace"], i["key"], self._value_d(i["value"], memo, blobs)]
                for i in out["items"]
            ]
        if "filter" in out:
            out["filter"] = plain(out["filter"])
        return out

    def put(self, below: SaverView, *args: *PutArgs) -> Flow[RunnableConfig]:
        config, _, metadata, _ = args
        # A step's checkpoint may come before its tasks' writes: their calls go first.
        conf = config.get("configurable", {})
        thread, parent = str(conf.get("thread_id")), conf.get("checkpoint_id")
        taken: list[_Call] = []
        step = metadata.get("step") if isinstance(metadata, dict) else None
        if self._calls and isinstance(step, int):
            # Only the steps this checkpoint ends (a run's input may be stored late).
            taken = self._take(thread, None, str(conf.get("checkpoint_ns") or ""), step)
        if taken and parent:
            yield from self._put_calls(below, config, taken)
        out: RunnableConfig = yield from below.flow("put", *args)
        if taken and not parent:  # a thread's first checkpoint (`durability="exit"`)
            yield from self._put_calls(below, out, taken)
        return out

    def _put_calls(
        self,
        below: SaverView,
        config: RunnableConfig,
        taken: list[_Call],
        task_id: str | None = None,
        task_path: str = "",
    ) -> Flow[None]:
        # One task id per flush: a resumed task stores calls again on the same checkpoint.
        task = taken[0].chain[-1] if task_id is None else task_id
        own_task = f"{CALLS_TASK_PREFIX}{task}:{taken[0].record['run_id'][-12:]}"
        value = self._stored_form(str(config["configurable"]["thread_id"]), taken)
        yield from below.flow("put_writes", config, [(CALLS_CHANNEL, value)], own_task, task_path)

    def _take(
        self, thread: str, task_id: str | None, graph_ns: str = "", step: int = 0
    ) -> list[_Call]:
        """The calls of `task_id` (and its subgraphs); with none, the finished calls of the
        graph at `graph_ns` up to `step`."""
        with self._lock:
            out = []
            for run_id, c in list(self._calls.items()):
                if c.thread == thread and (
                    (task_id in c.chain)
                    if task_id is not None
                    else (c.done and c.graph_ns == graph_ns and _step(c) <= step)
                ):
                    out.append(c)
                    del self._calls[run_id]
        out.sort(key=lambda c: c.record["t"])
        return out

    def _note_stored(self, thread: str, writes: Sequence[tuple[str, Any]]) -> None:
        with self._lock:
            memo = self._memo(thread)
        found = [
            m
            for _, value in writes
            for m in messages_in(value)
            if m.id and id(m) not in memo.noted and not isinstance(m, RemoveMessage)
        ]
        if not found:
            return
        known = [(str(m.id), self._digest(m)) for m in found]
        variants = [
            d
            for m, k in zip(found, known, strict=True)
            if m.name is not None and k not in memo.in_log and (d := _unnamed(m))
        ]
        with self._lock:
            if len(memo.noted) > _MAX_DIGESTS:
                memo.noted.clear()
            memo.noted.update(map(id, found))
            memo.in_log.update(known)
            memo.digests.update(d for _, d in known)
            memo.digests.update(variants)

    def forget(self, thread_id: str) -> None:
        """Forget what this process knows a thread stored (a lifecycle call changed it)."""
        with self._lock:
            self._memos.pop(thread_id, None)


def _same_prefix(sent: list[BaseMessage], before: list[BaseMessage]) -> int:
    """How many leading messages of `sent` equal `before`'s; 0 below two (no slice pays)."""
    n = 0
    for a, b in zip(sent, before, strict=False):
        if a is not b and a != b:
            break
        n += 1
    return n if n >= 2 else 0
