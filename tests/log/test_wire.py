"""The serialization boundary: what of a logged message may reach each provider."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI

from tests.helpers.model import ai, result, system, user
from tests.helpers.openai_server import RequestError, check_messages
from threadlog import PROFILES, OfflineChatModel, openai_payload, profile_for, to_wire, validate

DEVELOPER = SystemMessage(
    content="answer in French", id="dev", additional_kwargs={"__openai_role__": "developer"}
)


def _logged_history() -> list[object]:
    """A history carrying everything our log and tools attach to messages."""
    request = AIMessage(
        content="",
        id="run-123",
        name="Weather Agent",
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
        ],
        usage_metadata={"input_tokens": 5, "output_tokens": 7, "total_tokens": 12},
        response_metadata={"model_name": "gpt-x", "system_fingerprint": "fp", "audit": 1},
        additional_kwargs={"refusal": None, "threadlog_audit": {"by": "node"}},
    )
    answer = ToolMessage(
        content="sunny",
        tool_call_id="c1",
        id="t1",
        name="get_weather",
        status="success",
        artifact={"raw": [1, 2, 3]},
        response_metadata={"audit": "x"},
        additional_kwargs={"elapsed_ms": 12},
    )
    return [
        system("s"),
        DEVELOPER,
        HumanMessage(content="Paris?", id="h1", name="Ann Smith", additional_kwargs={"ui": "web"}),
        request,
        answer,
        AIMessage(content="Sunny.", id="a2", name="weather_agent"),
    ]


def test_openai_payload_holds_only_what_chat_completions_defines() -> None:
    payload = openai_payload(_logged_history(), "openai-chat")
    check_messages(payload)  # the strict local server's own rules
    blob = json.dumps(payload)
    for leaked in (
        "run-123",
        "audit",
        "elapsed_ms",
        "raw",
        "usage",
        "fp",
        '"id": "t1"',
        "Weather Agent",
        "Ann Smith",
        "ui",
    ):
        assert leaked not in blob, leaked
    assert payload[1] == {"role": "developer", "content": "answer in French"}
    assert payload[3]["tool_calls"][0]["id"] == "c1"
    assert payload[4] == {"role": "tool", "content": "sunny", "tool_call_id": "c1"}
    assert payload[5] == {"role": "assistant", "content": "Sunny.", "name": "weather_agent"}


def test_a_name_with_spaces_reaches_openai_only_without_threadlog() -> None:
    history = [HumanMessage("hi", name="Weather Agent")]
    from langchain_openai.chat_models.base import _convert_message_to_dict

    raw = [_convert_message_to_dict(m) for m in history]
    with pytest.raises(RequestError, match=r"Invalid 'messages\[0\].name'"):
        check_messages(raw)
    assert "name" not in openai_payload(history, "openai-chat")[0]


def test_openai_compatible_folds_developer_and_never_sends_names() -> None:
    payload = openai_payload(_logged_history(), "openai-compatible")
    assert payload[1] == {"role": "system", "content": "answer in French"}
    assert all("name" not in m for m in payload)


@pytest.mark.parametrize("profile", ["anthropic", "gemini"])
def test_top_level_system_profiles_get_one_folded_system_text(profile: str) -> None:
    wire = to_wire(_logged_history(), profile)
    assert (
        isinstance(wire[0], SystemMessage)
        and wire[0].text == "You are helpful.\n\nanswer in French"
    )
    assert not wire[0].additional_kwargs
    assert not any(isinstance(m, SystemMessage) for m in wire[1:])
    assert all(m.name is None for m in wire if not isinstance(m, ToolMessage))
    tool = next(m for m in wire if isinstance(m, ToolMessage))
    assert tool.name == "get_weather" and tool.artifact is None  # functionResponse needs it


def test_wire_messages_carry_no_ids_or_metadata_for_any_profile() -> None:
    for name in PROFILES:
        for m in to_wire(_logged_history(), name):
            assert m.id is None and not m.response_metadata
            assert set(m.additional_kwargs) <= {"__openai_role__"}
            if isinstance(m, AIMessage):
                assert m.usage_metadata is None
            if isinstance(m, ToolMessage):
                assert m.artifact is None


def test_responses_profile_uses_langchain_openais_input_builder() -> None:
    items = openai_payload(_logged_history(), "openai-responses")
    kinds = [i.get("type", i.get("role")) for i in items]
    assert "function_call" in kinds and "function_call_output" in kinds
    assert "run-123" not in json.dumps(items)


def test_invalid_tool_calls_travel_as_calls_with_their_raw_arguments() -> None:
    bad = AIMessage(
        content="",
        id="x",
        invalid_tool_calls=[
            {
                "name": "get_weather",
                "args": "{city:",
                "id": "cb",
                "error": "e",
                "type": "invalid_tool_call",
            }
        ],
    )
    payload = openai_payload([user("h"), bad, result("cb", "Error: bad JSON")])
    assert payload[1]["tool_calls"][0]["function"]["arguments"] == "{city:"
    check_messages(payload)


@pytest.mark.parametrize(
    ("profile", "history", "error"),
    [
        (
            "anthropic",
            [user("h1"), ai("a1", content="ok"), system("late")],
            "system text only before the conversation",
        ),
        ("gemini", [ai("a0", content="hello"), user("h1")], "start with a user message"),
        ("openai-chat", [user("h1"), result("zz")], "no earlier AIMessage"),
    ],
)
def test_profile_rules_reject_what_the_provider_rejects(
    profile: str, history: list[object], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        validate(history, profile)


def test_openai_chat_accepts_a_late_system_message() -> None:
    validate([user("h1"), ai("a1", content="ok"), system("late")], "openai-chat")


def test_profile_is_inferred_from_the_model() -> None:
    assert profile_for(ChatOpenAI(api_key="k")).name == "openai-chat"  # type: ignore[arg-type]
    local = ChatOpenAI(api_key="k", base_url="http://127.0.0.1:1/v1")  # type: ignore[arg-type]
    assert profile_for(local.bind_tools([])).name == "openai-compatible"
    responses = ChatOpenAI(api_key="k", use_responses_api=True)  # type: ignore[arg-type]
    assert profile_for(responses).name == "openai-responses"
    assert profile_for(OfflineChatModel()).name == "openai-chat"
    assert profile_for(object()).name == "openai-chat"


def test_anthropic_and_google_models_get_their_profiles_from_their_langsmith_provider() -> None:
    # ChatAnthropic / ChatGoogleGenerativeAI / ChatVertexAI name their provider in
    # `_get_ls_params`, which is all profile_for reads; those packages are not installed here.
    class Named(OfflineChatModel):
        provider: str

        def _get_ls_params(self, stop: Any = None, **kwargs: Any) -> Any:
            return {**super()._get_ls_params(stop=stop, **kwargs), "ls_provider": self.provider}

    assert profile_for(Named(provider="anthropic")).name == "anthropic"
    for google in ("google_genai", "google_vertexai"):
        assert profile_for(Named(provider=google).bind_tools([])).name == "gemini"
    local = ChatOpenAI(api_key="k", base_url="http://127.0.0.1:8080/v1")  # type: ignore[arg-type]
    assert profile_for(local).name == "llama-server"  # by its port alone


def test_the_profile_table_documents_every_profile() -> None:
    from pathlib import Path

    table = Path(__file__).parents[2].joinpath("docs", "profiles.md").read_text()
    for name, prof in PROFILES.items():
        assert f"| `{name}` | {prof.description} |" in table


# -- checked histories and the node's copies (issue 24: CPU per turn) -------------------


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_checked_wire_copies_of_a_logged_history_equal_the_coerced_ones(profile: str) -> None:
    history = _logged_history()
    assert to_wire(history, profile, checked=True) == to_wire(history, profile)


def test_checked_skips_the_check_only_for_messages_in_their_stored_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threadlog.providers.wire as wire
    from threadlog import InvalidMessageError

    coerced: list[object] = []
    real = wire.coerce_message

    def counting(value: object, **kw: object) -> object:
        coerced.append(value)
        return real(value, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(wire, "coerce_message", counting)
    pair, no_id = ("user", "hi"), HumanMessage("no id")
    out = to_wire([user("h1"), pair, ai("a1"), no_id], checked=True)
    assert coerced == [pair, no_id]  # the two logged messages are not re-checked
    assert [type(m) for m in out] == [HumanMessage, HumanMessage, AIMessage, HumanMessage]
    with pytest.raises(InvalidMessageError, match="lone surrogate"):
        to_wire([{"role": "user", "content": "bad \ud800"}], checked=True)
    coerced.clear()
    to_wire([user("h1"), ai("a1")])  # unchecked: every message is coerced, as before
    assert len(coerced) == 2


def _thread(i: int) -> Any:
    return {"configurable": {"thread_id": f"{i}"}}


def test_a_model_node_serving_many_threads_keeps_its_wire_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Was: the node emptied its copies whenever they outgrew one context, so with a few
    # dozen threads at once every message of every context was copied again each call.
    from langgraph.checkpoint.memory import InMemorySaver

    import threadlog
    import threadlog.providers.wire as wire

    made: list[str | None] = []
    real = wire._one

    def counting(message: object, profile: object) -> object:
        made.append(getattr(message, "id", None))
        return real(message, profile)  # type: ignore[arg-type]

    monkeypatch.setattr(wire, "_one", counting)
    graph = threadlog.create_agent(OfflineChatModel(), [], checkpointer=InMemorySaver())
    threads = 60
    for i in range(threads):
        graph.invoke({"messages": [user(f"a{i}", f"hello {i}")]}, _thread(i))
    made.clear()
    for i in range(threads):
        graph.invoke({"messages": [user(f"b{i}", f"again {i}")]}, _thread(i))
    # Each thread's second call copies its new messages only (the answer, the question);
    # its first question's copy is kept from the first round.
    assert len(made) == 2 * threads
    assert not any(m is not None and m.startswith("a") for m in made)
