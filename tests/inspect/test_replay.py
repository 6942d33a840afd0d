"""`threadlog replay` / `threadlog.check.replay.replay` / `threadlog.testing`: the demo's
threads replay through the unchanged graph turn for turn; a changed system prompt, tool
schema and context policy are each reported at the turn where they matter, with the
right kind; no stored tool runs again; the source is never written."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool

import threadlog
from tests.helpers.poisoned import snapshot
from threadlog import ContextPolicy, OfflineChatModel, create_agent
from threadlog.check.replay import replay
from threadlog.cli import main
from threadlog.examples import weather
from threadlog.testing import assert_replays, stored_threads

QUESTIONS = ["北京今天适合带伞吗？", "What about Shanghai and Beijing?", "thanks!"]


# Each test gets its own copy of a database written once per session: writing it runs the
# demo (or the agent) turn by turn, the slowest part of these tests.
_MASTERS: dict[str, Path] = {}


def _copy_of(name: str, tmp_path: Path, write: Callable[[Path], None]) -> Path:
    master = _MASTERS.get(name)
    if master is None:
        master = tmp_path / "master" / name
        master.parent.mkdir()
        write(master)
        _MASTERS[name] = master
    copy = tmp_path / name
    shutil.copyfile(master, copy)
    return copy


def _demo_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A database written by `threadlog demo` itself: two threads, four turns."""

    def write(db: Path) -> None:
        for argv in (
            [QUESTIONS[0], "--thread", "demo-a"],
            [QUESTIONS[1], "--thread", "demo-a"],
            [QUESTIONS[2], "--thread", "demo-a"],
            ["Hangzhou and Chengdu today?", "--thread", "demo-b"],
        ):
            assert main(["demo", "--db", str(db), *argv]) == 0

    db = str(_copy_of("demo.db", tmp_path, write))
    capsys.readouterr()
    return db


class Counter:
    """A weather tool that counts how often it really runs."""

    def __init__(self) -> None:
        self.runs = 0

    def tool(self, arg: str = "city") -> StructuredTool:
        def get_weather(**kwargs: Any) -> str:
            self.runs += 1
            return weather.get_weather.invoke({"city": kwargs[arg]})

        from pydantic import create_model

        schema = create_model("Args", **{arg: (str, ...)})  # type: ignore[call-overload]
        return StructuredTool.from_function(
            func=get_weather,
            name="get_weather",
            description="Today's weather for one city.",
            args_schema=schema,
        )


def _agent(
    tool: Any,
    *,
    system_prompt: str = weather.SYSTEM_PROMPT,
    context: ContextPolicy | None = None,
    checkpointer: Any = None,
) -> Any:
    return create_agent(
        OfflineChatModel(),
        [tool],
        system_prompt=system_prompt,
        context=context or ContextPolicy(max_turns=20),
        checkpointer=checkpointer,
        max_model_calls=6,
    )


def _counted_db(tmp_path: Path) -> tuple[str, Counter]:
    counter = Counter()

    def write(db: Path) -> None:
        with threadlog.checkpointer(f"sqlite:///{db}") as saver:
            graph = _agent(counter.tool(), checkpointer=saver)
            for q in QUESTIONS:
                graph.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "t"}})
        assert counter.runs == 3  # Beijing, then Shanghai and Beijing

    url = f"sqlite:///{_copy_of('counted.db', tmp_path, write)}"
    counter.runs = 0
    return url, counter


def _kinds(report: Any) -> list[tuple[int, str]]:
    return [(r.turn, r.kind) for r in report.results]


@pytest.mark.parametrize("model", ["stored", "live"])
def test_the_demo_threads_replay_through_the_unchanged_graph_on_every_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str
) -> None:
    db = _demo_db(tmp_path, capsys)
    before = snapshot(db)
    graph = weather.build_graph(max_model_calls=6)
    turns = 0
    for tid in stored_threads(db):
        report = assert_replays(graph, db, tid, model=model)  # type: ignore[arg-type]
        turns += len(report.results)
    assert turns == 4
    assert snapshot(db) == before


def test_no_stored_tool_runs_again_in_any_mode(tmp_path: Path) -> None:
    url, counter = _counted_db(tmp_path)
    for model in ("stored", "live"):
        report = replay(_agent(counter.tool()), url, "t", model=model)  # type: ignore[arg-type]
        assert report.matched, str(report)
    assert counter.runs == 0


def test_a_changed_system_prompt_is_a_context_divergence_at_the_first_turn(tmp_path: Path) -> None:
    url, counter = _counted_db(tmp_path)
    changed = _agent(counter.tool(), system_prompt="You are a terse weather bot.")
    for model in ("stored", "live"):
        report = replay(changed, url, "t", model=model)  # type: ignore[arg-type]
        first = report.results[0]
        assert (first.turn, first.kind, first.model_call) == (1, "context", 1)
        assert "system prompt" in first.detail
        # The thread recorded its calls: the prompt's text is compared, shown as a diff.
        diff = (first.diff or "").splitlines()
        assert f"-{weather.SYSTEM_PROMPT.splitlines()[0]}" in diff
        assert "+You are a terse weather bot." in diff
    assert counter.runs == 0


def test_a_changed_context_policy_is_a_context_divergence_where_it_cuts(tmp_path: Path) -> None:
    url, counter = _counted_db(tmp_path)
    report = replay(_agent(counter.tool(), context=ContextPolicy(max_turns=1)), url, "t")
    # Turn 1 has nothing to cut: it matches; turn 2 is sent without turn 1.
    assert _kinds(report) == [(1, "match"), (2, "context"), (3, "context")]
    assert "another context" in report.results[1].detail
    assert counter.runs == 0


def test_a_changed_tool_schema_is_reported_at_the_first_turn_that_calls_it(
    tmp_path: Path,
) -> None:
    url, counter = _counted_db(tmp_path)
    renamed = _agent(counter.tool(arg="location"))
    stored = replay(renamed, url, "t")
    assert _kinds(stored)[:2] == [(1, "tool_schema"), (2, "tool_schema")]
    assert _kinds(stored)[2] == (3, "match")  # "thanks!" calls nothing
    assert "does not fit the tool's schema" in stored.results[0].detail
    live = replay(renamed, url, "t", model="live")  # the model sees the new schema
    assert live.results[0].kind == "call" and live.results[0].model_call == 1
    assert counter.runs == 0


def test_a_call_the_stored_turn_did_not_make_is_reported_not_executed(tmp_path: Path) -> None:
    url, counter = _counted_db(tmp_path)

    class AlsoHangzhou(OfflineChatModel):
        def _generate(self, messages: Any, *a: Any, **kw: Any) -> Any:
            edited = [
                m.model_copy(update={"content": str(m.content).replace("北京", "北京和杭州")})
                if isinstance(m, HumanMessage)
                else m
                for m in messages
            ]
            return super()._generate(edited, *a, **kw)

    graph = create_agent(
        AlsoHangzhou(),
        [counter.tool()],
        system_prompt=weather.SYSTEM_PROMPT,
        context=ContextPolicy(max_turns=20),
        max_model_calls=6,
    )
    report = replay(graph, url, "t", turns="1", model="live")
    (r,) = report.results
    assert (r.turn, r.kind, r.model_call) == (1, "call", 1)
    assert "杭州" in (r.replayed or "") and "杭州" not in (r.stored or "")
    assert counter.runs == 0  # the stored Beijing call was served, the new one not run
    live_tools = replay(graph, url, "t", turns="1", model="live", tools="live")
    assert live_tools.results[0].kind == "call" and counter.runs == 1  # only the new call


def test_assert_replays_fails_with_the_report(tmp_path: Path) -> None:
    url, counter = _counted_db(tmp_path)
    with pytest.raises(AssertionError, match=r"(?s)no longer replays.*context"):
        assert_replays(_agent(counter.tool(), system_prompt="changed"), url, "t")


def test_replay_of_a_postgres_thread_leaves_its_rows_as_they_were(pg_backend: str) -> None:
    counter = Counter()
    with threadlog.checkpointer(pg_backend) as saver:
        graph = _agent(counter.tool(), checkpointer=saver)
        graph.invoke(
            {"messages": [HumanMessage(QUESTIONS[0])]}, {"configurable": {"thread_id": "t"}}
        )
    before = snapshot(pg_backend)
    assert replay(_agent(counter.tool()), pg_backend, "t").matched
    assert snapshot(pg_backend) == before and counter.runs == 1


# -- the command -------------------------------------------------------------------


def _graph_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prompt: str) -> str:
    (tmp_path / "myagent.py").write_text(
        textwrap.dedent(f"""
        from threadlog.examples import weather
        from threadlog import create_agent, OfflineChatModel, ContextPolicy

        def build():
            return weather.build_graph(max_model_calls=6)

        changed = create_agent(OfflineChatModel(), [weather.get_weather],
                               system_prompt={prompt!r}, context=ContextPolicy(max_turns=20))
    """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "myagent", raising=False)
    return "myagent"


def test_cli_exit_0_when_every_turn_matches_and_1_at_a_divergence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _demo_db(tmp_path, capsys)
    mod = _graph_module(tmp_path, monkeypatch, "Be brief.")
    assert main(["replay", "--db", db, "--thread", "demo-a", "--graph", f"{mod}:build"]) == 0
    assert "3 turn(s) replayed: 3 match" in capsys.readouterr().out
    status = main(
        [
            "replay",
            "--db",
            db,
            "--thread",
            "demo-a",
            "--graph",
            f"{mod}:changed",
            "--json",
            "--turns",
            "2:3",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert (doc["thread_id"], doc["source"]) == ("demo-a", db)
    rows = doc["turns"]
    assert status == 1 and [(r["turn"], r["kind"]) for r in rows] == [
        (2, "context"),
        (3, "context"),
    ]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--graph", "no_such_module:graph"], "does not import: ModuleNotFoundError"),
        (["--graph", "myagent:nothing"], "has no 'nothing'"),
        (["--graph", "myagent:build", "--thread", "ghost"], "no thread 'ghost'"),
        (["--graph", "myagent:build", "--turns", "7:9"], "the thread has turns 1 to 3"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    says: str,
) -> None:
    db = _demo_db(tmp_path, capsys)
    _graph_module(tmp_path, monkeypatch, "x")
    args = ["replay", "--db", db, "--thread", "demo-a", *argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_cli_a_database_that_is_not_langgraphs_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    _graph_module(tmp_path, monkeypatch, "x")
    argv = ["replay", "--db", str(other), "--thread", "t", "--graph", "myagent:build"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not a LangGraph checkpoint database" in err and err.count("\n") == 1


def test_a_turn_paused_for_approval_is_an_interrupt_after_what_ran_before_matched(
    tmp_path: Path,
) -> None:
    from langgraph.types import Command

    url = f"sqlite:///{tmp_path / 'approved.db'}"
    counter = Counter()
    cfg: Any = {"configurable": {"thread_id": "t"}}

    def build(checkpointer: Any = None) -> Any:
        return create_agent(
            OfflineChatModel(), [counter.tool()], system_prompt=weather.SYSTEM_PROMPT,
            context=ContextPolicy(max_turns=20), requires_approval=["get_weather"],
            checkpointer=checkpointer,
        )

    with threadlog.checkpointer(url) as saver:
        graph = build(saver)
        graph.invoke({"messages": [HumanMessage(QUESTIONS[0])]}, cfg)
        graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert counter.runs == 1
    (r,) = replay(build(), url, "t").results
    assert (r.turn, r.kind) == (1, "interrupt") and "interrupt()" in r.detail
    assert counter.runs == 1


def test_a_plain_create_react_agent_thread_replays_live_without_running_its_tool(
    tmp_path: Path,
) -> None:
    from tests.helpers.poisoned import plain_saver, react_agent

    url = f"sqlite:///{tmp_path / 'react.db'}"
    counter = Counter()
    with plain_saver(url) as saver:
        agent = react_agent(saver, tools=[counter.tool()])
        for q in QUESTIONS[:2]:
            agent.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "r"}})
    counter.runs = 0
    report = replay(react_agent(None, tools=[counter.tool()]), url, "r", model="live")
    assert report.matched and len(report.results) == 2, str(report)
    assert counter.runs == 0
    stored = replay(react_agent(None, tools=[counter.tool()]), url, "r")  # no ModelNode
    assert stored.matched and counter.runs == 0, str(stored)


def test_stored_replies_replace_a_model_chosen_per_run(tmp_path: Path) -> None:
    """A `ModelNode` whose model is a callable of (state, runtime) (the react-agent
    template's shape): `model="stored"` serves the stored replies, the chosen model is
    never called."""

    calls = [0]

    class Counting(OfflineChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            return super()._generate(*args, **kwargs)

    counter = Counter()
    url = f"sqlite:///{tmp_path / 'per-run.db'}"

    def build(checkpointer: Any = None) -> Any:
        return create_agent(
            lambda state, runtime: Counting(),
            [counter.tool()],
            system_prompt=weather.SYSTEM_PROMPT,
            context=ContextPolicy(max_turns=20),
            checkpointer=checkpointer,
            max_model_calls=6,
        )

    with threadlog.checkpointer(url) as saver:
        graph = build(saver)
        for q in QUESTIONS:
            graph.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "t"}})
    made = calls[0]
    assert made >= 3
    report = replay(build(), url, "t", model="stored")
    assert report.matched, str(report)
    assert calls[0] == made  # the stored replies answered every call
