"""Inside a graph the model node lets the chat model read the step's config from the
context LangGraph set (it is the same config; passing it again made langchain-core copy and
merge it twice per call). Called on its own, the node passes the config it was given. Either
way the model's run reaches the caller's callbacks as a child of the node's run, and
`stream_mode="messages"` streams its reply."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage

import threadlog
from threadlog import ModelNode
from threadlog.examples.weather import get_weather
from threadlog.models import OfflineChatModel


class Runs(BaseCallbackHandler):
    """Every chain and chat-model run started: (kind, name, run id, parent run id)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, UUID, UUID | None]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self.seen.append(("chain", kwargs.get("name") or "", run_id, parent_run_id))

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self.seen.append(("model", "", run_id, parent_run_id))

    def model_parents(self) -> list[str]:
        names = {run_id: name for kind, name, run_id, _ in self.seen if kind == "chain"}
        return [names.get(parent, "?") for kind, _, _, parent in self.seen
                if kind == "model" and parent is not None]


def _agent() -> Any:
    return threadlog.create_agent(OfflineChatModel(), [get_weather],
                                  checkpointer=threadlog.checkpointer("memory://").__enter__())


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_in_a_graph_the_models_run_is_a_child_of_the_model_step(mode: str) -> None:
    runs = Runs()
    config: Any = {"configurable": {"thread_id": mode}, "callbacks": [runs]}
    question = {"messages": [HumanMessage("weather in Paris?")]}
    agent = _agent()
    out = (agent.invoke(question, config) if mode == "invoke"
           else asyncio.run(agent.ainvoke(question, config)))
    assert "Paris" in out["messages"][-1].text
    assert runs.model_parents() == ["model", "model"]  # the call, then the answer


def test_in_a_graph_the_models_reply_is_streamed_as_messages() -> None:
    agent = _agent()
    streamed = [
        (chunk.text, meta["langgraph_node"])
        for chunk, meta in agent.stream({"messages": [HumanMessage("weather in Paris?")]},
                                        {"configurable": {"thread_id": "s"}},
                                        stream_mode="messages")
    ]
    answer = "".join(text for text, node in streamed if node == "model")
    assert "Paris" in answer and "cloudy" in answer


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_called_on_its_own_the_node_passes_the_config_it_was_given(mode: str) -> None:
    runs = Runs()
    node = ModelNode(OfflineChatModel(), [get_weather])
    state = {"messages": [HumanMessage("weather in Tokyo?")]}
    config: Any = {"callbacks": [runs], "configurable": {"thread_id": "alone"}}
    out = (node.invoke(state, config) if mode == "invoke"
           else asyncio.run(node.ainvoke(state, config)))
    assert out["messages"][-1].tool_calls[0]["args"] == {"city": "Tokyo"}
    assert [kind for kind, *_ in runs.seen] == ["model"]  # the caller's callbacks saw it
