"""`validate(messages, profile)`: would the provider accept this history?"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from threadlog import (
    PROFILES,
    InvalidMessageError,
    Profile,
    ToolPairingError,
    append_messages,
    get_profile,
    validate,
)


def _ai(mid: str, *calls: str) -> AIMessage:
    return AIMessage("", id=mid, tool_calls=[{"name": "f", "args": {}, "id": c} for c in calls])


def _res(call: str, mid: str | None = None) -> ToolMessage:
    return ToolMessage("ok", tool_call_id=call, id=mid or f"t-{call}")


GOOD: list[Any] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather in Paris and Rome?"},
    _ai("a1", "c1", "c2"),
    _res("c1"),
    {"role": "tool", "content": "rain", "tool_call_id": "c2"},
    ("assistant", "Sun in Paris, rain in Rome."),
    "thanks",
]


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_a_well_formed_history_passes_every_profile(profile: str) -> None:
    assert validate(GOOD, profile) is None
    assert validate(GOOD, profile, allow_pending_calls=False) is None


def test_orphan_result_is_a_pairing_error_naming_the_call_and_position() -> None:
    with pytest.raises(ToolPairingError, match="'c9'") as info:
        validate([HumanMessage("q", id="u1"), _res("c9", "t9")])
    assert (info.value.message_id, info.value.role, info.value.position) == ("t9", "tool", 1)


def test_duplicate_result_is_a_pairing_error() -> None:
    with pytest.raises(ToolPairingError, match="second result for call 'c1'"):
        validate([_ai("a1", "c1"), _res("c1", "t1"), _res("c1", "t2")])


def test_unanswered_call_before_a_later_message_is_a_pairing_error() -> None:
    history = [HumanMessage("q", id="u1"), _ai("a1", "c1", "c2"), _res("c1"), HumanMessage("?")]
    with pytest.raises(ToolPairingError, match="call 'c2'") as info:
        validate(history)
    assert info.value.position == 3


def test_pending_calls_at_the_end_are_allowed_unless_about_to_be_sent() -> None:
    history = [HumanMessage("q", id="u1"), _ai("a1", "c1")]
    assert validate(history) is None
    with pytest.raises(ToolPairingError, match="no result at the end") as info:
        validate(history, allow_pending_calls=False)
    assert info.value.message_id == "a1"


def test_invalid_tool_calls_need_a_result_too() -> None:
    ai = AIMessage(
        "",
        id="a1",
        tool_calls=[{"name": "f", "args": {}, "id": "c1"}],
        invalid_tool_calls=[{"name": "g", "args": "{", "id": "c2", "error": "bad json"}],
    )
    with pytest.raises(ToolPairingError, match="'c2'"):
        validate([HumanMessage("q"), ai, _res("c1")], allow_pending_calls=False)
    assert (
        validate([HumanMessage("q"), ai, _res("c1"), _res("c2")], allow_pending_calls=False) is None
    )


def test_reused_call_id_is_a_pairing_error() -> None:
    with pytest.raises(ToolPairingError, match="used twice"):
        validate([_ai("a1", "c1"), _res("c1"), _ai("a2", "c1")])


def test_invalid_input_is_an_invalid_message_error() -> None:
    with pytest.raises(InvalidMessageError, match="'robot'"):
        validate([{"role": "robot", "content": "x"}])


def test_profiles_without_late_system_text_refuse_it() -> None:
    late = [HumanMessage("q"), AIMessage("a"), SystemMessage("new rule")]
    assert validate(late, "openai-chat") is None
    for name in ("anthropic", "gemini"):
        with pytest.raises(InvalidMessageError, match="only before the conversation") as info:
            validate(late, name)
        assert info.value.position == 2 and info.value.role == "system"


def test_profiles_that_need_a_user_turn_first_say_so() -> None:
    history = [SystemMessage("s"), AIMessage("I start")]
    assert validate(history, "openai-chat") is None
    with pytest.raises(InvalidMessageError, match="start with a user message"):
        validate(history, "anthropic")


def test_a_log_with_a_late_result_validates_because_results_are_placed_by_call() -> None:
    # The result arrives after the user spoke again; the log places it after its call,
    # so the history stays valid for the provider.
    log = append_messages([], [HumanMessage("q", id="u1"), _ai("a1", "c1")])
    log = append_messages(log, [HumanMessage("still there?", id="u2")])
    log = append_messages(log, [_res("c1")])
    assert [m.id for m in log] == ["u1", "a1", "t-c1", "u2"]
    assert validate(log, allow_pending_calls=False) is None


def test_profiles_are_readable_frozen_data() -> None:
    prof = get_profile("anthropic")
    assert isinstance(prof, Profile) and get_profile(prof) is prof
    assert prof.developer == "as-system" and prof.tool_results == "user-block"
    assert PROFILES["openai-chat"].developer == "native"
    assert {f.name for f in dataclasses.fields(Profile)} >= {
        "name",
        "system",
        "developer",
        "system_anywhere",
        "tool_results",
        "first_turn_user",
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        prof.name = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"known: .*openai-chat"):
        get_profile("nonexistent")


def test_validate_raises_the_first_problem_find_problems_finds_for_its_profile() -> None:
    from threadlog.providers.problems import find_problems

    histories: list[list[Any]] = [
        [HumanMessage("q", id="u1"), _res("c9", "t9")],
        [_ai("a1", "c1"), _res("c1", "t1"), _res("c1", "t2")],
        [HumanMessage("q", id="u1"), _ai("a1", "c1"), HumanMessage("?", id="u2")],
        [HumanMessage("q", id="u1"), AIMessage("", id="a1"), HumanMessage("?", id="u2")],
        [SystemMessage("s", id="s1"), AIMessage("hi", id="a1"), SystemMessage("late", id="s2")],
        [_ai("a1", "c1"), _res("c1"), _ai("a2", "c1"), _res("c1", "t2")],
        GOOD,
    ]
    for name in ("openai-chat", "anthropic", "gemini"):
        for history in histories:
            first = find_problems(history, [get_profile(name)])
            if not first:
                assert validate(history, name, allow_pending_calls=False) is None
                continue
            with pytest.raises((ToolPairingError, InvalidMessageError)) as info:
                validate(history, name, allow_pending_calls=False)
            at = first[0].closed_by if first[0].closed_by is not None else first[0].position
            assert info.value.position == at, (name, history)


def test_empty_content_is_refused_by_validate_for_the_user_block_profiles_only() -> None:
    history = [HumanMessage("q", id="u1"), AIMessage("", id="a1"), HumanMessage("?", id="u2")]
    assert validate(history, "openai-chat") is None
    for name in ("anthropic", "gemini"):
        with pytest.raises(InvalidMessageError, match="no content") as info:
            validate(history, name)
        assert (info.value.message_id, info.value.position) == ("a1", 1)
