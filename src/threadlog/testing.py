"""Stored threads as regression tests in your own pytest suite.

    from threadlog.testing import assert_replays, stored_threads

    @pytest.mark.parametrize("thread_id", stored_threads("tests/threads.db"))
    def test_agent_still_answers_like_before(thread_id):
        assert_replays(build_graph(), "tests/threads.db", thread_id)

Contract: `assert_replays(graph, source, thread_id, turns=None, model="stored",
tools="stored")` replays the thread (`threadlog.check.replay.replay`) and returns the
report, or raises `AssertionError` whose message is the report unless every turn matches.
`stored_threads(source)` lists a database's thread ids, newest first, read-only.
"""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

from threadlog.check.replay import ModelMode, ReplayReport, ToolsMode, replay

__all__ = ["assert_replays", "stored_threads"]


class ReplayOptions(TypedDict, total=False):
    turns: str | range | None
    model: ModelMode
    tools: ToolsMode


def assert_replays(
    graph: Any, source: Any, thread_id: str, **options: Unpack[ReplayOptions]
) -> ReplayReport:
    """Replay `thread_id` of `source` through `graph`; AssertionError unless all match."""
    report = replay(graph, source, thread_id, **options)
    if not report.matched:
        raise AssertionError(f"thread {thread_id!r} no longer replays:\n{report}")
    return report


def stored_threads(source: Any) -> list[str]:
    """The thread ids of `source` (a database URL or path, or a saver), newest first."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from threadlog.inspect.catalog import thread_heads
    from threadlog.inspect.readonly import open_readonly

    if isinstance(source, BaseCheckpointSaver):
        return [h.thread_id for h in thread_heads(source)]
    with open_readonly(source) as saver:
        return [h.thread_id for h in thread_heads(saver)]
