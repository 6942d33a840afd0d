"""`threadlog check` (and `--repair`) on Postgres behind a table lock another connection
holds: one line naming the wait, exit 2, within `--lock-timeout` — never a hang."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
from langchain_core.messages import HumanMessage

import threadlog
from threadlog.cli import main
from threadlog.examples.weather import build_graph


@pytest.fixture
def locked(pg_backend: str) -> Iterator[str]:
    with threadlog.checkpointer(pg_backend) as saver:
        build_graph(checkpointer=saver).invoke(
            {"messages": [HumanMessage("Paris?")]}, {"configurable": {"thread_id": "t"}}
        )
    with psycopg.Connection.connect(pg_backend) as holder:
        holder.execute("LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE")
        yield pg_backend
        holder.rollback()


@pytest.mark.parametrize("extra", [[], ["--json"], ["--repair"], ["--repair", "--dry-run"]])
def test_a_table_lock_is_one_line_and_exit_2_within_the_lock_timeout(
    locked: str, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    started = time.monotonic()
    code = main(["check", "--db", locked, "--lock-timeout", "1", *extra])
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert "another connection holds a lock" in err and "gave up after 1s" in err
    assert took < 8


@pytest.fixture
def unrouted(pg_backend: str) -> str:
    from tests.helpers.poisoned import CITY_Q, unrouted_chat

    with threadlog.checkpointer(pg_backend) as saver:
        unrouted_chat(threadlog.MessagesState, saver).invoke(
            {"messages": [HumanMessage(CITY_Q, id="q1")]}, {"configurable": {"thread_id": "u"}}
        )
    return pg_backend


def test_a_repair_behind_a_write_lock_is_one_line_and_exit_2_with_nothing_written(
    unrouted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.poisoned import snapshot

    before = snapshot(unrouted)
    # EXCLUSIVE lets the plan's reads through and stops only the repair's writes.
    with psycopg.Connection.connect(unrouted) as holder:
        holder.execute("LOCK TABLE checkpoints IN EXCLUSIVE MODE")
        started = time.monotonic()
        code = main(["check", "--db", unrouted, "--repair", "--lock-timeout", "1"])
        took = time.monotonic() - started
        holder.rollback()
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert "another connection holds a lock" in err and "--lock-timeout 1s" in err, err
    assert "nothing was written to it" in err, err
    assert took < 8
    assert snapshot(unrouted) == before
    assert main(["check", "--db", unrouted, "--repair", "--lock-timeout", "1"]) == 0
    assert "repaired 1 thread(s)" in capsys.readouterr().out
    assert main(["check", "--db", unrouted]) == 0
