"""A scripted tool-calling chat model for the multi-agent tests (no network)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import threadlog


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


def _human_turns(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def swarm_reply(me: str, other: str) -> Callable[[Sequence[BaseMessage]], AIMessage]:
    """A swarm agent's scripted model: hand off to `other` on a user turn, else answer."""

    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        turn = _human_turns(messages)
        if isinstance(last, HumanMessage):
            call = {"name": f"transfer_to_{other}", "args": {}, "id": f"{me}-handoff-{turn}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage(f"{me} answers turn {turn}")

    return reply


class SwarmState(threadlog.MessagesState):
    active_agent: str | None


def messages_in(value: Any) -> list[BaseMessage]:
    """The message objects a decoded stored value holds (a stored snapshot's too)."""
    if isinstance(value, BaseMessage):
        return [value]
    if isinstance(value, Mapping):
        return [m for v in value.values() for m in messages_in(v)]
    if isinstance(value, (list, tuple)):
        return [m for v in value for m in messages_in(v)]
    inner = getattr(value, "value", None)  # a stored snapshot
    return messages_in(inner) if isinstance(inner, list) else []


def deep_agent(
    saver: Any,
    main: Callable[[Sequence[BaseMessage]], AIMessage],
    sub: Callable[[Sequence[BaseMessage]], AIMessage],
) -> Any:
    """A deepagents agent with a `researcher` subagent, both scripted, as its README builds it."""
    from deepagents import create_deep_agent

    researcher: Any = {
        "name": "researcher",
        "description": "looks things up",
        "system_prompt": "you look things up",
        "model": Scripted(script=sub),
    }
    return create_deep_agent(
        model=Scripted(script=main), tools=[], subagents=[researcher], checkpointer=saver
    )
