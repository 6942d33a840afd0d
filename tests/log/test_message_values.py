"""Inputs a log cannot store are refused with `InvalidMessageError` naming the field
(issue 15 item 5 and its degraded list), in the reducer and through a checkpointed graph,
and a refused input stores nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

import threadlog
from threadlog import InvalidMessageError, append_messages


class Opaque:
    """An object LangGraph's serializer cannot store."""


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def _raw_ai(**fields: Any) -> AIMessage:
    base = {"content": "", "id": "a1", "tool_calls": [], "invalid_tool_calls": []}
    return AIMessage.model_construct(**{**base, **fields})


# (input, what the error must say)
REFUSED: dict[str, tuple[Any, str]] = {
    "lone surrogate in a string": (("user", "caf\ud800"), "content holds a lone surrogate"),
    "lone surrogate in a dict": (
        {"role": "user", "content": "a\udcffb", "id": "s1"},
        "content holds a lone surrogate",
    ),
    "lone surrogate in a message": (
        HumanMessage("x\ud83d", id="s2"),
        "content holds a lone surrogate",
    ),
    "lone surrogate in tool arguments": (
        AIMessage("", id="a2", tool_calls=[{"name": "f", "args": {"city": "\ud800"}, "id": "c1"}]),
        "tool_calls[0].args['city'] holds a lone surrogate",
    ),
    "content None": ({"role": "user", "content": None, "id": "n1"}, "got NoneType"),
    "content bytes": ({"role": "user", "content": b"hi", "id": "b1"}, "got bytes"),
    "bytes in a message object": (
        HumanMessage.model_construct(
            content=b"hi", id="b2", additional_kwargs={}, response_metadata={}, type="human"
        ),
        "got bytes",
    ),
    "unserialisable additional_kwargs": (
        HumanMessage("hi", id="k1", additional_kwargs={"obj": Opaque()}),
        "additional_kwargs['obj'] is a Opaque, which the checkpointer cannot store",
    ),
    "content nested 3000 deep": (
        {"role": "user", "content": _deep(3000), "id": "d1"},
        "is nested deeper than 100 levels",
    ),
    "kwargs nested 3000 deep": (
        HumanMessage("hi", id="d2", additional_kwargs={"x": _deep(3000)}),
        "is nested deeper than 100 levels",
    ),
    "non-JSON tool arguments": (
        {
            "role": "assistant",
            "content": "",
            "id": "a3",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{x"}}
            ],
        },
        "tool_calls[0].function.arguments ('f') is not JSON",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_reducer_refuses_what_a_log_cannot_store_naming_the_field(case: str) -> None:
    value, said = REFUSED[case]
    with pytest.raises(InvalidMessageError) as err:
        append_messages([HumanMessage("earlier", id="h0")], [value])
    assert said in str(err.value)
    assert "position 1" in str(err.value)


def test_a_removal_dict_of_an_unknown_id_is_refused_as_append_only() -> None:
    # A removal dict is a removal event now; one naming no logged message is refused.
    with pytest.raises(threadlog.AppendOnlyError, match="Attempting to delete a message"):
        append_messages([], [{"type": "remove", "id": "x"}])


def test_a_removal_dict_hides_the_message_it_names() -> None:
    left = append_messages([], [{"role": "user", "content": "hi", "id": "x"}, "more"])
    assert [m.content for m in append_messages(left, [{"type": "remove", "id": "x"}])] == [
        "more"
    ]


def test_an_assistant_dict_that_only_calls_tools_may_have_no_content() -> None:
    out = append_messages(
        [],
        [
            {
                "role": "assistant",
                "content": None,
                "id": "a1",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        ],
    )
    assert out[0].tool_calls[0]["id"] == "c1"


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"{city}: sunny"


# Cases a graph hands to the log as they are. (A malformed dict *inside a list* is first
# converted by LangGraph's own id stamping, which raises langchain-core's error; nothing
# is stored either way — see docs/ARCHITECTURE.md.)
THROUGH_A_GRAPH = [
    "lone surrogate in a message",
    "bytes in a message object",
    "unserialisable additional_kwargs",
    "kwargs nested 3000 deep",
]


@pytest.mark.parametrize("case", THROUGH_A_GRAPH)
def test_a_checkpointed_graph_refuses_them_and_stores_nothing(case: str, tmp_path: Path) -> None:
    value, said = REFUSED[case]
    config: Any = {"configurable": {"thread_id": "t"}}
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'db.sqlite'}") as saver:
        app = threadlog.create_agent(
            threadlog.OfflineChatModel(), [get_weather], checkpointer=saver
        )
        app.invoke({"messages": [("user", "Beijing?")]}, config)
        before = app.get_state(config)
        with pytest.raises(InvalidMessageError, match=re.escape(said)):
            app.invoke({"messages": [value]}, config)
        after = app.get_state(config)
        assert after.config == before.config  # no new checkpoint
        assert after.values["messages"] == before.values["messages"]
        assert not after.next
