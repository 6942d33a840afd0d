"""A copy is a thread of its own: `copy_thread` of a thread paused before its tools (an
approval, or `interrupt_before=["tools"]`), then both threads resumed in either order —
also after a prune or a rollback of one of them — reads back through the same saver and
a fresh one (a new process's memory), each tool call ran once per thread, and `check`
finds both clean. A copy keeps its source's checkpoint ids, so anything remembered by
checkpoint id alone would mix the two threads' writes. SQLite and Postgres.

And `check` verifies what readers verify: a thread its readers refuse
(`StoredDataError`) is never called clean."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.types import Command

import threadlog
from threadlog.cli import main
from threadlog.inspect import check
from threadlog.log.pairing import open_calls

ran: Counter[str] = Counter()


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    ran[city] += 1
    return f"{city}: sunny"


def _cfg(tid: str, run: str | None = None) -> Any:
    cfg: Any = {"configurable": {"thread_id": tid}}
    if run is not None:
        cfg["metadata"] = {"run_id": run}
    return cfg


def _agent(saver: Any, pause: str) -> Any:
    approval = ["get_weather"] if pause == "approval" else []
    return threadlog.create_agent(
        threadlog.OfflineChatModel(), [get_weather], checkpointer=saver, requires_approval=approval
    )


def _ask(app: Any, pause: str, tid: str, question: str, run: str) -> None:
    """One user turn that stops before its tool runs."""
    extra = {"interrupt_before": ["tools"]} if pause == "interrupt_before" else {}
    app.invoke(
        {"messages": [{"role": "user", "content": question, "id": f"u-{run}"}]},
        _cfg(tid, run),
        **extra,
    )
    assert app.get_state(_cfg(tid)).next == ("tools",)


def _resume(app: Any, pause: str, tid: str, run: str) -> None:
    value = Command(resume={"action": "approve"}) if pause == "approval" else None
    app.invoke(value, _cfg(tid, run))
    assert not app.get_state(_cfg(tid)).next


def _history(app: Any, tid: str) -> list[tuple[str, str]]:
    messages = app.get_state(_cfg(tid)).values["messages"]
    assert not open_calls(messages)
    return [(type(m).__name__, str(m.content)) for m in messages]


def _reads_back(url: str, saver: Any, pause: str, threads: dict[str, list[Any]]) -> None:
    """Every thread reads back whole through `saver`, a fresh saver, and `check`."""
    app = _agent(saver, pause)
    for tid, want in threads.items():
        assert _history(app, tid) == want, tid
    with threadlog.checkpointer(url) as cold:
        cold_app = _agent(cold, pause)
        for tid, want in threads.items():
            assert _history(cold_app, tid) == want, tid
    report = check(url, threads=list(threads))
    assert report.tally.unreadable == 0 and report.status == 0, report.results


EXPECTED_TURN = [
    ("HumanMessage", "Paris?"),
    ("AIMessage", ""),
    ("ToolMessage", "Paris: sunny"),
]


@pytest.mark.parametrize("pause", ["approval", "interrupt_before"])
@pytest.mark.parametrize("first", ["source", "copy"])
def test_a_copy_of_a_thread_paused_before_its_tools_and_its_source_both_resume_and_read_back(
    backend: str, pause: str, first: str
) -> None:
    ran.clear()
    with threadlog.checkpointer(backend) as saver:
        app = _agent(saver, pause)
        _ask(app, pause, "src", "Paris?", "r0")
        saver.copy_thread("src", "copy")
        order = ["src", "copy"] if first == "source" else ["copy", "src"]
        for i, tid in enumerate(order):
            _resume(app, pause, tid, f"r{i + 1}")
        assert ran == Counter({"Paris": 2})  # once per thread
        want = _history(app, order[0])
        assert want[:3] == EXPECTED_TURN
        _reads_back(backend, saver, pause, {"src": want, "copy": want})
        # and both go on, each its own thread
        for tid in order:
            _ask(app, pause, tid, "Tokyo?", f"{tid}-r3")
            _resume(app, pause, tid, f"{tid}-r4")
        assert ran == Counter({"Paris": 2, "Tokyo": 2})
        _reads_back(backend, saver, pause, {t: _history(app, t) for t in order})


@pytest.mark.parametrize("first", ["source", "copy"])
def test_a_pruned_copy_of_a_paused_thread_and_its_source_both_resume_and_read_back(
    backend: str, first: str
) -> None:
    ran.clear()
    with threadlog.checkpointer(backend) as saver:
        app = _agent(saver, "approval")
        app.invoke({"messages": [{"role": "user", "content": "Tokyo?", "id": "u0"}]}, _cfg("src"))
        _resume(app, "approval", "src", "r0")
        _ask(app, "approval", "src", "Paris?", "r1")
        saver.copy_thread("src", "copy")
        saver.prune(["copy"], strategy="keep_latest")  # the copy's head is rewritten
        assert len(list(saver.list(_cfg("copy")))) == 1
        order = ["src", "copy"] if first == "source" else ["copy", "src"]
        for i, tid in enumerate(order):
            _resume(app, "approval", tid, f"r{i + 2}")
        assert ran == Counter({"Tokyo": 1, "Paris": 2})
        want = _history(app, "src")
        assert want[4:7] == EXPECTED_TURN  # after the Tokyo turn
        _reads_back(backend, saver, "approval", {"src": want, "copy": want})


@pytest.mark.parametrize("first", ["source", "copy"])
def test_a_rollback_on_the_source_of_a_copy_then_resumes_on_both_read_back(
    backend: str, first: str
) -> None:
    ran.clear()
    with threadlog.checkpointer(backend) as saver:
        app = _agent(saver, "approval")
        _ask(app, "approval", "src", "Paris?", "r1")
        saver.copy_thread("src", "copy")
        _resume(app, "approval", "src", "r2")
        _ask(app, "approval", "src", "London?", "r3")
        _resume(app, "approval", "src", "r3")
        # r2 goes; r3's checkpoints, built on it, are re-parented and re-sealed
        saver.delete_for_runs(["r2"])
        order = ["src", "copy"] if first == "source" else ["copy", "src"]
        for tid in order:
            if tid == "copy":
                _resume(app, "approval", "copy", "r4")
            else:
                _ask(app, "approval", "src", "Tokyo?", "r5")
                _resume(app, "approval", "src", "r5")
        assert ran == Counter({"Paris": 2, "London": 1, "Tokyo": 1})
        want = {"src": _history(app, "src"), "copy": _history(app, "copy")}
        assert want["copy"][:3] == want["src"][:3] == EXPECTED_TURN
        _reads_back(backend, saver, "approval", want)


def test_check_calls_a_thread_its_readers_refuse_unreadable_never_clean(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    url = f"sqlite:///{path}"
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver, "none")
        for tid in ("good", "tampered"):
            for i, q in enumerate(["Beijing?", "Paris?", "Tokyo?"]):
                app.invoke({"messages": [{"role": "user", "content": q, "id": f"u{i}"}]}, _cfg(tid))
    # Delete one turn's user message row: the history still pairs, but it is not what
    # was written, and readers say so.
    conn = sqlite3.connect(path)
    with conn:
        (row,) = conn.execute(
            "SELECT checkpoint_id, task_id, idx FROM writes WHERE thread_id = 'tampered' "
            "AND channel = 'messages' AND instr(value, 'Paris?') > 0"
        ).fetchall()
        conn.execute(
            "DELETE FROM writes WHERE thread_id = 'tampered' AND checkpoint_id = ? "
            "AND task_id = ? AND idx = ?",
            row,
        )
    conn.close()
    with threadlog.checkpointer(url) as saver, pytest.raises(threadlog.StoredDataError):
        _agent(saver, "none").get_state(_cfg("tampered"))
    report = check(url)
    assert [r.thread_id for r in report.results] == ["tampered"]
    assert report.results[0].error and "StoredDataError" in report.results[0].error
    assert report.tally.clean == 1 and report.status != 0


def test_the_check_command_exits_non_zero_naming_a_thread_its_readers_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.db"
    url = f"sqlite:///{path}"
    with threadlog.checkpointer(url) as saver:
        app = _agent(saver, "none")
        for i, q in enumerate(["Beijing?", "Paris?"]):
            app.invoke({"messages": [{"role": "user", "content": q, "id": f"u{i}"}]}, _cfg("t1"))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "DELETE FROM writes WHERE thread_id = 't1' AND channel = 'messages' "
            "AND instr(value, 'Beijing?') > 0"
        )
    conn.close()
    status = main(["check", "--db", str(path)])
    out = capsys.readouterr().out
    assert status != 0
    assert "t1" in out and "StoredDataError" in out and " 0 clean" in out
