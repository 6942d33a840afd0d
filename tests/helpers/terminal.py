"""A thread whose stored text is hostile to a terminal, and how to check printed output.

`write_hostile_thread(url)` stores, through `threadlog.checkpointer(url)`, one thread whose
thread id, message ids, message texts, tool name, tool call ids, tool arguments, a tool's
error result (its text and error kind), a failed task's error text and a subgraph's node
name (so its namespace) hold ESC sequences (CSI clear screen and cursor moves, an OSC
window title, an OSC 8 link whose text differs from its target), C1 bytes (U+009B, CSI),
a bare CR and BS, and a right-to-left override (U+202E); a user message also holds
`<script>` for the HTML page. Turn 1: the subgraph, a tool call answered by an error
result, an answer. Turn 2: the subgraph, a call whose tool raises (the step fails, the
call stays open). A saver stores a failed task's error as its repr, which Python already
escapes; a tool's error *result* is stored as written.

`raw_controls(text, allowed)` lists the characters a terminal would obey (C0 but
`allowed`, DEL, C1, bidi controls) and `visible(text)` is `text` with each of them as the
escape a safe view prints (`\\x1b`, `\\u202e`) — both written out here, not taken from
`threadlog.terminal`, so the tests check the code against the issue's list.
"""

from __future__ import annotations

import contextlib
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

import threadlog
from threadlog import AgentState

CLEAR = "\x1b[2J\x1b[H"  # CSI: clear the screen, cursor home
UP_ERASE = "\x1b[1A\x1b[2K"  # CSI: cursor up one line, erase it
TITLE = "\x1b]0;pwned\x07"  # OSC 0: set the window title
LINK = "\x1b]8;;https://evil.example/\x1b\\docs.python.org\x1b]8;;\x1b\\"  # OSC 8
C1_CSI = "\x9b2J"  # C1 CSI (U+009B): clear the screen on terminals that read C1
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
CR_BS = "ok\rfake\x08!"  # a bare CR and a backspace

THREAD = f"t-{TITLE}{RLO}1"
TOOL = f"weather{CLEAR}"
CALL = f"call{C1_CSI}{RLO}1"
CALL_2 = f"call{UP_ERASE}2"
AI_1 = f"ai{UP_ERASE}1"
AI_2 = f"ai-2{RLO}"
AI_3 = f"ai{C1_CSI}3"
USER_ID = f"u{TITLE}1"
RESULT_ID = f"r{C1_CSI}1"
USER_TEXT = f"weather?{LINK} {RLO}gnp.exe {CR_BS} <script>alert(1)</script>"
CITY = f"Paris{LINK}"
ERROR_TEXT = f"boom{CLEAR}{TITLE}"
ERROR_KIND = f"kind\r{UP_ERASE}"
ANSWER = f"done {UP_ERASE}{C1_CSI}{RLO}"
TASK_ERROR = f"service down{CLEAR}{TITLE}"
SUBGRAPH = f"notes{CLEAR}{RLO}"  # a node name: the subgraph's namespace starts with it

# Every stored string above, each as a terminal would be told to obey it.
HOSTILE = (CLEAR, UP_ERASE, TITLE, LINK, C1_CSI, RLO, "\r", "\x08")

_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
_OBEYED = {*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI}


def visible(text: str) -> str:
    """`text` as a terminal-safe view shows it: each control as `\\xNN` / `\\uNNNN`."""
    return "".join(
        (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") if ord(c) in _OBEYED else c
        for c in text
    )


def raw_controls(text: str, allowed: str = "\n") -> list[str]:
    """The characters of `text` a terminal would act on (other than `allowed`)."""
    ok = {ord(c) for c in allowed}
    return [c for c in text if ord(c) in _OBEYED and ord(c) not in ok]


class _Script:
    failing = False

    def model(self, state: AgentState) -> dict[str, Any]:
        n = sum(isinstance(m, AIMessage) for m in state["messages"])
        if n == 0:
            call = {"name": TOOL, "args": {"city": CITY}, "id": CALL, "type": "tool_call"}
            return {"messages": [AIMessage("", id=AI_1, tool_calls=[call])]}
        if n == 1:
            return {"messages": [AIMessage(ANSWER, id=AI_2)]}
        call = {"name": TOOL, "args": {"city": "Rome"}, "id": CALL_2, "type": "tool_call"}
        return {"messages": [AIMessage("", id=AI_3, tool_calls=[call])]}

    def tools(self, state: AgentState) -> dict[str, Any]:
        if self.failing:
            raise RuntimeError(TASK_ERROR)
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(
                    ERROR_TEXT,
                    tool_call_id=c["id"],
                    name=c["name"],
                    status="error",
                    id=RESULT_ID,
                    response_metadata={"threadlog_error": ERROR_KIND},
                )
                for c in last.tool_calls
            ]
        }


def _route(state: AgentState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def write_hostile_thread(url: str) -> None:
    script = _Script()
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(AgentState)
    inner.add_node("look", lambda state: {"messages": []})
    inner.add_edge(START, "look")
    b: StateGraph[Any, Any, Any, Any] = StateGraph(AgentState)
    b.add_node(SUBGRAPH, inner.compile())
    b.add_node("model", script.model)
    b.add_node("tools", script.tools)
    b.add_edge(START, SUBGRAPH)
    b.add_edge(SUBGRAPH, "model")
    b.add_conditional_edges("model", _route, ["tools", END])
    b.add_edge("tools", "model")
    config: Any = {"configurable": {"thread_id": THREAD}}
    with threadlog.checkpointer(url) as saver:
        graph = b.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage(USER_TEXT, id=USER_ID)]}, config)
        script.failing = True
        with contextlib.suppress(RuntimeError):
            graph.invoke({"messages": [HumanMessage("again", id="u-2")]}, config)
