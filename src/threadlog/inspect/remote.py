"""Reading threads served by a LangGraph server (`langgraph dev`, LangGraph Platform).

`Server(url)` is a context manager over `langgraph_sdk.get_sync_client`; entering checks
`GET /info` (else `SourceError`, one line). Stored bytes are unknown (None).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict

from threadlog.inspect.catalog import Head
from threadlog.inspect.readonly import SourceError, describe, one_line
from threadlog.inspect.records import CheckpointRecord, TaskError, linked, pause, pause_of
from threadlog.inspect.summary import ThreadSummary, summarize

__all__ = ["Server", "refuse_namespace", "to_messages"]

_PAGE = 100


def refuse_namespace(namespace: str, read: str) -> None:
    """A server's API reaches the root namespace only: a `namespace` is refused."""
    if namespace:
        raise ValueError(
            "namespace= reads a local checkpointer's subgraph namespaces; a LangGraph "
            f"server's {read} has the root namespace only"
        )


def to_messages(raw: Any) -> list[BaseMessage]:
    """LangChain message dicts (as a server returns them) → `BaseMessage`s."""
    out: list[BaseMessage] = []
    for m in raw or []:
        if isinstance(m, BaseMessage):
            out.append(m)
        elif isinstance(m, Mapping) and m.get("type"):
            out.extend(messages_from_dict([{"type": m["type"], "data": dict(m)}]))
    return out


def _values(raw: Any) -> dict[str, Any]:
    values = dict(raw) if isinstance(raw, Mapping) else {}
    if "messages" in values:
        values["messages"] = to_messages(values["messages"])
    return values


class Server:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.client: Any = None

    def __enter__(self) -> Server:
        import httpx
        from langgraph_sdk import get_sync_client

        try:
            info = httpx.get(f"{self.url}/info", timeout=10)
        except httpx.HTTPError as exc:
            raise SourceError(f"cannot reach {describe(self.url)}: {one_line(exc)}") from None
        body: Any = None
        with contextlib.suppress(ValueError):
            body = info.json()
        if info.status_code != 200 or not isinstance(body, dict) or "flags" not in body:
            raise SourceError(
                f"{describe(self.url)} is not a LangGraph server (GET /info answered "
                f"HTTP {info.status_code}); give the URL `langgraph dev` prints, e.g. "
                "http://127.0.0.1:2024"
            )
        self.client = get_sync_client(url=self.url, api_key=None, timeout=30)
        return self

    def __exit__(self, *exc_info: object) -> None:  # an exception propagates as it is
        if self.client is not None:
            self.client.http.client.close()

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from langgraph_sdk.errors import LangGraphError, NotFoundError

        try:
            return fn(*args, **kwargs)
        except NotFoundError:
            raise LookupError(f"{describe(self.url)} has no {what}") from None
        except LangGraphError as exc:
            raise SourceError(f"{describe(self.url)}: reading {what}: {one_line(exc)}") from None

    def history(self, thread_id: str, last: int | None = None) -> list[dict[str, Any]]:
        return [state for page in self.history_pages(thread_id, last) for state in page]

    def history_pages(
        self, thread_id: str, last: int | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """The server's state history of a thread, newest first, a page at a time."""
        before: Any = None
        seen = 0
        while last is None or seen < last:
            page = _PAGE if last is None else min(_PAGE, last - seen)
            batch = self._call(
                f"thread {thread_id!r}",
                self.client.threads.get_history,
                thread_id,
                limit=page,
                before=before,
            )
            if batch:
                yield batch
            seen += len(batch)
            if len(batch) < page:
                return
            before = _before(batch[-1])

    def thread_ids(self) -> Iterator[str]:
        for t in self._search("created_at", select=["thread_id"]):
            yield str(t["thread_id"])

    def _search(
        self, sort_by: str, page: Callable[[], int] = lambda: _PAGE, **fields: Any
    ) -> Iterator[Mapping[str, Any]]:
        """The server's threads, newest by `sort_by` first, `page()` (read when due) at a time."""
        offset = 0
        while True:
            size = page()
            batch = self._call(
                "threads",
                self.client.threads.search,
                limit=size,
                offset=offset,
                sort_by=sort_by,
                sort_order="desc",
                **fields,
            )
            yield from batch
            if len(batch) < size:
                return
            offset += len(batch)

    def records(self, thread_id: str, last: int | None = None) -> list[CheckpointRecord]:
        states = self.history(thread_id, last)
        if not states:
            raise LookupError(f"thread {thread_id!r} has no checkpoints on {describe(self.url)}")
        by_id = {s["checkpoint"]["checkpoint_id"]: s for s in states}
        records: list[CheckpointRecord] = []
        for s in states:
            cid = s["checkpoint"]["checkpoint_id"]
            parent = (s.get("parent_checkpoint") or {}).get("checkpoint_id")
            meta = s.get("metadata") or {}
            tasks = s.get("tasks") or []
            ptasks = (by_id.get(parent) or {}).get("tasks") or [] if parent else []
            records.append(
                CheckpointRecord(
                    checkpoint_id=cid,
                    parent_id=parent,
                    step=int(meta.get("step", -1)),
                    source=str(meta.get("source", "?")),
                    created_at=str(s.get("created_at") or ""),
                    config={"configurable": dict(s["checkpoint"])},
                    values=_values(s.get("values")),
                    writers=tuple(dict.fromkeys(str(t.get("name")) for t in ptasks)),
                    next=tuple(s.get("next") or ()),
                    pending_channels=(),
                    errors=tuple(
                        TaskError(str(t.get("name")), str(t["error"]))
                        for t in tasks
                        if t.get("error")
                    ),
                    interrupts=tuple(
                        str(i.get("value")) for t in tasks for i in (t.get("interrupts") or [])
                    ),
                    interrupted=tuple(str(t.get("name")) for t in tasks if t.get("interrupts")),
                )
            )
        linked(records)
        for r in records:
            r.paused = pause_of(r)  # the server's graph settings are not known here
        return records

    def state(self, thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        kwargs = {"checkpoint_id": checkpoint_id} if checkpoint_id else {}
        get = self.client.threads.get_state
        return dict(self._call(f"thread {thread_id!r}", get, thread_id, **kwargs))

    def threads(self, *, search: str | None = None, limit: int = 20) -> list[ThreadSummary]:
        needle = (search or "").lower()
        out: list[ThreadSummary] = []
        pages = self._search(
            "updated_at",
            lambda: _PAGE if (needle or limit <= 0) else min(_PAGE, limit - len(out)),
        )
        for t in pages:
            s = self._summary(t)
            text = " ".join(str(m.content) for m in to_messages(_messages_of(t)))
            if needle and needle not in (s.thread_id + " " + text).lower():
                continue
            out.append(s)
            if limit > 0 and len(out) >= limit:
                return out
        return out

    def _summary(self, t: Mapping[str, Any]) -> ThreadSummary:
        messages = to_messages(_messages_of(t))
        status = t.get("status")
        state = self.state(str(t["thread_id"])) if status in ("error", "interrupted") else {}
        tasks = state.get("tasks") or []
        errors: list[str] = []
        if status == "error":
            errors = [str(x["error"]) for x in tasks if x.get("error")]
            errors = errors or ["the last run failed (thread status 'error')"]
        paused = None
        if status == "interrupted":  # interrupt_before/after, or interrupt()
            paused = pause(
                next_nodes=tuple(state.get("next") or ()),
                interrupted_in=tuple(str(x.get("name")) for x in tasks if x.get("interrupts")),
                failed=False,
                source=str((state.get("metadata") or {}).get("source", "")),
            )
        head = Head(str(t["thread_id"]), "", "", 0)
        s = summarize(head, messages, errors, str(t.get("updated_at") or ""))
        return dataclasses.replace(s, created_at=str(t.get("created_at") or ""), paused=paused)


def _before(state: Mapping[str, Any]) -> dict[str, Any]:
    # A config, not the bare checkpoint dict the SDK's type suggests (the server fails).
    return {"configurable": dict(state["checkpoint"])}


def _messages_of(t: Mapping[str, Any]) -> Any:
    values = t.get("values")
    return values.get("messages") if isinstance(values, Mapping) else None
