"""Every chat-model call of a run on threadlog's saver is stored with the step that made it
(`threadlog.checkpoint.calls`) and listed by `threadlog inspect --calls [--json]`: the app's
own node, `create_agent` with a dynamic prompt, a swarm of two agents and a supervisor with
two workers, on SQLite and Postgres; after a kill between the reply and the next step; on a
copied thread; at O(new) storage; off with `record_calls=False`."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import threadlog
from tests.helpers import recorded_apps as apps
from threadlog.checkpoint.call_records import CALLS_CHANNEL
from threadlog.cli import main
from threadlog.inspect.calls import recorded_calls


def calls_json(capsys: pytest.CaptureFixture[str], url: str, thread_id: str) -> list[Any]:
    capsys.readouterr()
    assert main(["inspect", "--db", url, "--thread", thread_id, "--calls", "--json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out)  # type: ignore[no-any-return]


def system_prompts(calls: list[dict[str, Any]]) -> list[str]:
    out = []
    for call in calls:
        systems = [m["content"] for m in call["messages"] if m["role"] == "system"]
        assert len(systems) == 1, call["messages"]
        assert call["messages"][0]["role"] == "system"  # sent first
        out.append(systems[0])
    return out


S, R, M = apps.SUPERVISOR_PROMPT, apps.RESEARCH_PROMPT, apps.MATH_PROMPT
F, H = apps.FLIGHT_PROMPT, apps.HOTEL_PROMPT
APPS: dict[str, tuple[Callable[[Any], Any], dict[str, Any], list[str], list[str]]] = {
    # name: (build, first turn's extra state, system prompt per call, agent per call)
    "own_node": (
        apps.own_node,
        {"user_name": "Ada"},
        [apps.own_node_prompt("Ada", 1), apps.own_node_prompt("Ada", 2)],
        ["respond", "respond"],
    ),
    "create_agent_dynamic_prompt": (
        apps.dynamic_agent,
        {},
        [apps.dynamic_prompt_text(n) for n in (1, 3, 5, 7)],
        ["model"] * 4,
    ),
    "swarm": (
        apps.swarm,
        {},
        [F, H, H, F],
        ["flight_assistant", "hotel_assistant", "hotel_assistant", "flight_assistant"],
    ),
    "supervisor": (
        apps.supervisor,
        {},
        [S, R, S, M, S, S, R, S],
        ["supervisor", "research_expert", "supervisor", "math_expert", "supervisor",
         "supervisor", "research_expert", "supervisor"],
    ),
}


@pytest.mark.parametrize("app", sorted(APPS))
def test_inspect_calls_lists_each_model_call_with_the_exact_system_prompt_sent(
    app: str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    build, extra, prompts, agents = APPS[app]
    with threadlog.checkpointer(backend) as saver:
        graph = build(saver)
        apps.one_turn(graph, "t", "hello", **extra)
        out = apps.one_turn(graph, "t", "again")
    calls = calls_json(capsys, backend, "t")
    assert system_prompts(calls) == prompts
    assert [c["agent"] for c in calls] == agents
    stored = {m.id: m for m in out["messages"]}
    for call in calls:
        assert call["model"] == "ToolScripted"
        assert {"namespace", "node", "model", "messages", "tools", "reply_id"} <= set(call)
        # The reply is the AIMessage the call produced, as stored in the thread.
        assert isinstance(stored[call["reply_id"]], AIMessage)
        assert call["reply"]["content"] == stored[call["reply_id"]].content
        assert all("role" in m and "content" in m for m in call["messages"])
        assert not any(m.get("missing") for m in call["messages"])
        # Every message sent after the system prompt is one the thread stored.
        for m in call["messages"][1:]:
            assert stored[m["id"]].content == m["content"]
    if app == "create_agent_dynamic_prompt":
        assert all(c["tools"] == ["lookup"] for c in calls)
        assert calls[0]["tool_schemas"][0]["function"]["name"] == "lookup"
    if app == "swarm":
        assert [c["tools"] for c in calls[:2]] == [
            ["transfer_to_hotel_assistant"], ["transfer_to_flight_assistant"]
        ]
        assert calls[0]["namespace"] == "flight_assistant"
        assert calls[0]["node"] == "agent"
    text_code = main(["inspect", "--db", backend, "--thread", "t", "--calls"])
    text = capsys.readouterr().out
    assert text_code == 0
    assert f"model calls of thread t ({len(prompts)})" in text
    assert prompts[-1].split("\n")[0] in text


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_kill_between_the_reply_and_the_next_step_keeps_the_call_with_its_reply(
    durability: str, backend: str, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    proc = apps.start_killed_turn(backend, "k", durability)
    proc.join(60)
    assert proc.exitcode == -9
    calls = calls_json(capsys, backend, "k")
    assert system_prompts(calls) == [apps.own_node_prompt("Ada", 1)]
    assert calls[0]["reply"]["content"] == "reply to turn 1"
    cfg: Any = {"configurable": {"thread_id": "k"}}
    with caplog.at_level(logging.WARNING), threadlog.checkpointer(backend) as saver:
        graph = apps.own_node(saver, after=lambda state: {})
        graph.invoke(None, cfg)  # the killed turn's last step
        out = apps.one_turn(graph, "k", "again")
    # LangGraph never sees the recorded calls as writes to a channel it does not have.
    assert not [r for r in caplog.records if "unknown channel" in r.getMessage()]
    calls = calls_json(capsys, backend, "k")
    assert system_prompts(calls) == [apps.own_node_prompt("Ada", n) for n in (1, 2)]
    assert calls[1]["reply_id"] == out["messages"][-1].id
    assert calls[0]["reply_id"] == out["messages"][1].id


def test_a_copied_thread_lists_the_same_calls(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with threadlog.checkpointer(backend) as saver:
        graph = apps.swarm(saver)
        apps.one_turn(graph, "src", "hello")
        saver.copy_thread("src", "dst")  # type: ignore[attr-defined]
        out = apps.one_turn(graph, "dst", "again")
    source, copy = calls_json(capsys, backend, "src"), calls_json(capsys, backend, "dst")
    assert len(source) == 2 and len(copy) == 4
    assert [c["messages"] for c in copy[:2]] == [c["messages"] for c in source]
    assert system_prompts(copy) == [F, H, H, F]
    assert copy[-1]["reply_id"] == out["messages"][-1].id


def _record_sizes(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT length(value) FROM writes WHERE channel = ? ORDER BY checkpoint_id",
            (CALLS_CHANNEL,),
        ).fetchall()
    return [int(r[0]) for r in rows]


def test_each_calls_record_stores_only_what_is_new(tmp_path: Path) -> None:
    # The context grows every turn; what one turn's record stores does not.
    path = tmp_path / "grow.db"
    with threadlog.checkpointer(f"sqlite:///{path}") as saver:
        graph = apps.own_node(saver)
        apps.one_turn(graph, "g", "x" * 2000, user_name="Ada")
        for k in range(30):
            apps.one_turn(graph, "g", f"turn {k} " + "y" * 2000)
    sizes = _record_sizes(path)
    assert len(sizes) == 31
    assert max(sizes[2:]) < 1.5 * sizes[1]
    calls = recorded_calls(f"sqlite:///{path}", "g")
    assert len(calls[-1].messages) == 1 + 2 * 31 - 1  # system + every stored message
    assert not any(m.get("missing") for m in calls[-1].messages)


def test_a_call_refers_to_messages_whose_earlier_writes_reach_the_saver_after_its_own(
    tmp_path: Path,
) -> None:
    # Under durability="async" LangGraph stores a step's writes in the background: the
    # turn's input (the __start__ task's writes) may reach the saver after the model
    # node's. What a record stores must not depend on that order.
    import threading
    import time

    path = tmp_path / "late.db"
    cfg: Any = {"configurable": {"thread_id": "l"}}
    with threadlog.checkpointer(f"sqlite:///{path}") as saver:
        graph = apps.own_node(saver)
        inner = saver.put_writes
        model_wrote = threading.Event()

        def late_input(config: Any, writes: Any, task_id: str, task_path: str = "") -> Any:
            if any(ch == "user_name" for ch, _ in writes):  # the input's writes
                model_wrote.wait(5)
                time.sleep(0.05)
            out = inner(config, writes, task_id, task_path)
            if any(ch == "messages" for ch, _ in writes) and not any(
                ch == "user_name" for ch, _ in writes
            ):
                model_wrote.set()
            return out

        saver.put_writes = late_input  # type: ignore[method-assign]
        for k in range(3):
            model_wrote.clear()
            graph.invoke(
                {"messages": [HumanMessage(f"turn {k} " + "y" * 2000)], "user_name": "Ada"},
                cfg, durability="async",
            )
    sizes = _record_sizes(path)
    assert len(sizes) == 3
    assert max(sizes) < 1500  # the 2000-character user message is never stored again
    calls = recorded_calls(f"sqlite:///{path}", "l")
    assert [m["content"][:6] for m in calls[-1].messages if m["role"] == "user"] == [
        "turn 0", "turn 1", "turn 2"
    ]


def test_record_calls_false_stores_none_and_the_thread_reads_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'off.db'}"
    with threadlog.checkpointer(url, record_calls=False) as saver:
        graph = apps.own_node(saver)
        apps.one_turn(graph, "o", "hello", user_name="Ada")
    assert calls_json(capsys, url, "o") == []
    assert main(["inspect", "--db", url, "--thread", "o", "--calls"]) == 0
    assert "none recorded" in capsys.readouterr().out
    assert main(["inspect", "--db", url, "--thread", "o", "--json"]) == 0
    timeline = json.loads(capsys.readouterr().out)["timeline"]
    assert timeline


def test_recorded_text_is_escaped_in_the_terminal_and_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'esc.db'}"
    with threadlog.checkpointer(url) as saver:
        graph = apps.own_node(saver)
        apps.one_turn(graph, "e", "hi \x1b[2J\u202eevil\x85", user_name="Ada\x1b]0;x\x07")
    assert main(["inspect", "--db", url, "--thread", "e", "--calls"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\u202e" not in text and "\x85" not in text
    assert "\\x1b[2J\\u202eevil\\x85" in text
    capsys.readouterr()
    assert main(["inspect", "--db", url, "--thread", "e", "--calls", "--json"]) == 0
    raw = capsys.readouterr().out
    assert "\u202e" not in raw and "\x85" not in raw and "\x1b" not in raw
    calls = json.loads(raw)
    assert calls[0]["messages"][1]["content"] == "hi \x1b[2J\u202eevil\x85"
    assert calls[0]["messages"][0]["content"].startswith("You are Ada\x1b]0;x\x07's")
    html = recorded_calls(url, "e")._repr_html_()
    assert "<pre>hi \x1b[2J\u202eevil\x85</pre>" in html  # as sent, inside escaped HTML
    assert "You are Ada\x1b]0;x\x07&#x27;s assistant" in html


def test_runs_and_get_state_never_see_the_recorded_calls(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hidden.db'}"
    cfg: Any = {"configurable": {"thread_id": "h"}}
    with threadlog.checkpointer(url) as saver:
        graph = apps.own_node(saver, after=lambda state: {})
        graph.invoke(
            {"messages": [HumanMessage("hi")], "user_name": "Ada"}, cfg,
            interrupt_before=["after"],
        )
        head = saver.get_tuple(cfg)
        assert head is not None
        assert not [w for w in head.pending_writes or () if w[1] == CALLS_CHANNEL]
        assert not [
            w for t in saver.list(cfg) for w in t.pending_writes or () if w[1] == CALLS_CHANNEL
        ]
        assert "__threadlog_calls__" not in graph.get_state(cfg).values
    assert len(recorded_calls(url, "h")) == 1


def test_the_html_page_shows_each_call_under_its_step_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'page.db'}"
    with threadlog.checkpointer(url) as saver:
        graph = apps.swarm(saver)
        apps.one_turn(graph, "p", "hello")
        own = apps.own_node(saver)
        apps.one_turn(own, "q", "hi", user_name="<script>alert(1)</script>")
    page = tmp_path / "p.html"
    assert main(["inspect", "--db", url, "--thread", "p", "--html", str(page)]) == 0
    html = page.read_text()
    assert html.count('class="tl-model-call"') == 2
    assert "flight_assistant &gt; agent" in html and "hotel_assistant &gt; agent" in html
    assert apps.FLIGHT_PROMPT in html and apps.HOTEL_PROMPT in html
    assert main(["inspect", "--db", url, "--thread", "q", "--html", str(page)]) == 0
    html = page.read_text()
    assert html.count('class="tl-model-call"') == 1
    assert "<script>alert" not in html
    assert "You are &lt;script&gt;alert(1)&lt;/script&gt;&#x27;s assistant" in html
    # The notebook view of a thread loaded with its calls shows the same.
    notebook = threadlog.inspect.thread(url, "q", calls=True)._repr_html_()
    assert notebook.count('class="tl-model-call"') == 1


def test_async_runs_and_streamed_calls_are_recorded(backend: str) -> None:
    import asyncio

    from langchain_core.messages import SystemMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    model = apps.ToolScripted(script=lambda ms: AIMessage(f"seen {len(ms)}"))

    async def respond(state: MessagesState) -> dict[str, Any]:
        sent = [SystemMessage("async prompt"), *state["messages"]]
        first = await model.ainvoke(sent)
        chunks = [c async for c in model.astream([SystemMessage("streamed prompt"), *sent[1:]])]
        streamed = chunks[0]
        for c in chunks[1:]:
            streamed = streamed + c
        return {"messages": [first, AIMessage(str(streamed.content), id=streamed.id)]}

    g = StateGraph(MessagesState)
    g.add_node("respond", respond)
    g.add_edge(START, "respond")
    g.add_edge("respond", END)

    async def main_() -> Any:
        async with threadlog.acheckpointer(backend) as saver:
            graph = g.compile(checkpointer=saver)
            return await graph.ainvoke(
                {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "a"}}
            )

    out = asyncio.run(main_())
    calls = recorded_calls(backend, "a")
    assert [c.system_prompt for c in calls] == ["async prompt", "streamed prompt"]
    assert [c.reply_id for c in calls] == [m.id for m in out["messages"][1:]]


def test_under_exit_durability_every_call_of_each_run_is_recorded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'exit.db'}"
    cfg: Any = {"configurable": {"thread_id": "x"}}
    with threadlog.checkpointer(url) as saver:
        graph = apps.dynamic_agent(saver)
        for text in ("hi", "again"):
            graph.invoke({"messages": [HumanMessage(text)]}, cfg, durability="exit")
        # Nothing of the runs is kept past them: no call, no state a task read.
        from threadlog.checkpoint.calls import CallsLayer
        from threadlog.checkpoint.layered import layer_of

        layer = layer_of(saver, CallsLayer)
        assert layer is not None and not layer._calls and not layer._inputs
    calls = recorded_calls(url, "x")
    assert [c.system_prompt for c in calls] == [apps.dynamic_prompt_text(n) for n in (1, 3, 5, 7)]
    assert not any(m.get("missing") for c in calls for m in c.messages)


def test_rollback_and_prune_keep_the_calls_consistent_with_the_steps(backend: str) -> None:
    cfg: Any = {"configurable": {"thread_id": "r"}}

    def turn(graph: Any, text: str, run: str) -> None:
        graph.invoke({"messages": [HumanMessage(text)]}, {**cfg, "metadata": {"run_id": run}})

    with threadlog.checkpointer(backend) as saver:
        graph = apps.dynamic_agent(saver)
        turn(graph, "one", "r0")
        turn(graph, "two", "r1")
        assert len(recorded_calls(backend, "r")) == 4
        saver.delete_for_runs(["r1"])  # type: ignore[attr-defined]
        # The rolled-back run's calls went with its steps.
        assert [c.system_prompt for c in recorded_calls(backend, "r")] == [
            apps.dynamic_prompt_text(n) for n in (1, 3)
        ]
        turn(graph, "three", "r2")
        saver.prune(["r"], strategy="keep_latest")  # type: ignore[attr-defined]
        turn(graph, "four", "r3")
    calls = recorded_calls(backend, "r")
    # What prune kept and every call after it read whole: nothing refers to a removed write.
    assert [c.system_prompt for c in calls][-2:] == [
        apps.dynamic_prompt_text(n) for n in (9, 11)
    ]
    assert not any(m.get("missing") for c in calls[-2:] for m in c.messages)
    assert [m["content"] for m in calls[-1].messages if m["role"] == "user"] == [
        "one", "three", "four"
    ]


def test_a_slice_of_a_call_that_started_later_but_was_stored_first_reads_whole() -> None:
    # Calls are stored as their steps' writes land, so a call's record may slice one that
    # started after it; the reader expands by what each slice names, not by start time.
    from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint

    from threadlog.inspect.calls import calls_from

    def blob(text: str) -> dict[str, Any]:
        return {"k": "message", "role": "user", "content": text}

    later = {"run_id": "B", "t": 2.0, "ns": "n:x", "model": "m",
             "messages": [{"d": "d1"}, {"d": "d2"}]}
    earlier = {"run_id": "A", "t": 1.0, "ns": "n:y", "model": "m",
               "messages": [{"slice": ["B", 0, 2]}, {"d": "d3"}]}
    value = {"v": 1, "calls": [later, earlier],
             "blobs": {"d1": blob("one"), "d2": blob("two"), "d3": blob("three")}}
    tup = CheckpointTuple(
        {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}},
        empty_checkpoint(), {}, None, [("threadlog-calls:x", CALLS_CHANNEL, value)],
    )
    calls = calls_from([tup], "t")
    assert [c.run_id for c in calls] == ["A", "B"]
    assert [m["content"] for m in calls[0].messages] == ["one", "two", "three"]
