"""A memory app written the way langchain-ai/memory-agent writes it, for the store-items
tests: `call_model` searches the user's memories (`get_store().search`) and builds its
system prompt from them; `store_memory` saves what the model asked to remember
(`runtime.store.put`), reads one memory back (`store.get`) and answers the tool call.

The model is `ToolScripted` (no network): on a user message it calls `upsert_memory`,
after the tool's result it answers. `store_for(kind, url)` opens the store a test asks
for: `InMemoryStore`, or a SQLite / Postgres store beside the checkpointer's database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from typing_extensions import TypedDict

from tests.helpers.recorded_apps import ToolScripted


class Context(TypedDict):
    user_id: str


def memory_prompt(memories: str) -> str:
    return f"You are a helpful assistant.\n<memories>\n{memories}\n</memories>"


def _script(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        n = sum(isinstance(m, HumanMessage) for m in messages)
        call = {"name": "upsert_memory", "id": f"mem-{n}",
                "args": {"content": f"user said {last.content}", "context": f"turn {n}"}}
        return AIMessage("", tool_calls=[call])
    return AIMessage("noted")


def memory_agent(checkpointer: Any, store: BaseStore) -> Any:
    model = ToolScripted(script=_script)

    def call_model(state: MessagesState, runtime: Runtime[Context]) -> dict[str, Any]:
        user = runtime.context["user_id"]
        memories = get_store().search(("memories", user), query="what matters", limit=10)
        text = "\n".join(f"[{m.key}]: {m.value}" for m in memories)
        sent = [SystemMessage(memory_prompt(text)), *state["messages"]]
        return {"messages": [model.invoke(sent)]}

    def store_memory(state: MessagesState, runtime: Runtime[Context]) -> dict[str, Any]:
        user = runtime.context["user_id"]
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        out = []
        for call in last.tool_calls:
            key = str(call["id"])
            assert runtime.store is not None
            runtime.store.put(("memories", user), key, dict(call["args"]))
            saved = runtime.store.get(("memories", user), key)
            assert saved is not None
            out.append(ToolMessage(f"Stored memory {key}", tool_call_id=key))
        return {"messages": out}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "store_memory" if isinstance(last, AIMessage) and last.tool_calls else END

    b = StateGraph(MessagesState, context_schema=Context)
    b.add_node("call_model", call_model)
    b.add_node("store_memory", store_memory)
    b.add_edge(START, "call_model")
    b.add_conditional_edges("call_model", route, ["store_memory", END])
    b.add_edge("store_memory", "call_model")
    return b.compile(checkpointer=checkpointer, store=store)


def turn(graph: Any, thread_id: str, text: str, user: str = "ada") -> Any:
    return graph.invoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread_id}},
        context={"user_id": user},
    )


@contextlib.contextmanager
def store_for(kind: str, url: str) -> Iterator[BaseStore]:
    """`kind` "memory": an `InMemoryStore`; "database": a store in the checkpointer's
    database (`url`): SQLite's or Postgres's."""
    if kind == "memory":
        from langgraph.store.memory import InMemoryStore

        yield InMemoryStore()
    elif url.startswith("sqlite:///"):
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(url[len("sqlite:///"):] + ".store") as sqlite_store:
            sqlite_store.setup()
            yield sqlite_store
    else:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(url) as pg_store:
            pg_store.setup()
            yield pg_store


def async_memory_agent(checkpointer: Any, store: BaseStore) -> Any:
    """`memory_agent` with async nodes, as memory-agent's own: `await store.asearch`,
    `await store.aput` on the store LangGraph injects (`store: BaseStore`)."""
    model = ToolScripted(script=_script)

    async def call_model(
        state: MessagesState, runtime: Runtime[Context], *, store: BaseStore
    ) -> dict[str, Any]:
        user = runtime.context["user_id"]
        memories = await store.asearch(("memories", user), query="what matters", limit=10)
        text = "\n".join(f"[{m.key}]: {m.value}" for m in memories)
        sent = [SystemMessage(memory_prompt(text)), *state["messages"]]
        return {"messages": [await model.ainvoke(sent)]}

    async def store_memory(
        state: MessagesState, runtime: Runtime[Context], *, store: BaseStore
    ) -> dict[str, Any]:
        user = runtime.context["user_id"]
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        for call in last.tool_calls:
            await store.aput(("memories", user), str(call["id"]), dict(call["args"]))
        return {"messages": [
            ToolMessage(f"Stored memory {c['id']}", tool_call_id=str(c["id"]))
            for c in last.tool_calls
        ]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "store_memory" if isinstance(last, AIMessage) and last.tool_calls else END

    b = StateGraph(MessagesState, context_schema=Context)
    b.add_node("call_model", call_model)
    b.add_node("store_memory", store_memory)
    b.add_edge(START, "call_model")
    b.add_conditional_edges("call_model", route, ["store_memory", END])
    b.add_edge("store_memory", "call_model")
    return b.compile(checkpointer=checkpointer, store=store)
