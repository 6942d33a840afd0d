"""`threadlog check` / `threadlog.inspect.check`: every poisoned thread found, nothing else,
with the right kinds; `--repair` appends, then a second check is clean; the source of a
check is unchanged (SQLite byte for byte, Postgres row for row)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from tests.helpers.poisoned import (
    NOTES,
    plain_saver,
    plain_threads,
    react_agent,
    snapshot,
    threadlog_threads,
)
from threadlog.cli import main
from threadlog.inspect import check
from threadlog.log.pairing import NOT_COMPLETED, not_completed
from threadlog.providers.problems import find_problems
from threadlog.providers.profiles import PROFILES

ALL = list(PROFILES.values())


def _kinds(report: Any) -> dict[str, set[str]]:
    return {r.thread_id: {p.kind for p in r.problems} for r in report.results}


def _noted(report: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for n in report.noted:
        out.setdefault(n.thread_id, set()).add(n.kind)
    return out


def _expected_problems(expected: dict[str, set[str]]) -> dict[str, set[str]]:
    return {t: k - NOTES for t, k in expected.items() if k - NOTES}


def _expected_notes(expected: dict[str, set[str]]) -> dict[str, set[str]]:
    return {t: k & NOTES for t, k in expected.items() if k & NOTES}


# -- the scan itself, kind by kind ---------------------------------------------------


def _call(cid: str, aid: str, name: str = "get_weather") -> AIMessage:
    return AIMessage("", id=aid, tool_calls=[{"name": name, "args": {}, "id": cid}])


def _found(messages: list[Any], profile: str | None = None) -> list[tuple[str, int, str | None]]:
    profiles = ALL if profile is None else [PROFILES[profile]]
    return [(f.kind, f.position, f.message_id) for f in find_problems(messages, profiles)]


def test_a_call_the_conversation_moved_past_is_an_open_call_and_its_late_result_an_orphan() -> None:
    msgs = [
        HumanMessage("q", id="h"),
        _call("c1", "a1"),
        HumanMessage("again", id="h2"),
        ToolMessage("r", tool_call_id="c1", id="t1"),
    ]
    assert _found(msgs) == [("open_call", 1, "a1"), ("orphan_result", 3, "t1")]


def test_results_before_their_call_duplicates_and_calls_without_ids_are_named() -> None:
    msgs = [
        HumanMessage("q", id="h"),
        ToolMessage("early", tool_call_id="c2", id="t0"),
        _call("c1", "a1"),
        ToolMessage("r", tool_call_id="c1", id="t1"),
        ToolMessage("again", tool_call_id="c1", id="t2"),
        _call("c1", "a2"),
        AIMessage("", id="a3", tool_calls=[{"name": "x", "args": {}, "id": None}]),
        _call("c2", "a4"),
        ToolMessage("r2", tool_call_id="c2", id="t4"),
    ]
    found = _found(msgs)
    assert ("result_before_call", 1, "t0") in found
    assert ("duplicate_result", 4, "t2") in found
    assert ("duplicate_call_id", 5, "a2") in found
    assert ("call_without_id", 6, "a3") in found


def test_late_system_text_and_a_first_assistant_turn_are_rejected_where_a_profile_says() -> None:
    msgs = [
        AIMessage("hello", id="a0"),
        HumanMessage("q", id="h"),
        SystemMessage("late rule", id="s1"),
        AIMessage("ok", id="a1"),
    ]
    rows = {f.kind: f.profiles for f in find_problems(msgs, ALL)}
    assert set(rows) == {"system_out_of_place", "first_not_user"}
    strict = {p.name for p in ALL if not p.system_anywhere}
    assert set(rows["system_out_of_place"]) == strict == {"anthropic", "gemini"}
    assert set(rows["first_not_user"]) == {p.name for p in ALL if p.first_turn_user}
    assert _found(msgs, "openai-chat") == []


def test_empty_content_is_rejected_by_the_user_block_profiles_only() -> None:
    msgs = [HumanMessage("q", id="h"), AIMessage("", id="a0"), HumanMessage("q2", id="h2")]
    (f,) = find_problems(msgs, ALL)
    assert (f.kind, f.position, set(f.profiles)) == ("empty_content", 1, {"anthropic", "gemini"})


def test_a_clean_history_has_no_problem_for_any_profile() -> None:
    msgs = [
        SystemMessage("s", id="s"),
        HumanMessage("q", id="h"),
        _call("c1", "a1"),
        ToolMessage("r", tool_call_id="c1", id="t1"),
        AIMessage("done", id="a2"),
    ]
    assert find_problems(msgs, ALL) == []


# -- real databases ---------------------------------------------------------------


def test_check_finds_exactly_the_poisoned_threadlog_threads_and_reads_only(backend: str) -> None:
    expected = threadlog_threads(backend)
    before = snapshot(backend)
    report = check(backend)
    assert _kinds(report) == _expected_problems(expected)
    assert _noted(report) == _expected_notes(expected)  # paused, stopped: in progress
    assert report.tally.threads == len(expected) and report.status == 1
    assert {p.format for p in report.problems} == {"threadlog"}
    for p in report.problems:  # named like threadlog's errors: the id at the position
        assert p.message_id and p.call_id and p.call_name == "get_weather"
        assert p.profiles == list(PROFILES)
    assert snapshot(backend) == before


def test_check_finds_exactly_the_poisoned_add_messages_threads_and_reads_only(
    backend: str,
) -> None:
    expected = plain_threads(backend)
    before = snapshot(backend)
    report = check(backend, profiles=["openai-chat", "anthropic"])
    assert _kinds(report) == _expected_problems(expected)
    assert _noted(report) == _expected_notes(expected)
    assert {p.format for p in report.problems} == {"add_messages"}
    problems = len(_expected_problems(expected))
    assert report.tally.with_problems == problems
    assert report.tally.clean == len(expected) - problems
    assert snapshot(backend) == before


def test_repair_then_check_is_clean_and_nothing_stored_is_rewritten(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = {**threadlog_threads(backend)}
    plain = plain_threads(backend)
    before = check(backend)
    old_heads = {p.thread_id: p.checkpoint_id for p in before.problems}

    assert main(["check", "--db", backend, "--repair", "--dry-run"]) == 1
    plan = capsys.readouterr().out
    assert "nothing written (--dry-run)" in plan and NOT_COMPLETED in plan
    assert _kinds(check(backend)) == _kinds(before)  # the dry run wrote nothing

    main(["check", "--db", backend, "--repair"])
    out = capsys.readouterr().out
    assert "refused" in out
    after = check(backend)
    left = _kinds(after)
    # Every open call appending can answer is answered; the plain reject is not (its
    # call is followed by the user's message, and add_messages only appends).
    unfixable = {t: k for t, k in _expected_problems(plain).items() if k != {"open_call"}}
    assert left == {**unfixable, "p-rejected": {"open_call"}}
    assert "p-rejected" not in plan or "followed by other messages" in plan
    repaired = {t for t, k in {**expected, **plain}.items() if k == {"open_call"}} - set(left)
    assert repaired == {"tl-unrouted", "p-unrouted"} and all(t in old_heads for t in repaired)
    # A paused or stopped turn's calls are its pending step's to answer: untouched.
    assert _noted(after) == _expected_notes({**expected, **plain})

    import threadlog

    with threadlog.checkpointer(backend) as saver:
        for tid in repaired:
            head = saver.get_tuple({"configurable": {"thread_id": tid}})
            assert head is not None
            event = head.metadata["threadlog_repair"]  # type: ignore[typeddict-item]
            assert event["author"] == "check" and event["kind"] == "not_completed"
            # The old head is the new one's parent, still stored as it was.
            assert head.parent_config is not None
            assert head.parent_config["configurable"]["checkpoint_id"] == old_heads[tid]
    for tid in repaired:
        from threadlog.inspect.export import messages_at

        messages, _ = messages_at(backend, tid)
        request = next(m for m in messages if getattr(m, "tool_calls", None))
        result = messages[messages.index(request) + 1]
        want = not_completed(request.tool_calls[0])
        assert isinstance(result, ToolMessage)
        assert (result.id, result.content, result.status) == (want.id, want.content, want.status)


def test_a_repaired_plain_thread_takes_its_next_turn_in_langgraph(tmp_path: Path) -> None:
    # The app's history, moved to an agent that checks it: an open call is refused
    # before the repair and answered after it.
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    plain_threads(url)
    cfg: Any = {"configurable": {"thread_id": "p-unrouted"}}
    with plain_saver(url) as saver, pytest.raises(ValueError, match="INVALID_CHAT_HISTORY"):
        react_agent(saver).invoke({"messages": [HumanMessage("hello?", id="q9")]}, cfg)
    url2 = f"sqlite:///{tmp_path / 'plain2.db'}"
    plain_threads(url2)
    main(["check", "--db", url2, "--repair", "--thread", "p-unrouted"])
    with plain_saver(url2) as saver:
        out = react_agent(saver).invoke({"messages": [HumanMessage("hello?", id="q9")]}, cfg)
    kinds = [type(m).__name__ for m in out["messages"]]
    assert kinds[:3] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert out["messages"][2].content == NOT_COMPLETED and kinds[-1] == "AIMessage"
    assert check(url2, threads=["p-unrouted"]).problems == []


def test_repair_refuses_a_thread_a_run_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import threadlog

    url = f"sqlite:///{tmp_path / 'tl.db'}"
    threadlog_threads(url)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with threadlog.checkpointer(url) as saver, saver.exclusive("tl-unrouted"):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        status = main(["check", "--db", url, "--repair"])
        out = capsys.readouterr().out
    finally:
        release.set()
        holder.join()
    assert status == 1
    assert "thread tl-unrouted: not repaired: a run holds this thread" in out
    assert "tl-paused" not in out and "tl-crashed" not in out  # in progress: untouched
    assert _kinds(check(url)) == {"tl-unrouted": {"open_call"}}


def test_all_checkpoints_finds_what_an_older_checkpoint_still_holds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tl.db'}"
    threadlog_threads(url)
    main(["check", "--db", url, "--repair", "--thread", "tl-unrouted"])
    assert check(url, threads=["tl-unrouted"]).problems == []
    deep = check(url, threads=["tl-unrouted"], all_checkpoints=True)
    assert {p.kind for p in deep.problems} == {"open_call"}
    assert deep.tally.checkpoints > 1


# -- the command -------------------------------------------------------------------


def test_cli_exit_status_summary_and_json_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    plain_threads(url)
    assert main(["check", "--db", url, "--thread", "p-clean"]) == 0
    assert capsys.readouterr().out.strip().endswith("1 clean, 0 with problems")
    assert main(["check", "--db", url, "--json", "--profile", "anthropic"]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    summary = lines[-1]["summary"]
    assert summary["threads"] == 7 and summary["with_problems"] == 4
    assert summary["by_kind"] == {"open_call": 2, "orphan_result": 2}
    assert summary["notes"] == {"in_progress": 2}  # p-interrupted, p-crashed
    assert {r["thread_id"] for r in lines[:-1]} == {
        "p-rejected",
        "p-trimmed",
        "p-updated",
        "p-unrouted",
    }
    assert all(r["profiles"] == ["anthropic"] for r in lines[:-1])
    repairable = {r["thread_id"] for r in lines[:-1] if r["repairable"]}
    assert repairable == {"p-unrouted"}  # p-rejected: only by rewriting


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--profile", "nope"], "unknown provider profile 'nope'"),
        (["--thread", "ghost"], "no thread 'ghost'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    plain_threads(url)
    assert main(["check", "--db", url, *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_database_that_is_not_langgraphs_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE checkpoints (x)")
    assert main(["check", "--db", str(other)]) == 2
    err = capsys.readouterr().err
    assert "is not a LangGraph checkpoint database" in err and err.count("\n") == 1


def test_stored_text_prints_escaped_and_the_notebook_view_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    with plain_saver(url) as saver:
        from tests.helpers.poisoned import react_agent

        agent = react_agent(saver)
        agent.update_state(
            {"configurable": {"thread_id": "evil\x1b[2J"}},
            {
                "messages": [
                    HumanMessage("q", id="h"),
                    ToolMessage("x", tool_call_id="<b>\x1b]0;t\x07", id="t<i>"),
                ]
            },
        )
    assert main(["check", "--db", url]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J" in out
    html = check(url)._repr_html_()
    assert "<b>\x1b" not in html and "&lt;b&gt;" in html and "t<i>" not in html


def test_repair_through_a_server_url_is_refused_with_where_to_point_instead(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "--db", "http://127.0.0.1:1", "--repair"]) == 2
    err = capsys.readouterr().err
    assert "is a LangGraph server" in err and "pass that as --db" in err


def test_check_of_an_unreachable_server_url_is_exit_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.helpers.demo import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert main(["check", "--db", url]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert f"cannot reach {url}" in captured.err
