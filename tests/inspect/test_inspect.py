"""threadlog.inspect on real checkpointers: timeline, pairs, context seen, diff, fork tree."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from tests.helpers.inspect import CONFIG, ScriptedAgent, run_two_turns
from threadlog import (
    AgentState,
    ContextPolicy,
    MessagesState,
    OfflineChatModel,
    ToolNode,
    create_agent,
    inspect,
    tools_condition,
)
from threadlog.inspect.table import display_width


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[tuple[SqliteSaver, str]]:
    path = tmp_path / "threads.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    yield SqliteSaver(conn), f"sqlite:///{path}"
    conn.close()


def ids(messages: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


def test_timeline_has_one_row_per_checkpoint_with_what_each_step_appended(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, _ = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)

    rows = inspect.thread(graph, CONFIG).timeline().rows()

    assert len(rows) == len(list(saver.list(CONFIG)))
    assert rows[0]["source"] == "input" and rows[0]["parent_id"] is None
    asked = next(r for r in rows if [a["id"] for a in r["appended"]] == ["ai-1"])
    assert asked["writers"] == ["model"]
    assert asked["open_calls"] == ["c-paris", "c-rome"]
    answered = rows[rows.index(asked) + 1]
    assert sorted(answered["writers"]) == ["tools"]
    assert [a["id"] for a in answered["appended"]] == ["r-c-paris", "r-c-rome"]
    assert answered["open_calls"] == []
    assert rows[-1]["cum_total_tokens"] == 15 + 38 + 53
    assert [r["parent_id"] for r in rows[1:]] == [r["checkpoint_id"] for r in rows[:-1]]


def test_plot_draws_four_series_inline_and_to_a_file_without_a_display(
    sqlite_db: tuple[SqliteSaver, str], tmp_path: Path
) -> None:
    saver, url = sqlite_db
    run_two_turns(ScriptedAgent().build(saver))

    plot = inspect.thread(url, "t-1").plot()

    assert {"messages", "context_tokens", "log_tokens", "stored_bytes", "tool_ms"} <= set(
        plot.series
    )
    assert plot.series["messages"][-1] == 7 and len(plot.series["tool_ms"]) == 2  # Paris, Rome
    assert plot._repr_png_().startswith(b"\x89PNG")  # what Jupyter shows inline
    plot.save(str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")


def test_a_checkpointer_url_rebuilds_the_same_state_as_the_graph(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, url = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)

    from_graph = inspect.thread(graph, CONFIG)
    from_url = inspect.thread(url, "t-1")

    assert [r.checkpoint_id for r in from_url.records] == [
        r.checkpoint_id for r in from_graph.records
    ]
    for a, b in zip(from_graph.records, from_url.records, strict=True):
        assert ids(a.messages) == ids(b.messages)
        assert a.writers == b.writers
        assert a.stored_bytes == b.stored_bytes
    assert ids(from_url.head.messages) == ids(graph.get_state(CONFIG).values["messages"])


def test_stored_bytes_add_up_to_the_sqlite_tables(sqlite_db: tuple[SqliteSaver, str]) -> None:
    saver, _ = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)

    t = inspect.thread(graph, CONFIG)

    (ckpt,) = saver.conn.execute(
        "SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints"
    ).fetchone()
    (writes,) = saver.conn.execute("SELECT sum(length(value)) FROM writes").fetchone()
    assert t.timeline().total_bytes == ckpt + writes
    assert all((r.stored_bytes or 0) > 0 for r in t.records)
    head_row = t.timeline().rows()[-1]
    assert head_row["path_bytes"] == sum(r.stored_bytes or 0 for r in t.path())


def test_last_n_loads_only_the_newest_checkpoints(sqlite_db: tuple[SqliteSaver, str]) -> None:
    saver, url = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)
    full = inspect.thread(url, "t-1")

    t = inspect.thread(url, "t-1", last=3)

    assert [r.checkpoint_id for r in t.records] == [r.checkpoint_id for r in full.records[-3:]]
    rows = t.timeline().rows()
    assert rows[0]["parent_loaded"] is False and rows[0]["appended"] == []
    assert rows[0]["writers"] == [] and rows[0]["path_bytes"] is None
    assert rows[1:] == [
        {**r, "path_bytes": None} if r["path_bytes"] is not None else r
        for r in full.timeline().rows()[-2:]
    ]
    assert "(parent not loaded: " in str(t.timeline())
    with pytest.raises(ValueError, match="last must be a positive number"):
        inspect.thread(url, "t-1", last=0)


def test_in_memory_checkpointer_reports_bytes_too() -> None:
    graph = ScriptedAgent().build(InMemorySaver())
    run_two_turns(graph)

    t = inspect.thread(graph, CONFIG)

    assert t.bytes_known and all((r.stored_bytes or 0) > 0 for r in t.records)


def test_a_failed_branch_and_its_resume_show_in_timeline_and_pairs(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, url = sqlite_db
    agent = ScriptedAgent(failing={"Rome"})
    graph = agent.build(saver)
    with pytest.raises(RuntimeError, match="down for Rome"):
        graph.invoke({"messages": [("user", "Weather in Paris and Rome?")]}, CONFIG)  # type: ignore[arg-type]
    failed = inspect.thread(graph, CONFIG)
    assert failed.head.errors and failed.head.errors[0].task == "tools"
    assert "weather service down for Rome" in failed.head.errors[0].error
    assert failed.pairs().rows()[1]["status"] == "open"

    agent.heal()
    graph.invoke(None, CONFIG)  # type: ignore[arg-type]

    t = inspect.thread(graph, CONFIG)
    rows = t.timeline().rows()
    errored = [r for r in rows if r["errors"]]
    assert len(errored) == 1 and errored[0]["open_calls"] == ["c-paris", "c-rome"]
    after = next(r for r in rows if r["parent_id"] == errored[0]["checkpoint_id"])
    assert [a["id"] for a in after["appended"]] == ["r-c-paris", "r-c-rome"]
    assert Counter(agent.tool_runs) == {"Paris": 1, "Rome": 2}  # Paris's write was kept
    pairs = t.pairs().rows()
    assert [(p["call_id"], p["status"], p["result_id"]) for p in pairs] == [
        ("c-paris", "success", "r-c-paris"),
        ("c-rome", "success", "r-c-rome"),
    ]
    assert all(p["duration_source"] == "derived" and p["duration_s"] >= 0 for p in pairs)
    assert "≈ derived from checkpoint timestamps" in str(t.pairs())
    # Without the graph the failed task is known by id; the resumed step names its node.
    bare = inspect.thread(url, "t-1").timeline().rows()
    assert [r["errors"] for r in bare if r["errors"]] == [errored[0]["errors"]]
    assert errored[0]["errors"][0]["task"] == "tools"


def test_fork_tree_and_diff_after_update_state_on_an_old_checkpoint(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, url = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)
    t = inspect.thread(graph, CONFIG)
    turn1 = next(r for r in t.records if r.messages and r.messages[-1].id == "ai-2")

    new_config = graph.update_state(turn1.config, {"messages": [("user", "and Berlin?")]})

    t = inspect.thread(url, "t-1")
    tree = t.forks()
    assert [r.checkpoint_id for r in tree.fork_points] == [turn1.checkpoint_id]
    assert len(tree.branches) == 2
    branch = tree.branches[1]
    assert branch.forked_from is not None
    assert branch.forked_from.checkpoint_id == turn1.checkpoint_id
    assert branch.head.checkpoint_id == new_config["configurable"]["checkpoint_id"]
    assert branch.head.source == "update"
    heads = [r for r in tree.rows() if r["is_head"]]
    assert len(heads) == 2
    main_head = tree.branches[0].head.checkpoint_id
    diff = t.diff(main_head, branch.head.checkpoint_id)
    assert [r["content"] for r in diff.added] == ["and Berlin?"]
    assert "ai-3" in [r["id"] for r in diff.removed]
    assert "different branches" in str(diff)
    assert "#1" in str(tree) and "└" in str(tree)


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"{city}: light rain, 22°C"


def shown(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    # What a provider gets has no ids (the wire format drops them): compare role and text.
    return [(m.type, m.text) for m in messages]


class RecordingModel(OfflineChatModel):
    """The offline model, remembering the messages of each call it gets."""

    seen: ClassVar[list[list[tuple[str, str]]]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        type(self).seen.append(shown(messages))
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize("summarize", [False, True], ids=["trim", "summary"])
def test_context_seen_is_exactly_what_the_model_received(
    sqlite_db: tuple[SqliteSaver, str], summarize: bool
) -> None:
    saver, _ = sqlite_db
    RecordingModel.seen = []
    policy = ContextPolicy(max_turns=1, summarizer=OfflineChatModel() if summarize else None)
    graph = create_agent(
        RecordingModel(),
        [get_weather],
        system_prompt="Be brief.",
        context=policy,
        checkpointer=saver,
    )
    for q in ["Weather in Paris?", "And in Rome?", "And in Berlin?"]:
        graph.invoke({"messages": [("user", q)]}, CONFIG)  # type: ignore[arg-type]

    t = inspect.thread(graph, CONFIG)
    calls = [m for m in t.head.messages if isinstance(m, AIMessage)]
    assert len(calls) == len(RecordingModel.seen) >= 5
    for ai, seen in zip(calls, RecordingModel.seen, strict=True):
        assert shown(t.context(ai.id).context) == seen

    last = t.context(-1)
    rows = last.rows()
    assert [r["seen"] for r in rows if r["part"] == "context-only"][:1] == ["added"]
    log = [r for r in rows if r["part"] == "log"]
    assert len(log) == len(last.log) and {r["seen"] for r in log} == {"cut", "kept"}
    assert last.context_tokens < last.log_tokens
    if summarize:
        assert t.head.compactions and t.head.compactions[-1]["kind"] == "summary"
        assert any(r["role"] == "system" and r["seen"] == "added" for r in rows[1:2])
        assert any("✂ summary" in str(e) for e in t.timeline().display_rows())


def test_context_seen_takes_policy_and_prompt_when_read_without_the_graph(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, url = sqlite_db
    RecordingModel.seen = []
    graph = create_agent(
        RecordingModel(),
        [get_weather],
        system_prompt="Be brief.",
        context=ContextPolicy(max_turns=1),
        checkpointer=saver,
    )
    for q in ["Weather in Paris?", "And in Rome?"]:
        graph.invoke({"messages": [("user", q)]}, CONFIG)  # type: ignore[arg-type]

    bare = inspect.thread(url, "t-1")
    seen = bare.context(-1, policy=ContextPolicy(max_turns=1), system_prompt="Be brief.")

    assert shown(seen.context) == RecordingModel.seen[-1]
    assert shown(bare.context(-1).context) != RecordingModel.seen[-1]  # no policy: whole log


def _characters(messages: Any) -> int:
    """A custom token counter (one token per character), far from the default estimate."""
    return sum(len(m.text) for m in messages)


def test_context_seen_matches_the_model_input_with_a_custom_token_counter(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, url = sqlite_db
    RecordingModel.seen = []
    prompt = "Be brief and answer with the weather of the city asked about. " * 3
    policy = ContextPolicy(max_tokens=400, token_counter=_characters)
    graph = create_agent(
        RecordingModel(), [get_weather], system_prompt=prompt, context=policy, checkpointer=saver
    )
    for q in ["Weather in Paris?", "And in Rome?", "And in Berlin?", "And Paris again?"]:
        graph.invoke({"messages": [("user", q)]}, CONFIG)  # type: ignore[arg-type]

    t = inspect.thread(graph, CONFIG)
    calls = [m for m in t.head.messages if isinstance(m, AIMessage)]
    assert len(calls) == len(RecordingModel.seen) >= 6
    for ai, seen in zip(calls, RecordingModel.seen, strict=True):
        assert shown(t.context(ai.id).context) == seen
    assert len(RecordingModel.seen[-1]) < len(t.head.messages)  # the budget did cut

    bare = inspect.thread(url, "t-1")  # from a URL: the same settings given explicitly
    assert shown(bare.context(-1, policy=policy, system_prompt=prompt).context) == (
        RecordingModel.seen[-1]
    )
    assumed = bare.context(-1)
    assert any("assumed" in line for line in assumed.summary())
    assert not any("assumed" in line for line in t.context(-1).summary())


def _views(t: inspect.Thread) -> list[inspect.Table]:
    return [t.timeline(), t.pairs(), t.forks(), t.diff(t.records[0].checkpoint_id)]


def test_every_view_fits_100_columns_and_escapes_html(sqlite_db: tuple[SqliteSaver, str]) -> None:
    saver, _ = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)
    graph.invoke({"messages": [("user", "北京和上海今天适合带伞吗？" * 8)]}, CONFIG)  # type: ignore[arg-type]
    t = inspect.thread(graph, CONFIG)

    for view in _views(t):
        text = str(view)
        assert all(display_width(line) <= 100 for line in text.splitlines()), text
        html = view._repr_html_()
        assert html.count("<table>") == 1 and "</table>" in html
    timeline_html = t.timeline()._repr_html_()
    assert "&lt;rain&gt; &amp; wind" in timeline_html and "<rain>" not in timeline_html
    assert 'class="r-tool"' in timeline_html


def test_rows_are_plain_json_and_convert_to_dataframes(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, _ = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)
    t = inspect.thread(graph, CONFIG)

    for view in _views(t):
        rows = view.rows()
        assert json.loads(json.dumps(rows)) == rows
        frame = view.to_dataframe()
        assert len(frame) == len(rows) and list(frame.columns) == list(rows[0])


def test_to_dataframe_without_pandas_says_what_to_do(
    sqlite_db: tuple[SqliteSaver, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    saver, _ = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)
    timeline = inspect.thread(graph, CONFIG).timeline()
    monkeypatch.setitem(sys.modules, "pandas", None)

    with pytest.raises(ImportError, match=r"needs pandas.*\.rows\(\)"):
        timeline.to_dataframe()


def test_bad_sources_and_ids_get_clear_errors(sqlite_db: tuple[SqliteSaver, str]) -> None:
    saver, url = sqlite_db
    graph = ScriptedAgent().build(saver)
    run_two_turns(graph)

    with pytest.raises(LookupError, match="'nope' has no checkpoints"):
        inspect.thread(url, "nope")
    with pytest.raises(TypeError, match="cannot inspect a dict"):
        inspect.thread({}, "t-1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no thread id"):
        inspect.thread(graph, {"configurable": {}})
    plain = StateGraph(MessagesState)
    plain.add_node("x", lambda s: {})
    plain.add_edge(START, "x")
    with pytest.raises(ValueError, match="compiled without a checkpointer"):
        inspect.thread(plain.compile(), CONFIG)  # type: ignore[arg-type]
    t = inspect.thread(graph, CONFIG)
    with pytest.raises(KeyError, match="matches no checkpoint"):
        t.get("not-an-id")
    with pytest.raises(LookupError, match="no AIMessage with id 'ai-9'"):
        t.context("ai-9")
    assert t.get(t.head.checkpoint_id[-8:]) is t.head


def test_thread_reads_a_state_schema_with_more_keys(sqlite_db: tuple[SqliteSaver, str]) -> None:
    saver, url = sqlite_db

    class State(AgentState):
        city: str

    b: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    b.add_node("pick", lambda s: {"city": "Paris", "messages": [("assistant", "ok")]})
    b.add_edge(START, "pick")
    graph = b.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "hi")], "city": "Rome"}, CONFIG)  # type: ignore[arg-type]

    t = inspect.thread(url, "t-1", schema=State)
    first_with_city = next(r for r in t.records if r.values.get("city"))
    diff = t.diff(first_with_city.checkpoint_id).rows()
    changed = [(r["key"], r["before"], r["after"]) for r in diff if r["kind"] == "value"]
    assert changed == [("city", "'Rome'", "'Paris'")]


def test_pairs_show_invalid_calls_and_error_results_from_the_tool_node(
    sqlite_db: tuple[SqliteSaver, str],
) -> None:
    saver, _ = sqlite_db
    bad = {
        "name": "get_weather",
        "args": "{city: Paris",
        "id": "c-bad",
        "error": "bad json",
        "type": "invalid_tool_call",
    }
    script = [
        AIMessage(
            "",
            id="ai-1",
            invalid_tool_calls=[bad],  # type: ignore[list-item]
            tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "c-ok"}],
        ),
        AIMessage("done", id="ai-2"),
    ]

    def model(state: AgentState) -> dict[str, Any]:
        return {"messages": [script[sum(isinstance(m, AIMessage) for m in state["messages"])]]}

    b: StateGraph[Any, Any, Any, Any] = StateGraph(AgentState)
    b.add_node("model", model)
    b.add_node("tools", ToolNode([get_weather], record_durations=True))
    b.add_edge(START, "model")
    b.add_conditional_edges("model", tools_condition, ["tools", END])
    b.add_edge("tools", "model")
    graph = b.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "weather?")]}, CONFIG)  # type: ignore[arg-type]

    pairs = inspect.thread(graph, CONFIG).pairs()

    rows = {r["call_id"]: r for r in pairs.rows()}
    assert rows["c-ok"]["status"] == "success" and rows["c-ok"]["valid"]
    assert rows["c-bad"]["status"] == "error" and not rows["c-bad"]["valid"]
    assert rows["c-ok"]["duration_source"] == "recorded"
    assert rows["c-bad"]["error_kind"] is not None
    text = str(pairs)
    assert "error*" in text and "* an invalid tool call" in text


def test_an_interrupt_shows_in_the_timeline(sqlite_db: tuple[SqliteSaver, str]) -> None:
    saver, _ = sqlite_db

    def ask(state: AgentState) -> dict[str, Any]:
        answer = interrupt("approve sending the email?")
        return {"messages": [("assistant", f"approved: {answer}")]}

    b: StateGraph[Any, Any, Any, Any] = StateGraph(AgentState)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    graph = b.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "send it")]}, CONFIG)  # type: ignore[arg-type]

    waiting = inspect.thread(graph, CONFIG)
    assert waiting.head.interrupts == ("approve sending the email?",)
    assert "⚠ interrupt: approve sending the email?" in str(waiting.timeline())

    graph.invoke(Command(resume="yes"), CONFIG)  # type: ignore[arg-type]
    done = inspect.thread(graph, CONFIG)
    assert done.head.messages[-1].content == "approved: yes"
    assert [r.checkpoint_id for r in done.records if r.interrupts] == [waiting.head.checkpoint_id]
