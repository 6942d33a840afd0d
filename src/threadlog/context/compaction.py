"""Compaction as explicit events, and `ContextNode`, the node that records them.

Contract:

* Trimming and summarizing never delete anything. When the policy hides more of the log
  than the latest event did, `compact` returns a new **event**, a plain dict appended to
  the state key `compactions` (`threadlog.AgentState`):

      {"id": "cmp-…", "kind": "trim" | "summary", "cut_to": <id of the last hidden
       message>, "hidden": [ids hidden inside the newest turn], "dropped": <messages newly
       hidden>, "summary": <text> | None, "summary_id": <id> | None,
       "policy": {...}, "reason": "...", "tokens": <context tokens after>,
       "ts": "<UTC ISO>"}

  The context is then `build_context(log, events, policy)`, deterministic.
* A summary folds the previous summary plus everything newly hidden into one text made by
  `policy.summarizer`; if the summary pushes the cut further, that part is folded too (up
  to three rounds).
* With a token budget, a new cut goes down to `policy.trim_to` of the budget.
* The summarizer's tokens are kept out of LangGraph's `stream_mode="messages"`.
* Event ids come from the event's content and position: a replayed node writes the same.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from threadlog.channel import MessagesState
from threadlog.context.events import CompactionsChannel, append_events
from threadlog.context.policy import ContextPolicy, ContextView, plan_context
from threadlog.errors import InvalidMessageError
from threadlog.flows import Flow, Io, drivers
from threadlog.log.messages import role_of

__all__ = ["AgentState", "Compactions", "acompact", "append_compactions", "compact", "transcript"]

_ROUNDS = 3


def transcript(messages: Sequence[BaseMessage]) -> str:
    """A plain-text rendering of messages for a summarizer (`role: text` lines)."""
    lines = []
    for m in messages:
        text = " ".join((m.text if isinstance(m.content, list) else str(m.content)).split())
        if isinstance(m, AIMessage) and m.tool_calls:
            calls = ", ".join(
                f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in m.tool_calls
            )
            text = f"{text} [calls {calls}]".strip()
        who = f"tool {m.name}" if isinstance(m, ToolMessage) and m.name else role_of(m)
        lines.append(f"{who}: {text}")
    return "\n".join(lines)


class _Step:
    """One planning round: the view, the cut to record, and what it newly hides."""

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        compactions: Sequence[Mapping[str, Any]],
        policy: ContextPolicy,
        reserve_tokens: int,
    ) -> None:
        self.view: ContextView = plan_context(
            messages, compactions, policy, reserve_tokens=reserve_tokens
        )
        last = compactions[-1] if compactions else None
        old_cut = last.get("cut_to") if last else None
        old_hidden = tuple(last.get("hidden", ())) if last else ()
        self.moved = self.view.cut_to != old_cut
        self.changed = self.moved or self.view.hidden != old_hidden
        self.cut_to, self.cut_index = self.view.cut_to, self.view.cut_index
        target = policy.effective_trim_to()
        if self.moved and target is not None and policy.max_tokens is not None:
            # Cut down to trim_to of the budget, so the cut moves rarely.
            extra = int(policy.max_tokens * (1 - target))
            deep = plan_context(
                messages, compactions, policy, reserve_tokens=reserve_tokens + extra
            )
            if deep.cut_index > self.cut_index:
                self.cut_to, self.cut_index = deep.cut_to, deep.cut_index
        self.dropped: list[BaseMessage] = []
        if self.moved:
            if self.cut_to is None:
                raise InvalidMessageError(
                    "cannot record a compaction: the last hidden message has no id",
                    fix="give every message an id (a threadlog message log does)",
                )
            self.dropped = _newly_hidden(messages, self.cut_index, old_cut, len(self.view.head))


def _newly_hidden(
    messages: Sequence[BaseMessage], cut_index: int, old_cut: str | None, head: int
) -> list[BaseMessage]:
    # Walk back from the new cut to the old one (or the pinned head): O(newly hidden).
    out: list[BaseMessage] = []
    k = cut_index
    while k >= head and messages[k].id != old_cut:
        out.append(messages[k])
        k -= 1
    out.reverse()
    return out


def _event(
    step: _Step,
    compactions: Sequence[Mapping[str, Any]],
    policy: ContextPolicy,
    summary: str | None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "kind": "summary" if summary is not None else "trim",
        "cut_to": step.cut_to,
        "hidden": list(step.view.hidden),
        "summary": summary,
    }
    blob = json.dumps([len(compactions), payload], sort_keys=True, ensure_ascii=False)
    eid = "cmp-" + hashlib.blake2b(blob.encode("utf-8"), digest_size=10).hexdigest()
    return {
        "id": eid,
        **payload,
        "summary_id": f"{eid}-summary" if summary is not None else None,
        "dropped": len(step.dropped),
        "policy": policy.describe(),
        "ts": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _explain(event: dict[str, Any], view: ContextView, policy: ContextPolicy) -> None:
    limits = [
        f"{k}={v}"
        for k, v in (("max_turns", policy.max_turns), ("max_tokens", policy.max_tokens))
        if v is not None
    ]
    event["tokens"] = view.tokens
    event["reason"] = (
        f"{' and '.join(limits) or 'policy'}: {event['dropped']} more message(s) hidden"
        + (f", {len(view.hidden)} inside the newest turn" if view.hidden else "")
        + f"; the context keeps {view.turns} turn(s), {view.tokens} tokens"
    )


def _quiet(config: RunnableConfig | None) -> RunnableConfig:
    # The summarizer's tokens are bookkeeping: out of stream_mode="messages", named in traces.
    tags = [*((config or {}).get("tags") or []), TAG_NOSTREAM, "threadlog:summary"]
    return {**(config or {}), "tags": tags, "run_name": "threadlog_summary"}


_Result = tuple[ContextView, list[dict[str, Any]]]


def compact_flow(
    messages: Sequence[BaseMessage],
    compactions: Sequence[Mapping[str, Any]],
    policy: ContextPolicy,
    reserve_tokens: int = 0,
    config: RunnableConfig | None = None,
) -> Flow[_Result]:
    """`compact` as one flow (`threadlog.flows`): the summarizer's `invoke` / `ainvoke`."""
    events: list[dict[str, Any]] = []
    all_events = list(compactions)
    view: ContextView | None = None
    for _ in range(_ROUNDS):
        step = _Step(messages, all_events, policy, reserve_tokens)
        view = step.view
        if not step.changed:
            break
        summary = None
        if policy.summarizer is not None:
            prev = next((e for e in reversed(all_events) if e.get("kind") == "summary"), None)
            summary = None if prev is None else str(prev["summary"])
            if step.moved:
                body = transcript(step.dropped)
                if summary:
                    body = f"Summary so far:\n{summary}\n\nThen:\n{body}"
                request = [SystemMessage(policy.summary_prompt), HumanMessage(body)]
                model = policy.summarizer
                reply = yield Io(model.invoke, model.ainvoke, (request, _quiet(config)))
                summary = reply.text if isinstance(reply, BaseMessage) else str(reply)
        event = _event(step, all_events, policy, summary)
        events.append(event)
        all_events.append(event)
        view = plan_context(messages, all_events, policy, reserve_tokens=reserve_tokens)
        _explain(event, view, policy)
        if summary is None:
            break
    assert view is not None
    return view, events


compact, acompact = drivers(
    compact_flow,
    "compact",
    "The context for this log and the new events to record (empty when nothing new is "
    "hidden). Calls `policy.summarizer` when it is set and the cut moved.",
)


append_compactions = append_events
"""The pure reducer of the `compactions` key (`threadlog.context.events`)."""


Compactions = Annotated[list[dict[str, Any]], CompactionsChannel()]
"""Annotate a state key with this to record compaction events: `compactions: Compactions`."""


class AgentState(MessagesState):
    """`threadlog.MessagesState` plus the `compactions` event list."""

    compactions: Compactions
