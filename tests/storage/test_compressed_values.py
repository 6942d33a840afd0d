"""Stored msgpack values are deflated (`threadlog.checkpoint.compression`): a multi-agent
thread stores its write values in well under their msgpack size, every checkpoint of
every namespace reads back as before, and a thread written before the format (plain
msgpack rows, as main stored them) reads the same and goes on, its `threadlog check`
clean; SQLite and Postgres."""

from __future__ import annotations

import contextlib
import sqlite3
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

import threadlog
import threadlog.checkpoint.serde as serde_module
from scripts.kill_multi_agent import _check, build, snapshot
from threadlog._upstream import CONFIG_KEY_RUNTIME
from threadlog.checkpoint.compression import TAG, pack, unpack
from threadlog.checkpoint.serde import strict_serializer
from threadlog.errors import StoredDataError


def _ask(graph: Any, first: int, last: int) -> None:
    for turn in range(first, last):
        message = HumanMessage(f"question {turn}", id=f"u{turn}")
        graph.invoke({"messages": [message]}, {"configurable": {"thread_id": "t"}})


def _rows(url: str) -> list[tuple[str, str, bytes]]:
    """(table, type tag, value) of every stored write and blob."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url[len("sqlite:///") :])) as con:
            rows = con.execute("SELECT type, value FROM writes").fetchall()
            return [("writes", t, bytes(v)) for t, v in rows]
    import psycopg

    with psycopg.connect(url) as con:
        return [
            (table, t, bytes(v))
            for table in ("checkpoint_writes", "checkpoint_blobs")
            for t, v in con.execute(f"SELECT type, blob FROM {table} WHERE blob IS NOT NULL")
        ]


def _reads(url: str) -> dict[str, Any]:
    with threadlog.checkpointer(url) as saver:
        return snapshot(build("swarm", saver), saver, "t")


def test_a_swarm_thread_stores_its_values_deflated_in_well_under_their_msgpack_size(
    backend: str,
) -> None:
    with threadlog.checkpointer(backend) as saver:
        _ask(build("swarm", saver), 0, 4)
    rows = _rows(backend)
    tags = Counter(t for _, t, _ in rows)
    assert tags[TAG] > 0 and set(tags) <= {TAG, "msgpack", "empty", "null"}
    stored = sum(len(v) for _, t, v in rows if t == TAG)
    inflated = sum(len(unpack(t, v)[1]) for _, t, v in rows if t == TAG)
    assert stored < 0.7 * inflated


def test_a_thread_written_before_values_were_deflated_reads_the_same_and_goes_on(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old_format:
        old_format.setattr(serde_module, "pack", lambda kind, data: (kind, data))
        with threadlog.checkpointer(backend) as saver:
            _ask(build("swarm", saver), 0, 3)
        before = _reads(backend)
    assert TAG not in {t for _, t, _ in _rows(backend)}  # main's rows, plain msgpack
    assert _reads(backend) == before
    assert _check(backend, "t") == ""
    with threadlog.checkpointer(backend) as saver:
        _ask(build("swarm", saver), 3, 5)
    tags = {t for _, t, _ in _rows(backend)}
    assert {"msgpack", TAG} <= tags  # both formats in one thread
    after = _reads(backend)
    assert {k: v for k, v in after.items() if k in before} == before
    assert len(after) > len(before)
    with threadlog.checkpointer(backend, cache=False) as saver:
        assert snapshot(build("swarm", saver), saver, "t") == after
    assert _check(backend, "t") == ""


def test_deflate_keeps_other_tags_short_values_and_encryption_as_they_were() -> None:
    serde = strict_serializer()
    message = AIMessage("details " * 40, id="a1")
    kind, data = serde.dumps_typed(message)
    assert kind == TAG and serde.loads_typed((kind, data)) == message
    assert pack("msgpack", b"\x91\x01") == ("msgpack", b"\x91\x01")  # too short to gain
    assert pack("json", b"x" * 200) == ("json", b"x" * 200)
    assert unpack("msgpack", b"\x91\x01") == ("msgpack", b"\x91\x01")
    assert serde.loads_typed(("msgpack", unpack(kind, data)[1])) == message  # main's rows
    pytest.importorskip("Crypto")
    encrypted = EncryptedSerializer.from_pycryptodome_aes(serde, key=b"k" * 16)
    tag, blob = encrypted.dumps_typed(message)
    assert tag == f"{TAG}+aes" and encrypted.loads_typed((tag, blob)) == message


def test_a_value_that_does_not_inflate_is_one_clear_error() -> None:
    with pytest.raises(StoredDataError, match=TAG):
        strict_serializer().loads_typed((TAG, b"\xff\xfe not deflate"))


def test_a_task_result_rewritten_over_its_old_format_row_is_the_same_result(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A resumed task stores its result again: LangGraph keeps the first row, and the run
    # guard refuses only a *different* result; a plain msgpack row and its deflated
    # rewrite are the same result.
    url = f"sqlite:///{tmp_path / 'g.db'}"
    config = {"configurable": {"thread_id": "t"}}
    result = [AIMessage("details " * 40, id="a1")]
    with threadlog.checkpointer(url) as saver:
        _ask(build("swarm", saver), 0, 1)
        head = saver.get_tuple(config)
        assert head is not None
        # A run's write (a config with a runtime), not update_state's, which replaces.
        at = {"configurable": {**head.config["configurable"], CONFIG_KEY_RUNTIME: object()}}
        with monkeypatch.context() as old_format:
            old_format.setattr(serde_module, "pack", lambda kind, data: (kind, data))
            saver.put_writes(at, [("messages", result)], "a-task")
    with threadlog.checkpointer(url) as saver:
        saver.put_writes(at, [("messages", result)], "a-task")
    with threadlog.checkpointer(url) as saver:
        with pytest.raises(threadlog.ConcurrentRunError, match="different"):
            saver.put_writes(at, [("messages", [AIMessage("x", id="a2")])], "a-task")
