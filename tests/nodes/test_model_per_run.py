"""`ModelNode(model=…, system_prompt=…)` chosen per run from `runtime.context`, written the
way langchain-ai's react-agent template writes its graph (`context_schema`, a dataclass
state, the app's own router, `graph.invoke(..., context=Context(...))`): each call uses
the run's model and prompt, repair / validation / re-keying / timing apply to it, and the
trace and the inspector show each call's real prompt, read from storage."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

import threadlog
from threadlog import ModelNode, OfflineChatModel, inspect
from threadlog.terminal import display_width

# -- the app, as the template writes it ------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: sunny, 21°C"


TOOLS = [get_weather]
MODELS = {
    "offline/weather-a": OfflineChatModel(model="weather-a"),
    "offline/weather-b": OfflineChatModel(model="weather-b"),
}


def load_chat_model(fully_specified_name: str) -> Any:
    return MODELS[fully_specified_name]


@dataclass(kw_only=True)
class Context:
    system_prompt: str = "You are a helpful AI assistant.\n\nSystem time: {system_time}"
    model: str = "offline/weather-a"


@dataclass
class InputState:
    messages: threadlog.Messages = field(default_factory=list)


@dataclass
class State(InputState):
    pass


def choose_model(state: State, runtime: Runtime[Context]) -> Any:
    return load_chat_model(runtime.context.model)


def choose_prompt(state: State, runtime: Runtime[Context]) -> str:
    return runtime.context.system_prompt.format(system_time="2026-12-01T17:00:00+00:00")


async def achoose_model(state: State, runtime: Runtime[Context]) -> Any:
    return load_chat_model(runtime.context.model)


async def achoose_prompt(state: State, runtime: Runtime[Context]) -> str:
    return choose_prompt(state, runtime)


def route_model_output(state: State) -> Literal["__end__", "tools"]:
    last_message = state.messages[-1]
    if not isinstance(last_message, AIMessage):
        raise ValueError(
            f"Expected AIMessage in output edge, but got {type(last_message).__name__}"
        )
    if not last_message.tool_calls:
        return "__end__"
    return "tools"


def build(saver: Any, model: Any = choose_model, prompt: Any = choose_prompt) -> Any:
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    builder.add_node("call_model", ModelNode(model=model, tools=TOOLS, system_prompt=prompt))
    builder.add_node("tools", ToolNode(TOOLS))
    builder.add_edge("__start__", "call_model")
    builder.add_conditional_edges("call_model", route_model_output)
    builder.add_edge("tools", "call_model")
    return builder.compile(checkpointer=saver)


class Sent(BaseCallbackHandler):
    """What each model call was really given (LangChain's own callback)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[BaseMessage]]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        name = (kwargs.get("invocation_params") or {}).get("model") or "?"
        self.calls.append((str(name), list(messages[0])))


PROMPT_A = "You are terse. Answer in one line.\n\nSystem time: {system_time}"
PROMPT_B = "You are a weather reporter for {system_time}."
CFG = {"configurable": {"thread_id": "react-1"}}


def two_runs(graph: Any, sent: Sent) -> None:
    run = {"configurable": CFG["configurable"], "callbacks": [sent]}
    graph.invoke(
        {"messages": [("user", "Weather in Beijing?")]},
        run,
        context=Context(model="offline/weather-a", system_prompt=PROMPT_A),
    )
    graph.invoke(
        {"messages": [("user", "And Shanghai?")]},
        run,
        context=Context(model="offline/weather-b", system_prompt=PROMPT_B),
    )


async def atwo_runs(graph: Any, sent: Sent) -> None:
    run = {"configurable": CFG["configurable"], "callbacks": [sent]}
    await graph.ainvoke(
        {"messages": [("user", "Weather in Beijing?")]},
        run,
        context=Context(model="offline/weather-a", system_prompt=PROMPT_A),
    )
    await graph.ainvoke(
        {"messages": [("user", "And Shanghai?")]},
        run,
        context=Context(model="offline/weather-b", system_prompt=PROMPT_B),
    )


def prompt(text: str) -> str:
    return text.format(system_time="2026-12-01T17:00:00+00:00")


def check_two_runs(url: str, sent: Sent, graph: Any) -> None:
    # Each call got its run's model and prompt, first in the context.
    assert [name for name, _ in sent.calls] == ["weather-a"] * 2 + ["weather-b"] * 2
    assert [msgs[0].content for _, msgs in sent.calls] == [prompt(PROMPT_A)] * 2 + [
        prompt(PROMPT_B)
    ] * 2
    # The trace: model and prompt per call, the text stored once per prompt and thread.
    t = inspect.thread(url, "react-1")  # the database alone, no graph
    calls = [m for m in t.head.messages if isinstance(m, AIMessage)]
    recs = [m.response_metadata["threadlog"] for m in calls]
    assert [r["model"] for r in recs] == ["weather-a"] * 2 + ["weather-b"] * 2
    assert [r.get("system_prompt_text") for r in recs] == [
        prompt(PROMPT_A), None, prompt(PROMPT_B), None
    ]
    a_id, b_id = recs[0]["system_prompt"], recs[2]["system_prompt"]
    assert a_id != b_id and recs[1]["system_prompt"] == a_id and recs[3]["system_prompt"] == b_id
    assert recs[0]["system_prompt_digest"] != recs[2]["system_prompt_digest"]
    assert all(r["latency_ms"] >= 0 and r["context_messages"] >= 2 for r in recs)
    # The inspector reads each call's real prompt, from the database and from the graph.
    for source in (t, inspect.thread(graph, "react-1")):
        for i, text in enumerate([PROMPT_A, PROMPT_A, PROMPT_B, PROMPT_B]):
            seen = source.context(i)
            assert seen.context[0].content == prompt(text)
            assert seen.prompt_source == "recorded" and seen.matches_record is True
            view = str(seen)
            assert "read from the run's record" in view
            assert f"model weather-{'ab'[i // 2]}" in view
            assert all(display_width(line) <= 100 for line in view.splitlines())


def test_two_runs_on_one_thread_use_each_runs_model_and_prompt(sqlite_url: str) -> None:
    sent = Sent()
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build(saver)
        two_runs(graph, sent)
        check_two_runs(sqlite_url, sent, graph)


async def test_async_runs_and_async_choosers_do_the_same(backend: str) -> None:
    sent = Sent()
    async with threadlog.acheckpointer(backend) as saver:
        graph = build(saver, achoose_model, achoose_prompt)
        await atwo_runs(graph, sent)
    with threadlog.checkpointer(backend) as saver:
        check_two_runs(backend, sent, build(saver))


def test_an_async_chooser_in_a_sync_run_says_to_use_ainvoke(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build(saver, achoose_model)
        with pytest.raises(TypeError, match=r"model is an async function.*ainvoke"):
            graph.invoke({"messages": [("user", "hi")]}, CFG, context=Context())


def test_a_fixed_model_with_a_per_run_prompt(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build(saver, model=MODELS["offline/weather-b"])
        graph.invoke({"messages": [("user", "hi")]}, CFG, context=Context(system_prompt="P1"))
        graph.invoke({"messages": [("user", "hi again")]}, CFG, context=Context(system_prompt="P2"))
    t = inspect.thread(sqlite_url, "react-1")
    assert [t.context(i).context[0].content for i in range(2)] == ["P1", "P2"]


class ReusesIds(GenericFakeChatModel):
    """A local server's habit: the same call id in every reply."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def replies() -> Iterator[AIMessage]:
    for _ in range(2):
        call = {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_0"}
        yield AIMessage("", tool_calls=[call])
        yield AIMessage("Sunny in Rome.")


def test_the_per_run_model_is_re_keyed_validated_and_timed(sqlite_url: str) -> None:
    local = ReusesIds(messages=replies())
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build(saver, model=lambda state, runtime: local)
        for q in ("Rome?", "Rome again?"):
            graph.invoke({"messages": [("user", q)]}, CFG, context=Context())
        messages = graph.get_state(CFG).values["messages"]
    ids = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 2 and len(set(ids)) == 2 and "call_0" in ids  # the second re-keyed
    threadlog.validate(messages, allow_pending_calls=False)
    calls = [m for m in messages if isinstance(m, AIMessage)]
    assert all("latency_ms" in m.response_metadata["threadlog"] for m in calls)


def test_create_agent_takes_a_context_schema_and_choosers(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        agent = threadlog.create_agent(
            choose_model, TOOLS, system_prompt=choose_prompt, context_schema=Context,
            checkpointer=saver,
        )
        agent.invoke(
            {"messages": [("user", "Weather in Beijing?")]}, CFG,
            context=Context(model="offline/weather-b", system_prompt=PROMPT_B),
        )
    t = inspect.thread(sqlite_url, "react-1")
    assert t.context(-1).context[0].content == prompt(PROMPT_B)
    assert t.head.messages[-1].response_metadata["threadlog"]["model"] == "weather-b"


def test_the_hint_for_a_fixed_prompt_read_from_a_database_fits_100_columns(
    sqlite_url: str,
) -> None:
    from threadlog.examples.weather import SYSTEM_PROMPT, build_branching_graph

    with threadlog.checkpointer(sqlite_url) as saver:
        graph = build_branching_graph(OfflineChatModel(), saver)
        graph.invoke({"messages": [("user", "北京今天适合带伞吗？")]}, CFG)
    seen = inspect.thread(sqlite_url, "react-1").context(-1)
    assert seen.prompt_source == "assumed"  # a fixed prompt's text is the app's code
    lines = str(seen).splitlines()
    assert all(display_width(line) <= 100 and not line.endswith("…") for line in lines[:9])
    text = "\n".join(lines)
    assert "system prompt tl-system-" in text and "sent (fixed: its text is the app's code)" in text
    # It says what it shows, in words: no Python argument asked for.
    assert "rebuilt from the log by the context rules: no recorded call made this message" in text
    assert "its text is not stored with the thread: this rebuild sends none" in text
    assert "policy assumed: max_turns=" in text and "pass " not in text and "=)" not in text
    given = inspect.thread(sqlite_url, "react-1").context(-1, system_prompt=SYSTEM_PROMPT)
    assert given.prompt_source == "given" and given.matches_record is True
