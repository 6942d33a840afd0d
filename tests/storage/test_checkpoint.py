"""`threadlog.checkpointer(url)` / `acheckpointer(url)`: URLs, round trips, strict serializer."""

from __future__ import annotations

from pathlib import Path

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_SINGLE_ARG,
    JsonPlusSerializer,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

import threadlog
from threadlog.checkpoint import parse_url
from threadlog.checkpoint.guard import GuardedSaver

CANARY_HITS: list[str] = []


class Canary:
    """A class a forged blob names: constructing it is the "code execution"."""

    def __init__(self, arg: str) -> None:
        CANARY_HITS.append(arg)


def forged_blob(arg: str) -> bytes:
    """What JsonPlusSerializer writes for a constructor record naming `Canary`."""
    record = ormsgpack.packb((Canary.__module__, "Canary", arg))
    return ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, record))


@pytest.mark.parametrize(
    "url",
    ["mysql://localhost/db", "sqlite://relative.db", "threads.db", "", "sqlite:///"],
)
def test_bad_url_is_one_line_naming_the_schemes(url: str) -> None:
    with pytest.raises(ValueError) as err:
        with threadlog.checkpointer(url):
            pass
    text = str(err.value)
    assert "\n" not in text
    for scheme in ("sqlite:///", "postgresql://", "memory://"):
        assert scheme in text


def test_urls_pick_the_backend() -> None:
    assert parse_url("sqlite:///a/b.db").location == "a/b.db"
    assert parse_url("sqlite:////abs/b.db").location == "/abs/b.db"
    assert parse_url("postgres://u@h/db").kind == "postgres"
    assert parse_url("memory://").kind == "memory"


def test_each_url_gives_the_langgraph_saver_wrapped_in_the_guard(
    sqlite_url: str, pg_backend: str
) -> None:
    for url, cls in (
        (sqlite_url, SqliteSaver),
        (pg_backend, PostgresSaver),
        ("memory://", InMemorySaver),
    ):
        with threadlog.checkpointer(url) as saver:
            assert isinstance(saver, GuardedSaver)
            assert isinstance(saver.inner, cls)
        with threadlog.checkpointer(url, guard=False) as saver:
            assert isinstance(saver, cls)


def _graph(saver: object) -> object:
    def model(state: dict[str, object]) -> dict[str, object]:
        call = {"name": "get_weather", "args": {"city": "北京"}, "id": "c1"}
        return {
            "messages": [
                AIMessage("", id="a1", tool_calls=[call], usage_metadata={
                    "input_tokens": 3, "output_tokens": 2, "total_tokens": 5}),
                ToolMessage("晴", tool_call_id="c1", id="t1", status="success"),
                AIMessage("北京今天晴", id="a2"),
            ],
            "compactions": [{"kind": "trim", "id": "e1", "cut_to": 1}],
        }

    g = StateGraph(threadlog.AgentState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    g.add_edge("model", END)
    return g.compile(checkpointer=saver)


def test_messages_and_threadlog_state_round_trip_with_the_allowlist_on(backend: str) -> None:
    config = {"configurable": {"thread_id": "rt"}}
    with threadlog.checkpointer(backend) as saver:
        _graph(saver).invoke({"messages": [HumanMessage("你好", id="u1")]}, config)
    with threadlog.checkpointer(backend) as saver:  # a fresh process would do the same
        assert saver.serde._allowed_msgpack_modules is None  # strict: safe set only
        state = _graph(saver).get_state(config).values
    msgs = state["messages"]
    assert [type(m).__name__ for m in msgs] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert msgs[1].tool_calls[0]["args"] == {"city": "北京"}
    assert msgs[1].usage_metadata["total_tokens"] == 5
    assert msgs[2].status == "success" and msgs[3].content == "北京今天晴"
    assert state["compactions"] == [{"kind": "trim", "id": "e1", "cut_to": 1}]


async def test_async_checkpointer_round_trips(backend: str) -> None:
    config = {"configurable": {"thread_id": "art"}}
    async with threadlog.acheckpointer(backend) as saver:
        graph = _graph(saver)
        await graph.ainvoke({"messages": [HumanMessage("hi", id="u1")]}, config)
        state = await graph.aget_state(config)
    assert [m.id for m in state.values["messages"]] == ["u1", "a1", "t1", "a2"]


def test_a_blob_naming_an_unexpected_class_is_refused_not_executed() -> None:
    CANARY_HITS.clear()
    blob = forged_blob("boom")
    # The permissive default would build it: this is what the allowlist prevents.
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", blob))
    assert CANARY_HITS == ["boom"]
    CANARY_HITS.clear()
    with threadlog.checkpointer("memory://") as saver:
        # Refused loudly: neither built nor handed back as its raw argument.
        with pytest.raises(threadlog.StoredDataError, match=r"names .*Canary"):
            saver.serde.loads_typed(("msgpack", blob))
    assert CANARY_HITS == []


def test_a_forged_blob_in_the_database_is_not_executed_on_read(sqlite_url: str) -> None:
    CANARY_HITS.clear()
    config = {"configurable": {"thread_id": "forged"}}
    with threadlog.checkpointer(sqlite_url) as saver:
        _graph(saver).invoke({"messages": [HumanMessage("hi", id="u1")]}, config)
        # Replace the stored input write (the log is rebuilt from its writes) with a
        # record naming Canary, as an attacker with database access could.
        conn = saver.inner.conn
        (rowid,) = conn.execute(
            "SELECT rowid FROM writes WHERE channel = 'messages' ORDER BY checkpoint_id LIMIT 1"
        ).fetchone()
        conn.execute(
            "UPDATE writes SET type = 'msgpack', value = ? WHERE rowid = ?",
            (forged_blob("from-the-db"), rowid),
        )
        conn.commit()
    with threadlog.checkpointer(sqlite_url) as saver:
        # Not executed, and not read back as its argument either (it would become a
        # user message "from-the-db"): reading the thread fails, naming the type.
        with pytest.raises(threadlog.StoredDataError, match="Canary"):
            _graph(saver).get_state(config)
    assert CANARY_HITS == []


def test_a_record_naming_os_system_is_refused_not_run_nor_read_as_text(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    record = ormsgpack.packb(("os", "system", f"touch {marker}"))
    blob = ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, record))
    with threadlog.checkpointer("memory://") as saver:
        with pytest.raises(threadlog.StoredDataError, match=r"names os\.system"):
            saver.serde.loads_typed(("msgpack", blob))
    assert not marker.exists()


def test_allowed_types_let_your_own_classes_through() -> None:
    CANARY_HITS.clear()
    with threadlog.checkpointer("memory://", allowed_types=[Canary]) as saver:
        saver.serde.loads_typed(("msgpack", forged_blob("ok")))
    assert CANARY_HITS == ["ok"]


def test_missing_postgres_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.postgres", None)
    with pytest.raises(ImportError, match=r"threadlog\[postgres\]"):
        with threadlog.checkpointer("postgresql://nobody@localhost/none"):
            pass


def test_wrap_hook_wraps_the_backend_saver_inside_the_guard() -> None:
    seen: list[object] = []

    def wrapper(saver: object) -> object:
        seen.append(saver)
        return saver

    with threadlog.checkpointer("memory://", wrap=wrapper) as saver:  # type: ignore[arg-type]
        assert isinstance(saver, GuardedSaver)
        assert seen == [saver.inner] and isinstance(saver.inner, InMemorySaver)
