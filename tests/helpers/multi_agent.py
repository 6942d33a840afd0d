"""A scripted tool-calling chat model for the multi-agent tests (no network)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class Scripted(BaseChatModel):
    """Replies with `script(messages)`: a tool-calling model without a network."""

    script: Callable[[Sequence[BaseMessage]], AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
        return self
