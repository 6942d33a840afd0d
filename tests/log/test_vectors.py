"""Every JSON vector in reducers/ holds for the pure reducer and for the channel.

Each vector is run four ways, which must agree (see reducers/README.md):
  1. `append_messages`, one write at a time;
  2. `append_messages` with all writes concatenated into one (batching invariance);
  3. `MessageLogChannel.update`, one call per step (each write is one task's);
  4. `MessageLogChannel.replay_writes` of all writes at once (how a thread is read back).
"""

from __future__ import annotations

import copy
import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot

import threadlog.errors as errors
from tests.helpers.core import assert_log_invariants, shape
from threadlog import MessageLogChannel, MessageLogError, append_messages
from threadlog.log import MessageLog, flatten_write
from threadlog.log.messages import calls_of, coerce_message, role_of

VECTOR_DIR = Path(__file__).resolve().parents[2] / "reducers"


def _load() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(VECTOR_DIR.glob("*.json")):
        for vector in json.loads(path.read_text(encoding="utf-8"))["vectors"]:
            out.append((f"{path.stem}/{vector['name']}", vector))
    return out


VECTORS = _load()


def _initial(vector: dict[str, Any]) -> list[BaseMessage]:
    raw = copy.deepcopy(vector["initial"])
    return MessageLog(coerce_message(m, position=i) for i, m in enumerate(raw)).messages


def _check_log(log: list[BaseMessage], expected: list[dict[str, Any]]) -> None:
    assert len(log) == len(expected), [(m.id, role_of(m)) for m in log]
    for pos, (m, want) in enumerate(zip(log, expected, strict=True)):
        where = f"position {pos}: {m!r}"
        if "id" in want:
            assert m.id is not None and fnmatch.fnmatchcase(m.id, want["id"]), where
        if "role" in want:
            assert role_of(m) == want["role"], where
        if "type" in want:
            assert m.type == want["type"], where
        if "content" in want:
            assert m.content == want["content"], where
        if "name" in want:
            assert m.name == want["name"], where
        if "tool_call_id" in want:
            assert getattr(m, "tool_call_id", None) == want["tool_call_id"], where
        if "status" in want:
            assert getattr(m, "status", None) == want["status"], where
        if "tool_call_ids" in want:
            assert [c["id"] for c in calls_of(m)] == want["tool_call_ids"], where
    assert_log_invariants(log)


def _check_error(exc: BaseException, vector: dict[str, Any]) -> None:
    expect = vector["expect"]
    assert type(exc).__name__ == expect["error"], repr(exc)
    for text in expect.get("message_contains", []):
        assert text in str(exc), f"{text!r} not in {exc}"


def _error_step(vector: dict[str, Any]) -> int | None:
    return vector["expect"].get("step") if "error" in vector["expect"] else None


def _is_parallel(vector: dict[str, Any]) -> bool:
    return vector["expect"].get("error") == "ParallelWriteError"


def _kept_steps(vector: dict[str, Any]) -> list[list[Any]]:
    """The steps whose writes a checkpoint would hold: a failed step is never stored."""
    steps: list[list[Any]] = copy.deepcopy(vector["steps"])
    k = _error_step(vector)
    if k is None or _is_parallel(vector):
        return steps
    if "then" in vector["expect"]:
        return steps[:k] + steps[k + 1 :]
    return steps[: k + 1]  # includes the failing step: replaying it must fail the same way


def _final_expectation(vector: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    """(error class or None, expected log) for the one-batch paths (2 and 4)."""
    expect = vector["expect"]
    if "error" not in expect:
        return None, expect["log"]
    if _is_parallel(vector):
        return None, expect["reducer_log"]
    if "then" in expect:
        return None, expect["then"]["log"]
    return expect["error"], expect["log"]


@pytest.fixture(params=[v for _, v in VECTORS], ids=[n for n, _ in VECTORS])
def vector(request: pytest.FixtureRequest) -> dict[str, Any]:
    return request.param  # type: ignore[no-any-return]


def test_there_are_at_least_40_vectors_covering_every_error_class() -> None:
    assert len(VECTORS) >= 40
    raised = {v["expect"].get("error") for _, v in VECTORS}
    for cls in (
        errors.InvalidMessageError,
        errors.ConflictingIdError,
        errors.ToolPairingError,
        errors.AppendOnlyError,
        errors.ParallelWriteError,
    ):
        assert cls.__name__ in raised
    assert len({n for n, _ in VECTORS}) == len(VECTORS), "vector names must be unique"


def _run_reducer(vector: dict[str, Any]) -> tuple[list[BaseMessage], list[tuple[int, Exception]]]:
    state = _initial(vector)
    before_all = shape(state)
    failures: list[tuple[int, Exception]] = []
    for k, step in enumerate(copy.deepcopy(vector["steps"])):
        start = state
        try:
            for write in step:
                state = append_messages(state, write)
        except MessageLogError as exc:
            failures.append((k, exc))
            state = start
            if "then" not in vector["expect"]:
                break
    assert shape(_initial(vector)) == before_all
    return state, failures


def test_pure_reducer_one_write_at_a_time(vector: dict[str, Any]) -> None:
    left = _initial(vector)
    left_before = shape(left)
    log, failures = _run_reducer(vector)
    assert shape(left) == left_before, "the reducer must not change its input"
    expect = vector["expect"]
    if "error" not in expect or _is_parallel(vector):
        # ParallelWriteError needs the per-task grouping only the channel sees.
        assert not failures, failures
        _check_log(log, expect["log"] if "error" not in expect else expect["reducer_log"])
        return
    assert failures, "expected an error"
    step, exc = failures[0]
    assert step == expect["step"]
    _check_error(exc, vector)
    if "then" in expect:
        _check_log(log, expect["then"]["log"])


def test_pure_reducer_all_writes_as_one_batch(vector: dict[str, Any]) -> None:
    error, expected = _final_expectation(vector)
    flat = [item for step in _kept_steps(vector) for w in step for item in flatten_write(w)]
    if error is None:
        _check_log(append_messages(_initial(vector), flat), expected)
        # ...and it is the very log the one-write-at-a-time path builds.
        if "then" not in vector["expect"] and not _is_parallel(vector):
            assert shape(append_messages(_initial(vector), flat)) == shape(_run_reducer(vector)[0])
    else:
        with pytest.raises(MessageLogError) as info:
            append_messages(_initial(vector), flat)
        _check_error(info.value, vector)


def _channel(vector: dict[str, Any]) -> MessageLogChannel:
    return MessageLogChannel().from_checkpoint(_DeltaSnapshot(_initial(vector)))


def _run_channel(vector: dict[str, Any]) -> MessageLogChannel:
    ch = _channel(vector)
    expect = vector["expect"]
    for k, step in enumerate(copy.deepcopy(vector["steps"])):
        if k == _error_step(vector):
            before = shape(ch.get())
            with pytest.raises(MessageLogError) as info:
                ch.update(step)
            _check_error(info.value, vector)
            assert shape(ch.get()) == before, "a failed step must leave the channel as it was"
            _check_log(ch.get(), expect["log"])
            if "then" not in expect:
                return ch
        else:
            assert ch.update(step)
    return ch


def test_channel_update_per_step(vector: dict[str, Any]) -> None:
    ch = _run_channel(vector)
    expect = vector["expect"]
    if "error" not in expect:
        _check_log(ch.get(), expect["log"])
    elif "then" in expect:
        _check_log(ch.get(), expect["then"]["log"])
    # Deterministic: a second run builds the identical log, ids included.
    assert shape(_run_channel(vector).get()) == shape(ch.get())
    if "error" not in expect:
        assert shape(ch.get()) == shape(_run_reducer(vector)[0])


def test_channel_replay_of_all_writes_at_once(vector: dict[str, Any]) -> None:
    error, expected = _final_expectation(vector)
    writes = [("task", "messages", w) for step in _kept_steps(vector) for w in step]
    ch = _channel(vector)
    if error is None:
        ch.replay_writes(writes)
        _check_log(ch.get(), expected)
        if "error" not in vector["expect"]:
            assert shape(ch.get()) == shape(_run_channel(vector).get())
    else:
        with pytest.raises(MessageLogError) as info:
            ch.replay_writes(writes)
        _check_error(info.value, vector)
