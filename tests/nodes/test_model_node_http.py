"""The real wire path: ChatOpenAI → HTTP → a strict local Chat Completions server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from tests.helpers.model import get_weather
from tests.helpers.openai_server import OpenAIServer
from threadlog import AgentState, ContextPolicy, ModelNode, ToolNode, tools_condition

SYSTEM = "You are a weather assistant."


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def chat(server: OpenAIServer, **kw: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=server.base_url,
        api_key="test",  # type: ignore[arg-type]
        max_retries=0,
        **kw,
    )


def graph(model: Any, policy: ContextPolicy | None = None, **node: Any) -> Any:
    g = StateGraph(AgentState)
    g.add_node(
        "model", ModelNode(model, [get_weather], system_prompt=SYSTEM, context=policy, **node)
    )
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=InMemorySaver())


def cfg() -> dict[str, Any]:
    return {"configurable": {"thread_id": "wire"}}


def test_two_city_question_over_http_keeps_pairs_and_order(server: OpenAIServer) -> None:
    app = graph(chat(server), profile="openai-chat")
    question = {
        "role": "user",
        "content": "Beijing and Shanghai: do I need an umbrella?",
        "name": "Weather Fan",
    }
    out = app.invoke({"messages": [question]}, cfg())
    assert "umbrella in Beijing" in out["messages"][-1].text
    assert server.errors == []
    first, second = server.requests
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    body = second["messages"]
    assert [m["role"] for m in body] == ["system", "user", "assistant", "tool", "tool"]
    calls = [c["id"] for c in body[2]["tool_calls"]]
    assert [m["tool_call_id"] for m in body[3:]] == calls  # results in call order
    assert [json.loads(c["function"]["arguments"])["city"] for c in body[2]["tool_calls"]] == [
        "Beijing",
        "Shanghai",
    ]
    assert "name" not in body[1]  # "Weather Fan" does not match OpenAI's name pattern
    logged_ids = {m.id for m in out["messages"]}
    blob = json.dumps(second)
    assert not any(i in blob for i in logged_ids)  # none of our ids reach the wire
    # The whole AIMessage from the HTTP response is in the log.
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and final.usage_metadata
    assert final.response_metadata["finish_reason"] == "stop"
    print(json.dumps(second, ensure_ascii=False, indent=1))


def test_the_server_answers_400_like_openai_for_broken_pairs(server: OpenAIServer) -> None:
    model = chat(server)
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
    dangling = [HumanMessage("Paris?"), AIMessage("", tool_calls=[call]), HumanMessage("and?")]
    orphan = [HumanMessage("Paris?"), ToolMessage("sunny", tool_call_id="c1")]
    duplicate = [
        HumanMessage("Paris?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("sunny", tool_call_id="c1"),
        ToolMessage("sunny", tool_call_id="c1"),
    ]
    with pytest.raises(openai.BadRequestError, match="did not have response messages: c1"):
        model.invoke(dangling)
    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding"):
        model.invoke(orphan)
    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding"):
        model.invoke(duplicate)
    assert len(server.errors) == 3 and len(server.requests) == 3


def test_an_interrupted_thread_gets_a_repaired_call_not_a_400(server: OpenAIServer) -> None:
    def approve(state: AgentState) -> dict[str, Any]:
        interrupt("approve?")
        return {}

    g = StateGraph(AgentState)
    g.add_node("model", ModelNode(chat(server), [get_weather]))
    g.add_node("tools", approve)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=InMemorySaver())
    app.invoke({"messages": [("user", "Berlin?")]}, cfg())
    app.update_state(cfg(), {"messages": [("user", "forget it: Tokyo?")]}, as_node="tools")
    app.invoke(None, cfg())
    assert server.errors == []
    body = server.requests[-1]["messages"]
    assert [m["role"] for m in body] == ["user", "assistant", "tool", "user"]
    assert "not completed" in body[2]["content"]


def test_trimming_is_applied_to_what_is_sent(server: OpenAIServer) -> None:
    app = graph(chat(server), ContextPolicy(max_turns=1))
    for q in ["Beijing?", "Shanghai?", "Tokyo?"]:
        out = app.invoke({"messages": [("user", q)]}, cfg())
    assert server.errors == []
    last = server.requests[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["Tokyo?"]
    assert last[0] == {"role": "system", "content": SYSTEM}
    assert len(out["messages"]) == 12 and len(out["compactions"]) == 2


def test_streaming_over_http_assembles_the_same_calls(server: OpenAIServer) -> None:
    app = graph(chat(server, streaming=True, stream_usage=True))
    tokens = [
        chunk
        for chunk, _ in app.stream(
            {"messages": [("user", "北京今天适合带伞吗？")]}, cfg(), stream_mode="messages"
        )
        if chunk.type == "AIMessageChunk"
    ]
    assert all(r.get("stream") for r in server.requests)
    state = app.get_state(cfg()).values
    assert state["messages"][1].tool_calls[0]["args"] == {"city": "北京"}
    assert "带伞" in state["messages"][-1].text
    assert "".join(t.text for t in tokens).endswith(state["messages"][-1].text)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No network except 127.0.0.1, and no tiktoken cache: a machine with no internet."""
    import socket

    local = ("127.0.0.1", "::1", "localhost")
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and address[0] not in local:
            raise OSError(f"network blocked in this test: {address}")
        connect(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in local:
            raise socket.gaierror(f"network blocked in this test: {host}")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


@pytest.mark.usefixtures("offline")
def test_token_budgets_work_offline_where_chatopenai_counting_fails(
    server: OpenAIServer,
) -> None:
    model = chat(server)
    with pytest.raises(Exception, match=r"openaipublic|tiktoken|blocked"):
        model.get_num_tokens_from_messages([HumanMessage("hi")])  # downloads tiktoken
    app = graph(model, ContextPolicy(max_tokens=200))
    for q in ["Beijing?", "Shanghai?", "Tokyo?", "Paris?"]:
        app.invoke({"messages": [("user", q)]}, cfg())
    assert server.errors == [] and len(server.requests) == 8
    sent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert "Beijing?" not in sent and sent[-1] == "Paris?"


def test_a_run_that_died_mid_tool_is_repaired_on_the_next_turn(server: OpenAIServer) -> None:
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise RuntimeError("worker died")

    g = StateGraph(AgentState)
    g.add_node("model", ModelNode(chat(server), [get_weather]))
    g.add_node("tools", ToolNode([get_weather], handle_errors=False))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=InMemorySaver())
    with pytest.raises(Exception, match="worker died"):
        app.invoke({"messages": [("user", "Berlin?")]}, cfg())
    # Sent as it is, this thread's next request is OpenAI's 400 (a dangling call).
    crashed = app.get_state(cfg()).values["messages"]
    with pytest.raises(openai.BadRequestError, match="did not have response messages"):
        chat(server).invoke([*crashed, HumanMessage("hello again")])
    errors_before = len(server.errors)
    out = app.invoke({"messages": [("user", "hello again")]}, cfg())
    assert len(server.errors) == errors_before
    body = server.requests[-1]["messages"]
    assert [m["role"] for m in body] == ["user", "assistant", "tool", "user"]
    assert out["messages"][2].status == "error"
