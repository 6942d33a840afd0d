"""`threadlog check --repair`: answer a thread's calls that have no result, by appending.

`plan_repairs` reads only: one `RepairPlan` per thread whose head has an `open_call`
problem (never a call whose next step is pending), each open call answered by
`pairing.not_completed` (same id) or by the result a stored receipt stands for, or
`refused` with why. No tool runs. `apply_repairs` re-plans at each head and appends the
results through the guarded saver under `saver.exclusive`: one `update_state(as_node=
"check")` checkpoint recording `metadata["threadlog_repair"]`; nothing stored is rewritten.
On Postgres `lock_timeout` bounds each lock wait and the update is one transaction (a
timeout raises `SourceError`, nothing written). docs/check-and-replay.md says the rest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Annotated, Any, TypedDict, cast
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from threadlog.check.database import (
    LOG_FORMAT,
    StandIns,
    check_threads,
    checkpoint_tuple,
    pending_steps,
    tuple_channels,
)
from threadlog.checkpoint.receipts import KEY_METADATA
from threadlog.checkpoint.recover import recover_results
from threadlog.log.messages import calls_of
from threadlog.log.pairing import call_id, not_completed, open_in
from threadlog.providers.profiles import Profile

__all__ = ["AUTHOR", "RepairPlan", "RepairResult", "apply_repairs", "plan_for", "plan_repairs"]

AUTHOR = "check"
EVENT_KEY = "threadlog_repair"


@dataclass(slots=True)
class RepairPlan:
    thread_id: str
    checkpoint_id: str
    channel: str
    format: str
    results: list[ToolMessage] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # open calls appending cannot answer: why

    def row(self) -> dict[str, Any]:
        """The plan as `check --repair --dry-run --json` prints it."""
        calls = [{"tool_call_id": r.tool_call_id, "id": r.id, "name": r.name} for r in self.results]
        return {**asdict(replace(self, results=[])), "results": calls}

    def lines(self) -> list[str]:
        out = [
            f"thread {self.thread_id}: append {len(self.results)} result(s) to "
            f"{self.channel} ({self.format}) after checkpoint {self.checkpoint_id}"
        ]
        out += [
            f"  call {r.tool_call_id!r} ({r.name}): {r.content} [id {r.id}]" for r in self.results
        ]
        out += [f"  not repaired: {why}" for why in self.refused]
        return out


@dataclass(slots=True)
class RepairResult:
    thread_id: str
    channel: str = ""  # the message key appended to
    written: list[str] = field(default_factory=list)  # result message ids appended
    checkpoint_id: str | None = None  # the new head
    refused: str | None = None

    def line(self) -> str:
        if self.refused:
            return f"thread {self.thread_id}: not repaired: {self.refused}"
        return (
            f"thread {self.thread_id}: appended {len(self.written)} result(s) to "
            f"{self.channel}, new checkpoint {self.checkpoint_id}"
        )


def plan_for(
    thread_id: str,
    checkpoint_id: str,
    channel: str,
    fmt: str,
    messages: Sequence[BaseMessage],
    receipts: Mapping[str, ToolMessage] | None = None,
    *,
    in_progress: bool = False,
) -> RepairPlan | None:
    """The repair of one message channel, or None when it has no open call (module doc)."""
    index = {m.id: i for i, m in enumerate(messages) if m.id is not None}
    pending = [
        (request, result, call)
        for request, result, call in open_in(messages)
        if not (in_progress and _at_tail(messages, index.get(request.id or "", -1), request))
    ]
    if not pending:
        return None
    plan = RepairPlan(thread_id, checkpoint_id, channel, fmt)
    for request, _, call in pending:
        cid = call_id(call)
        where = index.get(request.id or "", -1)
        if not cid:
            plan.refused.append(
                f"a call of message {request.id!r} ({call.get('name')!r}) has no id, so no "
                "result can answer it"
            )
        elif fmt != LOG_FORMAT and not _at_tail(messages, where, request):
            plan.refused.append(
                f"call {cid!r} of message {request.id!r} at position {where} is followed by "
                "other messages: add_messages appends at the end, where its result would "
                "not answer it"
            )
        else:
            plan.results.append((receipts or {}).get(cid) or not_completed(call))
    return plan


def receipts_at(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    checkpoint_id: str,
    messages: Sequence[BaseMessage],
) -> dict[str, ToolMessage]:
    """Call id → the result a stored receipt stands for, for open calls whose tool returned."""
    wanted = {call_id(c): request for request, _, c in open_in(messages) if call_id(c)}
    if not wanted:
        return {}
    conf = {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
    config: RunnableConfig = {"configurable": conf}
    requests = {m.id for m in wanted.values() if m.id is not None}
    found = recover_results(saver, config, list(wanted), requests=requests)
    return {cid: m for cid, m in found.items() if KEY_METADATA in m.response_metadata}


def _at_tail(messages: Sequence[BaseMessage], where: int, request: AIMessage) -> bool:
    # An appended result is in place only when nothing but the request's own results follow.
    ids = {call_id(c) for c in calls_of(request)}
    return where >= 0 and all(
        isinstance(m, ToolMessage) and m.tool_call_id in ids for m in messages[where + 1 :]
    )


def plan_repairs(
    saver: BaseCheckpointSaver[Any],
    *,
    profiles: Sequence[Profile],
    threads: Sequence[str] | None = None,
) -> Iterator[RepairPlan]:
    """A plan per thread head with an open call (module doc); reads only."""
    readers = StandIns(saver)
    for result in check_threads(saver, profiles=profiles, threads=threads):
        if any(p.kind == "open_call" for p in result.problems):
            tup = checkpoint_tuple(saver, result.thread_id, result.problems[0].checkpoint_id)
            yield from _plans_at(saver, readers, tup)


def _plans_at(
    saver: BaseCheckpointSaver[Any], readers: StandIns, tup: CheckpointTuple
) -> Iterator[RepairPlan]:
    from threadlog.inspect.source import quiet_stand_in

    conf = tup.config["configurable"]
    thread_id, checkpoint = str(conf["thread_id"]), str(conf["checkpoint_id"])
    in_progress = bool(pending_steps(tup))
    with quiet_stand_in(True):
        channels = tuple_channels(saver, readers, tup)
    for channel, fmt, messages in channels:
        receipts = receipts_at(saver, thread_id, checkpoint, messages)
        plan = plan_for(
            thread_id, checkpoint, channel, fmt, messages, receipts, in_progress=in_progress
        )
        if plan is not None:
            yield plan


class _Appending(BaseCheckpointSaver[Any]):
    """The guarded saver under the repair's stand-in graph: a put keeps the stored values of
    the channels the stand-in does not own, and records the repair event."""

    def __init__(
        self, inner: BaseCheckpointSaver[Any], kept: Mapping[str, Any], event: dict[str, Any]
    ) -> None:
        super().__init__(serde=inner.serde)
        self.inner, self.kept, self.event = inner, kept, event

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        values = dict(checkpoint["channel_values"])
        for key, value in self.kept.items():
            if key not in new_versions:
                values.setdefault(key, value)
        stored: Checkpoint = {**checkpoint, "channel_values": values}
        meta: Any = {**metadata, EVENT_KEY: self.event}
        return self.inner.put(config, stored, meta, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.inner.put_writes(config, writes, task_id, task_path)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)


def _writer(saver: BaseCheckpointSaver[Any], plan: RepairPlan, kept: Mapping[str, Any]) -> Any:
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages

    from threadlog.channel import Messages

    kind: Any = Messages if plan.format == LOG_FORMAT else Annotated[list, add_messages]
    schema: Any = TypedDict("RepairState", {plan.channel: kind})  # type: ignore[misc]
    event = {
        "author": AUTHOR,
        "kind": "not_completed",
        "channel": plan.channel,
        "calls": [r.tool_call_id for r in plan.results],
        "results": [r.id for r in plan.results],
    }
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(schema)
    builder.add_node(AUTHOR, lambda state: None)
    builder.add_edge(START, AUTHOR)
    return builder.compile(checkpointer=_Appending(saver, kept, event))


def apply_repairs(
    url: str,
    plans: Sequence[RepairPlan],
    allowed_types: Sequence[tuple[str, str]] = (),
    lock_timeout: float | None = None,
) -> list[RepairResult]:
    """Write `plans` through the guarded saver, one thread at a time (module doc)."""
    from threadlog.checkpoint.guard import GuardedSaver
    from threadlog.checkpoint.saver import checkpointer
    from threadlog.errors import ConcurrentRunError

    out: list[RepairResult] = []
    try:
        with checkpointer(_bounded(url, lock_timeout), allowed_types=allowed_types) as opened:
            saver = cast(GuardedSaver, opened)  # threadlog.checkpointer's saver (its contract)
            reader = StandIns(saver)
            for plan in plans:
                result = RepairResult(plan.thread_id, channel=plan.channel)
                out.append(result)
                try:
                    with saver.exclusive(plan.thread_id):
                        _apply_one(saver, reader, plan, result)
                except ConcurrentRunError:
                    result.refused = (
                        "a run holds this thread (its multitask strategy); nothing was "
                        "written — run the repair again when the run ends"
                    )
    except Exception as exc:
        if lock_timeout is None or not _lock_timed_out(exc):
            raise
        raise _lock_error(exc, lock_timeout, out) from None
    return out


@contextmanager
def _one_transaction(saver: Any) -> Iterator[None]:
    # update_state's writes and new checkpoint in one transaction: a lock timeout leaves neither.
    from threadlog.checkpoint.backends.base import unwrap

    conn: Any = getattr(unwrap(saver), "conn", None)
    if type(conn).__module__.split(".")[0] != "psycopg" or not hasattr(conn, "transaction"):
        yield  # SQLite, or a pool: as before
        return
    with conn.transaction():
        yield


def _bounded(url: str, seconds: float | None) -> str:
    # Every connection the checkpointer opens takes the URL: libpq's `options` sets each.
    if seconds is None or urlsplit(url).scheme.lower() not in ("postgresql", "postgres"):
        return url
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    setting = f"-c lock_timeout={max(int(seconds * 1000), 1)}"
    given = " ".join(v for k, v in query if k == "options")
    query = [(k, v) for k, v in query if k != "options"]
    query.append(("options", f"{given} {setting}".strip()))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def _lock_timed_out(exc: BaseException) -> bool:
    try:
        from psycopg.errors import LockNotAvailable
    except ImportError:
        return False
    seen: BaseException | None = exc
    while seen is not None:  # the guard may wrap the driver's error
        if isinstance(seen, LockNotAvailable):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _lock_error(exc: BaseException, seconds: float, out: Sequence[RepairResult]) -> Exception:
    from threadlog.inspect.readonly import SourceError

    done = [r for r in out if r.refused is None and r.written]
    where = f" at thread {out[-1].thread_id}" if out else ""
    before = f"; {len(done)} thread(s) before it were repaired" if done else ""
    return SourceError(
        f"another connection holds a lock on the checkpoint tables; the repair gave up"
        f"{where} after --lock-timeout {seconds:g}s ({' '.join(str(exc).split())}); "
        f"nothing was written to it{before}"
    )


def _apply_one(
    saver: BaseCheckpointSaver[Any], reader: StandIns, plan: RepairPlan, result: RepairResult
) -> None:
    from threadlog.inspect.source import quiet_stand_in

    tup = saver.get_tuple({"configurable": {"thread_id": plan.thread_id, "checkpoint_ns": ""}})
    if tup is None:
        result.refused = "the thread has no checkpoint any more"
        return
    head = tup.config["configurable"]["checkpoint_id"]
    fresh = next((p for p in _plans_at(saver, reader, tup) if p.channel == plan.channel), None)
    if fresh is None or not fresh.results:
        result.refused = "nothing to append at the thread's head (answered meanwhile?)"
        return
    graph = _writer(saver, fresh, tup.checkpoint.get("channel_values") or {})
    config: RunnableConfig = {
        "configurable": {"thread_id": plan.thread_id, "checkpoint_ns": "", "checkpoint_id": head}
    }
    # The stand-in lacks the thread's real nodes.
    with quiet_stand_in(True), _one_transaction(saver):
        new = graph.update_state(config, {fresh.channel: list(fresh.results)}, as_node=AUTHOR)
    result.written = [r.id or "" for r in fresh.results]
    result.checkpoint_id = new["configurable"]["checkpoint_id"]
