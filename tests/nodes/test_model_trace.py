"""`ModelNode` records each call's latency, wall-clock start, model and context size under
`response_metadata["threadlog"]`; the record survives the checkpoint and feeds the page."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import threadlog
from threadlog import OfflineChatModel, inspect
from threadlog.examples.weather import build_branching_graph


def test_each_model_call_records_latency_model_and_context(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'trace.db'}"
    config = {"configurable": {"thread_id": "w-1"}}
    before = time.time()
    with threadlog.checkpointer(db) as saver:
        graph = build_branching_graph(OfflineChatModel(), saver)
        graph.invoke({"messages": [("user", "北京和上海今天要带伞吗？")]}, config)  # type: ignore[arg-type]
    after = time.time()

    t = inspect.thread(db, "w-1")  # read back from the database: the record was stored
    calls = [m for m in t.head.messages if m.type == "ai"]
    assert len(calls) == 2
    sent = [2, 5]  # system prompt + question; then + the request and its two results
    for m, n in zip(calls, sent, strict=True):
        rec = m.response_metadata["threadlog"]
        started = datetime.fromisoformat(rec["started_at"]).timestamp()
        assert before <= started <= after
        assert 0 <= rec["latency_ms"] <= rec["step_ms"] <= (after - before) * 1000
        assert rec["model"] == m.response_metadata["model_name"]
        assert rec["context_messages"] == n
        assert rec["system_prompt"] and rec["system_prompt"].startswith("tl-system-")
    assert calls[0].response_metadata["threadlog"]["started_at"] < calls[1].response_metadata[
        "threadlog"
    ]["started_at"]

    html = t._repr_html_()
    assert f"{calls[0].response_metadata['threadlog']['latency_ms']:.0f} ms" in html
    assert html.count('class="tl-wf-bar model"') == 2  # both model calls in the waterfall
    assert html.count('class="tl-wf-bar tool"') == 2  # the two parallel tool calls


def test_what_the_model_saw_is_checked_against_what_the_run_recorded(tmp_path: Path) -> None:
    from threadlog.examples.weather import SYSTEM_PROMPT

    db = f"sqlite:///{tmp_path / 'seen.db'}"
    with threadlog.checkpointer(db) as saver:
        graph = build_branching_graph(OfflineChatModel(), saver)
        graph.invoke(
            {"messages": [("user", "北京今天适合带伞吗？")]},  # type: ignore[arg-type]
            {"configurable": {"thread_id": "w-2"}},
        )
    t = inspect.thread(db, "w-2")  # a database: the app's prompt is not known here

    guessed = t.context(-1)
    assert guessed.matches_record is False
    assert any("⚠ the run recorded sending 4 messages" in s for s in guessed.summary())

    given = t.context(-1, system_prompt=SYSTEM_PROMPT)
    assert given.matches_record is True and len(given.context) == 4
    assert any("the run recorded sending 4 messages: the same" in s for s in given.summary())
