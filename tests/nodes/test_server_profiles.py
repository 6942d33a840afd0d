"""Server profiles on the wire: each row's request bodies, recorded, over real HTTP.

`ChatOpenAI` → a `ModelNode` with the profile → the strict local server
(`tests/helpers/openai_server.py`), which records every body. Each server profile's two bodies —
the turn's first call, and the call after a tool result — are compared with
`tests/fixtures/wire/<profile>.json`. To re-record after a deliberate change:
`THREADLOG_UPDATE_FIXTURES=1 pytest tests/nodes/test_server_profiles.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from tests.helpers.model import get_weather
from tests.helpers.openai_server import OpenAIServer
from threadlog import (
    PROFILES,
    SERVER_PROFILES,
    ModelNode,
    infer_profile,
    profile_for,
    rewrite_payload,
    validate,
    with_profile,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "wire"
SYSTEM = "You are a weather assistant."


def chat(server: OpenAIServer, **kw: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="local-model",
        base_url=server.base_url,
        api_key="test",  # type: ignore[arg-type]
        max_retries=0,
        **kw,
    )


def first_and_second_bodies(profile: str) -> list[dict[str, Any]]:
    """The bodies a ModelNode with `profile` sends for a turn's first call and for the
    call after the tool result (the history langchain-openai sends content null in)."""
    with OpenAIServer() as server:
        # streaming=True: what a streaming caller (the demo, stream_mode="messages") sends.
        model = chat(server, streaming=True, stream_usage=True)
        node = ModelNode(model, [get_weather], system_prompt=SYSTEM, profile=profile)
        user = HumanMessage("Umbrella in Beijing today?", id="u1")
        node.invoke({"messages": [user]})
        asked = AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "get_weather", "args": {"city": "Beijing"}, "id": "call_0"}],
        )
        result = ToolMessage("小雨 18°C (light rain)", tool_call_id="call_0", id="t1")
        node.invoke({"messages": [user, asked, result]})
        assert server.errors == []
        return server.requests


@pytest.mark.parametrize("profile", [p.name for p in SERVER_PROFILES])
def test_each_server_profile_sends_its_recorded_bodies(profile: str) -> None:
    bodies = first_and_second_bodies(profile)
    path = FIXTURES / f"{profile}.json"
    if os.environ.get("THREADLOG_UPDATE_FIXTURES"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(bodies, ensure_ascii=False, indent=2) + "\n")
    assert bodies == json.loads(path.read_text())


def test_the_rules_each_profile_states_are_the_ones_its_bodies_show() -> None:
    for prof in SERVER_PROFILES:
        first, second = json.loads((FIXTURES / f"{prof.name}.json").read_text())
        asked = next(m for m in second["messages"] if m.get("tool_calls"))
        assert asked["content"] == ("" if prof.tool_call_content == "empty" else None), prof.name
        restated = [m for m in second["messages"] if "tool returned" in str(m.get("content"))]
        assert bool(restated) == prof.tool_results_as_text, prof.name
        assert "tool_choice" not in second, prof.name  # only the turn's first call
        expected_choice = (
            {"type": "function", "function": {"name": "get_weather"}}
            if prof.named_for_required
            else prof.tool_choice
        )
        assert first.get("tool_choice") == expected_choice, prof.name
        assert first["stream"] is second["stream"] is prof.stream_tool_calls, prof.name
        assert ("stream_options" in first) == (prof.stream_tool_calls and prof.usage_in_stream)
        assert not any("name" in m for m in first["messages"] + second["messages"]), prof.name


def test_llama_cpp_python_gets_empty_content_where_langchain_sends_null() -> None:
    # The server types assistant content as a string: null is an HTTP 500 there.
    with OpenAIServer(string_content=True) as server:
        history = [
            HumanMessage("Umbrella in Beijing?", id="u1"),
            AIMessage(
                "",
                id="a1",
                tool_calls=[{"name": "get_weather", "args": {"city": "Beijing"}, "id": "c1"}],
            ),
            ToolMessage("rain", tool_call_id="c1", id="t1"),
        ]
        plain = ModelNode(chat(server), [get_weather], profile="openai-compatible")
        with pytest.raises(Exception, match="500"):
            plain.invoke({"messages": history})
        fixed = ModelNode(chat(server), [get_weather], profile="llama-cpp-python")
        update = fixed.invoke({"messages": history})
    assert isinstance(update["messages"][-1], AIMessage)
    assert server.requests[-1]["messages"][1]["content"] == ""
    assert len(server.errors) == 1  # only the null-content request was refused


@pytest.mark.parametrize("server", ["llama-cpp-python", "llama-server"])
def test_the_body_a_real_server_accepted_is_what_the_wire_builds(server: str) -> None:
    """Bodies recorded from the real servers (HTTP 200, see `server` and `note` in each
    file) are reproduced from the same history by langchain-openai plus the profile."""
    recorded = json.loads((FIXTURES / "recorded" / f"{server}.json").read_text())
    accepted = recorded["second_request"]
    assert recorded["second_status"] == 200
    model = with_profile(
        ChatOpenAI(model=accepted["model"], api_key="k", base_url="http://127.0.0.1:9/v1"),  # type: ignore[arg-type]
        server,
    )
    from langchain_core.messages import convert_to_messages

    history = convert_to_messages(recorded["history"])
    if accepted["messages"][0]["role"] == "system":
        history = [*convert_to_messages([accepted["messages"][0]]), *history]
        history = [m for i, m in enumerate(history) if not (i > 0 and m.type == "system")]
    bound = model.bind_tools(accepted["tools"], stream=accepted["stream"])
    body = bound.bound._get_request_payload(  # type: ignore[attr-defined]
        history,
        **bound.kwargs,  # type: ignore[attr-defined]
    )
    assert body["messages"] == accepted["messages"]


def test_rewrite_maps_call_ids_consistently_for_a_profile_with_an_id_format() -> None:
    from dataclasses import replace

    mistral = replace(PROFILES["vllm"], name="vllm-mistral", call_id_pattern=r"[a-zA-Z0-9]{9}")
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc-1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    },
                    {
                        "id": "abcdefghi",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_abc-1", "content": "1"},
            {"role": "tool", "tool_call_id": "abcdefghi", "content": "2"},
        ]
    }
    out = rewrite_payload(body, mistral)
    ids = [c["id"] for c in out["messages"][1]["tool_calls"]]
    assert ids[1] == "abcdefghi" and len(ids[0]) == 9 and ids[0].isalnum()
    assert [m["tool_call_id"] for m in out["messages"][2:]] == ids
    assert body["messages"][1]["tool_calls"][0]["id"] == "call_abc-1"  # input untouched


def test_a_profile_is_inferred_from_models_answer_then_url() -> None:
    assert infer_profile("http://127.0.0.1:8000/v1", {"data": [{"owned_by": "me"}]}).name == (
        "llama-cpp-python"
    )
    assert (
        infer_profile("http://127.0.0.1:8000/v1", {"data": [{"owned_by": "vllm"}]}).name == "vllm"
    )
    assert infer_profile("http://h:8080/v1", {"data": [{"owned_by": "llamacpp"}]}).name == (
        "llama-server"
    )
    assert infer_profile("http://localhost:11434/v1").name == "ollama"
    assert infer_profile("http://localhost:1234/v1").name == "lmstudio"
    assert infer_profile("https://api.deepseek.com/v1").name == "deepseek"
    assert infer_profile("https://dashscope.aliyuncs.com/compatible-mode/v1").name == "qwen"
    assert infer_profile("http://10.0.0.1:9999/v1").name == "openai-compatible"
    local = ChatOpenAI(api_key="k", base_url="http://localhost:11434/v1")  # type: ignore[arg-type]
    assert profile_for(local).name == "ollama"


def test_with_profile_leaves_the_callers_model_as_it_was() -> None:
    model = ChatOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")  # type: ignore[arg-type]
    wired = with_profile(model, "llama-cpp-python")
    assert type(model) is ChatOpenAI and type(wired) is not ChatOpenAI
    assert isinstance(wired, ChatOpenAI)
    history = [
        HumanMessage("x"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        ToolMessage("r", tool_call_id="c"),
    ]
    assert model._get_request_payload(history)["messages"][1]["content"] is None
    assert wired._get_request_payload(history)["messages"][1]["content"] == ""
    # Applying another profile replaces the rule instead of stacking it.
    again = with_profile(wired, "qwen")
    assert type(again).__mro__[1] is ChatOpenAI
    validate(history, "llama-cpp-python")
