"""`Edit`: a reviewer's change to an AIMessage's calls, recorded as an event (the log
refuses a re-sent id with new content; an `Edit` says the same explicitly, append-only).

Contract:

* **Written like a message.** `Edit(AIMessage(id=<the original's id>, tool_calls=[...]))`
  through `graph.update_state` or a node's return value (the approval flow's
  `Command(resume={"action": "edit", ...})` writes one too). The value is a plain dict
  (`type == "threadlog.edit"`) every serializer round-trips, stored as its own write.
* **The view** holds the *effective* message — the edited content and calls, under the
  original's id and position, once. Its `response_metadata["threadlog_edit"]` is the audit
  record: the original's content and calls, then every edit in order (`original_of`,
  `edits_of`).
* **Pairing follows the edit.** A result for a call an edit dropped or renamed is refused
  (`ToolPairingError`); such an id stays taken (`audit_call_ids`).
* **Rules** (`EditError`, nothing stored): the target is an AIMessage in the log with a
  call still waiting for its result; a call with a result may not change or disappear.
  An edit equal to the current message is a replay; the last edit wins.
* **Concurrent edits.** An edit may carry `base`, the message as its writer saw it; when
  another edit landed since, only what this edit changed relative to `base` is applied
  (content, and calls by id).
* **Before edits were events** an approval edit lived only on the call's result
  (`APPROVAL_KEY`); `apply_edits` is what the model sees of it."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.errors import ConflictingIdError, EditError, MessageLogError, ToolPairingError
from threadlog.log.call_ids import LoggedCall
from threadlog.log.messages import calls_of, coerce_message, digest, role_of

if TYPE_CHECKING:
    from threadlog.log.message_log import MessageLog

__all__ = [
    "APPROVAL_KEY",
    "EDIT_KEY",
    "EDIT_TYPE",
    "Edit",
    "EditEvent",
    "apply_edits",
    "audit_call_ids",
    "cache_key",
    "edits_of",
    "is_edit",
    "original_of",
]

EDIT_TYPE = "threadlog.edit"  # the `type` of an edit's stored dict
EDIT_KEY = "threadlog_edit"  # `response_metadata` key of an edited message's audit record
APPROVAL_KEY = "threadlog_approval"  # ... of a result whose call a reviewer decided on

_FIELDS = ("content", "tool_calls", "invalid_tool_calls")
UPDATE_STATE_SOURCE = "update_state"  # a same-id message with new content from update_state
REPLACE_SOURCE = "replace"  # RemoveMessage(id=X) then a message under id X in one write
REVISION_SOURCES = frozenset({UPDATE_STATE_SOURCE, REPLACE_SOURCE})


def _keys(message: BaseMessage) -> tuple[str, ...]:
    # The fields an edit of this message sets: a request's calls too, else its content.
    return _FIELDS if isinstance(message, AIMessage) else ("content",)


class Edit(dict[str, Any]):
    """An edit of the AIMessage whose id `message` carries (module doc).

    message: the edited message: its `content`, `tool_calls` and `invalid_tool_calls`
        replace the original's; other fields stay the original's.
    by, reason: who edited and why, kept in the audit record.
    base: the message as the editor saw it (optional): see "Concurrent edits"."""

    def __init__(
        self,
        message: AIMessage | Mapping[str, Any],
        *,
        by: str | None = None,
        reason: str | None = None,
        base: BaseMessage | None = None,
        source: str = "edit",
        at: str | None = None,
    ) -> None:
        msg = _edited_message(message, None)
        when = at or datetime.now(UTC).isoformat()
        seed = f"{msg.id}\x00{digest(msg)}\x00{when}"
        super().__init__(
            type=EDIT_TYPE,
            id=_edit_id(seed),
            message=msg,
            by=by,
            reason=reason,
            at=when,
            source=source,
            base=fields_of(base) if isinstance(base, AIMessage) else None,
        )


def is_edit(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == EDIT_TYPE


@dataclass(frozen=True, slots=True)
class EditEvent:
    id: str
    message: BaseMessage
    by: str | None
    reason: str | None
    at: str | None
    source: str
    base: dict[str, Any] | None

    @property
    def target(self) -> str:
        assert self.message.id is not None
        return self.message.id

    @classmethod
    def parse(cls, raw: Mapping[str, Any], position: int | None) -> EditEvent:
        msg = _edited_message(
            raw.get("message"), position, any_role=raw.get("source") in REVISION_SOURCES
        )
        eid = raw.get("id")
        if not isinstance(eid, str) or not eid:
            # Written by hand: an id from its content, the same on a replay.
            blob = json.dumps([msg.id, digest(msg), raw.get("at")], sort_keys=True, default=repr)
            eid = _edit_id(blob)
        base = raw.get("base")
        return cls(
            id=eid,
            message=msg,
            by=_opt_str(raw.get("by")),
            reason=_opt_str(raw.get("reason")),
            at=_opt_str(raw.get("at")),
            source=str(raw.get("source") or "edit"),
            base=dict(base) if isinstance(base, Mapping) else None,
        )


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _edited_message(value: Any, position: int | None, any_role: bool = False) -> BaseMessage:
    if value is None:
        raise EditError(
            "an edit needs the edited message",
            position=position,
            fix="write threadlog.Edit(AIMessage(id=<the original's id>, tool_calls=[...]))",
        )
    try:
        msg = coerce_message(value, position=position)
    except MessageLogError as exc:
        raise EditError(
            f"the edited message is not a message the log can store: {exc.problem}",
            message_id=exc.message_id,
            role=exc.role,
            position=position,
            fix=exc.fix,
        ) from exc
    role = role_of(msg)
    if not isinstance(msg, AIMessage) and not any_role:
        raise EditError(
            f"only an AIMessage can be edited, got a {role} message",
            message_id=msg.id,
            role=role,
            position=position,
            fix="to add a user or tool message, append it; an Edit changes an "
            "assistant message's calls",
        )
    if not msg.id:
        raise EditError(
            f"the edited {role} message has no id: an edit names the message it supersedes "
            "by that message's id",
            role=role,
            position=position,
            fix="copy the original (`original.model_copy(update={'tool_calls': [...]})`) "
            "so it keeps its id",
        )
    return msg


def fields_of(message: BaseMessage) -> dict[str, Any]:
    if not isinstance(message, AIMessage):
        return {"content": message.content}
    return {
        "content": message.content,
        "tool_calls": [{**c, "type": "tool_call"} for c in message.tool_calls],
        "invalid_tool_calls": [
            {**c, "type": "invalid_tool_call"} for c in message.invalid_tool_calls
        ],
    }


def snapshot_fields(message: AIMessage) -> dict[str, Any]:
    """`fields_of(message)` as an independent copy: what a request read when logged."""
    return _plain_copy(fields_of(message))  # type: ignore[no-any-return]


_ATOMS = (str, int, float, bool, type(None))


def _plain_copy(value: Any) -> Any:
    # `copy.deepcopy` for JSON-like data at a fraction of its cost (on every logged request).
    kind = type(value)
    if kind is dict:
        return {k: _plain_copy(v) for k, v in value.items()}
    if kind is list:
        return [_plain_copy(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def resent_edit(message: AIMessage, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The edit event standing for `message` re-sent with `fields` (id stable on a replay)."""
    calls = [call_key(c) for k in ("tool_calls", "invalid_tool_calls") for c in fields[k]]
    edited = message.model_copy(update=copy.deepcopy(dict(fields)))
    reason = "the AIMessage was changed in place and written again under its id"
    return _log_made(edited, reason, "resent", [message.id, fields["content"], calls])


def _edit_id(seed: str) -> str:
    return "tl-edit-" + hashlib.blake2b(seed.encode(), digest_size=12).hexdigest()


def _log_made(message: BaseMessage, reason: str, source: str, key: list[Any]) -> dict[str, Any]:
    return {
        "type": EDIT_TYPE,
        "id": _edit_id(json.dumps(key, sort_keys=True, default=repr)),
        "message": message,
        "by": None,
        "reason": reason,
        "at": None,
        "source": source,
        "base": None,
    }


UPDATE_TYPE = "threadlog.update"


def is_update(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == UPDATE_TYPE


def update_item(message: Any) -> dict[str, Any]:
    return {"type": UPDATE_TYPE, "message": message}


def update_edit(
    message: BaseMessage, earlier: int, source: str = UPDATE_STATE_SOURCE
) -> dict[str, Any]:
    reason = (
        "update_state wrote the message again with new content"
        if source == UPDATE_STATE_SOURCE
        else "RemoveMessage, then the message under the same id, in one write"
    )
    return _log_made(message, reason, source, [message.id, digest(message), earlier, source])


def call_key(call: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        call.get("id"),
        call.get("name"),
        json.dumps(call.get("args"), sort_keys=True, default=repr),
    )


def same_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a["content"] == b["content"] and all(
        [call_key(c) for c in a.get(k) or ()] == [call_key(c) for c in b.get(k) or ()]
        for k in ("tool_calls", "invalid_tool_calls")
    )


def merge(
    current: Mapping[str, Any], base: Mapping[str, Any] | None, new: Mapping[str, Any]
) -> dict[str, Any]:
    """The fields after an edit: `new`, or only what it changed since `base`, on `current`."""
    if base is None or same_fields(base, current) or "tool_calls" not in current:
        return {k: new[k] for k in current}
    out: dict[str, Any] = {
        "content": new["content"] if new["content"] != base["content"] else current["content"]
    }
    for key in ("tool_calls", "invalid_tool_calls"):
        was = {c.get("id"): c for c in base.get(key) or ()}
        now = {c.get("id"): c for c in new[key]}
        calls: list[dict[str, Any]] = []
        for c in current[key]:
            cid = c.get("id")
            if cid in was and cid not in now:
                continue  # this edit dropped it
            changed = cid in now and cid in was and call_key(now[cid]) != call_key(was[cid])
            calls.append(dict(now[cid]) if changed else dict(c))
        have = {c.get("id") for c in calls}
        calls += [dict(c) for c in new[key] if c.get("id") not in set(was) | have]
        out[key] = calls
    return out


def record_of(message: BaseMessage) -> Mapping[str, Any] | None:
    rec = message.response_metadata.get(EDIT_KEY) if message.response_metadata else None
    return rec if isinstance(rec, Mapping) and rec.get("edits") else None


def applied(current: BaseMessage, event: EditEvent, fields: Mapping[str, Any]) -> BaseMessage:
    rec = record_of(current)
    original = rec["original"] if rec else fields_of(current)
    entry = {
        "id": event.id,
        "at": event.at,
        "by": event.by,
        "reason": event.reason,
        "source": event.source,
        **{k: fields[k] for k in _keys(current)},
    }
    edits = [*(rec["edits"] if rec else ()), entry]
    meta = {**current.response_metadata, EDIT_KEY: {"original": original, "edits": edits}}
    return current.model_copy(
        update={**{k: fields[k] for k in _keys(current)}, "response_metadata": meta}
    )


def versions(message: BaseMessage) -> list[BaseMessage]:
    """Every version of an edited message, the original first, `message` last."""
    rec = record_of(message)
    if rec is None:
        return [message]
    plain = {k: v for k, v in message.response_metadata.items() if k != EDIT_KEY}
    edits: Sequence[Mapping[str, Any]] = rec["edits"]
    keys = _keys(message)
    out = [
        message.model_copy(update={**_fields(rec["original"], keys), "response_metadata": plain})
    ]
    for i, e in enumerate(edits[:-1]):
        meta = {**plain, EDIT_KEY: {"original": rec["original"], "edits": list(edits[: i + 1])}}
        out.append(message.model_copy(update={**_fields(e, keys), "response_metadata": meta}))
    out.append(message)
    return out


def _fields(rec: Mapping[str, Any], keys: tuple[str, ...] = _FIELDS) -> dict[str, Any]:
    return {k: rec.get(k) if k == "content" else list(rec.get(k) or ()) for k in keys}


def audit_call_ids(message: BaseMessage) -> set[str]:
    """The call ids an edited message's audit record holds; empty if never edited."""
    rec = record_of(message)
    if rec is None:
        return set()
    out: set[str] = set()
    for entry in [rec["original"], *rec["edits"]]:
        for key in ("tool_calls", "invalid_tool_calls"):
            out.update(str(c.get("id") or "") for c in entry.get(key) or ())
    return out


def original_of(message: BaseMessage) -> BaseMessage:
    """The message as first written, before any edit (`message` itself if never edited)."""
    return versions(message)[0]


def edits_of(message: BaseMessage) -> list[dict[str, Any]]:
    """The edits of `message`, oldest first (empty if never edited)."""
    rec = record_of(message)
    return [dict(e) for e in rec["edits"]] if rec else []


def cache_key(message: BaseMessage) -> str | None:
    """The key of `message` for per-id caches: its id, plus its last edit's id once edited."""
    rec = record_of(message)
    if rec is None or message.id is None:
        return message.id
    return f"{message.id}\x00{rec['edits'][-1].get('id')}"


def apply_edits(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    """What the model sees of a legacy approval edit (`APPROVAL_KEY`); `messages` if none."""
    edits: dict[str, dict[str, Any]] = {}
    for m in messages:
        if isinstance(m, ToolMessage):
            record = m.response_metadata.get(APPROVAL_KEY)
            if isinstance(record, dict) and record.get("action") == "edit":
                edits[m.tool_call_id] = dict(record.get("args") or {})
    if not edits:
        return messages
    out: list[BaseMessage] = []
    for m in messages:
        if (
            isinstance(m, AIMessage)
            and record_of(m) is None
            and any(c.get("id") in edits for c in m.tool_calls)
        ):
            calls = [
                {**c, "args": edits[c["id"] or ""]} if c.get("id") in edits else c
                for c in m.tool_calls
            ]
            m = m.model_copy(update={"tool_calls": calls})
        out.append(m)
    return out


def item_id(item: Any) -> Any:
    if isinstance(item, Mapping):
        if item.get("type") == UPDATE_TYPE:
            return item_id(item.get("message"))
        return item.get("id")
    return getattr(item, "id", None)


def restore_edits(log: MessageLog, message: BaseMessage) -> list[str]:
    """Index the edits an edited message's audit record holds; their ids in order."""
    mid = message.id
    assert mid is not None
    vs = versions(message)
    rec = record_of(message)
    assert rec is not None
    now = {c.get("id") for c in calls_of(message)}
    ids: list[str] = []
    for k, entry in enumerate(rec["edits"]):
        eid = str(entry.get("id"))
        log._edits[eid] = (mid, vs[k], vs[k + 1])
        after = {c.get("id") for c in calls_of(vs[k + 1])}
        for c in calls_of(vs[k]):
            cid = c.get("id")
            if cid and cid not in after and cid not in now:
                log._superseded[cid] = (mid, eid)
        ids.append(eid)
    return ids


def resent_as_edits(
    log: MessageLog, writes: Sequence[Sequence[Any]], *, stored: bool, dry_run: bool
) -> tuple[list[list[Any]], dict[str, AIMessage]] | None:
    """`writes` with each AIMessage changed in place and re-sent replaced by its edit event,
    and the requests as logged (by id); None when none. Live, a change shows against the
    request's `_baseline`; from storage, a different AIMessage under a logged id is one."""
    out: list[list[Any]] | None = None
    restored: dict[str, AIMessage] = {}
    for w, write in enumerate(writes):
        for k, raw in enumerate(write):
            if not isinstance(raw, AIMessage) or raw.id is None:
                continue
            existing = log._by_id.get(raw.id)
            if not isinstance(existing, AIMessage):
                continue
            fields = changed_in_place(log, existing, raw, stored=stored)
            if fields is None:
                continue
            mid = raw.id
            base = log._baseline.get(mid)
            if base is not None and not same_fields(fields_of(existing), base):
                # The object is left alone: the stored write must hold the change.
                existing = existing.model_copy(update=copy.deepcopy(base))
                restored[mid] = existing
            if out is None:
                out = [list(x) for x in writes]
            out[w][k] = resent_edit(existing, fields)
    return None if out is None else (out, restored)


def changed_in_place(
    log: MessageLog, existing: AIMessage, raw: AIMessage, *, stored: bool
) -> dict[str, Any] | None:
    if stored:
        if existing is raw:
            return None  # one object for identical stored records: unchanged
        if log._digest_of(existing) == digest(raw) or is_version(existing, raw):
            return None
        return snapshot_fields(raw)
    base = log._baseline.get(raw.id or "")
    if base is None:
        return None
    if same_fields(fields_of(existing), base):
        # A replay or a re-sent copy, unless the log this one was taken from took this
        # very change as an edit.
        now = fields_of(raw)
        if any(same_fields(now, f) for f in log._changed.get(raw.id or "", ())):
            return snapshot_fields(raw)
        return None
    now = snapshot_fields(raw)
    return None if same_fields(now, base) else now


def apply_edit(log: MessageLog, raw: Mapping[str, Any], position: int) -> bool:
    """Record one edit; False for a replay. Raises before changing anything."""
    event = EditEvent.parse(raw, position)
    target = event.target
    current = log._by_id.get(target)
    if current is None:
        raise EditError(
            f"edit {event.id!r} supersedes message {target!r}, which is not in the log",
            message_id=target,
            role="assistant",
            position=position,
            fix="an Edit carries the id of an AIMessage already in the log",
        )
    revision = _check_target(event, current, position, log)
    if event.id in log._edits:
        return False  # this very event, already recorded
    now = fields_of(current)
    new = merge(now, event.base, fields_of(event.message))
    if same_fields(new, now):
        return False  # the message already reads this way: a replay
    answered = [
        (c.get("id") or "", call.result_id)
        for c in calls_of(current)
        if (call := log._calls.get(c.get("id") or "")) is not None and call.result_id is not None
    ]
    content_only = revision and same_fields({**new, "content": None}, {**now, "content": None})
    if len(answered) == len(calls_of(current)) and not content_only:
        what = (
            f"its calls all have results (call {answered[0][0]!r}: {answered[0][1]!r})"
            if answered
            else "it has no tool calls"
        )
        raise EditError(
            f"edit {event.id!r} targets message {target!r}, which is not under review: {what}",
            message_id=target,
            role="assistant",
            position=position,
            fix="an Edit changes calls before they run; to go on after results, "
            "append a new message",
        )
    edited = applied(current, event, new)
    keys = {c.get("id"): call_key(c) for c in calls_of(edited)}
    _check_calls(log, event, current, keys, position)
    commit_edit(log, event.id, current, edited)
    if event.source == "resent":
        log._changed.setdefault(target, []).append(fields_of(edited))
    return True


def commit_edit(log: MessageLog, eid: str, current: BaseMessage, edited: BaseMessage) -> None:
    mid = current.id
    assert mid is not None
    old = [c.get("id") or "" for c in calls_of(current)]
    results = {cid: log._calls[cid].result_id for cid in old if cid in log._calls}
    fresh = {
        c.get("id") or "": LoggedCall(mid, i, c["name"], results.get(c.get("id") or ""))
        for i, c in enumerate(calls_of(edited))
    }
    # Rebuilt in place of the old calls, so `open_calls` keeps log order.
    olds = set(old)
    kept = [(cid, call) for cid, call in log._calls.items() if cid not in olds]
    at = next((i for i, cid in enumerate(log._calls) if cid in olds), len(kept))
    log._calls = dict([*kept[:at], *fresh.items(), *kept[at:]])
    for cid in old:
        if cid not in fresh:
            log._superseded[cid] = (mid, eid)
    for cid in fresh:
        log._superseded.pop(cid, None)
    if isinstance(edited, AIMessage) and any(c.result_id is None for c in fresh.values()):
        log._baseline[mid] = snapshot_fields(edited)
    else:
        log._baseline.pop(mid, None)
    for j in range(len(log.messages) - 1, -1, -1):
        if log.messages[j].id == mid:
            log.messages[j] = edited
            break
    log._by_id[mid] = edited
    log._digests.pop(mid, None)
    log._edits[eid] = (mid, current, edited)
    log._journal.append(eid)


def _check_target(event: EditEvent, current: BaseMessage, position: int, log: MessageLog) -> bool:
    """Refuse an edit of another role or of a non-AIMessage; whether it is a revision."""
    target = event.target
    revision = event.source in REVISION_SOURCES
    if revision and type(current) is not type(event.message):
        raise ConflictingIdError(
            f"update_state wrote a {role_of(event.message)} message under id {target!r}, "
            f"which the {role_of(current)} message at position "
            f"{log._position_hint(current, [])} has: an edit keeps the message's role",
            message_id=target,
            role=role_of(event.message),
            position=position,
            fix="give a new message a new id; to revise a message, write it again with "
            "its own role and id",
        )
    if not isinstance(current, AIMessage) and not revision:
        raise EditError(
            f"edit {event.id!r} targets the {role_of(current)} message {target!r}; only "
            "an AIMessage's calls can be edited",
            message_id=target,
            role=role_of(current),
            position=position,
            fix="append a new message instead",
        )
    return revision


def _check_calls(
    log: MessageLog,
    event: EditEvent,
    current: BaseMessage,
    keys: Mapping[Any, Any],
    position: int,
) -> None:
    target = event.target
    for c in calls_of(current):
        cid = c.get("id") or ""
        call = log._calls.get(cid)
        if call is not None and call.result_id is not None and keys.get(cid) != call_key(c):
            change = "drop" if cid not in keys else "change"
            raise EditError(
                f"edit {event.id!r} would {change} call {cid!r} ({c.get('name')}) of "
                f"message {target!r}, which already has a result ({call.result_id!r})",
                message_id=target,
                role="assistant",
                position=position,
                fix="edit calls before they run; a call with a result stays as it ran "
                "(append a new message to go on)",
            )
    for key in keys:
        cid = key or ""
        owner = log._calls.get(cid)
        dropped = log._superseded.get(cid) if owner is None else None
        other = owner.ai_id if owner is not None else dropped[0] if dropped else target
        if other != target:
            how = f" (edit {dropped[1]!r} dropped it there)" if dropped else ""
            raise ToolPairingError(
                f"edit {event.id!r} gives message {target!r} call id {cid!r}, already "
                f"used by message {other!r}{how}",
                message_id=target,
                role="assistant",
                position=position,
                fix="each tool call needs an id unique in the thread",
            )


def apply_update(log: MessageLog, raw: Mapping[str, Any], *, stored: bool) -> list[BaseMessage]:
    pos = len(log.messages)
    msg = coerce_message(raw.get("message"), position=pos, rekeyable=True)
    current = log._by_id.get(msg.id or "")
    if current is None:
        return log.extend_writes([[msg]], stored=stored)
    if log._digest_of(current) == digest(msg) or is_version(current, msg):
        return []
    apply_edit(log, update_edit(msg, len(edits_of(current))), pos)
    return []


def is_resent_edit(log: MessageLog, entry: str, item: BaseMessage) -> bool:
    done = log._edits.get(entry)
    return (
        done is not None
        and done[0] == item.id
        and isinstance(item, AIMessage)
        and isinstance(done[2], AIMessage)
        and same_fields(fields_of(done[2]), fields_of(item))
    )


def is_version(existing: BaseMessage, msg: BaseMessage) -> bool:
    if record_of(existing) is None:
        return False
    d = digest(msg)
    return any(digest(v) == d for v in versions(existing))
