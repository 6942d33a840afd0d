"""A result that the checkpointer stores as other types is kept, with a warning (issue 24,
item 6).

LangGraph's serializer reads a tuple back as a list and a pydantic model (or dataclass)
inside a `ToolMessage` as a dict; LangGraph's own ToolNode stores such results the same
way, silently. threadlog's tool node round-trips each result through the run's
serializer (`storage_check.check_storage`): a result whose types change is kept as the
tool returned it — refusing it would refuse what LangGraph takes — and a warning on the
`threadlog.tools` logger names the tool, where in the result, and both types, once per
node, tool and change. A result that reads back the same logs nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

import threadlog
from tests.helpers.tools import by_call, call, request, scripted_graph, start
from threadlog import ToolNode
from threadlog.nodes.tools.storage_check import check_storage, storage_problem


class Forecast(BaseModel):
    city: str
    highs: list[int]


@dataclass
class Booking:
    ref: str


ARTIFACTS: dict[str, Any] = {
    "tuple": (21, 23),
    "model": Forecast(city="Rome", highs=[21, 23]),
    "nested": {"rows": [{"span": (1, 2)}]},
    "plain": {"rows": [1, 2], "city": "Rome", "ok": True, "none": None},
}


def _artifact_tool(kind: str) -> Any:
    @tool(response_format="content_and_artifact")
    def forecast(city: str) -> tuple[str, Any]:
        """The forecast for a city, with its data as the artifact."""
        return f"{city}: sunny", ARTIFACTS[kind]

    return forecast


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "threadlog.tools"]


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("tuple", "artifact is a tuple and reads back as a list"),
        ("model", f"artifact is a {__name__}.Forecast and reads back as a dict"),
        ("nested", "artifact['rows'][0]['span'] is a tuple and reads back as a list"),
    ],
)
def test_a_result_that_reads_back_as_other_types_is_kept_with_a_warning(
    kind: str, change: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="threadlog.tools")
    node = ToolNode([_artifact_tool(kind)])
    out = node.invoke({"messages": [request(call("forecast", {"city": "Rome"}, "c1"))]})
    result = out["messages"][0]
    assert result.status == "success" and result.artifact is ARTIFACTS[kind]  # kept as is
    (warning,) = _warnings(caplog)
    assert "tool 'forecast'" in warning and change in warning
    assert "kept as returned" in warning


def test_the_warning_is_logged_once_per_node_tool_and_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="threadlog.tools")
    node = ToolNode([_artifact_tool("tuple")])
    ai = request(call("forecast", {"city": "Rome"}, "c1"), call("forecast", {"city": "Oslo"}, "c2"))
    node.invoke({"messages": [ai]})
    node.invoke({"messages": [request(call("forecast", {"city": "Bonn"}, "c3"))]})
    assert len(_warnings(caplog)) == 1
    other = ToolNode([_artifact_tool("tuple")])
    other.invoke({"messages": [request(call("forecast", {"city": "Kyiv"}, "c4"))]})
    assert len(_warnings(caplog)) == 2  # another node warns on its own


@pytest.mark.parametrize("saver_kind", ["langgraph", "threadlog"])
def test_a_result_that_round_trips_unchanged_logs_nothing(
    saver_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="threadlog.tools")
    cfg: Any = {"configurable": {"thread_id": "t"}}
    ai = request(call("forecast", {"city": "Rome"}, "c1"))
    node = ToolNode([_artifact_tool("plain")])
    if saver_kind == "langgraph":
        graph = scripted_graph(node, [ai], checkpointer=InMemorySaver())
        out = graph.invoke(start(), cfg)
        stored = graph.get_state(cfg).values["messages"]
    else:  # the strict allowlist serializer of threadlog.checkpointer
        with threadlog.checkpointer("memory://") as saver:
            graph = scripted_graph(node, [ai], checkpointer=saver)
            out = graph.invoke(start(), cfg)
            stored = graph.get_state(cfg).values["messages"]
    assert by_call(out["messages"])["c1"].artifact == ARTIFACTS["plain"]
    assert by_call(stored)["c1"].artifact == ARTIFACTS["plain"]
    assert _warnings(caplog) == []


def test_what_the_warning_says_is_what_the_thread_reads_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="threadlog.tools")
    cfg: Any = {"configurable": {"thread_id": "t"}}
    graph = scripted_graph(
        ToolNode([_artifact_tool("model")]),
        [request(call("forecast", {"city": "Rome"}, "c1"))],
        checkpointer=InMemorySaver(),
    )
    out = graph.invoke(start(), cfg)
    assert isinstance(by_call(out["messages"])["c1"].artifact, Forecast)  # this run
    reread = by_call(graph.get_state(cfg).values["messages"])["c1"].artifact
    assert reread == {"city": "Rome", "highs": [21, 23]}  # every later read
    assert "reads back as a dict" in _warnings(caplog)[0]


def test_check_storage_tells_a_change_from_a_problem() -> None:
    serde = JsonPlusSerializer()

    def msg(artifact: Any, content: Any = "x") -> ToolMessage:
        return ToolMessage(content, tool_call_id="c1", artifact=artifact)

    assert check_storage(msg(Booking("b-1")), serde).change == (
        f"artifact is a {__name__}.Booking and reads back as a dict")
    assert check_storage(msg({"ok": [1, 2]}), serde).change is None
    assert check_storage(msg(None, [{"type": "text", "text": "hi"}]), serde).change is None
    bad = check_storage(msg({"lock": object()}), serde)
    assert bad.problem == "type builtins.object cannot be serialized" and bad.change is None
    assert storage_problem(msg((1, 2)), serde) is None  # a change is no problem
