"""What the model sees: a `ContextPolicy` applied to the log and its compaction events.

* The log is never shortened: `build_context(messages, compactions, policy)` is a pure,
  deterministic function of the log, the recorded compaction events and the policy.
* Leading system/developer messages are always kept, first; then the latest summary (if
  an event recorded one) as a system message; then the newest turns.
* A **turn** is a user message and everything up to the next one (messages before the
  first form a turn of their own). A **unit** is a message, or an AIMessage with calls
  together with all their results (interleaved requests form one unit). Units are kept or
  dropped whole: a context never holds half a tool exchange.
* The newest turn's user message and newest unit are always kept, its older units
  newest-first while they fit. Older turns are kept whole, newest-first, while they fit
  `max_tokens` and `max_turns`; the first that does not fit ends the context. The minimum
  context is never cut.
* Everything up to the latest event's `cut_to` stays hidden (a cut only moves forward).
* Cost is proportional to the kept turns: the walk goes backwards from the newest
  message; per-message token counts and closed turns' totals are cached. A warm policy
  gives exactly the context a fresh one does."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from threadlog.errors import InvalidMessageError
from threadlog.log.edits import apply_edits, cache_key
from threadlog.log.messages import calls_of

__all__ = ["ContextPolicy", "ContextView", "build_context", "plan_context", "summary_message"]

_MAX_CACHED = 500_000  # per policy: ids of messages whose token count is remembered

TokenCounter = Callable[[Sequence[BaseMessage]], int]


@dataclass(eq=False)
class ContextPolicy:
    """How much of the log the model sees.

    max_turns: keep at most this many turns (the newest turn counts as one).
    max_tokens: token budget for the whole context (pinned system text included).
    token_counter: `f(messages) -> int`; default `count_tokens_approximately` (offline).
    summarizer: a chat model; when set, what a cut hides is folded into a summary.
    trim_to: a new cut goes down to this fraction of `max_tokens` (0 < trim_to <= 1), so
        cuts and summaries are rare and the prompt prefix stays cacheable. Default: 0.5
        with a summarizer, else 1.
    summary_prompt: the system text given to the summarizer."""

    max_turns: int | None = None
    max_tokens: int | None = None
    token_counter: TokenCounter | None = None
    summarizer: Any = None
    trim_to: float | None = None
    summary_prompt: str = (
        "Summarize the earlier part of this conversation for the assistant's memory: "
        "keep facts, names, numbers, decisions and open questions; be brief."
    )
    _counts: dict[str, int] = field(default_factory=dict, repr=False)
    _turns: dict[str, tuple[str, int, int]] = field(default_factory=dict, repr=False)
    _where: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"ContextPolicy.{name} must be a positive int, got {value!r}")
        if self.trim_to is not None and not 0 < self.trim_to <= 1:
            raise ValueError(f"ContextPolicy.trim_to must be in (0, 1], got {self.trim_to!r}")

    def effective_trim_to(self) -> float | None:
        """`trim_to` with its default filled in (None: cut just enough)."""
        if self.trim_to is not None:
            return self.trim_to if self.trim_to < 1 else None
        return 0.5 if self.summarizer is not None else None

    def count(self, message: BaseMessage) -> int:
        """Tokens of one message, cached by `cache_key`."""
        mid = cache_key(message)
        if mid is not None:
            n = self._counts.get(mid)
            if n is not None:
                return n
        n = (self.token_counter or count_tokens_approximately)([message])
        if mid is not None:
            if len(self._counts) >= _MAX_CACHED:  # a long-lived server: stay bounded
                self._counts.clear()
                self._turns.clear()
                self._where.clear()
            self._counts[mid] = n
        return n

    def describe(self) -> dict[str, Any]:
        counter, model = self.token_counter or count_tokens_approximately, self.summarizer
        name = getattr(model, "model_name", None) or getattr(model, "model", None)
        return {
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "token_counter": getattr(counter, "__name__", repr(counter)),
            "trim_to": self.effective_trim_to(),
            "summarizer": None if model is None else str(name or type(model).__name__),
        }


@dataclass(frozen=True)
class ContextView:
    """One derived context, and where its cut lies in the log."""

    head: list[BaseMessage]
    """Leading system/developer messages of the log."""
    summary: SystemMessage | None
    body: list[BaseMessage]
    """The kept log messages after the head, in log order."""
    cut_to: str | None
    """Id of the last message hidden by whole-turn trimming (None: nothing hidden)."""
    cut_index: int
    """Index in the log of `cut_to` (-1 when nothing is hidden)."""
    hidden: tuple[str, ...]
    """Ids hidden inside the newest turn (units that did not fit the budget)."""
    tokens: int
    turns: int

    @property
    def messages(self) -> list[BaseMessage]:
        return [*self.head, *([self.summary] if self.summary else []), *self.body]


def summary_message(event: Mapping[str, Any]) -> SystemMessage:
    """The system message a summary event puts in front of the kept turns."""
    return SystemMessage(
        content=f"Summary of the earlier conversation:\n{event['summary']}",
        id=str(event["summary_id"]),
    )


# id(event) -> (the event, its position, the newest summary at or before it): events are
# append-only and the same objects each step, so the search resumes at the last one seen.
_SUMMARY_AT: OrderedDict[int, tuple[Mapping[str, Any], int, Any]] = OrderedDict()
_SUMMARY_AT_MAX = 4096
_summary_lock = threading.Lock()


def _latest(compactions: Sequence[Mapping[str, Any]]) -> tuple[Any, Any]:
    if not compactions:
        return None, None
    last = compactions[-1]
    summary = None
    for k in range(len(compactions) - 1, -1, -1):
        e = compactions[k]
        if e.get("kind") == "summary":
            summary = e
            break
        hit = _SUMMARY_AT.get(id(e))
        if hit is not None and hit[0] is e and hit[1] == k:
            summary = hit[2]
            break
    with _summary_lock:
        _SUMMARY_AT[id(last)] = (last, len(compactions) - 1, summary)
        while len(_SUMMARY_AT) > _SUMMARY_AT_MAX:
            _SUMMARY_AT.popitem(last=False)
    return last, summary


def _locate(
    messages: Sequence[BaseMessage],
    stop_id: str,
    head: int,
    policy: ContextPolicy,
    event: Mapping[str, Any],
) -> int:
    k = policy._where.get(stop_id)
    if k is not None and k < len(messages) and messages[k].id == stop_id:
        return k
    for k in range(len(messages) - 1, head - 1, -1):
        if messages[k].id == stop_id:
            policy._where[stop_id] = k
            return k
    raise InvalidMessageError(
        f"compaction event {event.get('id')!r} cuts up to message {stop_id!r}, "
        "which is not in the log",
        message_id=stop_id,
        fix="compaction events must name a message of this thread's log",
    )


def plan_context(
    messages: Sequence[BaseMessage],
    compactions: Sequence[Mapping[str, Any]] = (),
    policy: ContextPolicy | None = None,
    *,
    reserve_tokens: int = 0,
) -> ContextView:
    """Derive the context (module doc); `reserve_tokens`: budget used outside the log."""
    policy = policy or ContextPolicy()
    n = len(messages)
    h = 0
    while h < n and isinstance(messages[h], SystemMessage):
        h += 1
    head = list(messages[:h])
    last, summary_ev = _latest(compactions)
    stop_id = last.get("cut_to") if last else None
    lo = h if stop_id is None else _locate(messages, stop_id, h, policy, last) + 1
    summary = summary_message(summary_ev) if summary_ev else None
    fixed = sum(policy.count(m) for m in head) + (policy.count(summary) if summary else 0)
    budget = (
        policy.max_tokens - reserve_tokens - fixed if policy.max_tokens is not None else math.inf
    )
    max_turns = policy.max_turns or math.inf
    walk, lowest = _walk(messages, lo, policy, budget, max_turns)
    # A legacy approval edit: the model sees the args that ran. Only what the walk read
    # can differ (a call's results follow it), so only that range is searched.
    read = messages[lowest:]
    if apply_edits(read) is not read:
        messages = [*messages[:lo], *apply_edits(messages[lo:])]
        # Caches hold unedited counts and totals: a scratch policy walks the edited view.
        scratch = replace(policy, _counts={}, _turns={}, _where={})
        walk, _ = _walk(messages, lo, scratch, budget, max_turns)
    keep_from = walk.kept_start
    prev = keep_from - 1
    if prev >= lo:
        cut_index, cut_id = prev, messages[prev].id  # the policy moved the cut
        if cut_id is not None:
            policy._where[cut_id] = prev
    elif stop_id is not None:
        cut_index, cut_id = lo - 1, stop_id
    else:
        cut_index, cut_id = -1, None
    hidden = walk.hidden_at
    body = list(messages[keep_from:])
    if hidden:
        body = [m for k, m in enumerate(body, keep_from) if k not in hidden]
    return ContextView(
        head=head,
        summary=summary,
        body=body,
        cut_to=cut_id,
        cut_index=cut_index,
        hidden=tuple(str(messages[k].id) for k in sorted(hidden)),
        tokens=fixed + walk.used,
        turns=walk.turns,
    )


def _walk(
    messages: Sequence[BaseMessage],
    lo: int,
    policy: ContextPolicy,
    budget: float,
    max_turns: float,
) -> tuple[_Walk, int]:
    """Walk back from the newest message to the budget; also the lowest index read."""
    walk = _Walk(messages, policy, budget, max_turns)
    turns = policy._turns
    j = len(messages) - 1
    while j >= lo and not walk.done:
        if walk.turns and walk.turn_end == j + 1:
            # A closed turn seen before is decided from its cached total (checked by
            # position: a late result inserted into an old turn shifts what follows).
            key = messages[j + 1].id
            hit = turns.get(key) if key is not None else None
            if hit is not None:
                prev_id, length, tokens = hit
                start = j + 1 - length
                if start >= lo and messages[start].id == prev_id:
                    walk.decide(start, tokens)
                    j = start - 1
                    continue
        walk.step(j, messages[j])
        j -= 1
    if not walk.done:
        walk.flush_turn()  # the oldest turn: no user message before the limit
    return walk, max(j + 1, lo)


@dataclass(eq=False)
class _Walk:
    """The backward walk over units and turns (state of `plan_context`)."""

    messages: Sequence[BaseMessage]
    policy: ContextPolicy
    budget: float
    max_turns: float
    need: set[str] = field(default_factory=set)
    unit_tokens: int = 0
    units: list[tuple[int, int, int]] = field(default_factory=list)  # this turn's, newest first
    used: int = 0
    turns: int = 0
    hidden_at: set[int] = field(default_factory=set)
    done: bool = False

    def __post_init__(self) -> None:
        # The unit being collected ends here (exclusive), as do the kept part and the newer
        # turn last decided.
        self.unit_end = self.kept_start = self.turn_end = len(self.messages)

    def step(self, j: int, m: BaseMessage) -> None:
        if isinstance(m, ToolMessage):
            self.need.add(m.tool_call_id)
        elif isinstance(m, AIMessage):
            for call in calls_of(m):
                self.need.discard(call["id"] or "")
        self.unit_tokens += self.policy.count(m)
        if self.need:
            return  # inside a tool exchange: the unit continues further back
        self.units.append((j, self.unit_end, self.unit_tokens))
        self.unit_tokens = 0
        self.unit_end = j
        if isinstance(m, HumanMessage):
            self.flush_turn()

    def flush_turn(self) -> None:
        """Decide the turn whose units were collected (oldest unit last)."""
        units = self.units
        self.units = []
        self.need = set()  # an unfinished unit's request lies beyond the limit: left out
        if not units:
            return
        start = units[-1][0]
        if self.turns == 0:
            self._keep_newest(units)
            self.turn_end = start
            return
        total = sum(u[2] for u in units)
        msgs, end = self.messages, self.turn_end
        if end < len(msgs) and isinstance(msgs[end], HumanMessage):
            later, first = msgs[end].id, msgs[start].id
            if later and first and isinstance(msgs[start], HumanMessage):
                # A closed turn (user message to the next one) never changes: remember it.
                self.policy._turns[later] = (first, end - start, total)
        self.decide(start, total)

    def decide(self, start: int, total: int) -> None:
        """Keep the older turn starting at `start` whole, or end the context before it."""
        if self.turns < self.max_turns and self.used + total <= self.budget:
            self.used += total
            self.turns += 1
            self.kept_start = self.turn_end = self.unit_end = start
        else:
            self.done = True

    def _keep_newest(self, units: list[tuple[int, int, int]]) -> None:
        # The newest turn: its user message and newest unit always; the rest while they fit.
        first = units[-1]
        user = isinstance(self.messages[first[0]], HumanMessage)
        middle = units[:-1] if user else units
        used = first[2] if user else 0
        cutting = False
        for i, (s, e, t) in enumerate(middle):
            if not cutting and (i == 0 or used + t <= self.budget):
                used += t
                continue
            cutting = True
            self.hidden_at.update(range(s, e))
        self.used = used
        self.turns = 1
        self.kept_start = first[0]
        if cutting or self.turns >= self.max_turns:
            self.done = True


def build_context(
    messages: Sequence[BaseMessage],
    compactions: Sequence[Mapping[str, Any]] = (),
    policy: ContextPolicy | None = None,
    *,
    reserve_tokens: int = 0,
) -> list[BaseMessage]:
    """The messages the model sees for this log, events and policy (deterministic)."""
    return plan_context(messages, compactions, policy, reserve_tokens=reserve_tokens).messages
