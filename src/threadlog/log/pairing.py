"""Calls without a result, defined once: which calls of a log are open, where a result
goes, and the result that answers an abandoned call.

Contract:

* **Open.** A call (`calls_of`) is answered by a later `ToolMessage` with its id as
  `tool_call_id`; every other call is open. `open_in(messages)` lists them in log order;
  `open_calls(messages)` is `{call id: its request}`.
* **A call without an id** is open and can never be answered (a result pairs only by
  id): listed under `""` (`NO_ID`); every path that would answer it (`repair_open_calls`,
  the tool step, new input abandoning it) raises `ToolPairingError` (`unanswerable`)
  before anything runs or is written. The log refuses a new one and reads a stored one.
* **Placement.** A result goes right after its request and the results of that request's
  earlier calls (`result_slot`), the log's and `repair_open_calls`' rule alike.
* **Not completed.** `not_completed(call)`: `ToolMessage(NOT_COMPLETED, status="error")`
  with the deterministic id `tl-repair-<blake2b(call id)>`, for a call whose tool never
  ran or did not finish.
* **Outcome unknown.** `outcome_unknown(call)`: the result of a call whose tool *started*
  and never reported back (`checkpoint.recover`); the text tells the model not to assume
  it did not happen. Same id as `not_completed`, `status="error"`,
  `response_metadata["threadlog_error"] = "outcome_unknown"`; `repair_kind` tells the two
  apart. `Recovered` carries which calls started, next to the stored results.
* **Incremental.** `OpenCalls` answers `open_calls` for a log that grows at its end,
  resuming per key where its last scan stopped (anything else is a full scan); the answer
  is always exactly `open_calls(messages)`."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeAlias

from langchain_core.messages import AIMessage, BaseMessage, InvalidToolCall, ToolCall, ToolMessage

from threadlog.errors import ToolPairingError
from threadlog.log.edits import EDIT_KEY, audit_call_ids
from threadlog.log.messages import calls_of

if TYPE_CHECKING:
    from threadlog.log.message_log import MessageLog

__all__ = [
    "NOT_COMPLETED",
    "NO_ID",
    "OUTCOME_UNKNOWN",
    "UNKNOWN_OUTCOME_KIND",
    "AnyCall",
    "OpenCall",
    "OpenCalls",
    "Recovered",
    "Repair",
    "RepairKind",
    "call_id",
    "not_completed",
    "open_calls",
    "open_in",
    "outcome_unknown",
    "repair_kind",
    "repair_open_calls",
    "result_slot",
    "unanswerable",
]

AnyCall: TypeAlias = ToolCall | InvalidToolCall
Repair = Literal["error-result", "refuse"]

NOT_COMPLETED = "Error: call was not completed (the run stopped before its result was recorded)"

OUTCOME_UNKNOWN = (
    "Error: the outcome of this call is unknown: its tool started, but the run stopped "
    "before the tool reported back, so it may have taken effect. Do not assume it did not "
    "happen, and do not repeat it blindly: check its effect first, or ask the user."
)
UNKNOWN_OUTCOME_KIND = "outcome_unknown"  # `response_metadata["threadlog_error"]` of one
_ERROR_KEY = "threadlog_error"  # the tool node's key for an error result's kind
_REPAIR_PREFIX = "tl-repair-"

RepairKind = Literal["not_completed", "outcome_unknown"]

NO_ID = ""  # the id a call without one is listed under: never a result's `tool_call_id`


def call_id(call: Mapping[str, Any]) -> str:
    return call.get("id") or NO_ID


class OpenCall(NamedTuple):
    """One call with no result: its request, its index in `calls_of(request)`, the call."""

    request: AIMessage
    call_index: int
    call: AnyCall


_Found = tuple[AIMessage, int, AnyCall]  # an `OpenCall` while scanning (a plain tuple: cheaper)
# Calls with an id under it (a result pops it); one without under its (position, index),
# which no result's tool_call_id can equal. Insertion order is log order.
_Open = dict[str | tuple[int, int], _Found]


def _scan(
    found: _Open,
    messages: Sequence[BaseMessage],
    start: int = 0,
    where: dict[int, AIMessage] | None = None,
    used: set[str] | None = None,
) -> _Open:
    """The one loop deciding what is open: `found` advanced over `messages[start:]`."""
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, ToolMessage):
            found.pop(m.tool_call_id, None)
        elif isinstance(m, AIMessage):
            if m.tool_calls or m.invalid_tool_calls:
                for k, call in enumerate(calls_of(m)):
                    cid = call.get("id") or NO_ID  # `call_id`, inlined: the hot loop
                    found[cid or (i, k)] = (m, k, call)
                    if used is not None:
                        used.add(cid)
                if where is not None:
                    where[i] = m
            if used is not None and EDIT_KEY in m.response_metadata:
                # Ids an edit dropped stay taken: the audit record holds them.
                used |= audit_call_ids(m)
    return found


def open_in(messages: Sequence[BaseMessage]) -> list[OpenCall]:
    return [OpenCall(*f) for f in _scan({}, messages).values()]


def open_calls(messages: Sequence[BaseMessage]) -> dict[str, AIMessage]:
    return _by_id(_scan({}, messages))


def _by_id(found: _Open) -> dict[str, AIMessage]:
    return {call_id(call): m for m, _, call in found.values()}


@dataclass
class _Resumable:
    """A key's scan as `OpenCalls` keeps it."""

    count: int = 0
    last_id: str | None = None
    found: _Open = field(default_factory=dict)
    # Where each request with open calls sits: a resumed scan must notice an edit.
    where: dict[int, AIMessage] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # every call id of the log
    # Whether `used` is this scan's alone: a resumed scan takes it over instead of copying.
    owns_used: bool = True

    def advance(self, messages: Sequence[BaseMessage]) -> _Resumable:
        _scan(self.found, messages, self.count, self.where, self.used)
        self.count = len(messages)
        self.last_id = messages[-1].id if messages else None
        live = {id(m) for m, _, _ in self.found.values()}
        self.where = {i: m for i, m in self.where.items() if id(m) in live}
        return self


class OpenCalls:
    """`open_calls`, scanned incrementally per key; at most `max_threads` keys (LRU)."""

    def __init__(self, max_threads: int = 256) -> None:
        self._scans: OrderedDict[Hashable, _Resumable] = OrderedDict()
        self._max = max_threads
        self._lock = threading.Lock()

    def of(
        self, messages: Sequence[BaseMessage], key: Hashable | None = None
    ) -> dict[str, AIMessage]:
        return self.scan(messages, key)[0]

    def scan(
        self, messages: Sequence[BaseMessage], key: Hashable | None = None
    ) -> tuple[dict[str, AIMessage], set[str]]:
        """(`of(messages, key)`, every call id the log's assistant messages use.)"""
        scan = self._resume(messages, key).advance(messages)
        if key is not None:
            with self._lock:
                self._scans[key] = scan
                self._scans.move_to_end(key)
                while len(self._scans) > self._max:
                    self._scans.popitem(last=False)
        return _by_id(scan.found), scan.used

    def _resume(self, messages: Sequence[BaseMessage], key: Hashable | None) -> _Resumable:
        with self._lock:
            old = self._scans.get(key) if key is not None else None
        if (
            old is not None
            and 0 < old.count <= len(messages)
            and messages[old.count - 1].id == old.last_id
            and all(
                messages[i] is m or calls_of(messages[i]) == calls_of(m)
                for i, m in old.where.items()
            )
        ):
            with self._lock:
                used = old.used if old.owns_used else set(old.used)
                old.owns_used = False
            return _Resumable(old.count, old.last_id, dict(old.found), dict(old.where), used)
        return _Resumable()


def unanswerable(
    call: Mapping[str, Any], request: BaseMessage | None = None, index: int | None = None
) -> ToolPairingError:
    which = f"call {index}" if index is not None else "a tool call"
    return ToolPairingError(
        f"{which} ({call.get('name')!r}, args {call.get('args')!r}) has no id, so no "
        "result can answer it",
        message_id=request.id if request is not None else None,
        role="assistant",
        fix="every tool call needs an id, which providers require to pair its result; "
        "have the model's integration set one (threadlog.ModelNode re-keys a reply's "
        "empty ids before logging it)",
    )


def not_completed(call: Mapping[str, Any]) -> ToolMessage:
    return _repair(call, NOT_COMPLETED)


def outcome_unknown(call: Mapping[str, Any]) -> ToolMessage:
    return _repair(call, OUTCOME_UNKNOWN, response_metadata={_ERROR_KEY: UNKNOWN_OUTCOME_KIND})


def _repair(call: Mapping[str, Any], content: str, **fields: Any) -> ToolMessage:
    cid = call_id(call)
    return ToolMessage(
        content=content,
        tool_call_id=cid,
        name=call.get("name") or None,
        status="error",
        id=_REPAIR_PREFIX + hashlib.blake2b(cid.encode(), digest_size=10).hexdigest(),
        **fields,
    )


def repair_kind(message: BaseMessage) -> RepairKind | None:
    if not isinstance(message, ToolMessage) or not (message.id or "").startswith(_REPAIR_PREFIX):
        return None
    if message.content == NOT_COMPLETED:
        return "not_completed"
    if message.response_metadata.get(_ERROR_KEY) == UNKNOWN_OUTCOME_KIND:
        return "outcome_unknown"
    return None


class Recovered(dict[str, ToolMessage]):
    """Stored results of open calls (call id -> `ToolMessage`) and `started` calls."""

    __slots__ = ("started",)

    def __init__(
        self, results: Mapping[str, ToolMessage] | None = None, started: Iterable[str] = ()
    ) -> None:
        super().__init__(results or {})
        self.started: frozenset[str] = frozenset(started)


def result_slot(
    messages: Sequence[BaseMessage],
    request_id: str,
    index: int,
    call_at: Callable[[str], tuple[str, int] | None],
) -> int:
    """Where the result of call `index` of request `request_id` goes in `messages`;
    `call_at(call id)` is (request id, index) of a call, or None."""
    for j in range(len(messages) - 1, -1, -1):
        m = messages[j]
        if m.id == request_id:
            return j + 1
        if isinstance(m, ToolMessage):
            other = call_at(m.tool_call_id)
            if other is not None and other[0] == request_id and other[1] < index:
                return j + 1
    return len(messages)  # no such request (a checked log always has it)


def repair_open_calls(
    context: Sequence[BaseMessage],
    *,
    repair: Repair = "error-result",
    recovered: Mapping[str, ToolMessage] | None = None,
) -> tuple[list[BaseMessage], list[ToolMessage]]:
    """Answer every call of `context` that has no result: with its result in `recovered` (a
    tool that ran is never re-run), else per `repair`: `"error-result"` (`outcome_unknown`
    when its tool started, else `not_completed`) or `"refuse"` (`ToolPairingError`, as for
    a call without an id). Returns the answered context and the new results, in call order."""
    pending = open_in(context)
    if not pending:
        return list(context), []
    for msg, index, call in pending:  # first: no policy answers these
        if not call_id(call):
            raise unanswerable(call, msg, index)
    stored_results = recovered or {}
    started = recovered.started if isinstance(recovered, Recovered) else frozenset()
    known = {m.id for m in context if m.id is not None}
    new: list[ToolMessage] = []
    for msg, _, call in pending:
        cid = call_id(call)
        result = stored_results.get(cid)
        if result is None or result.id in known:
            unknown = cid in started
            if repair == "refuse":
                why = " (its tool started, so its outcome is unknown)" if unknown else ""
                raise ToolPairingError(
                    f"call {cid!r} ({call.get('name')}) has no result{why}; the model call "
                    "was refused (repair='refuse')",
                    message_id=msg.id,
                    role="assistant",
                    fix="run the tools first, or use ModelNode(repair='error-result') to "
                    "record an explicit error result for it",
                )
            result = outcome_unknown(call) if unknown else not_completed(call)
        new.append(result)
    return _placed(context, pending, new), new


def _placed(
    context: Sequence[BaseMessage], pending: list[OpenCall], results: list[ToolMessage]
) -> list[BaseMessage]:
    # Only calls of the answered requests decide a slot (`result_slot`).
    at = {
        call_id(c): (o.request.id, i)
        for o in pending
        if o.request.id is not None
        for i, c in enumerate(calls_of(o.request))
    }
    out = list(context)
    for r in results:
        where = at.get(r.tool_call_id)
        slot = result_slot(out, where[0], where[1], at.get) if where else len(out)
        out.insert(slot, r)
    return out


def check_result(
    log: MessageLog,
    msg: ToolMessage,
    pos: int,
    new_calls: Mapping[str, Any],
    answered: Mapping[str, str],
) -> None:
    cid = msg.tool_call_id

    def bad(problem: str, fix: str) -> ToolPairingError:
        return ToolPairingError(problem, message_id=msg.id, role="tool", position=pos, fix=fix)

    call = new_calls.get(cid) or log._calls.get(cid)
    dropped = log._superseded.get(cid) if call is None else None
    if dropped is not None:
        ai = log._by_id.get(dropped[0])
        now = [c.get("id") for c in calls_of(ai)] if ai is not None else []
        raise bad(
            f"tool result answers call {cid!r}, which edit {dropped[1]!r} of message "
            f"{dropped[0]!r} superseded; that message's calls are now {now}",
            "answer the edited calls' ids",
        )
    if call is None:
        raise bad(
            f"tool result answers call {cid!r}, which no earlier AIMessage made",
            "write the AIMessage with this call first, or fix tool_call_id",
        )
    done = answered.get(cid) or call.result_id
    if done is not None:
        raise bad(
            f"call {cid!r} ({call.name}) already has a result, message {done!r}",
            "each tool call gets exactly one result; a tool may not answer another call's id",
        )
