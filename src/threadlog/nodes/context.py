"""What the model sees: a `ContextPolicy` applied to the log and its compaction events.

Contract:

* The log is never shortened. What the model sees is *derived*:
  `build_context(messages, compactions, policy)` is a pure, deterministic function of the
  log, the recorded compaction events (state key `compactions`, see
  `threadlog.nodes.compaction`) and the policy.
* Leading system/developer messages of the log are always kept, first. Then the latest
  summary (if an event recorded one) as a system message. Then the newest turns.
* A **turn** is a user message and everything up to the next user message (messages
  before the first user message form a turn of their own). A **unit** is a message, or
  an AIMessage with tool calls together with all their results — including interleaved
  shapes such as AI1(a), AI2(b), tool a, tool b, which form *one* unit. Units are kept
  or dropped whole, so a context never holds half a tool exchange.
* The newest turn is kept: its user message always, its newest unit always, and older
  units of it newest-first while they fit the budget. Older turns are kept whole,
  newest-first, while they fit `max_tokens` and `max_turns`; the first one that does not
  fit ends the context (no gaps between older turns). The budget is a target: the
  minimum context (pinned system text, summary, newest user message, newest unit) is
  never cut.
* Everything up to the latest event's `cut_to` message stays hidden (a cut only moves
  forward), whatever the policy would now allow.
* Cost is proportional to what is kept (plus one turn), not to the log: the walk goes
  backwards from the newest message and stops at the budget; per-message token counts
  are cached by message id on the policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from threadlog.channel import MessagesState
from threadlog.errors import InvalidMessageError
from threadlog.messages import calls_of

__all__ = [
    "AgentState",
    "Compactions",
    "ContextPolicy",
    "ContextView",
    "append_compactions",
    "build_context",
    "plan_context",
    "summary_message",
]

TokenCounter = Callable[[Sequence[BaseMessage]], int]


@dataclass(eq=False)
class ContextPolicy:
    """How much of the log the model sees.

    max_turns: keep at most this many turns (the newest turn counts as one).
    max_tokens: token budget for the whole context (pinned system text included).
    token_counter: `f(messages) -> int`; default `count_tokens_approximately` (offline).
    summarizer: a chat model; when set, what a cut hides is folded into a summary.
    summary_prompt: the system text given to the summarizer.
    """

    max_turns: int | None = None
    max_tokens: int | None = None
    token_counter: TokenCounter | None = None
    summarizer: Any = None
    summary_prompt: str = (
        "Summarize the earlier part of this conversation for the assistant's memory: "
        "keep facts, names, numbers, decisions and open questions; be brief."
    )
    _counts: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"ContextPolicy.{name} must be a positive int, got {value!r}")

    def count(self, message: BaseMessage) -> int:
        """Tokens of one message, cached by id (ids in a log never change content)."""
        mid = message.id
        if mid is not None:
            n = self._counts.get(mid)
            if n is not None:
                return n
        n = (self.token_counter or count_tokens_approximately)([message])
        if mid is not None:
            self._counts[mid] = n
        return n

    def describe(self) -> dict[str, Any]:
        """The policy as a plain dict (stored in compaction events)."""
        counter = self.token_counter
        model = self.summarizer
        return {
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "token_counter": getattr(counter, "__name__", repr(counter))
            if counter
            else "count_tokens_approximately",
            "summarizer": None
            if model is None
            else str(
                getattr(model, "model_name", None)
                or getattr(model, "model", None)
                or type(model).__name__
            ),
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


def _is_system(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage)


def summary_message(event: Mapping[str, Any]) -> SystemMessage:
    """The system message a summary event puts in front of the kept turns."""
    return SystemMessage(
        content=f"Summary of the earlier conversation:\n{event['summary']}",
        id=str(event["summary_id"]),
    )


def _latest(compactions: Sequence[Mapping[str, Any]]) -> tuple[Any, Any]:
    last = compactions[-1] if compactions else None
    summary = next((e for e in reversed(compactions) if e.get("kind") == "summary"), None)
    return last, summary


def plan_context(
    messages: Sequence[BaseMessage],
    compactions: Sequence[Mapping[str, Any]] = (),
    policy: ContextPolicy | None = None,
    *,
    reserve_tokens: int = 0,
) -> ContextView:
    """Derive the context (see the module docstring); `reserve_tokens` is budget taken
    by text sent outside the log (a node's system prompt)."""
    policy = policy or ContextPolicy()
    n = len(messages)
    h = 0
    while h < n and _is_system(messages[h]):
        h += 1
    head = list(messages[:h])
    last, summary_ev = _latest(compactions)
    stop_id = last.get("cut_to") if last else None
    summary = summary_message(summary_ev) if summary_ev else None
    fixed = sum(policy.count(m) for m in head) + (policy.count(summary) if summary else 0)
    budget = (
        policy.max_tokens - reserve_tokens - fixed if policy.max_tokens is not None else math.inf
    )
    max_turns = policy.max_turns or math.inf

    walk = _Walk(messages, policy, budget, max_turns)
    j = n - 1
    reached_cut = stop_id is None
    while j >= h and not walk.done:
        m = messages[j]
        if stop_id is not None and m.id == stop_id:
            reached_cut = True
            break
        walk.step(j, m)
        j -= 1
    if not walk.done:
        if not reached_cut:
            raise InvalidMessageError(
                f"compaction event {last.get('id')!r} cuts up to message {stop_id!r}, "
                "which is not in the log",
                message_id=stop_id,
                fix="compaction events must name a message of this thread's log",
            )
        walk.flush_turn()  # the oldest turn: no user message before the limit
    keep_from = walk.kept_start
    prev = keep_from - 1
    if prev >= h and messages[prev].id != stop_id and (walk.done or prev > j):
        cut_index, cut_id = prev, messages[prev].id  # the policy moved the cut
    elif prev >= h and messages[prev].id == stop_id:
        cut_index, cut_id = prev, stop_id
    elif stop_id is not None:
        cut_index, cut_id = (j if reached_cut else -1), stop_id
    else:
        cut_index, cut_id = -1, None
    hidden = walk.hidden_at
    body = [m for k, m in enumerate(messages[keep_from:], keep_from) if k not in hidden]
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


class _Walk:
    """The backward walk over units and turns (state of `plan_context`)."""

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        policy: ContextPolicy,
        budget: float,
        max_turns: float,
    ) -> None:
        self.messages = messages
        self.policy = policy
        self.budget = budget
        self.max_turns = max_turns
        self.need: set[str] = set()
        self.unit_tokens = 0
        self.unit_end = len(messages)  # exclusive end of the unit being collected
        self.units: list[tuple[int, int, int]] = []  # this turn's units, newest first
        self.kept_start = len(messages)
        self.used = 0
        self.turns = 0
        self.hidden_at: set[int] = set()
        self.done = False

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
        # An unfinished unit here holds results whose request lies beyond the limit:
        # it is left out (it lies before every kept unit), never sent as orphans.
        self.need = set()
        if not units:
            return
        start = units[-1][0]
        total = sum(u[2] for u in units)
        if self.turns == 0:
            self._keep_newest(units)
            return
        if self.turns < self.max_turns and self.used + total <= self.budget:
            self.used += total
            self.turns += 1
            self.kept_start = start
        else:
            self.done = True

    def _keep_newest(self, units: list[tuple[int, int, int]]) -> None:
        # The newest turn: its user message (oldest unit, when it is one) and newest
        # unit always; the units between, newest first, while they fit.
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


# -- the compaction event list -------------------------------------------------------


def append_compactions(
    left: Sequence[Mapping[str, Any]] | None, right: Any
) -> list[dict[str, Any]]:
    """Reducer of the `compactions` key: append-only; an event already present (same
    `id`) is a replay and is dropped. Each event is a plain dict with `id`, `kind`
    (`trim` | `summary`) and `cut_to`."""
    out = [dict(e) for e in (left or [])]
    seen = {e.get("id") for e in out}
    items = right if isinstance(right, (list, tuple)) else [right]
    for i, event in enumerate(items):
        if not isinstance(event, Mapping) or not {"id", "kind", "cut_to"} <= event.keys():
            raise InvalidMessageError(
                f"compactions[{i}] is not a compaction event: {event!r}",
                position=i,
                fix="write events made by threadlog.ContextNode / ModelNode "
                "(dicts with id, kind, cut_to); the event list is append-only",
            )
        if event["kind"] not in ("trim", "summary"):
            raise InvalidMessageError(
                f"compactions[{i}] has unknown kind {event['kind']!r}",
                position=i,
                fix="kind is 'trim' or 'summary'",
            )
        if event["id"] in seen:
            continue
        seen.add(event["id"])
        out.append(dict(event))
    return out


Compactions = Annotated[list[dict[str, Any]], append_compactions]
"""Annotate a state key with this to record compaction events: `compactions: Compactions`."""


class AgentState(MessagesState):
    """`threadlog.MessagesState` plus the `compactions` event list."""

    compactions: Compactions
