"""Poisoned threads made the way they happen, in threadlog and plain LangGraph databases.

`threadlog_threads(url)` writes, through `threadlog.checkpointer(url)` and the weather
agent (`threadlog.create_agent`, the offline model): a clean turn, a turn paused for
approval between a call and its result (human in the loop), a turn whose tool crashed the
process (a `BaseException` escapes the run), a paused turn the user then answered
with new input (threadlog answers the abandoned call: clean), and a chat graph on
threadlog's log whose model calls a tool no node of the graph runs (unrouted).

`plain_threads(url)` writes, through LangGraph's own saver and `create_react_agent`: a
clean turn, a turn interrupted before its tools, a crash in a tool, a human-in-the-loop
reject (the reviewer's "no" sent as new input, which LangGraph stores before refusing the
history), trimming that removed a call but kept its result, a hand-written
`update_state` that adds a result for a call nobody made, and an unrouted call.

Each returns `{thread_id: expected kinds}` (empty: clean). A paused or stopped turn —
its tool step pending, which answers its calls when the thread resumes — is
`in_progress`: a note of `check`, not a problem (`NOTES`). `snapshot(url)` is
the database's whole stored content (SQLite: the bytes of the file and of a
non-empty WAL; Postgres: every row of every table), to prove a reader changed nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver

CITY_Q = "Is it raining in Beijing?"
NOTES = frozenset({"in_progress"})
"""Expected kinds that are `check`'s notes, not problems."""


class Crash(BaseException):
    """A process dying mid-tool, as far as the run can tell (nothing catches it)."""


def _crashing_weather(city: str) -> str:
    raise Crash(city)


crashing_weather = StructuredTool.from_function(
    func=_crashing_weather, name="get_weather", description="Today's weather for one city."
)


def _cfg(tid: str) -> Any:
    return {"configurable": {"thread_id": tid}}


def threadlog_threads(url: str) -> dict[str, set[str]]:
    import threadlog
    from threadlog.examples.weather import build_graph

    with threadlog.checkpointer(url) as saver:
        graph = build_graph(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("tl-clean"))
        approving = build_graph(checkpointer=saver, requires_approval=["get_weather"])
        approving.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("tl-paused"))
        approving.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("tl-moved-on"))
        # The reviewer never answers; the user asks something else instead.
        approving.invoke({"messages": [HumanMessage("never mind", id="q2")]}, _cfg("tl-moved-on"))
        from threadlog import OfflineChatModel, create_agent

        crashing = create_agent(OfflineChatModel(), [crashing_weather], checkpointer=saver)
        with contextlib.suppress(Crash):
            crashing.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("tl-crashed"))
        unrouted_chat(threadlog.MessagesState, saver).invoke(
            {"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("tl-unrouted")
        )
    return {
        "tl-clean": set(),
        "tl-paused": {"in_progress"},
        "tl-moved-on": set(),
        "tl-crashed": {"in_progress"},
        "tl-unrouted": {"open_call"},
    }


def unrouted_chat(state: Any, saver: BaseCheckpointSaver[Any]) -> Any:
    """A chat graph whose model has tools bound but no node runs them: its calls stay
    open with nothing pending (what `check --repair` answers)."""
    from langgraph.graph import END, START, StateGraph

    from threadlog import OfflineChatModel
    from threadlog.examples.weather import get_weather

    model = OfflineChatModel().bind_tools([get_weather])
    builder = StateGraph(state)
    builder.add_node("chat", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    return builder.compile(checkpointer=saver)


@contextlib.contextmanager
def plain_saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """LangGraph's own saver for `url` (tables set up), no threadlog in the way."""
    if url.startswith("sqlite:///"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(url[len("sqlite:///") :]) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver


def react_agent(saver: BaseCheckpointSaver[Any], tools: list[Any] | None = None, **kw: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    from threadlog import OfflineChatModel
    from threadlog.examples.weather import get_weather

    with warnings.catch_warnings():  # moved to langchain.agents; still what users have
        warnings.simplefilter("ignore")
        return create_react_agent(
            OfflineChatModel(), tools or [get_weather], checkpointer=saver, **kw
        )


def plain_threads(url: str) -> dict[str, set[str]]:
    with plain_saver(url) as saver:
        agent = react_agent(saver)
        agent.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("p-clean"))
        paused = react_agent(saver, interrupt_before=["tools"])
        paused.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("p-interrupted"))
        paused.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("p-rejected"))
        # The reviewer rejects the call by sending a message instead of a result.
        with contextlib.suppress(ValueError):  # LangGraph's INVALID_CHAT_HISTORY
            paused.invoke(
                {"messages": [HumanMessage("No, don't look it up.", id="q2")]}, _cfg("p-rejected")
            )
        crashing = react_agent(saver, tools=[crashing_weather])
        with contextlib.suppress(Crash):
            crashing.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("p-crashed"))
        # Trimming that split a pair: an old-message cleanup removed the call, kept its result.
        agent.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("p-trimmed"))
        state = agent.get_state(_cfg("p-trimmed"))
        request = next(m for m in state.values["messages"] if getattr(m, "tool_calls", None))
        agent.update_state(_cfg("p-trimmed"), {"messages": [RemoveMessage(id=request.id)]})
        # A hand-written update_state: a result for a call that was never made.
        agent.invoke({"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("p-updated"))
        agent.update_state(
            _cfg("p-updated"),
            {"messages": [ToolMessage("sunny", tool_call_id="call_made_up", id="hand-1")]},
        )
        from langgraph.graph import MessagesState

        unrouted_chat(MessagesState, saver).invoke(
            {"messages": [HumanMessage(CITY_Q, id="q1")]}, _cfg("p-unrouted")
        )
    return {
        "p-clean": set(),
        "p-interrupted": {"in_progress"},
        "p-rejected": {"open_call"},
        "p-crashed": {"in_progress"},
        "p-trimmed": {"orphan_result"},
        "p-updated": {"orphan_result"},
        "p-unrouted": {"open_call"},
    }


_TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs", "writes")


def snapshot(url: str) -> Any:
    """Everything stored (module doc): equal snapshots, unchanged database."""
    if url.startswith("sqlite:///") or "://" not in url:
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else url
        out = {}
        # The file and any journal content. A WAL reader creates an empty -wal and the
        # -shm index (shared memory, no data): neither is a change to what is stored.
        for suffix in ("", "-wal", "-journal"):
            if os.path.exists(path + suffix) and os.path.getsize(path + suffix):
                with open(path + suffix, "rb") as f:
                    out[suffix] = hashlib.sha256(f.read()).hexdigest()
        return out
    import psycopg

    rows: dict[str, list[Any]] = {}
    with psycopg.connect(url) as conn:
        names = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema='public'"
            )
        }
        for table in sorted(names):
            data = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            rows[table] = sorted(repr(r) for r in data)
    return rows
