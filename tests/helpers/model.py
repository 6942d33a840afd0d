"""Builders shared by the context, model-node and wire tests (owner: model)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from threadlog import OfflineChatModel


def ai(mid: str, *calls: str, content: str = "") -> AIMessage:
    """An AIMessage with id `mid` calling tool `f` once per call id in `calls`."""
    return AIMessage(
        content=content,
        id=mid,
        tool_calls=[{"name": "f", "args": {"x": c}, "id": c, "type": "tool_call"} for c in calls],
    )


def result(call_id: str, content: str | None = None) -> ToolMessage:
    return ToolMessage(
        content=content or f"result {call_id}", tool_call_id=call_id, id=f"t-{call_id}"
    )


def user(mid: str, text: str | None = None) -> HumanMessage:
    return HumanMessage(content=text or f"question {mid}", id=mid)


def system(mid: str = "sys", text: str = "You are helpful.") -> SystemMessage:
    return SystemMessage(content=text, id=mid)


def ids(messages: Sequence[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


def one_token_each(messages: Sequence[Any]) -> int:
    """A token counter where every message costs 1: budgets read as message counts."""
    return len(list(messages))


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    rainy = {"北京", "Beijing", "beijing"}
    return "小雨 18°C (light rain)" if city in rainy else "晴 25°C (sunny)"


class Recorder(BaseChatModel):
    """Wraps the offline model and records every message list it was sent."""

    seen: ClassVar[list[list[BaseMessage]]] = []

    @property
    def _llm_type(self) -> str:
        return "recorder"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        reply = OfflineChatModel()._reply(messages, kwargs.get("tools") or ())
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return OfflineChatModel.bind_tools(self, tools, **kwargs)  # type: ignore[arg-type]
