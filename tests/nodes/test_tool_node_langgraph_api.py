"""`threadlog.ToolNode` takes every argument of LangGraph's ToolNode with the same meaning:
`handle_tool_errors` in all its forms, `wrap_tool_call` / `awrap_tool_call`, `messages_key`,
and a node invoked inside another node inherits the graph's runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import InjectedStore, ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from threadlog import MessagesState, ToolCallError, ToolNode

MODES = ["sync", "async"]


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@tool
def boom(why: str) -> str:
    """Always fails."""
    raise KeyError(why)


def ask(name: str, args: dict[str, Any], cid: str = "c1") -> dict[str, Any]:
    return {"messages": [AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])]}


async def run(node: ToolNode, inp: Any, mode: str) -> Any:
    return node.invoke(inp) if mode == "sync" else await node.ainvoke(inp)


@pytest.mark.parametrize("mode", MODES)
async def test_a_string_handler_becomes_the_error_text(mode: str) -> None:
    out = await run(
        ToolNode([divide], handle_tool_errors="try again"), ask("divide", {"a": 1, "b": 0}), mode
    )
    msg = out["messages"][0]
    assert msg == ToolMessage("try again", name="divide", tool_call_id="c1", status="error")


@pytest.mark.parametrize("mode", MODES)
async def test_an_exception_type_handles_only_that_type(mode: str) -> None:
    node = ToolNode([divide, boom], handle_tool_errors=ZeroDivisionError)
    out = await run(node, ask("divide", {"a": 1, "b": 0}), mode)
    assert out["messages"][0].status == "error"
    assert out["messages"][0].response_metadata["threadlog_error"] == "raised"
    with pytest.raises(KeyError, match="nope"):
        await run(node, ask("boom", {"why": "nope"}), mode)


@pytest.mark.parametrize("mode", MODES)
async def test_a_tuple_of_types_handles_each(mode: str) -> None:
    node = ToolNode([divide, boom], handle_tool_errors=(ZeroDivisionError, KeyError))
    for name, args in (("divide", {"a": 1, "b": 0}), ("boom", {"why": "x"})):
        assert (await run(node, ask(name, args), mode))["messages"][0].status == "error"


@pytest.mark.parametrize("mode", MODES)
async def test_a_callable_handles_the_types_its_annotation_names(mode: str) -> None:
    def explain(e: ZeroDivisionError) -> str:
        return f"cannot divide: {e}"

    node = ToolNode([divide, boom], handle_tool_errors=explain)
    out = await run(node, ask("divide", {"a": 1, "b": 0}), mode)
    assert out["messages"][0].content == "cannot divide: division by zero"
    with pytest.raises(KeyError):
        await run(node, ask("boom", {"why": "x"}), mode)


@pytest.mark.parametrize("mode", MODES)
async def test_schema_failures_reach_handlers_as_tool_invocation_errors(mode: str) -> None:
    def explain(e: ToolInvocationError) -> str:
        return f"bad args for {e.tool_name}"

    node = ToolNode([divide, boom], handle_tool_errors=explain)
    out = await run(node, ask("divide", {"a": "x", "b": 1}), mode)
    assert out["messages"][0].content == "bad args for divide"
    with pytest.raises(KeyError):  # not a ToolInvocationError: propagates
        await run(node, ask("boom", {"why": "x"}), mode)


def test_handle_errors_is_the_older_name_of_a_bool_handle_tool_errors() -> None:
    assert ToolNode([divide], handle_errors=False).handle_tool_errors is False
    assert ToolNode([divide]).handle_tool_errors is True
    with pytest.raises(ValueError, match="not both"):
        ToolNode([divide], handle_errors=False, handle_tool_errors="x")
    with pytest.raises(TypeError, match="handle_tool_errors=42"):
        ToolNode([divide], handle_tool_errors=42)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
async def test_an_interceptor_can_retry_and_rewrite_the_call(mode: str) -> None:
    seen: list[dict[str, Any]] = []

    def retry_with_b_one(request: ToolCallRequest, execute: Any) -> Any:
        result = execute(request)
        seen.append(dict(request.tool_call["args"]))
        if isinstance(result, ToolMessage) and result.status == "error":
            fixed = {**request.tool_call, "args": {**request.tool_call["args"], "b": 1}}
            result = execute(request.override(tool_call=fixed))
        return result

    node = ToolNode([divide], wrap_tool_call=retry_with_b_one)
    out = await run(node, ask("divide", {"a": 6, "b": 0}), mode)
    assert out["messages"][0].content == "6.0" and out["messages"][0].status == "success"
    assert seen == [{"a": 6, "b": 0}]


async def test_an_async_interceptor_runs_under_ainvoke() -> None:
    async def short_circuit(request: ToolCallRequest, execute: Any) -> ToolMessage:
        return ToolMessage("cached", tool_call_id=request.tool_call["id"], name="divide")

    node = ToolNode([divide], awrap_tool_call=short_circuit)
    out = await node.ainvoke(ask("divide", {"a": 1, "b": 0}))
    assert out["messages"][0].content == "cached"


@pytest.mark.parametrize("mode", MODES)
async def test_an_interceptor_sees_unknown_tools_and_its_errors_become_results(mode: str) -> None:
    requests: list[Any] = []

    def failing(request: ToolCallRequest, execute: Any) -> Any:
        requests.append(request.tool)
        raise RuntimeError("interceptor broke")

    out = await run(ToolNode([divide], wrap_tool_call=failing), ask("fly", {}), mode)
    assert requests == [None]
    assert (
        out["messages"][0].status == "error" and "interceptor broke" in out["messages"][0].content
    )
    with pytest.raises(RuntimeError, match="interceptor broke"):
        await run(
            ToolNode([divide], wrap_tool_call=failing, handle_tool_errors=False),
            ask("fly", {}),
            mode,
        )


@pytest.mark.parametrize("mode", MODES)
async def test_timeouts_and_result_checks_apply_inside_execute(mode: str) -> None:
    @tool
    def forger() -> ToolMessage:
        """Answers another call."""
        return ToolMessage("x", tool_call_id="other")

    out = await run(ToolNode([forger], wrap_tool_call=lambda r, ex: ex(r)), ask("forger", {}), mode)
    assert out["messages"][0].response_metadata["threadlog_error"] == "forged"
    with pytest.raises(ToolCallError):
        node = ToolNode([forger], wrap_tool_call=lambda r, ex: ex(r), handle_tool_errors=False)
        await run(node, ask("forger", {}), mode)


@pytest.mark.parametrize("mode", MODES)
async def test_a_command_update_follows_the_input_form_as_in_langgraph(mode: str) -> None:
    @tool
    def as_list() -> Command[Any]:
        """Returns a list-form update."""
        return Command(update=[ToolMessage("done", tool_call_id="c1")])

    @tool
    def as_dict() -> Command[Any]:
        """Returns a dict-form update."""
        return Command(update={"messages": [ToolMessage("done", tool_call_id="c1")]})

    listed = ask("as_list", {})["messages"]
    ok = await run(ToolNode([as_list, as_dict]), listed, mode)
    assert ok == [Command(update=[ToolMessage("done", name="as_list", tool_call_id="c1")])]
    refused = await run(ToolNode([as_list, as_dict]), ask("as_dict", {})["messages"], mode)
    assert refused[0].status == "error" and "given a list of messages" in refused[0].content
    refused = await run(ToolNode([as_list, as_dict]), ask("as_list", {}), mode)
    assert "given a state" in refused["messages"][0].content


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_node_called_inside_a_node_inherits_the_graphs_store(mode: str) -> None:
    @tool
    def remember(key: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
        """Reads the store."""
        item = store.get(("notes",), key)
        return item.value["text"] if item else "nothing"

    inner = ToolNode([remember])

    def call_tools(state: MessagesState) -> dict[str, Any]:
        return inner.invoke(state)  # no config: the graph's own is inherited

    async def acall_tools(state: MessagesState) -> dict[str, Any]:
        return await inner.ainvoke(state)

    store = InMemoryStore()
    store.put(("notes",), "k", {"text": "umbrella"})
    g = StateGraph(MessagesState)
    g.add_node("tools", call_tools if mode == "sync" else acall_tools)
    g.add_edge(START, "tools")
    graph = g.compile(store=store)
    inp = {"messages": [HumanMessage("hi"), *ask("remember", {"key": "k"})["messages"]]}
    out = graph.invoke(inp) if mode == "sync" else await graph.ainvoke(inp)
    assert out["messages"][-1].content == "umbrella"


@dataclass
class Ctx:
    user: str


def test_a_tool_node_called_inside_a_node_inherits_the_runs_context_and_stream_writer() -> None:
    @tool
    def greet(runtime: ToolRuntime) -> str:
        """Greets the run's user."""
        runtime.stream_writer({"greeted": runtime.context.user})
        return f"hello {runtime.context.user}"

    inner = ToolNode([greet])
    g = StateGraph(MessagesState, context_schema=Ctx)
    g.add_node("tools", lambda state: inner.invoke(state))  # no config: the graph's own
    g.add_edge(START, "tools")
    inp = {"messages": [HumanMessage("hi"), *ask("greet", {})["messages"]]}
    parts = list(g.compile().stream(inp, context=Ctx("ann"), stream_mode=["custom", "values"]))
    assert ("custom", {"greeted": "ann"}) in parts
    assert parts[-1][1]["messages"][-1].content == "hello ann"
