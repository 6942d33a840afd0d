"""The weather demo: "北京今天适合带伞吗？" in, a `get_weather` call per city, an answer out.

`get_weather(city)` answers from fixed data after a per-city latency (parallel calls finish
out of order); `build_graph` is `threadlog.create_agent`, `build_branching_graph` the same
agent wired by hand. With no model given, both use `threadlog.OfflineChatModel`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Send

from threadlog import (
    AgentState,
    ContextNode,
    ContextPolicy,
    ModelNode,
    OfflineChatModel,
    ToolNode,
    create_agent,
    send_tool_calls,
)

__all__ = [
    "FORECASTS",
    "SYSTEM_PROMPT",
    "Forecast",
    "build_branching_graph",
    "build_graph",
    "get_weather",
]

SYSTEM_PROMPT = (
    "You are a weather assistant. For every city the user asks about, call get_weather once "
    "— all cities in parallel — and answer only from the tool results: say whether to take "
    "an umbrella and give the temperature. Answer in the user's language."
)


@dataclass(frozen=True, slots=True)
class Forecast:
    """Today's weather for one city (made-up, fixed data)."""

    city: str
    city_zh: str
    condition: str
    condition_zh: str
    rain_probability: int  # percent
    temperature_c: int
    latency_s: float  # how long the pretend weather service takes for this city

    def report(self, chinese: bool) -> str:
        if chinese:
            return (
                f"{self.condition_zh}，降水概率 {self.rain_probability}%，"
                f"气温 {self.temperature_c}°C"
            )
        return (
            f"{self.condition}, {self.rain_probability}% chance of precipitation, "
            f"{self.temperature_c}°C"
        )


FORECASTS = (
    # Beijing is slower than Shanghai on purpose: ask about both, the second finishes first.
    Forecast("Beijing", "北京", "light rain", "小雨", 70, 22, 0.30),
    Forecast("Shanghai", "上海", "cloudy", "多云", 20, 26, 0.05),
    Forecast("Guangzhou", "广州", "thundershowers", "雷阵雨", 85, 31, 0.20),
    Forecast("Shenzhen", "深圳", "showers", "阵雨", 60, 30, 0.10),
    Forecast("Hangzhou", "杭州", "overcast", "阴", 40, 24, 0.15),
    Forecast("Chengdu", "成都", "light rain", "小雨", 55, 23, 0.12),
    Forecast("Nanjing", "南京", "sunny", "晴", 5, 25, 0.08),
    Forecast("Wuhan", "武汉", "cloudy", "多云", 25, 28, 0.18),
    Forecast("Xi'an", "西安", "sunny", "晴", 5, 29, 0.07),
    Forecast("Chongqing", "重庆", "overcast", "阴", 35, 27, 0.14),
    Forecast("Tianjin", "天津", "sunny", "晴", 10, 23, 0.09),
    Forecast("Suzhou", "苏州", "showers", "阵雨", 65, 25, 0.11),
    Forecast("Hong Kong", "香港", "thundershowers", "雷阵雨", 80, 30, 0.22),
    Forecast("Tokyo", "东京", "showers", "阵雨", 55, 19, 0.25),
    Forecast("Seoul", "首尔", "clear", "晴", 5, 16, 0.06),
    Forecast("Singapore", "新加坡", "thundershowers", "雷阵雨", 75, 32, 0.16),
    Forecast("London", "伦敦", "light rain", "小雨", 65, 14, 0.21),
    Forecast("Paris", "巴黎", "cloudy", "多云", 30, 17, 0.13),
    Forecast("Berlin", "柏林", "sunny", "晴", 10, 15, 0.10),
    Forecast("New York", "纽约", "clear", "晴", 10, 18, 0.24),
    Forecast("San Francisco", "旧金山", "fog", "雾", 15, 17, 0.09),
    Forecast("Sydney", "悉尼", "sunny", "晴", 0, 21, 0.19),
)

_BY_NAME = {key: f for f in FORECASTS for key in (f.city.lower(), f.city_zh)}


def _forecast(city: str) -> Forecast:
    key = city.strip().lower().removesuffix("市").removesuffix(" city").strip()
    found = _BY_NAME.get(key)
    if found is None:
        # "Beijing, China": one known name inside the text is taken as meant.
        inside = {f for name, f in _BY_NAME.items() if name in key}
        found = inside.pop() if len(inside) == 1 else None
    if found is None:
        known = ", ".join(f"{f.city_zh}/{f.city}" for f in FORECASTS)
        raise ValueError(f"no weather data for city {city!r}; known cities: {known}")
    return found


def _is_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _get_weather(city: str) -> str:
    forecast = _forecast(city)
    time.sleep(forecast.latency_s)
    return forecast.report(_is_chinese(city))


async def _aget_weather(city: str) -> str:
    forecast = _forecast(city)
    await asyncio.sleep(forecast.latency_s)
    return forecast.report(_is_chinese(city))


# Both a sync and an async body: no blocking under `langgraph dev`'s event loop.
get_weather = StructuredTool.from_function(
    func=_get_weather,
    coroutine=_aget_weather,
    name="get_weather",
    description=(
        "Today's weather for one city (Chinese or English name, e.g. 北京 or Beijing): "
        "condition, rain probability in percent, temperature in °C."
    ),
)


def _context() -> ContextPolicy:
    return ContextPolicy(max_turns=20)  # older turns stay in the log, recorded as compacted


def build_graph(
    model: BaseChatModel | None = None,
    checkpointer: Checkpointer = None,
    *,
    context: ContextPolicy | None = None,
    per_call_branches: bool = False,
    **agent_options: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The weather agent: `create_agent` (with `agent_options`) and the weather tool."""
    return create_agent(
        model or OfflineChatModel(),
        [get_weather],
        system_prompt=SYSTEM_PROMPT,
        context=context or _context(),
        checkpointer=checkpointer,
        per_call_branches=per_call_branches,
        name="weather",
        **agent_options,
    )


def build_branching_graph(
    model: BaseChatModel | None = None,
    checkpointer: Checkpointer = None,
    *,
    context: ContextPolicy | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The weather agent wired by hand, one `Send` task per tool call."""
    policy = context or _context()
    tools = [get_weather]
    builder = StateGraph(AgentState)
    # Trimming is its own checkpointed step, so a failing model call never redoes it.
    builder.add_node("context", ContextNode(policy))
    builder.add_node(
        "model",
        ModelNode(model or OfflineChatModel(), tools, system_prompt=SYSTEM_PROMPT, context=policy),
    )
    builder.add_node("tools", ToolNode(tools, record_durations=True))
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    builder.add_conditional_edges("model", _one_task_per_call, ["tools", END])
    builder.add_edge("tools", "context")
    return builder.compile(checkpointer=checkpointer, name="weather_branches")


def _one_task_per_call(state: AgentState) -> list[Send] | str:
    return send_tool_calls(state, node="tools") or END
