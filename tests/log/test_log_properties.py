"""Property tests: random sequences of writes keep the log's invariants or fail cleanly.

Writes are drawn from a small universe so that collisions are frequent: three AIMessages
owning six call ids, results for those calls (two variants each, so a second variant is a
duplicate), re-sent messages (replays), same id with other content (conflicts), orphan
results, reused call ids and id-less strings.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from tests.helpers.core import assert_log_invariants, shape
from threadlog import MessageLogChannel, MessageLogError, ParallelWriteError, append_messages

CALLS = {"a0": ["c0", "c1"], "a1": ["c2", "c3", "c4"], "a2": ["c5"]}
OWNER = {c: a for a, cs in CALLS.items() for c in cs}

ITEM = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 3)),
    st.tuples(st.just("user-conflict"), st.integers(0, 3)),
    st.tuples(st.just("ai"), st.sampled_from(sorted(CALLS))),
    st.tuples(st.just("ai-conflict"), st.sampled_from(sorted(CALLS))),
    st.tuples(st.just("result"), st.sampled_from(sorted(OWNER)), st.integers(0, 1)),
    st.tuples(st.just("result"), st.sampled_from(sorted(OWNER)), st.just(0)),
    st.tuples(st.just("text"), st.sampled_from(["yes", "no"])),
    st.tuples(st.just("orphan")),
    st.tuples(st.just("reuse")),
)


def make(item: tuple[Any, ...]) -> Any:
    """A fresh message-like for an item (fresh objects: the log must not rely on identity)."""
    kind = item[0]
    if kind == "user":
        return HumanMessage(f"question {item[1]}", id=f"u{item[1]}")
    if kind == "user-conflict":
        return {"role": "user", "content": "edited", "id": f"u{item[1]}"}
    if kind in ("ai", "ai-conflict"):
        calls = [{"name": "f", "args": {"c": c}, "id": c} for c in CALLS[item[1]]]
        if kind == "ai-conflict":
            calls = calls[::-1]
        return AIMessage("", id=item[1], tool_calls=calls)
    if kind == "result":
        return ToolMessage(f"result {item[1]}", id=f"t{item[1]}-{item[2]}", tool_call_id=item[1])
    if kind == "text":
        return item[1]
    if kind == "orphan":
        return {"role": "tool", "content": "?", "id": "orphan", "tool_call_id": "nowhere"}
    return AIMessage("", id="ax", tool_calls=[{"name": "f", "args": {}, "id": "c0"}])


ITEMS = st.lists(ITEM, max_size=8)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _apply(state: list[BaseMessage], items: list[Any]) -> list[BaseMessage] | str:
    """The log after appending, or the error class name."""
    try:
        return append_messages(state, [make(i) for i in items])
    except MessageLogError as exc:
        assert str(exc)  # always a message
        return type(exc).__name__


@SETTINGS
@given(writes=st.lists(ITEMS, max_size=8))
def test_every_write_keeps_the_invariants_or_fails_changing_nothing(
    writes: list[list[Any]],
) -> None:
    state: list[BaseMessage] = []
    for items in writes:
        before = shape(state)
        out = _apply(state, items)
        assert shape(state) == before  # the input list is never changed
        if isinstance(out, str):
            continue
        assert_log_invariants(out)
        # Append-only: what was there keeps its relative order and content.
        old = {mid for mid, _ in before}
        assert [s for s in shape(out) if s[0] in old] == before
        state = out


@SETTINGS
@given(prefix=st.lists(ITEMS, max_size=4), xs=ITEMS, ys=ITEMS)
def test_batching_invariance_including_the_error(
    prefix: list[list[Any]], xs: list[Any], ys: list[Any]
) -> None:
    state: list[BaseMessage] = []
    for items in prefix:
        out = _apply(state, items)
        state = out if isinstance(out, list) else state
    first = _apply(state, xs)
    two_steps = first if isinstance(first, str) else _apply(first, ys)
    one_step = _apply(state, xs + ys)
    if isinstance(one_step, str):
        assert two_steps == one_step
    else:
        assert isinstance(two_steps, list) and shape(two_steps) == shape(one_step)


STEP = st.lists(ITEMS, min_size=1, max_size=3)  # one write per task


@SETTINGS
@given(steps=st.lists(STEP, max_size=6))
def test_channel_steps_equal_a_replay_of_the_accepted_writes(
    steps: list[list[list[Any]]],
) -> None:
    ch = MessageLogChannel().from_checkpoint(None)
    accepted: list[Any] = []
    for step in steps:
        before = shape(ch.get())
        writes = [[make(i) for i in items] for items in step]
        try:
            ch.update(writes)
        except ParallelWriteError:
            assert shape(ch.get()) == before
            # Refused only when two writers each added a new non-tool message; the
            # same writes from one writer are a valid batch.
            single = append_messages(ch.get(), [m for w in writes for m in w])
            assert len(single) > len(before)
            continue
        except MessageLogError:
            assert shape(ch.get()) == before
            continue
        assert_log_invariants(ch.get())
        accepted.extend(writes)
    # Reading the thread back replays the stored writes: the same log, ids included.
    replayed = MessageLogChannel().from_checkpoint(_DeltaSnapshot([]))
    replayed.replay_writes([("task", "messages", w) for w in accepted])
    assert shape(replayed.get()) == shape(ch.get())
    # ...and so does the pure reducer applied write by write.
    state: list[BaseMessage] = []
    for w in accepted:
        state = append_messages(state, w)
    assert shape(state) == shape(ch.get())


def _step(ch: MessageLogChannel, step: list[list[Any]]) -> list[list[Any]] | None:
    """Apply one step; the writes if accepted, None if refused (and then nothing changed)."""
    before = shape(ch.get())
    writes = [[make(i) for i in items] for items in step]
    try:
        ch.update(writes)
    except MessageLogError:
        assert shape(ch.get()) == before
        return None
    return writes


def _rebuilt(writes: list[list[Any]]) -> list[tuple[str | None, str]]:
    fresh = MessageLogChannel().from_checkpoint(None)
    fresh.replay_writes([("task", "messages", w) for w in writes])
    return shape(fresh.get())


@SETTINGS
@given(data=st.data(), trunk=st.lists(STEP, max_size=5), branch=st.lists(STEP, max_size=4))
def test_copies_of_a_channel_are_independent_forks(
    data: st.DataObject, trunk: list[list[list[Any]]], branch: list[list[list[Any]]]
) -> None:
    # LangGraph copies channels for every checkpoint and task read; a fork (resuming an
    # old checkpoint) writes to a copy. No copy may ever see another's writes.
    ch = MessageLogChannel().from_checkpoint(None)
    accepted: list[list[Any]] = []
    snapshots = [(ch.copy(), shape(ch.get()), list(accepted))]
    for step in trunk:
        writes = _step(ch, step)
        if writes is not None:
            accepted.extend(writes)
        snapshots.append((ch.copy(), shape(ch.get()), list(accepted)))
    trunk_log = shape(ch.get())
    snap, fork_start, fork_writes = snapshots[
        data.draw(st.integers(0, len(snapshots) - 1), label="fork at")
    ]
    fork = snap.copy()
    assert shape(fork.get()) == fork_start
    for step in branch:
        writes = _step(fork, step)
        if writes is not None:
            fork_writes = [*fork_writes, *writes]
    assert shape(fork.get()) == _rebuilt(fork_writes)
    assert shape(ch.get()) == trunk_log == _rebuilt(accepted)
    for snap, seen, _ in snapshots:
        assert shape(snap.get()) == seen


# -- replay survives the checkpoint serializer ------------------------------------

JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
CONTENT = st.text(max_size=30) | st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=20)),
        st.builds(
            lambda u: {"type": "image", "url": f"https://x.test/{u}.png"}, st.text(max_size=8)
        ),
        st.builds(lambda r: {"type": "reasoning", "reasoning": r}, st.text(max_size=20)),
    ),
    max_size=3,
)


@st.composite
def turns(draw: st.DrawFn) -> list[BaseMessage]:
    """A valid log: user, an AI with random calls, their results (any order), an answer."""
    n = draw(st.integers(0, 3))
    calls = [
        {
            "name": draw(st.sampled_from(["f", "get_weather"])),
            "args": draw(st.dictionaries(st.text(max_size=6), JSONISH, max_size=3)),
            "id": f"call-{i}",
        }
        for i in range(n)
    ]
    order = draw(st.permutations(range(n)))
    return [
        HumanMessage(draw(CONTENT), id="u", name=draw(st.none() | st.just("alice"))),
        AIMessage(draw(CONTENT), id="a", tool_calls=calls),
        *[
            ToolMessage(
                draw(CONTENT),
                tool_call_id=f"call-{i}",
                id=f"t{i}",
                status=draw(st.sampled_from(["success", "error"])),
            )
            for i in order
        ],
        AIMessage(draw(CONTENT), id="z"),
    ]


@settings(max_examples=100, deadline=None)
@given(log=turns())
def test_messages_read_back_through_the_checkpoint_serializer_replay(
    log: list[BaseMessage],
) -> None:

    serde = JsonPlusSerializer()
    stored = append_messages([], log)
    assert_log_invariants(stored)
    read_back = [serde.loads_typed(serde.dumps_typed(m)) for m in stored]
    assert shape(read_back) == shape(stored)
    # Re-sending everything read back is a replay: nothing is added, nothing conflicts.
    assert shape(append_messages(stored, read_back)) == shape(stored)
