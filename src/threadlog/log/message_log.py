"""The append-only message log and its pure reducer, `append_messages`.

Contract (what every write to a threadlog message log obeys):

* **Append-only.** Logged messages are never replaced, removed or moved relative to each
  other; `Overwrite` is refused. Changes are events: a `threadlog.Edit` of a request's open
  calls, an `update_state` revision, and a removal (`RemoveMessage` /
  `REMOVE_ALL_MESSAGES` hide messages from the `view` while `messages`, the audit, keeps
  them, marked: `threadlog.log.removals`).
* **Replay vs conflict.** A logged id with the same model-visible content (`digest`) is a
  replay, dropped; other content raises `ConflictingIdError`. A message without an id
  gets a deterministic one (`derive_id`).
* **Pairing.** A `ToolMessage` must answer an open call of an earlier `AIMessage`; a
  result for an unknown or answered call, or a new `AIMessage` reusing a call id (also one
  an edit dropped), raises `ToolPairingError`. A new call without an id, repeating one or
  reusing another message's live id is re-keyed first (`threadlog.log.call_ids`); a
  stored call without an id stays open for good (`threadlog.log.pairing`).
* **Placement.** A result goes right after its request and that request's earlier results
  (`pairing.result_slot`); every other message at the end. So
  `append(append(s, xs), ys) == append(s, xs + ys)`.
* **All or nothing.** A batch that fails leaves the log exactly as it was.
* **Edits** (`threadlog.log.edits`): `messages` holds the edited message in the
  original's place, its audit record carrying the original; pairing follows the edited
  calls; a re-sent copy of any version is a replay.
* **`update_state` revisions.** A message `update_state` writes is stored as
  `edits.update_item`; under a logged id with other content it is an edit event
  (`source="update_state"`, any role). From a node or turn input it stays a conflict.
* **Edits in place.** A request with open calls changed in place (the log's own object)
  and written again is recorded as the edit it amounts to (`source="resent"`); a changed
  *copy* re-sent under the id is still a `ConflictingIdError`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, InvalidToolCall, ToolCall, ToolMessage

from threadlog.errors import MessageLogError, ToolPairingError
from threadlog.log.call_ids import LoggedCall, needs_rekey, rekey_calls
from threadlog.log.edits import (
    EDIT_TYPE,
    changed_in_place,
    is_resent_edit,
    is_update,
    is_version,
    item_id,
    record_of,
    resent_as_edits,
    restore_edits,
    snapshot_fields,
)
from threadlog.log.events import extend_with_events, has_event
from threadlog.log.messages import (
    calls_of,
    coerce_message,
    derive_id,
    digest,
    is_pair,
    is_stored_form,
)
from threadlog.log.pairing import check_result, open_in, result_slot
from threadlog.log.refusals import conflict, parallel_error, reused_superseded
from threadlog.log.removals import (
    hide_late_result,
    is_removal,
    removed_by,
    restore_removal,
    view_anchor,
)

__all__ = [
    "RESENT_TYPE",
    "MessageLog",
    "append_messages",
    "flatten_write",
    "is_resent",
    "resent_write",
]

RESENT_TYPE = "threadlog.resent"  # a write that re-sent messages the log already held


@dataclass(slots=True)
class _Staging:
    """One batch being checked: what it adds, before anything is committed."""

    count: int  # the view's length before the batch: derived ids count it
    anchor: str | None
    staged: list[BaseMessage] = field(default_factory=list)
    by_id: dict[str, BaseMessage] = field(default_factory=dict)
    calls: dict[str, LoggedCall] = field(default_factory=dict)
    answered: dict[str, str] = field(default_factory=dict)  # call id -> result id


def flatten_write(value: Any) -> list[Any]:
    """One channel write as a list of items; a `(role, content)` pair is one message
    (checkpoints store tuples as lists)."""
    if is_pair(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    if is_resent(value):
        return list(value["items"])  # the re-sent messages are replays: nothing to apply
    return [value]


def resent_write(at: str, count: int, items: list[Any], ns: str | None = None) -> dict[str, Any]:
    """A write stored as what it adds: its first `count` items were the view's first at
    checkpoint `at` (in namespace `ns`, else the write's own); `items` is the rest."""
    out: dict[str, Any] = {"type": RESENT_TYPE, "at": at, "count": count, "items": items}
    if ns is not None:
        out["ns"] = ns
    return out


def is_resent(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == RESENT_TYPE


class MessageLog:
    """An indexed, append-only list of messages. `messages` is the log in order."""

    __slots__ = (
        "_anchor",
        "_baseline",
        "_by_id",
        "_calls",
        "_changed",
        "_digests",
        "_edits",
        "_hidden",
        "_journal",
        "_removals",
        "_superseded",
        "messages",
    )

    def __init__(self, messages: Iterable[BaseMessage] = ()) -> None:
        """Index messages that are already a log (stored history is trusted)."""
        self.messages: list[BaseMessage] = []
        self._by_id: dict[str, BaseMessage] = {}
        self._calls: dict[str, LoggedCall] = {}
        self._digests: dict[str, str] = {}
        self._anchor: str | None = None
        # Ids in commit order: `(log, version)` names the log as it was then.
        self._journal: list[str] = []
        # edit id -> (message id, before, after); dropped call id -> (message id, edit id)
        self._edits: dict[str, tuple[str, BaseMessage, BaseMessage]] = {}
        self._superseded: dict[str, tuple[str, str]] = {}
        # What each request with open calls read when logged: to see changes in place.
        self._baseline: dict[str, dict[str, Any]] = {}
        # Changes in place taken as edits: a log taken `at` an older version gets them again.
        self._changed: dict[str, list[dict[str, Any]]] = {}
        # hidden message id -> removal event id; event id -> [(message id, before, after)]
        self._hidden: dict[str, str] = {}
        self._removals: dict[str, list[tuple[str, BaseMessage, BaseMessage]]] = {}
        edited: list[str] = []
        for m in messages:
            if m.id is None:  # legacy stored data: a stable id, on our copy
                m = m.model_copy(update={"id": derive_id(len(self.messages), self._anchor, m)})
            self._index(m)
            self.messages.append(m)
            self._journal.append(m.id)  # type: ignore[arg-type]
            if record_of(m) is not None:
                edited.extend(restore_edits(self, m))
            edited.extend(restore_removal(self, m))
        if self._hidden:
            self._anchor = view_anchor(self)
        # A snapshot's edits follow its messages in the journal (never stepped through).
        self._journal.extend(edited)
        self.note_open_requests()

    def note_open_requests(self) -> None:
        """Baseline each open request lacking one (stored history: once, after its replay)."""
        for call in self._calls.values():
            if call.result_id is None and call.ai_id not in self._baseline:
                ai = self._by_id[call.ai_id]
                assert isinstance(ai, AIMessage)
                self._baseline[call.ai_id] = snapshot_fields(ai)

    def copy(self) -> MessageLog:
        new = MessageLog.__new__(MessageLog)
        new.messages = list(self.messages)
        new._by_id = dict(self._by_id)
        # LoggedCall objects are mutated on commit, so they are copied too.
        new._calls = {
            k: LoggedCall(c.ai_id, c.index, c.name, c.result_id) for k, c in self._calls.items()
        }
        new._digests = dict(self._digests)
        new._anchor = self._anchor
        new._journal = list(self._journal)
        new._edits = dict(self._edits)
        new._superseded = dict(self._superseded)
        new._baseline = dict(self._baseline)  # values are never mutated: shared
        new._changed = {k: list(v) for k, v in self._changed.items()}
        new._hidden = dict(self._hidden)
        new._removals = {k: list(v) for k, v in self._removals.items()}
        return new

    def adopt(self, other: MessageLog) -> None:
        """Take `other`'s state (a copy of this log that a write was applied to)."""
        for name in MessageLog.__slots__:
            if name != "messages":
                setattr(self, name, getattr(other, name))
        self.messages[:] = other.messages  # the same list object: channels hold it

    @property
    def version(self) -> int:
        return len(self._journal)

    def messages_at(self, version: int) -> list[BaseMessage]:
        """The log as it was at `version` (a new list)."""
        if version >= len(self._journal):
            return list(self.messages)
        tail = self._journal[version:]
        later = set(tail)
        out = [m for m in self.messages if m.id not in later]
        if self._edits or self._removals:
            # Each message changed since `version` as it was before the first change.
            before: dict[str, BaseMessage] = {}
            for eid in tail:
                done = self._edits.get(eid)
                if done is not None:
                    before.setdefault(done[0], done[1])
                for mid, was, _ in self._removals.get(eid, ()):
                    before.setdefault(mid, was)
            if before:
                out = [before.get(m.id, m) for m in out]  # type: ignore[arg-type]
        return out

    @property
    def view(self) -> list[BaseMessage]:
        """What the app reads: `messages` without the ones a removal event hid."""
        if not self._hidden:
            return self.messages
        return [m for m in self.messages if m.id not in self._hidden]

    @property
    def hides_any(self) -> bool:
        return bool(self._hidden)

    def view_at(self, version: int) -> list[BaseMessage]:
        out = self.messages_at(version)
        if not self._removals:
            return out
        return [m for m in out if removed_by(m) is None]

    def removed(self) -> list[tuple[BaseMessage, str]]:
        """Every hidden message with the id of the removal event that hid it, in log order."""
        return [(m, self._hidden[m.id]) for m in self.messages if m.id in self._hidden]

    def at(self, version: int) -> MessageLog:
        if version >= len(self._journal):
            return self.copy()
        older = MessageLog(self.messages_at(version))
        older._changed = {k: list(v) for k, v in self._changed.items()}
        return older

    def rewind(self, version: int, items: Sequence[Any]) -> int | None:
        """The version before `items` if they were the last committed; else None."""
        ids = [item_id(item) for item in items]
        n = len(ids)
        if n > version:
            return None
        start, held = version - n, self._journal[version - n : version]
        for i, (item, mid) in enumerate(zip(items, ids, strict=True)):
            if mid is None:  # written without an id: the log derived one
                mid = self._derived_at(start + i, item)
            if mid != held[i]:
                return None
        return start

    def _derived_at(self, j: int, item: Any) -> str | None:
        """The id of the message at journal position `j` if `item` written there becomes exactly
        it, else None (only for a log that never edited or hid a message)."""
        if self._edits or self._removals or self._hidden or j >= len(self._journal):
            return None
        held = self._by_id.get(self._journal[j])
        if held is None:
            return None
        try:
            msg = coerce_message(item, position=j, rekeyable=True)
        except MessageLogError:
            return None
        if msg.id is None:
            journal, by_id = self._journal, self._by_id
            anchor = next(
                (
                    journal[k]
                    for k in range(j - 1, -1, -1)
                    if not isinstance(by_id.get(journal[k]), ToolMessage)
                ),
                None,
            )
            msg = msg.model_copy(update={"id": derive_id(j, anchor, msg)})
        return held.id if msg == held else None

    def resent_prefix(self, items: Sequence[Any], version: int) -> int:
        """How many leading `items` are the view's first at `version`, unchanged (none changed
        in place since logged): a replay at any later version."""
        first = items[0] if items else None
        if not isinstance(first, BaseMessage) or first.id not in self._by_id:
            return 0  # the usual write: new messages only (no view built for it)
        view = self.view_at(version)
        n = 0
        for item, held in zip(items, view, strict=False):
            if not isinstance(item, BaseMessage) or item.id is None or item.id != held.id:
                break
            if item is not held and item != held:
                break
            if isinstance(item, AIMessage):
                existing = self._by_id.get(item.id)
                if isinstance(existing, AIMessage) and (
                    existing is not held
                    or changed_in_place(self, existing, item, stored=False) is not None
                ):
                    break  # an edited request, or one changed in place: stored as written
            n += 1
        return n

    def fast_forward(self, version: int, items: Sequence[Any]) -> int | None:
        """The version after `items` if they are the next committed; else None."""
        journal, by_id, v = self._journal, self._by_id, version
        for item in items:
            if is_removal(item):
                return None  # a removal is applied, never fast-forwarded
            if is_update(item):
                item = item.get("message")  # update_state's message: as if written plainly
            if isinstance(item, Mapping) and item.get("type") == EDIT_TYPE:
                if v >= len(journal) or item.get("id") != journal[v]:
                    return None
                v += 1  # the same edit, committed next
                continue
            if not isinstance(item, BaseMessage) or v >= len(journal):
                return None
            if item.id != journal[v]:
                if is_resent_edit(self, journal[v], item):
                    v += 1  # the request changed in place, which this log took as an edit
                    continue
                return None
            held = by_id[journal[v]]
            if held is not item and held != item and not is_version(held, item):
                return None
            v += 1
        return v

    def __len__(self) -> int:
        return len(self.messages)

    def get(self, message_id: str) -> BaseMessage | None:
        return self._by_id.get(message_id)

    def open_calls(self) -> list[tuple[AIMessage, ToolCall | InvalidToolCall]]:
        """Calls with no result yet, as (request, call) in log order."""
        return [(o.request, o.call) for o in open_in(self.view)]

    def extend(self, items: Iterable[Any]) -> list[BaseMessage]:
        """Append one batch; returns the messages actually added (replays dropped)."""
        return self.extend_writes([list(items)])

    def extend_writes(
        self,
        writes: Sequence[Sequence[Any]],
        *,
        single_writer: bool = False,
        stored: bool = False,
        dry_run: bool = False,
    ) -> list[BaseMessage]:
        """Append the writes of one superstep (one sequence per task), all or nothing.

        `single_writer`: more than one writer adding conversation is an error. `stored`
        (replaying a checkpoint) skips re-checking plain messages' fields; every log rule
        still applies. `dry_run`: check, commit nothing."""
        # Stored new messages or records the log holds (same objects): no event, no edit.
        by_id = self._by_id
        plain = stored and all(
            is_stored_form(raw) and by_id.get(raw.id, raw) is raw for w in writes for raw in w
        )
        resent = None if plain else resent_as_edits(self, writes, stored=stored, dry_run=dry_run)
        if resent is not None or (not plain and any(has_event(w) for w in writes)):
            writes, restored = resent if resent is not None else (writes, None)
            return extend_with_events(
                self,
                writes,
                single_writer=single_writer,
                stored=stored,
                dry_run=dry_run,
                restored=restored,
            )
        # Derived ids count the view, as a log read back from a snapshot (of the view) does.
        stage = _Staging(len(self.messages) - len(self._hidden), self._anchor)
        conversational: list[tuple[int, list[BaseMessage]]] = []
        for w, write in enumerate(writes):
            here = [self._stage(raw, stage, stored) for raw in write]
            talk = [m for m in here if m is not None and not isinstance(m, ToolMessage)]
            if talk:
                conversational.append((w, talk))
        if single_writer and len(conversational) > 1:
            raise parallel_error(conversational, stage.count)
        if not dry_run:
            self._commit(stage, stored)
        return stage.staged

    def _stage(self, raw: Any, stage: _Staging, stored: bool) -> BaseMessage | None:
        """Check one item and stage it, or None for a replay. Changes nothing of the log."""
        mid = getattr(raw, "id", None) if stored else None
        if mid is not None and (stage.by_id.get(mid) or self._by_id.get(mid)) is raw:
            # One object for identical stored records (`checkpoint.shared_records`).
            return None
        pos = stage.count + len(stage.staged)
        msg: BaseMessage
        if is_stored_form(raw) and (stored or self._by_id.get(raw.id) is raw):
            # Stored, or the very object this log holds: its fields were checked already.
            msg = raw
        else:
            msg = coerce_message(raw, position=pos, rekeyable=True)
        if msg.id is None:
            # Never mutate the caller's object: ids live on our copy.
            msg = msg.model_copy(update={"id": derive_id(pos, stage.anchor, msg)})
        mid = msg.id
        assert mid is not None
        if isinstance(msg, AIMessage) and (msg.tool_calls or msg.invalid_tool_calls):
            msg = self._rekeyed(msg, mid, stage)
        existing = stage.by_id.get(mid) or self._by_id.get(mid)
        if existing is not None:
            # Staged messages are hashed uncached: the cache must not outlive a failed batch.
            known = digest(existing) if mid in stage.by_id else self._digest_of(existing)
            if known == digest(msg):
                return None  # a replay of what is already logged
            if mid not in stage.by_id and is_version(existing, msg):
                return None  # a copy of an edited message as it was: a replay
            raise conflict(existing, msg, self._position_hint(existing, stage.staged), pos)
        if isinstance(msg, ToolMessage):
            check_result(self, msg, pos, stage.calls, stage.answered)
            stage.answered[msg.tool_call_id] = mid
        elif isinstance(msg, AIMessage):
            self._stage_calls(msg, mid, pos, stage, stored)
        if not isinstance(msg, ToolMessage):
            stage.anchor = mid
        stage.by_id[mid] = msg
        stage.staged.append(msg)
        return msg

    def _rekeyed(self, msg: AIMessage, mid: str, stage: _Staging) -> AIMessage:
        def taken(cid: str) -> bool:
            owner = stage.calls.get(cid) or self._calls.get(cid)
            # A hidden message's call ids are free, as in a log read back from the view.
            return owner is not None and owner.ai_id != mid and owner.ai_id not in self._hidden

        return rekey_calls(msg, taken) if needs_rekey(msg, taken) else msg

    def _stage_calls(
        self, msg: AIMessage, mid: str, pos: int, stage: _Staging, stored: bool
    ) -> None:
        for i, call in enumerate(calls_of(msg)):
            cid = call["id"]
            if not cid:
                # Only stored history gets here (coercion refuses new ones): open for good.
                continue
            prior = stage.calls.get(cid) or self._calls.get(cid)
            if prior is not None and prior.ai_id not in self._hidden:
                raise ToolPairingError(
                    f"call {i} ({call['name']!r}) reuses call id {cid!r}, issued by "
                    f"message {prior.ai_id!r}",
                    message_id=mid,
                    role="assistant",
                    position=pos,
                    fix="each tool call needs an id unique in the thread",
                )
            dropped = self._superseded.get(cid)
            if dropped is not None and not stored:
                # The edited message's audit record holds it (stored: the later owner wins).
                raise reused_superseded(i, call, dropped, mid, pos)
            stage.calls[cid] = LoggedCall(mid, i, call["name"])

    def _commit(self, stage: _Staging, stored: bool = False) -> None:
        # Stored requests get their baseline after the replay: most are answered by then.
        for msg in stage.staged:
            self._index(msg, stage.calls, baseline=not stored)
            self._journal.append(msg.id)  # type: ignore[arg-type]
            if isinstance(msg, ToolMessage):
                call = self._calls[msg.tool_call_id]
                at = result_slot(self.messages, call.ai_id, call.index, self._call_at)
                if self._hidden and call.ai_id in self._hidden:
                    self.messages.insert(at, hide_late_result(self, msg))
                else:
                    self.messages.insert(at, msg)
            else:
                self.messages.append(msg)
        self._anchor = stage.anchor

    def _index(
        self,
        msg: BaseMessage,
        new_calls: dict[str, LoggedCall] | None = None,
        baseline: bool = True,
    ) -> None:
        mid = msg.id
        assert mid is not None  # extend_writes and __init__ give every message an id
        self._by_id[mid] = msg
        if isinstance(msg, AIMessage):
            calls = calls_of(msg)
            for i, call in enumerate(calls):
                cid = call.get("id")
                owner = self._calls.get(cid or "")
                if cid and (owner is None or (owner.ai_id != mid and owner.ai_id in self._hidden)):
                    # (A hidden message's call id goes to the visible message reusing it.)
                    new = (new_calls or {}).get(cid)
                    self._calls[cid] = new or LoggedCall(mid, i, call["name"])
                    if self._superseded and cid in self._superseded:
                        del self._superseded[cid]  # a stored later message owns it now
            if calls and new_calls is not None and baseline:
                self._baseline[mid] = snapshot_fields(msg)
        if isinstance(msg, ToolMessage):
            answered = self._calls.get(msg.tool_call_id)
            if answered is not None and answered.result_id is None:
                answered.result_id = mid
                if answered.ai_id in self._baseline:
                    self._settle(answered.ai_id)
        else:
            self._anchor = mid

    def _settle(self, ai_id: str) -> None:
        """Forget a request's baseline once all its calls have results."""
        ai = self._by_id.get(ai_id)
        for c in calls_of(ai) if isinstance(ai, AIMessage) else ():
            call = self._calls.get(c.get("id") or "")
            if call is not None and call.result_id is None:
                return
        del self._baseline[ai_id]

    def _digest_of(self, msg: BaseMessage) -> str:
        # Computed on first collision only: hashing every message would slow a cold start.
        mid = msg.id
        assert mid is not None
        d = self._digests.get(mid)
        if d is None:
            d = self._digests[mid] = digest(msg)
        return d

    def _call_at(self, call_id: str) -> tuple[str, int] | None:
        call = self._calls.get(call_id)
        return (call.ai_id, call.index) if call is not None else None

    def _position_hint(self, existing: BaseMessage, staged: list[BaseMessage]) -> int:
        for j in range(len(self.messages) - 1, -1, -1):
            if self.messages[j] is existing:
                return j
        return len(self.messages) + next((k for k, m in enumerate(staged) if m is existing), 0)


def append_messages(
    left: Sequence[Any] | Any | None = None,
    right: Any = None,
    *,
    format: Literal["langchain-openai"] | None = None,
) -> list[BaseMessage]:
    """The pure reducer: `left` with `right` appended under the log's rules (a new list, the
    view); raises a `MessageLogError` on a bad write. `format="langchain-openai"` converts
    content blocks as `add_messages` does; `append_messages(format=...)` is such a reducer."""
    if left is None and right is None:
        return functools.partial(append_messages, format=format)  # type: ignore[return-value]
    if format not in (None, "langchain-openai"):
        raise ValueError(f"Unrecognized format={format!r}: expected 'langchain-openai' or None")
    items = [] if left is None else flatten_write(left)
    log = MessageLog([coerce_message(m, position=i) for i, m in enumerate(items)])
    log.extend(flatten_write([] if right is None else right))
    out = list(log.view)
    if format == "langchain-openai":
        out = _openai_format(out)
    return out


def _openai_format(messages: list[BaseMessage]) -> list[BaseMessage]:
    # As `add_messages(format="langchain-openai")`: content blocks in OpenAI's shape.
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages

    return convert_to_messages(convert_to_openai_messages(messages))
