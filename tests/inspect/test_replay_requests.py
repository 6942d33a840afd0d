"""`threadlog replay` compares the request each model call sends now with the one the
thread recorded (`threadlog.check.requests`), for any app: the app's own node calling its
model with a system prompt built from state, `create_agent` with a dynamic prompt, a swarm
of two agents, a supervisor with two workers. A changed system prompt is a `context`
divergence shown as a unified diff (escaped in a terminal, `\\u`-escaped in JSON), at the
call that sent it."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

import threadlog
from tests.helpers import recorded_apps as apps
from threadlog.check.replay import replay
from threadlog.cli import main

BUILD: dict[str, tuple[Callable[[Any], Any], dict[str, Any]]] = {
    "own_node": (apps.own_node, {"user_name": "Ada"}),
    "create_agent_dynamic_prompt": (apps.dynamic_agent, {}),
    "swarm": (apps.swarm, {}),
    "supervisor": (apps.supervisor, {}),
}


def _recorded(tmp_path: Path, app: str, **extra: Any) -> str:
    build, first = BUILD[app]
    url = f"sqlite:///{tmp_path / f'{app}.sqlite'}"
    with threadlog.checkpointer(url) as saver:
        graph = build(saver)
        apps.one_turn(graph, "t", "hello", **{**first, **extra})
        apps.one_turn(graph, "t", "again")
    return url


def _kinds(report: Any) -> list[tuple[int, str, int | None]]:
    return [(r.turn, r.kind, r.model_call) for r in report.results]


@pytest.mark.parametrize("app", sorted(BUILD))
def test_each_apps_unchanged_graph_replays_matching_its_recorded_requests(
    app: str, tmp_path: Path
) -> None:
    url = _recorded(tmp_path, app)
    report = replay(BUILD[app][0](None), url, "t")
    assert _kinds(report) == [(1, "match", None), (2, "match", None)], str(report)


def test_a_changed_prompt_built_in_the_apps_own_node_is_a_text_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _recorded(tmp_path, "own_node")
    sent = apps.own_node_prompt("Ada", 1)
    monkeypatch.setattr(
        apps, "own_node_prompt", lambda name, turn: f"You are {name}'s assistant. Turn {turn}."
        "\nBe brief."
    )
    report = replay(apps.own_node(None), url, "t")
    assert _kinds(report) == [(1, "context", 1), (2, "context", 1)]
    first = report.results[0]
    assert first.detail == "the system prompt sent differs from the recorded one"
    assert first.stored == sent  # the recorded text, whole
    assert first.diff is not None
    lines = first.diff.splitlines()
    assert lines[:2] == ["--- recorded", "+++ replayed"]
    assert "-You are Ada's assistant. This is turn 1." in lines
    assert "+You are Ada's assistant. Turn 1." in lines
    assert " Be brief." in lines  # the line both share is context, not a change
    text = str(report)
    assert "-You are Ada's assistant. This is turn 1." in text
    assert "tl-system" not in text and "stored:" not in text  # a diff, not two ids
    assert "       Be brief." in text.splitlines()  # under the row, its leading space kept


def test_a_changed_dynamic_prompt_of_create_agent_diverges_at_its_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _recorded(tmp_path, "create_agent_dynamic_prompt")
    sent = apps.dynamic_prompt_text(1)
    monkeypatch.setattr(apps, "dynamic_prompt_text", lambda n: f"Seen: {n}.")
    report = replay(apps.dynamic_agent(None), url, "t")
    assert _kinds(report) == [(1, "context", 1), (2, "context", 1)]
    assert report.results[0].diff is not None
    assert "+Seen: 1." in report.results[0].diff.splitlines()
    assert f"-{sent}" in report.results[0].diff.splitlines()


def test_a_changed_prompt_of_the_second_swarm_agent_diverges_at_that_agents_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _recorded(tmp_path, "swarm")
    original = apps.HOTEL_PROMPT
    monkeypatch.setattr(apps, "HOTEL_PROMPT", "You are hotel_assistant. Hotels only.")
    report = replay(apps.swarm(None), url, "t")
    # Turn 1: flight_assistant's call matches, it hands off (the handoff tool routes), and
    # hotel_assistant's call is the second of the turn; turn 2 starts with hotel_assistant,
    # the agent the swarm stored as active.
    assert _kinds(report) == [(1, "context", 2), (2, "context", 1)]
    diff = report.results[0].diff or ""
    assert f"-{original}" in diff.splitlines()
    assert "+You are hotel_assistant. Hotels only." in diff.splitlines()


def test_a_changed_worker_prompt_under_a_supervisor_diverges_at_the_workers_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _recorded(tmp_path, "supervisor")
    original = apps.MATH_PROMPT
    monkeypatch.setattr(apps, "MATH_PROMPT", "You are math_expert. Compute carefully.")
    report = replay(apps.supervisor(None), url, "t")
    # Turn 1's model calls: supervisor, research_expert, supervisor, math_expert (the 4th);
    # the handoff-back messages the supervisor's graph writes itself are not model replies.
    # Turn 2 never calls math_expert: it matches.
    assert _kinds(report) == [(1, "context", 4), (2, "match", None)]
    diff = (report.results[0].diff or "").splitlines()
    assert f"-{original}" in diff and "+You are math_expert. Compute carefully." in diff


def test_a_changed_tool_description_is_a_context_divergence_with_the_schema_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _recorded(tmp_path, "create_agent_dynamic_prompt")

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up in the handbook."""
        return f"notes on {topic}"

    monkeypatch.setattr(apps, "lookup", lookup)
    report = replay(apps.dynamic_agent(None), url, "t")
    # The messages sent match, the stored reply's call still fits the schema: what differs
    # is the schema the model was shown.
    assert _kinds(report) == [(1, "context", 1), (2, "context", 1)]
    first = report.results[0]
    assert first.detail == "the schema of tool 'lookup' differs from the recorded one"
    diff = (first.diff or "").splitlines()
    assert '-  "description": "Look a topic up.",' in diff
    assert '+  "description": "Look a topic up in the handbook.",' in diff


def _graph_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prompt: str) -> str:
    (tmp_path / "ownapp.py").write_text(
        textwrap.dedent(f"""
        from tests.helpers import recorded_apps as apps

        def build():
            apps.own_node_prompt = lambda name, turn: {prompt!r} + name
            return apps.own_node(None)
        """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).parents[2]))
    monkeypatch.delitem(sys.modules, "ownapp", raising=False)
    monkeypatch.setattr(apps, "own_node_prompt", apps.own_node_prompt)  # restored after
    return "ownapp:build"


def test_cli_shows_the_prompt_diff_escaped_in_text_and_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stored prompt holds the user's name, which holds a bidi override and an ESC.
    url = _recorded(tmp_path, "own_node", user_name="Ada\u202e\x1b[31m")
    sent = apps.own_node_prompt("Ada\u202e\x1b[31m", 1)
    graph = _graph_module(tmp_path, monkeypatch, "Hello ")
    capsys.readouterr()
    assert main(["replay", "--db", url, "--thread", "t", "--graph", graph]) == 1
    out = capsys.readouterr().out
    assert "\u202e" not in out and "\x1b" not in out
    assert "-You are Ada\\u202e\\x1b[31m's assistant. This is turn 1." in out
    assert "+Hello Ada\\u202e\\x1b[31m" in out
    assert main(["replay", "--db", url, "--thread", "t", "--graph", graph, "--json"]) == 1
    raw = capsys.readouterr().out
    assert "\u202e" not in raw and "\\u202e" in raw
    row = json.loads(raw)["turns"][0]
    assert row["kind"] == "context"
    assert "+Hello Ada\u202e\x1b[31m" in row["diff"].splitlines()
    assert row["stored"] == sent


def test_without_recorded_calls_an_apps_own_prompt_is_not_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database written with record_calls=False (or before recording): the replay has
    # no request to compare an app's own node with, and says so by matching on replies.
    url = f"sqlite:///{tmp_path / 'plain.sqlite'}"
    with threadlog.checkpointer(url, record_calls=False) as saver:
        graph = apps.own_node(saver)
        apps.one_turn(graph, "t", "hello", user_name="Ada")
    monkeypatch.setattr(apps, "own_node_prompt", lambda name, turn: "Another prompt.")
    report = replay(apps.own_node(None), url, "t")
    assert _kinds(report) == [(1, "match", None)]


def test_a_model_the_apps_node_streams_is_served_the_stored_reply_not_called(
    tmp_path: Path,
) -> None:
    from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    calls: list[int] = []

    def build(saver: Any, prompt: str) -> Any:
        def script(messages: Any) -> AIMessage:
            calls.append(1)
            return AIMessage(f"streamed answer {len(calls)}")

        model = apps.ToolScripted(script=script)

        def respond(state: MessagesState) -> dict[str, Any]:
            full: Any = None
            for chunk in model.stream([SystemMessage(prompt), *state["messages"]]):
                full = chunk if full is None else full + chunk
            if isinstance(full, AIMessageChunk):
                full = AIMessage(full.content, id=full.id)
            return {"messages": [full]}

        b = StateGraph(MessagesState)
        b.add_node("respond", respond)
        b.add_edge(START, "respond")
        b.add_edge("respond", END)
        return b.compile(checkpointer=saver)

    url = f"sqlite:///{tmp_path / 'stream.sqlite'}"
    with threadlog.checkpointer(url) as saver:
        build(saver, "Stream it.").invoke(
            {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}}
        )
    assert len(calls) == 1
    assert _kinds(replay(build(None, "Stream it."), url, "t")) == [(1, "match", None)]
    changed = replay(build(None, "Stream it, briefly."), url, "t")
    assert _kinds(changed) == [(1, "context", 1)]
    assert "+Stream it, briefly." in (changed.results[0].diff or "").splitlines()
    assert len(calls) == 1  # the replays served the stored reply: the model never ran


def test_inside_replying_every_way_of_calling_a_model_gets_the_reply_and_callbacks_see_it() -> None:
    import asyncio

    from langchain_core.messages import AIMessage

    from threadlog.check.boundary import replying
    from threadlog.check.requests import RequestCapture

    ran: list[int] = []
    model = apps.ToolScripted(script=lambda ms: ran.append(1) or AIMessage("real"))
    seen = RequestCapture()
    config: Any = {"callbacks": [seen]}

    async def both_async() -> list[Any]:
        chunks = [c async for c in model.astream("hi", config)]
        return [await model.ainvoke("hi", config), *chunks]

    with replying(lambda _model, _input: AIMessage("served", id="s-1")):
        got = [model.invoke("hi", config), *model.stream("hi", config), *asyncio.run(both_async())]
    assert [(m.content, m.id) for m in got] == [("served", "s-1")] * 4
    assert ran == []  # the model never ran
    assert [r.messages for r in seen.requests] == [[{"role": "user", "content": "hi"}]] * 4
    assert model.invoke("hi").content == "real"  # outside the block: the model again


def test_another_model_or_other_parameters_are_named_by_what_changed() -> None:
    from threadlog.check.requests import Request, difference

    sent = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    was = Request(sent, [], None, "gpt-4o-mini", {"temperature": 0.0, "ls_provider": "openai"})
    assert difference(was, Request(sent, [], None, "gpt-4o-mini", dict(was.params or {}))) is None
    other = difference(was, Request(sent, [], None, "gpt-4o", dict(was.params or {})))
    assert other is not None and (other.part, other.recorded, other.replayed) == (
        "model", "gpt-4o-mini", "gpt-4o"
    )
    warmer = difference(
        was, Request(sent, [], None, "gpt-4o-mini", {"temperature": 0.7, "ls_provider": "openai"})
    )
    assert warmer is not None and warmer.detail == "the model's parameters differ: temperature"
    assert (warmer.recorded, warmer.replayed) == ("temperature=0.0", "temperature=0.7")
    # A request known by its messages only (a ModelNode served stored replies): not compared.
    assert difference(was, Request(sent)) is None
