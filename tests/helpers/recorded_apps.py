"""Apps written the way their users write them, for the recorded-calls tests: each builds
its system prompt per call, so a test can ask `inspect --calls` for the exact text sent.

* `own_node`: a plain function node calls `model.invoke([SystemMessage(...), *messages])`
  with a prompt built from the state.
* `dynamic_agent`: `langchain.agents.create_agent` with a `@dynamic_prompt` middleware.
* `swarm`: `langgraph-swarm` with two `create_react_agent` agents, each with its prompt.
* `supervisor`: `langgraph-supervisor` with two `create_react_agent` workers.

Every app's models are `ToolScripted`: scripted (no network), binding tools the way real
chat models do (`bind(tools=[...])`), so the tools reach the call's parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph

from tests.helpers.multi_agent import Scripted


class ToolScripted(Scripted):
    """`Scripted`, binding tools as provider chat models do (into the call's kwargs)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


# -- the app's own node -----------------------------------------------------------------------


class NoteState(MessagesState):
    user_name: str


def own_node_prompt(name: str, turn: int) -> str:
    return f"You are {name}'s assistant. This is turn {turn}.\nBe brief."


def own_node(checkpointer: Any, after: Any = None) -> Any:
    """One node calling the model with a system prompt from state; `after` (optional) is
    a second node the turn runs next (the tests' kill point)."""
    model = ToolScripted(script=lambda ms: AIMessage(f"reply to turn {_turn(ms)}"))

    def respond(state: NoteState) -> dict[str, Any]:
        prompt = own_node_prompt(state["user_name"], _turn(state["messages"]))
        return {"messages": [model.invoke([SystemMessage(prompt), *state["messages"]])]}

    b = StateGraph(NoteState)
    b.add_node("respond", respond)
    b.add_edge(START, "respond")
    if after is not None:
        b.add_node("after", after)
        b.add_edge("respond", "after")
        b.add_edge("after", END)
    else:
        b.add_edge("respond", END)
    return b.compile(checkpointer=checkpointer)


# -- create_agent with a dynamic prompt -------------------------------------------------------


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


def dynamic_prompt_text(count: int) -> str:
    return f"You have seen {count} messages. Use lookup when unsure."


def dynamic_agent(checkpointer: Any) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelRequest, dynamic_prompt

    @dynamic_prompt
    def prompt(request: ModelRequest) -> str:
        return dynamic_prompt_text(len(request.state["messages"]))

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "lookup", "args": {"topic": "x"}, "id": f"c{_turn(messages)}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage(f"done with turn {_turn(messages)}")

    return create_agent(
        ToolScripted(script=script), [lookup], middleware=[prompt], checkpointer=checkpointer
    )


# -- a swarm of two agents --------------------------------------------------------------------

FLIGHT_PROMPT = "You are flight_assistant. Book flights; hand hotels to hotel_assistant."
HOTEL_PROMPT = "You are hotel_assistant. Book hotels; hand flights to flight_assistant."


def swarm(checkpointer: Any) -> Any:
    from langgraph.prebuilt import create_react_agent
    from langgraph_swarm import create_handoff_tool, create_swarm

    def reply(me: str, other: str) -> Any:
        def script(messages: Sequence[BaseMessage]) -> AIMessage:
            if isinstance(messages[-1], HumanMessage):
                call = {"name": f"transfer_to_{other}", "args": {}, "id": f"{me}-{_turn(messages)}"}
                return AIMessage("", tool_calls=[call])
            return AIMessage(f"{me} answers turn {_turn(messages)}")

        return script

    flight = create_react_agent(
        ToolScripted(script=reply("flight_assistant", "hotel_assistant")),
        [create_handoff_tool(agent_name="hotel_assistant")],
        prompt=FLIGHT_PROMPT,
        name="flight_assistant",
    )
    hotel = create_react_agent(
        ToolScripted(script=reply("hotel_assistant", "flight_assistant")),
        [create_handoff_tool(agent_name="flight_assistant")],
        prompt=HOTEL_PROMPT,
        name="hotel_assistant",
    )
    builder = create_swarm([flight, hotel], default_active_agent="flight_assistant")
    return builder.compile(checkpointer=checkpointer)


# -- a supervisor with two workers ------------------------------------------------------------

SUPERVISOR_PROMPT = "You manage research_expert and math_expert. Delegate, then answer."
RESEARCH_PROMPT = "You are research_expert. Find facts."
MATH_PROMPT = "You are math_expert. Compute."


def supervisor(checkpointer: Any) -> Any:
    from langgraph.prebuilt import create_react_agent
    from langgraph_supervisor import create_supervisor

    def boss(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "transfer_to_research_expert", "args": {}, "id": "to-research"}
            return AIMessage("", tool_calls=[call])
        if not any(getattr(m, "name", None) == "math_expert" for m in messages):
            call = {"name": "transfer_to_math_expert", "args": {}, "id": "to-math"}
            return AIMessage("", tool_calls=[call])
        return AIMessage("supervisor: all done")

    research = create_react_agent(
        ToolScripted(script=lambda ms: AIMessage("research: found it")),
        [],
        prompt=RESEARCH_PROMPT,
        name="research_expert",
    )
    math = create_react_agent(
        ToolScripted(script=lambda ms: AIMessage("math: 42")),
        [],
        prompt=MATH_PROMPT,
        name="math_expert",
    )
    builder = create_supervisor(
        [research, math], model=ToolScripted(script=boss), prompt=SUPERVISOR_PROMPT
    )
    return builder.compile(checkpointer=checkpointer)


def one_turn(graph: Any, thread_id: str, text: str, **values: Any) -> Any:
    config: Any = {"configurable": {"thread_id": thread_id}}
    return graph.invoke({"messages": [HumanMessage(text)], **values}, config)


# -- a worker killed between the model's reply and the next step ------------------------------


def _killed_turn(url: str, thread_id: str, durability: str) -> None:
    import os
    import signal
    import time

    import threadlog

    config: Any = {"configurable": {"thread_id": thread_id}}
    holder: list[Any] = []

    def after(state: NoteState) -> dict[str, Any]:
        # The next step: once the model's reply is stored (under "async" LangGraph stores
        # it in the background while this step runs), the process dies.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            messages = holder[0].get_state(config).values.get("messages", [])
            if messages and isinstance(messages[-1], AIMessage):
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.01)
        raise AssertionError("the model's reply was never stored")

    with threadlog.checkpointer(url) as saver:
        graph = own_node(saver, after=after)
        holder.append(graph)
        graph.invoke(
            {"messages": [HumanMessage("hello", id="u-1")], "user_name": "Ada"},
            config,
            durability=durability,
        )


def _child(url: str, thread_id: str, durability: str) -> None:
    import os
    import sys
    import traceback

    try:
        _killed_turn(url, thread_id, durability)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(1)  # not killed: the test sees exit code 1


def start_killed_turn(url: str, thread_id: str, durability: str) -> Any:
    """Fork a process running `own_node`'s first turn, SIGKILLed in the step after the
    model's reply was stored; join it and read `.exitcode` (-9)."""
    import multiprocessing

    proc = multiprocessing.get_context("fork").Process(
        target=_child, args=(url, thread_id, durability)
    )
    proc.start()
    return proc
