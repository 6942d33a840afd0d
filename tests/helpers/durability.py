"""The durability scenarios' agent, tools with countable side effects, and invariant checks.

The agent is built from threadlog's own parts — `ModelNode(OfflineChatModel())` and
`ToolNode` fed one call per task by `send_tool_calls` — so every tool call is its own
LangGraph task, checkpointed on its own. The weather tool appends one line per *finished*
call to an effects file (fsynced), so a test can count side effects across processes.

`check_thread` is the independent invariant check: it does not trust threadlog's log to
police itself, it counts.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

import threadlog

COUNTS: Counter[str] = Counter()
"""Figures the scenarios gather (kill points, concurrent turns…); conftest prints them."""

Hook = Callable[[str, str], None]
"""hook(city, call_id), called inside the tool before its effect."""


def record_effect(path: Path, call_id: str, city: str) -> None:
    line = json.dumps({"call_id": call_id, "city": city}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_effects(path: Path) -> list[str]:
    """Call ids whose tool finished, one entry per execution."""
    if not path.exists():
        return []
    return [json.loads(line)["call_id"] for line in path.read_text().splitlines() if line]


def make_weather_tool(effects: Path, hook: Hook | None = None) -> Any:
    @tool
    def get_weather(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Today's weather for a city."""
        if hook is not None:
            hook(city, tool_call_id)
        record_effect(effects, tool_call_id, city)
        return f"{city}: sunny, 21°C"

    return get_weather


def model_tools_graph(weather: Any) -> StateGraph[Any, Any, Any, Any]:
    """model ⇄ tools with `threadlog.ModelNode` itself as the node and one tool task per
    call (`send_tool_calls`), errors raised: the agent the recovery tests stop and resume,
    on its own or as a subgraph at any depth. Not compiled."""
    g: StateGraph[Any, Any, Any, Any] = StateGraph(threadlog.AgentState)
    g.add_node("model", threadlog.ModelNode(threadlog.OfflineChatModel(), [weather]))
    g.add_node("tools", threadlog.ToolNode([weather], handle_errors=False))
    g.add_edge(START, "model")
    g.add_conditional_edges(
        "model", lambda s: threadlog.send_tool_calls(s, node="tools") or END, ["tools", END]
    )
    g.add_edge("tools", "model")
    return g


def build_agent(
    saver: BaseCheckpointSaver[Any] | None,
    effects: Path,
    *,
    hook: Hook | None = None,
    model_hook: Callable[[str, list[BaseMessage]], None] | None = None,
    handle_errors: bool = True,
) -> Any:
    """model ⇄ tools, one task per tool call.

    `model_hook(stage, messages)` runs around each model call, stage "before"/"after".
    """
    weather = make_weather_tool(effects, hook)
    model_node = threadlog.ModelNode(threadlog.OfflineChatModel(), [weather])

    def model(state: dict[str, Any], config: RunnableConfig) -> Any:
        if model_hook is not None:
            model_hook("before", list(state["messages"]))
        out = model_node.invoke(state, config)
        if model_hook is not None:
            model_hook("after", list(state["messages"]))
        return out

    def route(state: dict[str, Any]) -> Any:
        return threadlog.send_tool_calls(state, node="tools") or END

    g = StateGraph(threadlog.AgentState)
    g.add_node("model", model)
    g.add_node("tools", threadlog.ToolNode([weather], handle_errors=handle_errors))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def wait_for_calls(graph: Any, thread_id: str, limit: float = 30) -> list[str]:
    """Block until the thread's stored state ends with an AIMessage with tool calls;
    return their ids (polls the DB)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        msgs = graph.get_state({"configurable": {"thread_id": thread_id}}).values.get(
            "messages", []
        )
        ai = [m for m in msgs if isinstance(m, AIMessage)]
        if ai and ai[-1].tool_calls:
            return [c["id"] for c in ai[-1].tool_calls]
        time.sleep(0.02)
    raise AssertionError("the model's tool calls were never stored")


def wait_for_results(
    saver: BaseCheckpointSaver[Any], thread_id: str, call_ids: Iterable[str], limit: float = 30
) -> None:
    """Block until each call id has a stored result on the thread's head (polls the DB)."""
    wanted = set(call_ids)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        saved = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        found = set()
        for _, _, value in saved.pending_writes if saved else ():
            for m in value if isinstance(value, list) else [value]:
                if isinstance(m, ToolMessage):
                    found.add(m.tool_call_id)
        if wanted <= found:
            return
        time.sleep(0.02)
    raise AssertionError(f"results for {sorted(wanted)} were never stored")


# -- invariants -------------------------------------------------------------------


def check_messages(messages: list[BaseMessage], *, final: bool) -> None:
    """Counted, not trusted: unique ids; each result answers one earlier call once;
    at the end every call has exactly one result. Plus `threadlog.validate`."""
    threadlog.validate(messages, allow_pending_calls=not final)
    ids = [m.id for m in messages]
    dup = [i for i, n in Counter(ids).items() if n > 1]
    assert not dup, f"message ids appear more than once: {dup}"
    calls: dict[str, int] = {}
    results: Counter[str] = Counter()
    for pos, m in enumerate(messages):
        if isinstance(m, AIMessage):
            for c in [*m.tool_calls, *m.invalid_tool_calls]:
                assert c["id"] not in calls, f"call id {c['id']!r} issued twice"
                calls[c["id"] or ""] = pos
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in calls, f"result {m.id!r} answers no earlier call"
            results[m.tool_call_id] += 1
    assert all(n == 1 for n in results.values()), f"calls with several results: {results}"
    if final:
        missing = [c for c in calls if results[c] != 1]
        assert not missing, f"calls without a result at the end: {missing}"


def check_thread(
    graph: Any,
    config: dict[str, Any],
    *,
    linear: bool = True,
    complete: bool = True,
    repaired_input_ok: bool = False,
    repairing_nodes: tuple[str, ...] = ("model",),
) -> list[BaseMessage]:
    """Every checkpoint of the thread validates; the head is complete; with `linear`, no
    checkpoint has two children (no silent fork); `complete=False` for a thread paused
    with open calls. Returns the head's messages.

    `repaired_input_ok`: a new message sent to a thread paused with open calls is stored
    by LangGraph's input step *before* the model node repairs those calls; such a
    checkpoint must be one the model node is about to run on, and must validate once
    the model node's repair policy is applied to it. `repairing_nodes`: the nodes that
    run the model node (a subgraph's name, when the model runs inside one).
    """
    from threadlog.nodes.model import repair_open_calls

    history = list(graph.get_state_history(config))
    assert history, "the thread has no checkpoints"
    children: Counter[str] = Counter()
    for snap in history:
        messages = list(snap.values.get("messages", []))
        try:
            check_messages(messages, final=False)
        except threadlog.ToolPairingError as exc:
            # The input checkpoint (next: __start__) and the one after it (next: model)
            # both hold the new message before the model node has run on it.
            nexts = [(n,) for n in repairing_nodes] + [("__start__",)]
            if not (repaired_input_ok and snap.next in nexts):
                exc.add_note(
                    f"checkpoint {snap.config['configurable']['checkpoint_id']}: "
                    f"source={snap.metadata.get('source') if snap.metadata else None}, "
                    f"next={snap.next}"
                )
                raise
            check_messages(repair_open_calls(messages)[0], final=True)
        if snap.parent_config is not None:
            children[snap.parent_config["configurable"]["checkpoint_id"]] += 1
    if linear:
        forks = {cid: n for cid, n in children.items() if n > 1}
        assert not forks, f"the thread forked at {forks}"
    head = list(graph.get_state(config).values["messages"])
    check_messages(head, final=complete)
    return head


def user(text: str, mid: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "id": mid}
