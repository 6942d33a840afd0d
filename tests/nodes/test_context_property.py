"""Property: a 500-turn history trimmed at any budget is always a history providers accept.

Every context the policy derives — at many budgets, turn limits and token counters, and
at every model call of a growing thread with compaction events — is checked by
`threadlog.validate(..., allow_pending_calls=False)` and by the strict local server's
Chat Completions rules (on langchain-openai's own payload, and a sample over real HTTP).
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI

from tests.helpers.model import one_token_each
from tests.helpers.openai_server import OpenAIServer, check_messages
from threadlog import (
    ContextPolicy,
    append_messages,
    build_context,
    openai_payload,
    plan_context,
    validate,
)
from threadlog.context.compaction import compact
from threadlog.nodes.model import repair_open_calls


def synthetic_history(seed: int, turns: int = 500) -> list[BaseMessage]:
    """A thread of `turns` user turns: tool exchanges of 1-3 parallel calls, several
    exchanges per turn, calls left open by a crash, empty and long texts."""
    rng = random.Random(seed)
    out: list[Any] = [SystemMessage("You are a weather assistant.", id="sys")]
    n = 0

    def nid(p: str) -> str:
        nonlocal n
        n += 1
        return f"{p}{n}"

    for t in range(turns):
        out.append(HumanMessage("q" * rng.choice([1, 5, 40, 400]) + f" {t}", id=nid("h")))
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            calls = [{"name": "get_weather", "args": {"city": f"c{k}"}, "id": nid("call"),
                      "type": "tool_call"} for k in range(rng.randint(1, 3))]
            out.append(AIMessage("", id=nid("a"), tool_calls=calls))
            crashed = rng.random() < 0.05
            answered = calls[: rng.randrange(len(calls))] if crashed else calls
            order = list(answered)
            rng.shuffle(order)  # results arrive in any order; the log places them
            out.extend(ToolMessage("r" * rng.choice([1, 30, 300]), tool_call_id=c["id"],
                                   id=nid("t")) for c in order)
            if crashed:
                break
        else:
            out.append(AIMessage("answer " * rng.choice([1, 10, 100]), id=nid("a")))
    return append_messages([], out)  # log order: results after their request


def sent_context(context: list[BaseMessage]) -> list[BaseMessage]:
    """What ModelNode sends: the context with open calls repaired, then validated."""
    repaired, _ = repair_open_calls(context)
    validate(repaired, "openai-chat", allow_pending_calls=False)
    check_messages(openai_payload(repaired, "openai-chat"))
    return repaired


def call_point(log: list[BaseMessage], end: float) -> list[BaseMessage]:
    """The log as it was at a model call near fraction `end` of the thread (the whole
    log at 1.0): after a user message or after the last result of a request."""
    k = max(2, round(end * len(log)))
    while k < len(log) and (
        isinstance(log[k], ToolMessage)
        or (isinstance(log[k - 1], AIMessage) and log[k - 1].tool_calls)
    ):
        k += 1
    return log[:k]


_HISTORIES: dict[int, list[BaseMessage]] = {}


def history(seed: int) -> list[BaseMessage]:
    if seed not in _HISTORIES:
        _HISTORIES[seed] = synthetic_history(seed)
    return _HISTORIES[seed]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 3),
    budgets=st.lists(st.integers(1, 60_000), min_size=5, max_size=10),
    max_turns=st.one_of(st.none(), st.integers(1, 600)),
    unit_tokens=st.booleans(),
    end=st.floats(0.0, 1.0),
)
def test_every_trimmed_500_turn_context_is_accepted(
    seed: int, budgets: list[int], max_turns: int | None, unit_tokens: bool, end: float
) -> None:
    log = call_point(history(seed), end)
    counter = one_token_each if unit_tokens else None
    for budget in budgets:
        policy = ContextPolicy(max_tokens=budget, max_turns=max_turns, token_counter=counter)
        ctx = sent_context(build_context(log, [], policy))
        assert ctx[0].id == "sys"
        last_user = next(m for m in reversed(log) if isinstance(m, HumanMessage))
        assert last_user in ctx


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 3), budget=st.integers(50, 5_000))
def test_every_model_call_of_a_growing_thread_is_accepted(seed: int, budget: int) -> None:
    log = history(seed)[:700]
    policy = ContextPolicy(max_tokens=budget)
    events: list[dict[str, Any]] = []
    cuts: list[int] = []
    index = {m.id: i for i, m in enumerate(log)}
    for k in range(2, len(log) + 1):
        if isinstance(log[k - 1], AIMessage) and log[k - 1].tool_calls:
            continue  # the model is called after a user message or after results
        if k < len(log) and isinstance(log[k], ToolMessage):
            continue  # more results of the same request are still coming
        view, new = compact(log[:k], events, policy)
        events += new
        sent_context(view.messages)
        # The warm caches (token counts, closed turns, cut positions) change nothing.
        cold = plan_context(log[:k], events, ContextPolicy(max_tokens=budget))
        assert [m.id for m in cold.messages] == [m.id for m in view.messages]
        if events and events[-1]["cut_to"] is not None:
            cuts.append(index[events[-1]["cut_to"]])
    assert cuts == sorted(cuts)  # a cut only moves forward


def test_a_sample_of_trimmed_contexts_over_real_http() -> None:
    log = history(0)
    with OpenAIServer() as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="test",  # type: ignore[arg-type]
                           max_retries=0)
        for budget in (1, 120, 700, 3_000, 20_000):
            model.invoke(sent_context(build_context(log, [], ContextPolicy(max_tokens=budget))))
        assert len(server.requests) == 5 and server.errors == []
        for body in server.requests:
            assert body["messages"][0]["role"] == "system"
