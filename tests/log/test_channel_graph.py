"""The message log's rules end to end: a real `StateGraph` checkpointed by a real SQLite file.

Reading a thread back goes through a *second* `SqliteSaver` on the same file, so every
"read back" below really crossed the serializer and the database.
"""

from __future__ import annotations

import operator
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph import MessagesState as LangGraphMessagesState
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Overwrite, Send

import threadlog
from tests.helpers.core import assert_log_invariants, shape
from threadlog import (
    AppendOnlyError,
    ConflictingIdError,
    InvalidMessageError,
    MessagesState,
    ParallelWriteError,
)
from threadlog.log.messages import role_of


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "threads.sqlite"


@pytest.fixture
def saver(db: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(db, check_same_thread=False)
    yield SqliteSaver(conn)
    conn.close()


def read_back(db: Path, graph: StateGraph[Any], thread: str) -> list[BaseMessage]:
    """The thread's messages as a fresh process would read them from the file."""
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        app = graph.compile(checkpointer=SqliteSaver(conn))
        messages: list[BaseMessage] = app.get_state(cfg(thread)).values.get("messages", [])
        return messages
    finally:
        conn.close()


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def echo_graph(state_type: Any = MessagesState) -> StateGraph[Any]:
    """START -> reply -> END; `reply` answers the last user message."""

    def reply(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(f"you said: {last.text}")]}

    g = StateGraph(state_type)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g


# -- ids: replay vs conflict -------------------------------------------------


def test_resending_messages_read_back_from_sqlite_is_a_replay(db: Path, saver: SqliteSaver) -> None:
    g = echo_graph()
    app = g.compile(checkpointer=saver)
    first = [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": "hi"},
        ("user", "there"),
    ]
    app.invoke({"messages": first}, cfg("t"))
    stored = read_back(db, g, "t")
    assert [role_of(m) for m in stored] == ["developer", "user", "user", "assistant"]
    # A client that re-sends the whole history it read back, plus one new message:
    out = app.invoke({"messages": [*stored, "and now?"]}, cfg("t"))
    assert shape(out["messages"][:4]) == shape(stored)
    assert [m.text for m in out["messages"][4:]] == ["and now?", "you said: and now?"]
    assert shape(read_back(db, g, "t")) == shape(out["messages"])


def test_conflict_from_a_node_surfaces_and_leaves_the_stored_thread_unchanged(
    db: Path, saver: SqliteSaver
) -> None:
    def rewrite(state: MessagesState) -> dict[str, Any]:
        first = state["messages"][0]
        if state["messages"][-1].text == "rewrite history":
            return {"messages": [AIMessage("I never said that", id=first.id)]}
        return {"messages": [AIMessage("fine")]}

    g = StateGraph(MessagesState)
    g.add_node("rewrite", rewrite)
    g.add_edge(START, "rewrite")
    g.add_edge("rewrite", END)
    app = g.compile(checkpointer=saver)
    app.invoke({"messages": ["hello"]}, cfg("t"))
    before = read_back(db, g, "t")

    with pytest.raises(ConflictingIdError) as info:
        app.invoke({"messages": ["rewrite history"]}, cfg("t"))
    assert info.value.message_id == before[0].id and info.value.role == "assistant"

    # The stored log: everything up to the input of the failed step, nothing of the write.
    latest = next(iter(app.get_state_history(cfg("t"))))
    assert shape(latest.values["messages"][:2]) == shape(before)
    assert [m.text for m in latest.values["messages"]] == ["hello", "fine", "rewrite history"]
    # LangGraph keeps the failed task's write pending on that checkpoint; the live view
    # (get_state without a checkpoint_id) previews it, and shows the last good state
    # instead of raising (or of a corrupted log). Resuming raises the error again.
    live = app.get_state(cfg("t"))
    assert [m.text for m in live.values["messages"]] == ["hello", "fine", "rewrite history"]
    with pytest.raises(ConflictingIdError):
        app.invoke(None, cfg("t"))
    # New input starts a new step from the stored log: the thread goes on.
    out = app.invoke({"messages": ["ok, go on"]}, cfg("t"))
    assert [m.text for m in out["messages"]] == [
        "hello",
        "fine",
        "rewrite history",
        "ok, go on",
        "fine",
    ]
    assert_log_invariants(out["messages"])


# -- content -----------------------------------------------------------------

BLOCKS: list[str | dict[str, Any]] = [
    {"type": "text", "text": "What is in this picture and this file?"},
    {"type": "image", "url": "https://example.com/cat.png"},
    {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
    {"type": "file", "url": "https://example.com/report.pdf", "mime_type": "application/pdf"},
]
AI_BLOCKS: list[str | dict[str, Any]] = [
    {"type": "reasoning", "reasoning": "A cat, and a PDF report."},
    {"type": "text", "text": "A cat and a report."},
]


def test_list_content_blocks_round_trip_and_content_blocks_still_read(
    db: Path, saver: SqliteSaver
) -> None:
    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(AI_BLOCKS, id="a1")]}

    g = StateGraph(MessagesState)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    g.compile(checkpointer=saver).invoke({"messages": [HumanMessage(BLOCKS, id="u1")]}, cfg("t"))
    user, ai = read_back(db, g, "t")
    assert user.content == BLOCKS and ai.content == AI_BLOCKS
    assert user.content_blocks == HumanMessage(BLOCKS).content_blocks
    assert [b["type"] for b in user.content_blocks] == ["text", "image", "image", "file"]
    assert ai.content_blocks == AIMessage(AI_BLOCKS).content_blocks
    assert [b["type"] for b in ai.content_blocks] == ["reasoning", "text"]
    # ...and re-sending what was read back is still a replay.
    g.compile(checkpointer=saver).update_state(cfg("t"), {"messages": [user, ai]})
    assert shape(read_back(db, g, "t")) == shape([user, ai])


# -- parallel writers ----------------------------------------------------------


def test_two_parallel_branches_both_answering_raise_parallel_write_error(
    saver: SqliteSaver,
) -> None:
    g = StateGraph(MessagesState)
    g.add_node("optimist", lambda s: {"messages": [AIMessage("Sunny!", id="opt")]})
    g.add_node("pessimist", lambda s: {"messages": [AIMessage("Rain.", id="pes")]})
    g.add_edge(START, "optimist")
    g.add_edge(START, "pessimist")
    g.add_edge("optimist", END)
    g.add_edge("pessimist", END)
    app = g.compile(checkpointer=saver)
    with pytest.raises(ParallelWriteError) as info:
        app.invoke({"messages": [HumanMessage("weather?", id="u1")]}, cfg("t"))
    assert "'opt'" in str(info.value) and "'pes'" in str(info.value)
    latest = next(iter(app.get_state_history(cfg("t"))))
    assert [m.id for m in latest.values["messages"]] == ["u1"]


def test_parallel_send_tool_branches_land_in_call_order(db: Path, saver: SqliteSaver) -> None:
    calls = [{"name": "lookup", "args": {"n": i}, "id": f"c{i}"} for i in range(4)]
    finished: list[str] = []
    gate = threading.Barrier(4)

    def model(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("all done", id="final")]}
        return {"messages": [AIMessage("", id="ask", tool_calls=calls)]}

    def fan_out(state: MessagesState) -> Any:
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return END
        # Branches are sent in reverse call order...
        return [Send("lookup", {"call": c}) for c in reversed(last.tool_calls)]

    lock = threading.Lock()

    def lookup(arg: dict[str, Any]) -> dict[str, Any]:
        call = arg["call"]
        gate.wait(timeout=30)  # ...all four run at once...
        with lock:
            finished.append(call["id"])
        return {"messages": [ToolMessage(f"r{call['id']}", tool_call_id=call["id"])]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("lookup", lookup)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", fan_out, ["lookup", END])
    g.add_edge("lookup", "model")
    g.compile(checkpointer=saver).invoke({"messages": [HumanMessage("go", id="u1")]}, cfg("t"))
    stored = read_back(db, g, "t")
    # ...and the results are placed in the order of the calls.
    assert [m.id if not isinstance(m, ToolMessage) else m.tool_call_id for m in stored] == [
        "u1",
        "ask",
        "c0",
        "c1",
        "c2",
        "c3",
        "final",
    ]
    assert sorted(finished) == ["c0", "c1", "c2", "c3"]
    assert_log_invariants(stored)


# -- append-only and invalid input from nodes -----------------------------------


def test_overwrite_from_a_node_raises_append_only_error(saver: SqliteSaver) -> None:
    # RemoveMessage writes are removal events now (tests/log/test_removals.py); an
    # Overwrite stays refused: it would replace the history without saying what went.
    g = StateGraph(MessagesState)
    g.add_node("forget", lambda s: {"messages": Overwrite([HumanMessage("fresh", id="n1")])})
    g.add_edge(START, "forget")
    g.add_edge("forget", END)
    app = g.compile(checkpointer=saver)
    with pytest.raises(AppendOnlyError, match="ContextPolicy"):
        app.invoke({"messages": [HumanMessage("remember me", id="u1")]}, cfg("t"))
    latest = next(iter(app.get_state_history(cfg("t"))))
    assert [m.id for m in latest.values["messages"]] == ["u1"]


def test_invalid_message_from_a_node_raises_invalid_message_error(saver: SqliteSaver) -> None:
    g = StateGraph(MessagesState)
    g.add_node("bad", lambda s: {"messages": {"role": "tool", "content": "no call id"}})
    g.add_edge(START, "bad")
    g.add_edge("bad", END)
    with pytest.raises(InvalidMessageError, match="tool_call_id"):
        g.compile(checkpointer=saver).invoke({"messages": ["hi"]}, cfg("t"))


def test_malformed_message_dict_in_a_list_fails_before_anything_is_stored(
    saver: SqliteSaver,
) -> None:
    # LangGraph itself converts message dicts inside list writes to DeltaChannels
    # (ensure_message_ids) before our channel sees them, so its own conversion error
    # surfaces here (a KeyError for the missing tool_call_id), not InvalidMessageError.
    # What threadlog guarantees still holds: the run fails and nothing is written.
    g = StateGraph(MessagesState)
    g.add_node("bad", lambda s: {"messages": [{"role": "tool", "content": "no call id"}]})
    g.add_edge(START, "bad")
    g.add_edge("bad", END)
    app = g.compile(checkpointer=saver)
    with pytest.raises(Exception, match="tool_call_id"):
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg("t"))
    assert [m.id for m in app.get_state(cfg("t")).values["messages"]] == ["u1"]


# -- history -------------------------------------------------------------------


def test_every_checkpoint_in_the_history_reads_back(db: Path, saver: SqliteSaver) -> None:
    g = echo_graph()
    app = g.compile(checkpointer=saver)
    for text in ("one", "two", "three"):
        app.invoke({"messages": [text]}, cfg("t"))
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        states = list(g.compile(checkpointer=SqliteSaver(conn)).get_state_history(cfg("t")))
    finally:
        conn.close()
    lengths = [len(s.values.get("messages", [])) for s in reversed(states)]
    # input, reply for each turn (plus the empty start of each invoke's input step)
    assert lengths == [0, 1, 2, 2, 3, 4, 4, 5, 6]
    final = states[0].values["messages"]
    for s in states:
        msgs = s.values.get("messages", [])
        assert shape(msgs) == shape(final[: len(msgs)])  # every state is a prefix
        assert_log_invariants(msgs)


# -- LangGraph's own prebuilt tool node -----------------------------------------


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def _scripted_model(state: Any) -> dict[str, Any]:  # Any: used with both schemas
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        n = len(state["messages"])
        return {
            "messages": [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "get_weather", "args": {"city": c}, "id": f"{c}-{n}"}
                        for c in ("Paris", "Rome")
                    ],
                )
            ]
        }
    return {"messages": [AIMessage("Sunny in both.")]}


def prebuilt_graph(state_type: Any = MessagesState) -> StateGraph[Any]:
    g = StateGraph(state_type)
    g.add_node("model", _scripted_model)
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    return g


EXPECTED_TURN = ["human", "ai", "tool", "tool", "ai"]


def test_langgraph_prebuilt_tool_node_and_tools_condition_work_unchanged(
    db: Path, saver: SqliteSaver
) -> None:
    g = prebuilt_graph()
    app = g.compile(checkpointer=saver)
    app.invoke({"messages": ["weather?"]}, cfg("t"))
    out = app.invoke({"messages": ["and tomorrow?"]}, cfg("t"))
    assert [m.type for m in out["messages"]] == EXPECTED_TURN * 2
    assert [m.text for m in out["messages"][2:4]] == ["sunny in Paris", "sunny in Rome"]
    assert shape(read_back(db, g, "t")) == shape(out["messages"])
    assert_log_invariants(out["messages"])


async def test_langgraph_prebuilt_tool_node_works_async(db: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(db)) as asaver:
        app = prebuilt_graph().compile(checkpointer=asaver)
        out = await app.ainvoke({"messages": ["weather?"]}, cfg("t"))
        state = await app.aget_state(cfg("t"))
    assert [m.type for m in out["messages"]] == EXPECTED_TURN
    assert shape(state.values["messages"]) == shape(out["messages"])
    assert_log_invariants(out["messages"])


# -- state schemas ---------------------------------------------------------------


class CountingState(MessagesState):
    turns: Annotated[int, operator.add]


def test_subclassing_messages_state_adds_keys(db: Path, saver: SqliteSaver) -> None:
    def reply(state: CountingState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"turn {state['turns'] + 1}")], "turns": 1}

    g = StateGraph(CountingState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    app = g.compile(checkpointer=saver)
    app.invoke({"messages": ["a"], "turns": 0}, cfg("t"))
    out = app.invoke({"messages": ["b"]}, cfg("t"))
    assert out["turns"] == 2
    assert [m.text for m in out["messages"]] == ["a", "turn 1", "b", "turn 2"]
    assert isinstance(g.channels["messages"], threadlog.MessageLogChannel)


def test_messages_annotation_works_in_any_typed_dict() -> None:
    from typing_extensions import TypedDict

    class Chat(TypedDict):
        messages: threadlog.Messages
        history: Annotated[list[AnyMessage], threadlog.append_messages]

    g = StateGraph(Chat)
    g.add_node("n", lambda s: {"messages": ["x"], "history": ["x"]})
    g.add_edge(START, "n")
    g.add_edge("n", END)
    out = g.compile().invoke({"messages": [], "history": []})
    assert shape(out["messages"]) == shape(out["history"])


def test_a_thread_written_with_langgraph_messages_state_migrates_by_being_read(
    db: Path, saver: SqliteSaver
) -> None:
    old = prebuilt_graph(LangGraphMessagesState).compile(checkpointer=saver)
    old.invoke({"messages": ["weather?"]}, cfg("t"))
    written = old.get_state(cfg("t")).values["messages"]
    assert [m.type for m in written] == EXPECTED_TURN

    new_graph = prebuilt_graph(MessagesState)
    assert shape(read_back(db, new_graph, "t")) == shape(written)
    new = new_graph.compile(checkpointer=saver)
    out = new.invoke({"messages": ["and tomorrow?"]}, cfg("t"))
    assert shape(out["messages"][:5]) == shape(written)
    assert [m.type for m in out["messages"]] == EXPECTED_TURN * 2
    for s in new.get_state_history(cfg("t")):  # the old checkpoints read too
        assert_log_invariants(s.values.get("messages", []))
    # From now on the thread is append-only: a removal hides, the log keeps.
    first = written[0].id or ""
    new.update_state(cfg("t"), {"messages": [RemoveMessage(id=first)]})
    assert first not in [m.id for m in new.get_state(cfg("t")).values["messages"]]
    # Nothing was deleted: the checkpoint before the removal still reads it.
    before = list(new.get_state_history(cfg("t")))[1]
    assert first in [m.id for m in before.values["messages"]]
