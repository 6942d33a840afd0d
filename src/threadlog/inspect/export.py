"""Exporting a thread's message history, complete, without running anything.

* `messages_at(source, thread_id, checkpoint=None, namespace="")` returns
  `(messages, checkpoint_id)`: the log at the head (as `get_state` shows it, with what a
  stopped step's finished tasks stored) or exactly at one checkpoint (full id or unique
  suffix/prefix), read-only, from a database, a checkpointer or a server URL; `namespace`
  reads a subgraph's log (local sources only).
* `whole_history(source, thread_id, checkpoint=None)` (`threadlog export`) is every
  message ever written up to that checkpoint: the head's messages, plus each message an
  earlier checkpoint held that a later one does not, put back where it stood and marked
  `response_metadata["threadlog_removed"]` (`log.removals.REMOVED_KEY`) =
  `{"event": "removed", "checkpoint_id", "step", "by": [node(s)]}` (a threadlog log's own
  mark is kept as it is). A server URL gives its head's view.
* `dumps(messages, fmt)` writes them whole: `jsonl` one `{"role": ..., <LangChain
  fields>}` a line; `langchain` `messages_to_dict`; `openai` the Chat Completions
  `messages` (`threadlog.openai_payload`). An "outcome unknown" repair carries
  `response_metadata["threadlog_error"] == "outcome_unknown"` in `jsonl` and `langchain`;
  `openai`'s text says so.
* `loads(text)` reads any of the three back into `BaseMessage`s with the same
  model-visible history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import (
    BaseMessage,
    convert_to_messages,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.checkpoint.base import BaseCheckpointSaver

from threadlog.inspect.catalog import resolve_checkpoint

__all__ = [
    "FORMATS",
    "Format",
    "dumps",
    "loads",
    "messages_at",
    "resolve_checkpoint",
    "whole_history",
]

Format = Literal["jsonl", "openai", "langchain"]
FORMATS: tuple[Format, ...] = ("jsonl", "openai", "langchain")


def dumps(messages: Sequence[BaseMessage], fmt: Format = "jsonl") -> str:
    from threadlog.log.messages import role_of
    from threadlog.providers.wire import openai_payload

    if fmt == "jsonl":
        return "".join(
            json.dumps({"role": role_of(m), **m.model_dump(mode="json")}, ensure_ascii=False) + "\n"
            for m in messages
        )
    if fmt == "langchain":
        return json.dumps(messages_to_dict(list(messages)), ensure_ascii=False, indent=1) + "\n"
    if fmt == "openai":
        return json.dumps(_openai(messages, openai_payload), ensure_ascii=False, indent=1) + "\n"
    raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


def loads(text: str) -> list[BaseMessage]:
    """Messages from any export format (detected from the text)."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        items = json.loads(stripped)
        if items and all(isinstance(i, dict) and "data" in i and "type" in i for i in items):
            return list(messages_from_dict(items))
        return list(convert_to_messages(items))  # the OpenAI `messages` list
    out: list[BaseMessage] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {n} of the export is not JSON: {exc}") from None
        if not isinstance(data, dict) or "type" not in data:
            raise ValueError(f"line {n} of the export is not a message (no 'type' field)")
        data.pop("role", None)
        out.extend(messages_from_dict([{"type": data["type"], "data": data}]))
    return out


def messages_at(
    source: Any, thread_id: str, checkpoint: str | None = None, *, namespace: str = ""
) -> tuple[list[BaseMessage], str]:
    from threadlog.inspect.readonly import is_server_url, local_saver

    if isinstance(source, str) and is_server_url(source):
        from threadlog.inspect.remote import Server, refuse_namespace, to_messages

        refuse_namespace(namespace, "state")
        with Server(source) as server:
            cid = None
            if checkpoint:
                ids = [s["checkpoint"]["checkpoint_id"] for s in server.history(thread_id)]
                cid = resolve_checkpoint(ids, checkpoint, thread_id)
            state = server.state(thread_id, cid)
            head = (state.get("checkpoint") or {}).get("checkpoint_id")
            if not head:
                raise LookupError(f"thread {thread_id!r} has no checkpoints on {source}")
            return to_messages((state.get("values") or {}).get("messages")), str(head)
    refusal = (
        "cannot export from a {}: pass a checkpointer, a database URL or path, or a "
        "LangGraph server URL"
    )
    with local_saver(source, refusal) as saver:
        return _from_saver(saver, thread_id, checkpoint, namespace)


def _from_saver(
    saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint: str | None, namespace: str
) -> tuple[list[BaseMessage], str]:
    from threadlog.inspect.catalog import checkpoint_ids
    from threadlog.inspect.namespaces import InNamespace, no_such_namespace
    from threadlog.inspect.source import quiet_stand_in, stand_in

    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    ids = checkpoint_ids(saver, thread_id, namespace) if checkpoint or namespace else []
    if namespace and not ids:
        raise no_such_namespace(saver, thread_id, namespace)
    reader: BaseCheckpointSaver[Any]
    if checkpoint:  # exactly that checkpoint's log
        conf["checkpoint_id"] = resolve_checkpoint(ids, checkpoint, thread_id)
        reader = InNamespace(saver, namespace) if namespace else saver
    else:  # the head, with what its stopped step's finished tasks stored
        head = ids[-1] if namespace else None  # a namespace's newest, read by id
        if head:
            conf["checkpoint_id"] = head
        reader = InNamespace(saver, namespace, head)
    with quiet_stand_in(True):
        snap = stand_in(reader, None).get_state({"configurable": conf})
    cid = (snap.config.get("configurable") or {}).get("checkpoint_id")
    if not cid:
        raise LookupError(f"thread {thread_id!r} has no checkpoints in this database")
    values = snap.values if isinstance(snap.values, dict) else {}
    messages = [m for m in values.get("messages") or [] if isinstance(m, BaseMessage)]
    return messages, str(cid)


def _openai(messages: Sequence[BaseMessage], payload: Any) -> list[dict[str, Any]]:
    """The OpenAI messages, a removed one's event riding as an extra `threadlog_removed` key."""
    from threadlog.log.removals import REMOVED_KEY

    if not any(REMOVED_KEY in m.response_metadata for m in messages):
        return list(payload(list(messages)))
    out: list[dict[str, Any]] = []
    for m in messages:
        for item in payload([m]):
            event = m.response_metadata.get(REMOVED_KEY)
            out.append({**item, REMOVED_KEY: event} if event else item)
    return out


def whole_history(
    source: Any, thread_id: str, checkpoint: str | None = None, *, namespace: str = ""
) -> tuple[list[BaseMessage], str]:
    from threadlog.inspect.readonly import is_server_url, local_saver

    if isinstance(source, str) and is_server_url(source):
        return messages_at(source, thread_id, checkpoint)
    with local_saver(source, "cannot export from a {}") as saver:
        return _whole(saver, thread_id, checkpoint, namespace)


def _whole(
    saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint: str | None, namespace: str
) -> tuple[list[BaseMessage], str]:
    from threadlog.inspect.namespaces import InNamespace
    from threadlog.inspect.source import quiet_stand_in, stand_in
    from threadlog.log.removals import REMOVED_KEY

    head, cid = _from_saver(saver, thread_id, checkpoint, namespace)
    reader = InNamespace(saver, namespace) if namespace else saver
    seen = {  # which nodes had run by each checkpoint (LangGraph's `versions_seen`)
        str(t.config["configurable"]["checkpoint_id"]): t.checkpoint.get("versions_seen") or {}
        for t in reader.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    }
    with quiet_stand_in(True):
        snaps = {
            str(s.config["configurable"]["checkpoint_id"]): s
            for s in stand_in(reader, None).get_state_history(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            )
        }
    chain = []  # the root → cid path (a fork's other branches are not this history)
    at: Any = snaps.get(cid)
    while at is not None:
        chain.append(at)
        parent = (at.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        at = snaps.get(str(parent)) if parent else None
    chain.reverse()
    first: dict[str, int] = {}  # id → when it was first written (history order)
    latest: dict[str, BaseMessage] = {}
    removed: dict[str, dict[str, Any]] = {}
    before: set[str] = set()
    previous = ""
    for snap in chain:
        values = snap.values if isinstance(snap.values, dict) else {}
        now = [m for m in values.get("messages") or [] if isinstance(m, BaseMessage) and m.id]
        for m in now:
            first.setdefault(str(m.id), len(first))
            latest[str(m.id)] = m
            removed.pop(str(m.id), None)
        ids = {str(m.id) for m in now}
        here = str(snap.config["configurable"]["checkpoint_id"])
        for gone in before - ids:
            removed[gone] = {
                "event": "removed",
                "checkpoint_id": here,
                "step": (snap.metadata or {}).get("step"),
                "by": _ran(seen.get(here, {}), seen.get(previous, {})),
            }
        before, previous = ids, here
    shown = {m.id for m in head}
    hidden = sorted((i for i in removed if i not in shown), key=lambda i: first[i])
    out: list[BaseMessage] = []
    for m in head:
        while hidden and first[hidden[0]] < first.get(str(m.id), len(first)):
            out.append(_marked(latest[hidden[0]], removed[hidden.pop(0)], REMOVED_KEY))
        out.append(m)
    out += [_marked(latest[i], removed[i], REMOVED_KEY) for i in hidden]
    return out, cid


def _ran(now: dict[str, Any], then: dict[str, Any]) -> list[str]:
    # The nodes whose step made the checkpoint: what they have seen changed.
    return sorted(
        node
        for node, versions in now.items()
        if versions != then.get(node) and not node.startswith("__")
    )


def _marked(m: BaseMessage, event: dict[str, Any], key: str) -> BaseMessage:
    if key in m.response_metadata:
        return m  # the log's own mark says which event hid it
    return m.model_copy(update={"response_metadata": {**m.response_metadata, key: event}})
