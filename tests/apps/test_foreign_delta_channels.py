"""Delta channels that are not threadlog's — LangGraph's own delta messages channel, an
app's own reducer, deepagents (its copy of that reducer, its files channel, a subagent) —
run on threadlog's saver turn after turn and read back exactly what LangGraph's own saver
gives the same app: after every turn and at every checkpoint of the history. SQLite and
Postgres, sync and async."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

from tests.helpers.delta_apps import (
    cfg,
    langgraph_saver,
    message_rows,
    run_turns,
    threadlog_saver,
)
from tests.helpers.echo import one_node_graph
from tests.helpers.multi_agent import deep_agent


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def reference_url(backend: str, request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """Fresh storage of the same kind as `backend`, for LangGraph's own saver."""
    if backend.startswith("sqlite:///"):
        return f"sqlite:///{tmp_path / 'langgraph.sqlite'}"
    return str(request.getfixturevalue("pg_databases").take())


async def _both(
    build: Any, url: str, reference: str, inputs: Sequence[Any], is_async: bool, read: Any
) -> tuple[Any, Any]:
    async with langgraph_saver(reference, is_async) as saver:
        expected = await run_turns(build(saver), inputs, "t", is_async, read=read)
    async with threadlog_saver(url, is_async) as saver:
        got = await run_turns(build(saver), inputs, "t", is_async, read=read)
    return expected, got


# -- LangGraph's own delta messages channel ----------------------------------------------


class DeltaMessages(TypedDict):
    messages: Annotated[list[BaseMessage], DeltaChannel(_messages_delta_reducer)]


def _reply(state: DeltaMessages) -> dict[str, Any]:
    n = len(state["messages"])
    last = state["messages"][-1].id
    return {"messages": [AIMessage(f"reply to {n} messages", id=f"re-{last}")]}


def _delta_messages_app(saver: Any) -> Any:
    return one_node_graph(DeltaMessages, _reply, saver)


# The reducer's own rules on the way: a same-id message replaces, a RemoveMessage deletes.
DELTA_TURNS: list[Any] = [
    {"messages": [HumanMessage("hi", id="h1")]},
    {"messages": [HumanMessage("and then?", id="h2")]},
    {"messages": [HumanMessage("third", id="h3")]},
    {"messages": [HumanMessage("hi, edited", id="h1"), RemoveMessage(id="re-h2")]},
    {"messages": [HumanMessage("fifth", id="h5")]},
    {"messages": [HumanMessage("sixth", id="h6")]},
]


def _messages(values: dict[str, Any]) -> list[tuple[Any, ...]]:
    return message_rows(values.get("messages"))


async def test_langgraphs_delta_messages_channel_reads_back_as_on_langgraphs_saver(
    backend: str, reference_url: str, is_async: bool
) -> None:
    expected, got = await _both(
        _delta_messages_app, backend, reference_url, DELTA_TURNS, is_async, _messages
    )
    assert got == expected
    after, history = got
    assert [len(rows) for rows in after] == [2, 4, 6, 6, 8, 10]
    assert after[3][0][2] == "hi, edited"  # the reducer's replace, not the log's refusal
    assert len(history) > 2 * len(DELTA_TURNS)


async def test_update_state_on_langgraphs_delta_channel_replaces_as_its_reducer_says(
    backend: str, reference_url: str, is_async: bool
) -> None:
    async def run(saver: Any) -> Any:
        app = _delta_messages_app(saver)
        await run_turns(app, DELTA_TURNS[:3], "u", is_async, read=_messages)
        update = {"messages": [HumanMessage("revised", id="h2")]}
        if is_async:
            await app.aupdate_state(cfg("u"), update)
            return _messages((await app.aget_state(cfg("u"))).values)
        app.update_state(cfg("u"), update)
        return _messages(app.get_state(cfg("u")).values)

    async with langgraph_saver(reference_url, is_async) as saver:
        expected = await run(saver)
    async with threadlog_saver(backend, is_async) as saver:
        got = await run(saver)
    assert got == expected
    assert [row[2] for row in got if row[1] == "h2"] == ["revised"]


# -- an app's own delta reducer ----------------------------------------------------------


def _window(state: list[Any] | None, writes: Sequence[Any]) -> list[Any]:
    """The app's own reducer on its message key: the last four messages only."""
    out = list(state or [])
    for w in writes:
        out.extend(w if isinstance(w, list) else [w])
    return out[-4:]


def _tally(state: dict[str, int] | None, writes: Sequence[dict[str, int]]) -> dict[str, int]:
    out = dict(state or {})
    for w in writes:
        for k, v in w.items():
            out[k] = out.get(k, 0) + v
    return out


class OwnReducers(TypedDict):
    messages: Annotated[list[BaseMessage], DeltaChannel(_window)]
    tally: Annotated[dict[str, int], DeltaChannel(_tally, snapshot_frequency=3)]


def _count(state: OwnReducers) -> dict[str, Any]:
    n = len(state["messages"])
    reply = AIMessage(f"seen {n}, tally {sorted(state.get('tally', {}).items())}", id=f"c-{n}")
    return {"messages": [reply], "tally": {"turns": 1, f"len{n}": 1}}


def _own_reducers_app(saver: Any) -> Any:
    builder = StateGraph(OwnReducers)
    builder.add_node("count", _count)
    builder.add_edge(START, "count")
    builder.add_edge("count", END)
    return builder.compile(checkpointer=saver)


def _own_values(values: dict[str, Any]) -> tuple[Any, ...]:
    return (message_rows(values.get("messages")), sorted((values.get("tally") or {}).items()))


async def test_an_apps_own_delta_reducers_read_back_as_on_langgraphs_saver(
    backend: str, reference_url: str, is_async: bool
) -> None:
    turns = [{"messages": [HumanMessage(f"turn {i}", id=f"h{i}")]} for i in range(7)]
    expected, got = await _both(
        _own_reducers_app, backend, reference_url, turns, is_async, _own_values
    )
    assert got == expected
    after, _ = got
    assert len(after[-1][0]) == 4  # the window, not the whole log
    assert dict(after[-1][1])["turns"] == 7


# -- deepagents: its own delta messages reducer, its files channel, a subagent ----------


def _deep_main(messages: Sequence[BaseMessage]) -> AIMessage:
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    if isinstance(messages[-1], HumanMessage):
        call = {
            "name": "task",
            "args": {"description": f"look into {turn}", "subagent_type": "researcher"},
            "id": f"task-{turn}",
        }
        return AIMessage("", tool_calls=[call], id=f"main-call-{turn}")
    return AIMessage(f"main answers turn {turn}", id=f"main-answer-{turn}")


def _deep_sub(messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(f"researched: {messages[-1].content}")


def _deep_agent(saver: Any) -> Any:
    return deep_agent(saver, _deep_main, _deep_sub)


def _deep_values(values: dict[str, Any]) -> list[tuple[Any, ...]]:
    # The tool results' ids are LangGraph's random uuids: compared by everything else.
    return message_rows(values.get("messages"), ids=False)


async def test_a_deepagents_agent_with_a_subagent_reads_back_as_on_langgraphs_saver(
    backend: str, reference_url: str, is_async: bool
) -> None:
    turns = [{"messages": [HumanMessage(f"question {i}", id=f"q{i}")]} for i in range(5)]
    expected, got = await _both(_deep_agent, backend, reference_url, turns, is_async, _deep_values)
    assert got == expected
    after, _ = got
    assert after[-1][-1][2] == "main answers turn 5"
    assert sum(row[0] == "tool" for row in after[-1]) == 5  # each task's result once


async def test_a_deepagents_thread_reads_back_with_the_same_ids_on_a_cold_saver(
    backend: str, is_async: bool
) -> None:
    turns = [{"messages": [HumanMessage(f"question {i}", id=f"q{i}")]} for i in range(3)]
    async with threadlog_saver(backend, is_async) as saver:
        after, _ = await run_turns(_deep_agent(saver), turns, "d", is_async, read=_ids)
    async with threadlog_saver(backend, is_async) as saver:  # a cold cache
        app = _deep_agent(saver)
        state = (await app.aget_state(cfg("d"))) if is_async else app.get_state(cfg("d"))
    assert _ids(state.values) == after[-1]
    assert len(set(after[-1])) == len(after[-1]) == 12


def _ids(values: dict[str, Any]) -> list[str]:
    return [m.id for m in values.get("messages") or ()]

