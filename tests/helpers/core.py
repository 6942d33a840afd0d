"""Shared checks for the core tests: the structural invariants every message log keeps."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.log.messages import calls_of, digest


def assert_log_invariants(log: Sequence[BaseMessage]) -> None:
    """Unique ids; each result once per call, right after its request and that
    request's earlier results (so results of one request form one block, in call order)."""
    ids = [m.id for m in log]
    assert all(isinstance(i, str) and i for i in ids), ids
    assert len(set(ids)) == len(ids), f"duplicate ids in {ids}"
    call_owner: dict[str, tuple[int, int]] = {}  # call id -> (ai position, call index)
    answered: set[str] = set()
    last_index: dict[int, int] = {}  # ai position -> index of its last result so far
    for pos, m in enumerate(log):
        if isinstance(m, AIMessage):
            for i, call in enumerate(calls_of(m)):
                cid = call["id"]
                assert cid and cid not in call_owner, f"call id {cid!r} reused at {pos}"
                call_owner[cid] = (pos, i)
        if isinstance(m, ToolMessage):
            cid = m.tool_call_id
            assert cid in call_owner, f"result {m.id!r} at {pos} answers no earlier call"
            assert cid not in answered, f"second result for {cid!r} at {pos}"
            answered.add(cid)
            ai_pos, index = call_owner[cid]
            assert index > last_index.get(ai_pos, -1), f"result {m.id!r} out of call order"
            last_index[ai_pos] = index
            prev = log[pos - 1]
            assert prev.id == log[ai_pos].id or (
                isinstance(prev, ToolMessage) and call_owner[prev.tool_call_id][0] == ai_pos
            ), f"result {m.id!r} at {pos} is not in its request's block"


def shape(log: Sequence[BaseMessage]) -> list[tuple[str | None, str]]:
    """What two logs must agree on to be the same log: ids and model-visible digests."""
    return [(m.id, digest(m)) for m in log]
