"""ContextPolicy / build_context: pairing-safe trimming, each shape from issue 4's "Why"."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, RemoveMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from tests.helpers.model import ai, ids, one_token_each, result, system, user
from threadlog import (
    ContextPolicy,
    InvalidMessageError,
    ToolPairingError,
    append_messages,
    build_context,
    plan_context,
    validate,
)

# [system, human, AI(calls a, b), tool a, tool b, AI, human] — the example.
EXAMPLE = [
    system("s"),
    user("h1"),
    ai("a1", "a", "b"),
    result("a"),
    result("b"),
    ai("a2", content="answer"),
    user("h2"),
]


def test_trim_messages_last_can_start_with_tool_results_but_the_policy_cannot() -> None:
    trimmed = trim_messages(EXAMPLE, strategy="last", token_counter=len, max_tokens=4)
    assert ids(trimmed) == ["t-a", "t-b", "a2", "h2"]
    with pytest.raises(ToolPairingError, match="no earlier AIMessage"):
        validate(trimmed, allow_pending_calls=False)

    ours = build_context(EXAMPLE, [], ContextPolicy(max_tokens=4, token_counter=one_token_each))
    assert ids(ours) == ["s", "h2"]
    validate(ours, allow_pending_calls=False)


def test_trim_messages_first_can_keep_a_request_with_half_its_results() -> None:
    trimmed = trim_messages(EXAMPLE, strategy="first", token_counter=len, max_tokens=4)
    assert ids(trimmed) == ["s", "h1", "a1", "t-a"]
    with pytest.raises(ToolPairingError, match="'b'"):
        validate(trimmed, allow_pending_calls=False)


@pytest.mark.parametrize("budget", range(1, 9))
def test_every_budget_keeps_the_exchange_whole_or_drops_it_whole(budget: int) -> None:
    ours = build_context(
        EXAMPLE, [], ContextPolicy(max_tokens=budget, token_counter=one_token_each)
    )
    validate(ours, allow_pending_calls=False)
    kept = set(ids(ours))
    assert {"a1", "t-a", "t-b"} <= kept or not ({"a1", "t-a", "t-b"} & kept)
    assert ours[0].id == "s" and ours[-1].id == "h2"


def test_interleaved_requests_and_results_are_one_unit() -> None:
    # [human, AI1(call a), AI2(call b), tool a, tool b, AI]: a cut that walks back to one
    # AIMessage would keep AI2 + both results and orphan tool a.
    log = [
        user("h1"),
        ai("x1", "a"),
        ai("x2", "b"),
        result("a"),
        result("b"),
        ai("y", content="done"),
        user("h2"),
        ai("z1", "c"),
        ai("z2", "d"),
        result("c"),
        result("d"),
    ]
    for budget in range(1, 13):
        view = plan_context(log, [], ContextPolicy(max_tokens=budget, token_counter=one_token_each))
        # No orphan and no half exchange: the log accepts the context as a history, and
        # once it places each result after its request, the provider rules hold.
        placed = append_messages([], view.messages)
        validate(placed, allow_pending_calls=False)
        kept = set(ids(view.messages))
        assert {"z1", "z2", "t-c", "t-d"} <= kept  # the newest unit is always kept
        assert {"x1", "x2", "t-a", "t-b"} <= kept or not ({"x1", "x2", "t-a", "t-b"} & kept)
    # A threadlog log never holds this shape: results are placed after their request.
    assert ids(append_messages([], log))[1:5] == ["x1", "t-a", "x2", "t-b"]


def test_newest_user_message_is_kept_even_when_over_budget() -> None:
    log = [system("s"), user("h1"), ai("a1", content="hi"), user("h2", "x" * 4000)]
    ctx = build_context(log, [], ContextPolicy(max_tokens=10))
    assert ids(ctx) == ["s", "h2"]


def test_a_context_always_has_a_user_message_when_the_log_has_one() -> None:
    # langmem-style summarizing can leave no human message at all; the policy cannot.
    log = [user("h1"), *[m for i in range(30) for m in (ai(f"a{i}", f"c{i}"), result(f"c{i}"))]]
    for budget in (1, 50, 200, 400):
        ctx = build_context(log, [], ContextPolicy(max_tokens=budget))
        assert isinstance(ctx[0], HumanMessage)
        validate(ctx, "anthropic", allow_pending_calls=False)


def test_newest_turn_drops_its_oldest_units_first_and_keeps_user_and_newest_unit() -> None:
    log = [
        user("h1"),
        ai("a", "c1"),
        result("c1"),
        ai("b", "c2"),
        result("c2"),
        ai("c", "c3"),
        result("c3"),
    ]
    view = plan_context(log, [], ContextPolicy(max_tokens=5, token_counter=one_token_each))
    assert ids(view.messages) == ["h1", "b", "t-c2", "c", "t-c3"]
    assert view.hidden == ("a", "t-c1")


def test_system_and_developer_messages_are_kept_first() -> None:
    dev = SystemMessage(
        content="be brief", id="dev", additional_kwargs={"__openai_role__": "developer"}
    )
    log = [
        system("s"),
        dev,
        *[m for i in range(10) for m in (user(f"h{i}"), ai(f"a{i}", content="ok"))],
    ]
    ctx = build_context(log, [], ContextPolicy(max_turns=2))
    assert ids(ctx) == ["s", "dev", "h8", "a8", "h9", "a9"]


def test_max_turns_counts_user_turns() -> None:
    log = [
        m
        for i in range(5)
        for m in (user(f"h{i}"), ai(f"a{i}", f"c{i}"), result(f"c{i}"), ai(f"b{i}", content="ok"))
    ]
    assert ids(build_context(log, [], ContextPolicy(max_turns=1))) == ["h4", "a4", "t-c4", "b4"]
    assert len(build_context(log, [], ContextPolicy(max_turns=3))) == 12
    assert len(build_context(log, [], ContextPolicy())) == len(log)


def test_token_counting_is_offline_by_default_and_pluggable() -> None:
    log = [user("h1", "word " * 100), ai("a1", content="ok"), user("h2")]
    policy = ContextPolicy(max_tokens=50)
    assert policy.count(log[0]) == count_tokens_approximately([log[0]])
    assert ids(build_context(log, [], policy)) == ["h2"]
    calls: list[int] = []

    def counter(messages: list[object]) -> int:
        calls.append(len(messages))
        return 1

    policy = ContextPolicy(max_tokens=50, token_counter=counter)
    assert ids(build_context(log, [], policy)) == ["h1", "a1", "h2"]
    build_context(log, [], policy)
    assert len(calls) == 3  # each message counted once: counts are cached by id


def test_events_cut_only_forward_and_never_remove_from_the_log() -> None:
    log = [m for i in range(6) for m in (user(f"h{i}"), ai(f"a{i}", content="ok"))]
    event = {"id": "cmp-1", "kind": "trim", "cut_to": "a2", "hidden": []}
    # A generous policy cannot bring back what an event already hid.
    assert ids(build_context(log, [event], ContextPolicy())) == ids(log[6:])
    assert len(log) == 12


def test_an_event_naming_an_unknown_message_is_a_clear_error() -> None:
    log = [user("h1"), ai("a1", content="ok")]
    with pytest.raises(InvalidMessageError, match="'nope', which is not in the log"):
        build_context(log, [{"id": "cmp-x", "kind": "trim", "cut_to": "nope"}], ContextPolicy())


def test_summary_event_puts_the_summary_after_the_pinned_system_text() -> None:
    log = [system("s"), *[m for i in range(4) for m in (user(f"h{i}"), ai(f"a{i}", content="ok"))]]
    event = {
        "id": "cmp-1",
        "kind": "summary",
        "cut_to": "a1",
        "hidden": [],
        "summary": "the user asked twice",
        "summary_id": "cmp-1-summary",
    }
    ctx = build_context(log, [event], ContextPolicy())
    assert ids(ctx) == ["s", "cmp-1-summary", "h2", "a2", "h3", "a3"]
    assert "the user asked twice" in str(ctx[1].content)
    validate(ctx, "anthropic", allow_pending_calls=False)


def test_deleting_summaries_are_removal_events_in_the_log() -> None:
    # The summarization recipe deletes history with RemoveMessage(REMOVE_ALL_MESSAGES):
    # a removal event (threadlog.log.removals) — the view holds only the replacements.
    out = append_messages(
        [user("h1")], [RemoveMessage(id=REMOVE_ALL_MESSAGES), system("s1", "summary")]
    )
    assert [m.content for m in out] == ["summary"]


def test_policy_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        ContextPolicy(max_tokens=0)


def test_a_late_result_inserted_into_an_old_turn_is_seen_despite_the_caches() -> None:
    # A repaired call's result lands inside an old turn and shifts every later index.
    log = [m for i in range(8) for m in (user(f"h{i}"), ai(f"a{i}", content="ok"))]
    log[3:3] = [ai("open", "late")]  # turn h1 gets a call that has no result yet
    log = append_messages([], log)
    warm = ContextPolicy(max_tokens=120)
    for k in range(4, len(log) + 1):
        build_context(log[:k], [], warm)  # fills the caches turn by turn
    grown = append_messages(log, [result("late", "x" * 200)])
    assert ids(grown)[4] == "t-late"
    cold = ContextPolicy(max_tokens=120)
    assert ids(build_context(grown, [], warm)) == ids(build_context(grown, [], cold))
    assert ids(build_context(grown, [], ContextPolicy())) == ids(grown)


def _grow(policy: ContextPolicy, turns: int = 40) -> tuple[list[dict[str, object]], list[int]]:
    from threadlog.context.compaction import compact

    log: list[object] = [system("s")]
    events: list[dict[str, object]] = []
    sizes = []
    for i in range(turns):
        log += [user(f"h{i}", f"question {i} " * 5), ai(f"a{i}", content=f"answer {i} " * 5)]
        view, new = compact(log, events, policy)  # type: ignore[arg-type]
        events += new
        sizes.append(view.tokens)
        assert ids(view.messages) == ids(build_context(log, events, policy))  # type: ignore[arg-type]
    return events, sizes


def test_trim_to_cuts_deeper_so_the_cut_moves_rarely() -> None:
    eager, eager_sizes = _grow(ContextPolicy(max_tokens=300, trim_to=1))
    lazy, lazy_sizes = _grow(ContextPolicy(max_tokens=300, trim_to=0.5))
    assert len(eager) > 2 * len(lazy) > 0
    assert max(eager_sizes) <= 300 and max(lazy_sizes) <= 300
    assert min(lazy_sizes[10:]) <= 170  # right after a deep cut: about half the budget


def test_a_summarizing_policy_summarizes_once_per_half_budget_not_every_turn() -> None:
    from threadlog import OfflineChatModel

    events, _ = _grow(ContextPolicy(max_tokens=300, summarizer=OfflineChatModel()))
    eager, _ = _grow(ContextPolicy(max_tokens=300, summarizer=OfflineChatModel(), trim_to=1))
    summaries = [e for e in events if e["kind"] == "summary"]
    assert 0 < 2 * len(summaries) < len([e for e in eager if e["kind"] == "summary"])
    assert "question 0" in str(summaries[0]["summary"])
