"""A tool that calls `sys.exit()` becomes one error result; its siblings keep theirs."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

import threadlog


@tool
def leave(city: str) -> str:
    """Exits the process."""
    sys.exit(3)


@tool
async def aleave(city: str) -> str:
    """Exits the process, async."""
    sys.exit(4)


@tool
def stay(city: str) -> str:
    """A well-behaved tool."""
    return f"{city}: sunny"


def _state(name: str) -> dict[str, Any]:
    calls = [
        {"name": "stay", "args": {"city": "Beijing"}, "id": "c1"},
        {"name": name, "args": {"city": "Paris"}, "id": "c2"},
        {"name": "stay", "args": {"city": "Tokyo"}, "id": "c3"},
    ]
    return {"messages": [("user", "weather?"), AIMessage("", id="a1", tool_calls=calls)]}


# An async tool's sys.exit() inside an async node is not covered: langchain runs the
# coroutine in a task of its own, and asyncio re-raises SystemExit out of the event
# loop itself, past any handler in the node (see docs/tools.md).
@pytest.mark.parametrize(
    ("name", "mode"), [("leave", "sync"), ("leave", "async"), ("aleave", "sync")]
)
async def test_a_tool_calling_sys_exit_is_an_error_result_and_siblings_keep_theirs(
    name: str, mode: str
) -> None:
    node = threadlog.ToolNode([leave, aleave, stay])
    out = node.invoke(_state(name)) if mode == "sync" else await node.ainvoke(_state(name))
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert [r.status for r in results] == ["success", "error", "success"]
    assert "sys.exit(" in results[1].text
    assert results[0].text == "Beijing: sunny" and results[2].text == "Tokyo: sunny"
