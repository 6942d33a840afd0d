"""Compaction as explicit events, and `ContextNode`, the node that records them.

Contract:

* Trimming and summarizing never delete anything. When the policy hides more of the log
  than the latest event did, `compact` returns a new **event** — a plain dict — to be
  appended to the state key `compactions` (`threadlog.AgentState`):

      {"id": "cmp-…", "kind": "trim" | "summary", "cut_to": <id of the last hidden
       message>, "hidden": [ids hidden inside the newest turn], "dropped": <messages newly
       hidden>, "summary": <text> | None, "summary_id": <id> | None,
       "policy": {...}, "reason": "...", "tokens": <context tokens>, "ts": "<UTC ISO>"}

  The context is then `build_context(log, events, policy)`: deterministic, so a notebook
  can show what the model saw at any checkpoint.
* A summary folds the previous summary plus everything newly hidden into one text, made
  by `policy.summarizer` (any chat model). If the summary itself pushes the cut further,
  that part is folded too (up to three rounds), so no message is hidden unsummarized
  except units dropped inside the newest turn.
* Event ids are derived from the event's content and position, so a replayed node
  writes the same id and the reducer drops it as a replay.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable

from threadlog.errors import InvalidMessageError
from threadlog.messages import role_of
from threadlog.nodes.context import ContextPolicy, ContextView, plan_context

__all__ = ["ContextNode", "acompact", "compact", "transcript"]

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


def _summary_request(
    policy: ContextPolicy, previous: str | None, dropped: Sequence[BaseMessage]
) -> list[BaseMessage]:
    body = transcript(dropped)
    if previous:
        body = f"Summary so far:\n{previous}\n\nThen:\n{body}"
    return [SystemMessage(content=policy.summary_prompt), HumanMessage(content=body)]


def _text_of(reply: Any) -> str:
    if isinstance(reply, BaseMessage):
        return reply.text if isinstance(reply.content, list) else str(reply.content)
    return str(reply)


def _event_id(compactions: Sequence[Mapping[str, Any]], payload: Mapping[str, Any]) -> str:
    blob = json.dumps([len(compactions), payload], sort_keys=True, ensure_ascii=False)
    return "cmp-" + hashlib.blake2b(blob.encode("utf-8"), digest_size=10).hexdigest()


class _Step:
    """One planning round: the view, and what it newly hides (for events/summaries)."""

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
        self.old_cut = last.get("cut_to") if last else None
        self.old_hidden = tuple(last.get("hidden", ())) if last else ()
        self.moved = self.view.cut_to != self.old_cut
        self.changed = self.moved or self.view.hidden != self.old_hidden
        self.dropped: list[BaseMessage] = []
        if self.moved:
            if self.view.cut_to is None:
                raise InvalidMessageError(
                    "cannot record a compaction: the last hidden message has no id",
                    fix="give every message an id (a threadlog message log does)",
                )
            self.dropped = _newly_hidden(
                messages, self.view.cut_index, self.old_cut, len(self.view.head)
            )


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
    *,
    summary: str | None,
    dropped: int,
) -> dict[str, Any]:
    view = step.view
    kind = "summary" if summary is not None else "trim"
    reasons = []
    if policy.max_turns is not None:
        reasons.append(f"max_turns={policy.max_turns}")
    if policy.max_tokens is not None:
        reasons.append(f"max_tokens={policy.max_tokens}")
    payload: dict[str, Any] = {
        "kind": kind,
        "cut_to": view.cut_to,
        "hidden": list(view.hidden),
        "summary": summary,
    }
    eid = _event_id(compactions, payload)
    return {
        "id": eid,
        **payload,
        "summary_id": f"{eid}-summary" if summary is not None else None,
        "dropped": dropped,
        "policy": policy.describe(),
        "reason": f"{' and '.join(reasons) or 'policy'}: kept {view.turns} turn(s), "
        f"{view.tokens} tokens; {dropped} more message(s) hidden"
        + (f", {len(view.hidden)} inside the newest turn" if view.hidden else ""),
        "tokens": view.tokens,
        "ts": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _previous_summary(compactions: Sequence[Mapping[str, Any]]) -> str | None:
    ev = next((e for e in reversed(compactions) if e.get("kind") == "summary"), None)
    return None if ev is None else str(ev["summary"])


def compact(
    messages: Sequence[BaseMessage],
    compactions: Sequence[Mapping[str, Any]],
    policy: ContextPolicy,
    *,
    reserve_tokens: int = 0,
    config: RunnableConfig | None = None,
) -> tuple[ContextView, list[dict[str, Any]]]:
    """The context for this log and the new events to record (empty when nothing new
    is hidden). Calls `policy.summarizer` when it is set and the cut moved."""
    events: list[dict[str, Any]] = []
    all_events = list(compactions)
    for _ in range(_ROUNDS):
        step = _Step(messages, all_events, policy, reserve_tokens)
        if not step.changed:
            break
        summary = None
        if policy.summarizer is not None and step.moved:
            request = _summary_request(policy, _previous_summary(all_events), step.dropped)
            summary = _text_of(policy.summarizer.invoke(request, config))
        elif policy.summarizer is not None:
            summary = _previous_summary(all_events)
        event = _event(step, all_events, policy, summary=summary, dropped=len(step.dropped))
        events.append(event)
        all_events.append(event)
        if summary is None:
            break
    return plan_context(messages, all_events, policy, reserve_tokens=reserve_tokens), events


async def acompact(
    messages: Sequence[BaseMessage],
    compactions: Sequence[Mapping[str, Any]],
    policy: ContextPolicy,
    *,
    reserve_tokens: int = 0,
    config: RunnableConfig | None = None,
) -> tuple[ContextView, list[dict[str, Any]]]:
    """`compact` with the summarizer awaited."""
    events: list[dict[str, Any]] = []
    all_events = list(compactions)
    for _ in range(_ROUNDS):
        step = _Step(messages, all_events, policy, reserve_tokens)
        if not step.changed:
            break
        summary = None
        if policy.summarizer is not None and step.moved:
            request = _summary_request(policy, _previous_summary(all_events), step.dropped)
            summary = _text_of(await policy.summarizer.ainvoke(request, config))
        elif policy.summarizer is not None:
            summary = _previous_summary(all_events)
        event = _event(step, all_events, policy, summary=summary, dropped=len(step.dropped))
        events.append(event)
        all_events.append(event)
        if summary is None:
            break
    return plan_context(messages, all_events, policy, reserve_tokens=reserve_tokens), events


def _inputs(state: Any) -> tuple[list[BaseMessage], list[dict[str, Any]]]:
    if not isinstance(state, Mapping) or "messages" not in state:
        raise InvalidMessageError(
            "the context node needs a state with a 'messages' key",
            fix="use threadlog.AgentState (messages + compactions) as the graph state",
        )
    if "compactions" not in state:
        raise InvalidMessageError(
            "the context node records events in the 'compactions' state key, which "
            "this graph's state does not have",
            fix="use threadlog.AgentState, or add `compactions: threadlog.Compactions`",
        )
    return list(state["messages"]), list(state["compactions"] or [])


class ContextNode(RunnableCallable):
    """A LangGraph node that records compaction events for `policy` (no messages)."""

    def __init__(self, policy: ContextPolicy, *, name: str = "context") -> None:
        super().__init__(self._run, self._arun, name=name, trace=False)
        self.policy = policy

    def _run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages, compactions = _inputs(state)
        _, events = compact(messages, compactions, self.policy, config=config)
        return {"compactions": events} if events else {}

    async def _arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages, compactions = _inputs(state)
        _, events = await acompact(messages, compactions, self.policy, config=config)
        return {"compactions": events} if events else {}
