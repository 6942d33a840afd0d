"""A turn ends after `max_model_calls` model calls; ids the server reuses are re-keyed;
`tool_choice` goes on a turn's first call only. Real SQLite checkpoints, real HTTP where
a server is involved."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI

import threadlog
from tests.helpers.model import get_weather
from tests.helpers.openai_server import OpenAIServer
from threadlog import create_agent, validate


class NeverDone(BaseChatModel):
    """A model that calls get_weather on every call, always with id `call_0` (as servers
    that number calls per message do)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "never-done"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self.bind(**kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        ai = AIMessage(
            "",
            id=f"never-{self.calls}",
            tool_calls=[{"name": "get_weather", "args": {"city": "Beijing"}, "id": "call_0"}],
        )
        return ChatResult(generations=[ChatGeneration(message=ai)])


def test_a_model_that_never_stops_calling_tools_is_stopped_with_a_logged_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = NeverDone()
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'cap.db'}") as saver:
        app = create_agent(model, [get_weather], checkpointer=saver, max_model_calls=3)
        config: Any = {"configurable": {"thread_id": "t"}}
        with caplog.at_level(logging.WARNING, logger="threadlog"):
            out = app.invoke({"messages": [HumanMessage("Umbrella?")]}, config)
        log = out["messages"]
        assert model.calls == 3  # the fourth step did not call the model
        stop = log[-1]
        assert isinstance(stop, AIMessage) and not stop.tool_calls
        assert stop.response_metadata["threadlog_stop"] == "max_model_calls"
        assert "max_model_calls=3" in stop.text
        assert any("max_model_calls=3" in r.getMessage() for r in caplog.records)
        validate(log, allow_pending_calls=False)  # every call answered, ids unique
        ids = [c["id"] for m in log if isinstance(m, AIMessage) for c in m.tool_calls]
        assert len(ids) == 3 and len(set(ids)) == 3 and ids[0] == "call_0"
        results = [m.tool_call_id for m in log if isinstance(m, ToolMessage)]
        assert results == ids

        # The next turn gets its own budget, on the same stored thread.
        out = app.invoke({"messages": [HumanMessage("And now?")]}, config)
        assert model.calls == 6
        assert out["messages"][-1].response_metadata["threadlog_stop"] == "max_model_calls"
        validate(out["messages"], allow_pending_calls=False)


def test_the_default_cap_stops_a_turn_long_before_the_recursion_limit() -> None:
    model = NeverDone()
    app = create_agent(model, [get_weather])
    out = app.invoke({"messages": [HumanMessage("Umbrella?")]}, {"recursion_limit": 200})
    assert model.calls == threadlog.nodes.model.DEFAULT_MAX_MODEL_CALLS == 25
    assert out["messages"][-1].response_metadata["threadlog_stop"] == "max_model_calls"


def test_max_model_calls_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_model_calls"):
        create_agent(NeverDone(), [get_weather], max_model_calls=0)


def _reply(cid: str, city: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'},
            }
        ],
    }


def test_call_ids_a_server_reuses_across_turns_are_rekeyed_and_requests_stay_paired(
    tmp_path: Path,
) -> None:
    scripted = [
        _reply("call_0", "Beijing"),
        {"role": "assistant", "content": "Take an umbrella."},
        _reply("call_0", "Shanghai"),  # the same id again, next turn
        {"role": "assistant", "content": "No umbrella in Shanghai."},
    ]
    with (
        OpenAIServer(scripted) as server,
        threadlog.checkpointer(f"sqlite:///{tmp_path / 'ids.db'}") as saver,
    ):
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0)  # type: ignore[arg-type]
        app = create_agent(model, [get_weather], checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "ids"}}
        app.invoke({"messages": [HumanMessage("Beijing?")]}, config)
        out = app.invoke({"messages": [HumanMessage("Shanghai?")]}, config)
    assert server.errors == []  # every request was self-consistent (the server checks)
    log = out["messages"]
    validate(log, allow_pending_calls=False)
    asks = [m for m in log if isinstance(m, AIMessage) and m.tool_calls]
    assert asks[0].tool_calls[0]["id"] == "call_0"
    second = asks[1].tool_calls[0]["id"]
    assert second != "call_0" and second.startswith("call_")
    assert asks[1].response_metadata["threadlog_call_ids_rekeyed"] == {second: "call_0"}
    last_body = server.requests[-1]["messages"]
    sent_ids = [c["id"] for m in last_body for c in m.get("tool_calls") or []]
    assert sent_ids == ["call_0", second]
    assert [m["tool_call_id"] for m in last_body if m["role"] == "tool"] == sent_ids


def test_tool_choice_goes_on_the_first_model_call_of_each_turn_only() -> None:
    with OpenAIServer() as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0)  # type: ignore[arg-type]
        app = create_agent(model, [get_weather], tool_choice="required", profile="openai")
        app.invoke({"messages": [HumanMessage("Umbrella in Beijing?")]})
    first, second = server.requests
    assert first["tool_choice"] == "required"
    assert "tool_choice" not in second
