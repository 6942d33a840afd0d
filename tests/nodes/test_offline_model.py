"""OfflineChatModel: a real LangChain chat model (standard tests) with weather behaviour."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_tests.unit_tests import ChatModelUnitTests

from tests.helpers.model import get_weather
from threadlog import OfflineChatModel
from threadlog.models import find_cities


class TestOfflineChatModelStandard(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return OfflineChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": "offline-weather"}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return {"THREADLOG_OFFLINE_API_KEY": "k"}, {}, {"api_key": "k"}


def _run_tools(ai: AIMessage) -> list[ToolMessage]:
    return [
        ToolMessage(content=get_weather.invoke(c["args"]), tool_call_id=c["id"])
        for c in ai.tool_calls
    ]


def test_chinese_question_gets_a_weather_call_and_an_umbrella_answer() -> None:
    model = OfflineChatModel().bind_tools([get_weather])
    question = HumanMessage("北京今天适合带伞吗？", id="q1")
    ai = model.invoke([question])
    assert [c["args"] for c in ai.tool_calls] == [{"city": "北京"}]
    answer = model.invoke([question, ai, *_run_tools(ai)])
    assert not answer.tool_calls
    assert "北京" in answer.text and "带伞" in answer.text and "小雨" in answer.text


def test_two_cities_get_two_parallel_calls_in_the_order_named() -> None:
    model = OfflineChatModel().bind_tools([get_weather])
    ai = model.invoke("Beijing and Shanghai: do I need an umbrella?")
    assert [c["args"]["city"] for c in ai.tool_calls] == ["Beijing", "Shanghai"]
    assert len({c["id"] for c in ai.tool_calls}) == 2
    answer = model.invoke(["Beijing and Shanghai: do I need an umbrella?", ai, *_run_tools(ai)])
    assert answer.text.startswith("Beijing: 小雨") and "Shanghai: 晴" in answer.text
    assert "umbrella in Beijing" in answer.text


def test_a_city_named_in_both_languages_is_looked_up_once() -> None:
    assert find_cities("上海 (Shanghai) 和 Beijing") == [
        ("Shanghai", "上海"),
        ("Beijing", "Beijing"),
    ]


def test_failed_results_are_reported_as_failures() -> None:
    model = OfflineChatModel().bind_tools([get_weather])
    ai = model.invoke("Tokyo?")
    failed = ToolMessage("Error: timeout", tool_call_id=ai.tool_calls[0]["id"], status="error")
    assert "lookup failed" in model.invoke(["Tokyo?", ai, failed]).text


def test_replies_are_deterministic_and_report_usage() -> None:
    model = OfflineChatModel().bind_tools([get_weather])
    first, second = model.invoke("Paris?"), model.invoke("Paris?")
    assert first == second and first.id and first.id.startswith("offline-")
    usage = first.usage_metadata
    assert (
        usage
        and usage["input_tokens"] > 0
        and usage["total_tokens"] == (usage["input_tokens"] + usage["output_tokens"])
    )


def test_without_a_city_tool_it_answers_in_plain_text() -> None:
    assert OfflineChatModel().invoke("hello").text == "(offline) hello"
    assert "name a city" in OfflineChatModel().bind_tools([get_weather]).invoke("hi").text


def test_streaming_yields_chunks_that_add_up_to_the_invoke_result() -> None:
    model = OfflineChatModel(chunk_chars=4).bind_tools([get_weather])
    chunks = list(model.stream("Beijing and Shanghai?"))
    assert len(chunks) >= 3 and all(isinstance(c, AIMessageChunk) for c in chunks)
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    whole = model.invoke("Beijing and Shanghai?")
    assert total.tool_calls == whole.tool_calls
    assert total.usage_metadata == whole.usage_metadata

    text_chunks = list(OfflineChatModel(chunk_chars=4).stream("hello there"))
    assert "".join(c.text for c in text_chunks) == "(offline) hello there"
    assert len(text_chunks) > 3


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_async_invoke_matches_sync(asynchronous: bool) -> None:
    model = OfflineChatModel().bind_tools([get_weather])
    sync = model.invoke("London?")
    other = await model.ainvoke("London?") if asynchronous else model.invoke("London?")
    assert other.tool_calls == sync.tool_calls


def test_summarize_requests_get_an_extractive_summary() -> None:
    from langchain_core.messages import SystemMessage

    reply = OfflineChatModel().invoke(
        [
            SystemMessage("Summarize the conversation."),
            HumanMessage("user: weather in Paris?\nassistant: sunny\nuser: and Rome?"),
        ]
    )
    assert reply.text == "Earlier the user asked about: weather in Paris?; and Rome?"
