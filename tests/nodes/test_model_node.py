"""ModelNode: context → repair → validate → call → append, inside real LangGraph graphs."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from tests.helpers.model import Recorder, ai, get_weather, result, system, user
from threadlog import (
    AgentState,
    Compactions,
    ContextNode,
    ContextPolicy,
    InvalidMessageError,
    Messages,
    MessagesState,
    ModelNode,
    OfflineChatModel,
    ToolNode,
    ToolPairingError,
    tools_condition,
    validate,
)
from threadlog.nodes.model import NOT_COMPLETED


def weather_graph(
    model: Any, *, policy: ContextPolicy | None = None, state: Any = AgentState, **node: Any
) -> Any:
    g = StateGraph(state)
    g.add_node("model", ModelNode(model, [get_weather], context=policy, **node))
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=InMemorySaver())


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_a_two_city_question_runs_the_loop_and_logs_every_message() -> None:
    app = weather_graph(OfflineChatModel(), system_prompt="You answer weather questions.")
    out = app.invoke({"messages": [("user", "Beijing and Shanghai: umbrella?")]}, cfg())
    kinds = [type(m).__name__ for m in out["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage"]
    assert "umbrella in Beijing" in out["messages"][-1].text
    # The system prompt is sent, not logged.
    assert not any(m.type == "system" for m in out["messages"])
    validate(out["messages"], allow_pending_calls=False)


def test_the_whole_ai_message_is_appended() -> None:
    app = weather_graph(OfflineChatModel())
    out = app.invoke({"messages": [("user", "北京今天适合带伞吗？")]}, cfg())
    request = out["messages"][1]
    direct = OfflineChatModel().bind_tools([get_weather]).invoke([m for m in out["messages"][:1]])
    assert isinstance(request, AIMessage)
    assert request.id and request.usage_metadata and request.response_metadata["model_name"]
    assert request.tool_calls[0]["args"] == {"city": "北京"}
    assert request.usage_metadata == direct.usage_metadata


def test_an_invalid_tool_call_reaches_the_log_and_is_answered() -> None:
    class Broken(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "broken"

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: Any = None,
            run_manager: Any = None,
            **kwargs: Any,
        ) -> ChatResult:
            if isinstance(messages[-1], ToolMessage):
                msg = AIMessage(content="sorry", id="final")
            else:
                msg = AIMessage(
                    content="",
                    id="bad",
                    invalid_tool_calls=[
                        {
                            "name": "get_weather",
                            "args": "{city:",
                            "id": "c-bad",
                            "error": "not JSON",
                            "type": "invalid_tool_call",
                        }
                    ],
                )
            return ChatResult(generations=[ChatGeneration(message=msg)])

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    out = weather_graph(Broken()).invoke({"messages": [("user", "Paris?")]}, cfg())
    assert out["messages"][1].invalid_tool_calls[0]["args"] == "{city:"
    assert out["messages"][2].tool_call_id == "c-bad"
    assert out["messages"][-1].id == "final"


def _interrupted_thread() -> tuple[Any, dict[str, Any]]:
    """A thread paused at interrupt() inside the tool step, with one call open."""

    def approve(state: AgentState) -> dict[str, Any]:
        interrupt("approve the weather lookup?")
        return {}

    g = StateGraph(AgentState)
    g.add_node("model", ModelNode(OfflineChatModel(), [get_weather]))
    g.add_node("tools", approve)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=InMemorySaver())
    app.invoke({"messages": [("user", "Berlin?")]}, cfg())
    assert app.get_state(cfg()).next == ("tools",)
    return app, cfg()


def test_a_new_message_on_an_interrupted_thread_repairs_the_open_call() -> None:
    app, config = _interrupted_thread()
    # The user gives up on the approval and asks something else.
    app.update_state(config, {"messages": [("user", "never mind, Tokyo?")]}, as_node="tools")
    out = app.invoke(None, config)
    log = out["messages"]
    repaired = log[2]
    assert isinstance(repaired, ToolMessage) and repaired.status == "error"
    assert repaired.content == NOT_COMPLETED
    assert repaired.tool_call_id == log[1].tool_calls[0]["id"]
    assert log[3].text == "never mind, Tokyo?"
    validate(log)


def test_repair_refuse_raises_naming_the_call() -> None:
    node = ModelNode(OfflineChatModel(), [get_weather], repair="refuse")
    state = {"messages": [user("h1"), ai("a1", "c1"), user("h2")]}
    with pytest.raises(ToolPairingError, match=r"call 'c1' \(f\) has no result"):
        node.invoke(state)


def test_default_repair_appends_error_results_before_the_answer() -> None:
    Recorder.seen = []
    node = ModelNode(Recorder(), [get_weather])
    state = {"messages": [user("h1"), ai("a1", "c1", "c2"), result("c1"), user("h2", "Tokyo?")]}
    update = node.invoke(state)
    repair, answer = update["messages"]
    assert (repair.tool_call_id, repair.status) == ("c2", "error")
    sent = Recorder.seen[-1]
    assert [type(m).__name__ for m in sent] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    assert sent[3].tool_call_id == "c2"  # placed after its request's earlier result
    assert answer.tool_calls[0]["args"] == {"city": "Tokyo"}


def test_a_history_the_profile_rejects_is_never_sent() -> None:
    Recorder.seen = []
    node = ModelNode(Recorder(), profile="anthropic")
    late_system = system("late", "be brief")
    state = {"messages": [user("h1"), ai("a1", content="ok"), late_system, user("h2")]}
    with pytest.raises(InvalidMessageError, match="system text only before the conversation"):
        node.invoke(state)
    assert Recorder.seen == []


def test_trimming_and_events_in_a_checkpointed_thread() -> None:
    Recorder.seen = []
    app = weather_graph(Recorder(), policy=ContextPolicy(max_turns=2))
    for q in ["Beijing?", "Shanghai?", "Tokyo?", "Paris?"]:
        out = app.invoke({"messages": [("user", q)]}, cfg())
    assert len(out["messages"]) == 16  # nothing was deleted
    events = out["compactions"]
    assert [e["kind"] for e in events] == ["trim", "trim"]
    assert all({"id", "cut_to", "policy", "reason", "ts"} <= e.keys() for e in events)
    last_sent = Recorder.seen[-1]
    assert [m.text for m in last_sent if m.type == "human"] == ["Tokyo?", "Paris?"]
    # The context is derived from log + events: the same for a reader later.
    from threadlog import build_context

    later = build_context(out["messages"], events, ContextPolicy(max_turns=2))
    assert [m.text for m in later if m.type == "human"] == ["Tokyo?", "Paris?"]


def test_summaries_are_recorded_as_events_and_shown_to_the_model() -> None:
    Recorder.seen = []
    policy = ContextPolicy(max_turns=1, summarizer=OfflineChatModel())
    app = weather_graph(Recorder(), policy=policy)
    for q in ["Beijing?", "Shanghai?", "Tokyo?"]:
        out = app.invoke({"messages": [("user", q)]}, cfg())
    summaries = [e for e in out["compactions"] if e["kind"] == "summary"]
    assert summaries and "Beijing?" in summaries[-1]["summary"]
    assert "Shanghai?" in summaries[-1]["summary"]
    sent = Recorder.seen[-1]
    assert sent[0].type == "system" and "Beijing?; Shanghai?" in sent[0].text
    assert [m.text for m in sent if m.type == "human"] == ["Tokyo?"]


def test_a_summarizing_policy_needs_the_compactions_key() -> None:
    node = ModelNode(OfflineChatModel(), context=ContextPolicy(summarizer=OfflineChatModel()))
    with pytest.raises(InvalidMessageError, match="'compactions' state key"):
        node.invoke({"messages": [user("h1")]})


def test_plain_messages_state_works_without_events() -> None:
    app = weather_graph(OfflineChatModel(), policy=ContextPolicy(max_turns=1), state=MessagesState)
    for q in ["Beijing?", "Tokyo?"]:
        out = app.invoke({"messages": [("user", q)]}, cfg())
    assert "compactions" not in out and len(out["messages"]) == 8


def test_context_node_records_events_and_the_model_node_then_adds_none() -> None:
    policy = ContextPolicy(max_turns=1)
    g = StateGraph(AgentState)
    g.add_node("context", ContextNode(policy))
    g.add_node("model", ModelNode(OfflineChatModel(), [get_weather], context=policy))
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "context")
    g.add_edge("context", "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=InMemorySaver())
    for q in ["Beijing?", "Tokyo?", "Paris?"]:
        out = app.invoke({"messages": [("user", q)]}, cfg())
    cuts = [e["cut_to"] for e in out["compactions"]]
    assert len(cuts) == 2 and len(set(cuts)) == 2  # one event per moved cut
    history = [s.values.get("compactions", []) for s in app.get_state_history(cfg())]
    assert all(len(a) >= len(b) for a, b in itertools.pairwise(history))  # append-only


async def test_async_graph_matches_sync() -> None:
    app = weather_graph(
        OfflineChatModel(), policy=ContextPolicy(max_turns=1, summarizer=OfflineChatModel())
    )
    for q in ["Beijing?", "Tokyo?"]:
        out = await app.ainvoke({"messages": [("user", q)]}, cfg("a"))
    sync = weather_graph(
        OfflineChatModel(), policy=ContextPolicy(max_turns=1, summarizer=OfflineChatModel())
    )
    for q in ["Beijing?", "Tokyo?"]:
        ref = sync.invoke({"messages": [("user", q)]}, cfg("s"))
    assert [m.text for m in out["messages"]] == [m.text for m in ref["messages"]]
    assert [e["summary"] for e in out["compactions"]] == [e["summary"] for e in ref["compactions"]]


def test_resume_with_command_still_works_after_repair_policy_is_set() -> None:
    app, config = _interrupted_thread()
    out = app.invoke(Command(resume="ok"), config)
    # The approval node answers nothing, so the model repairs the call it left open.
    assert out["messages"][2].status == "error"
    assert out["messages"][-1].type == "ai"


def test_summary_tokens_stay_out_of_the_messages_stream() -> None:
    policy = ContextPolicy(max_turns=1, summarizer=OfflineChatModel())
    app = weather_graph(OfflineChatModel(), policy=policy)
    app.invoke({"messages": [("user", "Beijing?")]}, cfg())
    streamed = [
        chunk.text
        for chunk, _ in app.stream({"messages": [("user", "Tokyo?")]}, cfg(),
                                   stream_mode="messages")
    ]
    assert app.get_state(cfg()).values["compactions"][-1]["kind"] == "summary"
    assert "Tokyo" in "".join(streamed)
    assert "Earlier the user asked" not in "".join(streamed)


def test_a_model_without_tool_calling_is_a_clear_error() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    with pytest.raises(TypeError, match="FakeListChatModel cannot bind tools"):
        ModelNode(FakeListChatModel(responses=["hi"]), [get_weather])


class PydanticState(BaseModel):
    messages: Messages
    compactions: Compactions = []


def test_pydantic_states_are_read_by_attribute() -> None:
    g = StateGraph(PydanticState)
    g.add_node("model", ModelNode(OfflineChatModel(), [get_weather],
                                  context=ContextPolicy(max_turns=1)))
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=InMemorySaver())
    for q in ["Beijing?", "Tokyo?"]:
        out = app.invoke({"messages": [("user", q)]}, cfg())
    assert len(out["messages"]) == 8 and len(out["compactions"]) == 1
