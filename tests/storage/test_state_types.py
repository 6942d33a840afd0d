"""An app's own types in state (a pydantic model, a dataclass, an enum) written the tutorial
way: allowed by the saver's strict serializer from the graph's schema, never from the data.

The CLI side (`--allow-type`, `THREADLOG_ALLOW_TYPES`, the placeholder) is in
tests/cli/test_cli_state_types.py.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import re
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG
from langgraph.graph import START, StateGraph
from pydantic import BaseModel

import threadlog


class Mood(enum.Enum):
    CALM = "calm"
    BUSY = "busy"


@dataclasses.dataclass
class Visit:
    city: str
    nights: int


class Profile(BaseModel):
    name: str
    mood: Mood
    visits: list[Visit] = []


class State(TypedDict):
    messages: threadlog.Messages
    profile: Profile | None
    history: Annotated[list[Visit], operator.add]


def remember(state: State) -> dict[str, Any]:
    # The app's own node, as a tutorial writes it: it reads and writes its model.
    visits = [Visit("Oslo", 2)]
    return {
        "messages": [AIMessage("noted", id=f"ai-{len(state['messages'])}")],
        "profile": Profile(name="Ada", mood=Mood.BUSY, visits=visits),
        "history": visits,
    }


def app(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    return builder.compile(checkpointer=saver)


CFG = {"configurable": {"thread_id": "t1"}}


def test_the_first_get_state_of_an_app_with_a_pydantic_model_in_state_reads_it(
    backend: str,
) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = threadlog.allow_state_types(app(saver))
        graph.invoke({"messages": [("user", "hi")]}, CFG)
        state = graph.get_state(CFG)
        graph.invoke({"messages": [("user", "again")]}, CFG)
    assert state.values["profile"] == Profile(name="Ada", mood=Mood.BUSY, visits=[Visit("Oslo", 2)])
    assert state.values["history"] == [Visit("Oslo", 2)]
    # A second process: a cold saver and the graph compiled again read the same.
    with threadlog.checkpointer(backend) as saver:
        graph = threadlog.allow_state_types(app(saver))
        values = graph.get_state(CFG).values
    assert isinstance(values["profile"], Profile) and values["profile"].mood is Mood.BUSY
    assert values["history"] == [Visit("Oslo", 2), Visit("Oslo", 2)]
    assert [m.content for m in values["messages"]] == ["hi", "noted", "again", "noted"]


async def test_the_async_saver_reads_the_state_types_too(backend: str) -> None:
    async with threadlog.acheckpointer(backend) as saver:
        graph = threadlog.allow_state_types(app(saver))
        await graph.ainvoke({"messages": [("user", "hi")]}, CFG)
        state = await graph.aget_state(CFG)
    assert state.values["profile"].visits == [Visit("Oslo", 2)]


def test_without_the_call_the_error_names_the_call_and_the_cli_flag(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = app(saver)
        graph.invoke({"messages": [("user", "hi")]}, CFG)
        with pytest.raises(threadlog.StoredDataError) as caught:
            graph.get_state(CFG)
    text = str(caught.value)
    assert "Profile" in text and "allow_state_types(graph)" in text
    assert re.search(r"--allow-type [\w.]+:(Profile|Mood|Visit)\b", text)
    assert "THREADLOG_ALLOW_TYPES" in text
    assert "not imported" not in text


def test_a_schema_and_a_saver_allow_the_same_types_without_a_graph(sqlite_url: str) -> None:
    with threadlog.checkpointer(sqlite_url) as saver:
        threadlog.allow_state_types(State, saver)
        graph = app(saver)  # compiled after: the saver already reads its types
        graph.invoke({"messages": [("user", "hi")]}, CFG)
        assert graph.get_state(CFG).values["profile"].name == "Ada"


def test_a_subgraphs_state_types_are_allowed_through_the_parent(sqlite_url: str) -> None:
    class Inner(TypedDict):
        messages: threadlog.Messages
        visit: Visit | None

    class Outer(TypedDict):
        messages: threadlog.Messages

    inner = StateGraph(Inner)
    inner.add_node("go", lambda s: {"visit": Visit("Rome", 1)})
    inner.add_node("stay", lambda s: {"messages": [AIMessage("ok", id="ok")]})
    inner.add_edge(START, "go")
    inner.add_edge("go", "stay")
    outer = StateGraph(Outer)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    with threadlog.checkpointer(sqlite_url) as saver:
        graph = threadlog.allow_state_types(outer.compile(checkpointer=saver))
        graph.invoke({"messages": [("user", "hi")]}, CFG)
        # Every checkpoint, the subgraph's namespace included, reads back.
        stored = [t.checkpoint["channel_values"] for t in saver.list(None)]
    assert {"visit": Visit("Rome", 1)}.items() <= next(
        v for v in stored if "visit" in v
    ).items()


def test_the_database_cannot_widen_the_list(sqlite_url: str, tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    record = ormsgpack.packb(("os", "system", f"touch {marker}"))
    blob = ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, record))
    with threadlog.checkpointer(sqlite_url) as saver:
        threadlog.allow_state_types(app(saver))
        profile = Profile(name="x", mood=Mood.CALM)
        assert saver.serde.loads_typed(saver.serde.dumps_typed(profile)) == profile
        with pytest.raises(threadlog.StoredDataError, match=r"names os\.system"):
            saver.serde.loads_typed(("msgpack", blob))
        # The readers' placeholder type is a reader's only: an app's saver refuses it too.
        forged = ormsgpack.packb(("threadlog.checkpoint.serde", "UndecodedValue", "x"))
        placeholder = ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, forged))
        with pytest.raises(threadlog.StoredDataError, match="UndecodedValue"):
            saver.serde.loads_typed(("msgpack", placeholder))
    assert not marker.exists()


class AgentWithProfile(threadlog.AgentState):
    profile: Profile | None


def test_create_agent_allows_its_state_types_by_itself(sqlite_url: str) -> None:
    model = threadlog.OfflineChatModel()
    with threadlog.checkpointer(sqlite_url) as saver:
        agent = threadlog.create_agent(
            model, [], state_schema=AgentWithProfile, checkpointer=saver
        )
        profile = Profile(name="Ada", mood=Mood.CALM)
        agent.invoke({"messages": [("user", "hi")], "profile": profile}, CFG)
        assert agent.get_state(CFG).values["profile"] == profile


def test_allow_state_types_needs_a_saver_to_widen() -> None:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    with pytest.raises(ValueError, match="pass the saver too"):
        threadlog.allow_state_types(builder.compile())
    with pytest.raises(ValueError, match="a schema and no saver"):
        threadlog.allow_state_types(State)
