"""Approval before execution (issue 3, point 9): `requires_approval` pauses with
`interrupt()` before anything of the step runs; resume approves, edits or rejects; no
call runs twice and none is left without a result. On a real SqliteSaver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from tests.helpers.tools import FINAL, SideEffects, by_call, call, request, scripted_graph, start
from threadlog import ApprovalError, ToolNode, edits_of, original_of, plan_context, validate

effects = SideEffects()


@tool
def lookup(path: str) -> str:
    """Read-only: how big a file is."""
    effects.hit(f"lookup:{path}")
    return f"{path} is 10 kB"


@tool
def delete_file(path: str) -> str:
    """Delete a file (needs a human's approval)."""
    effects.hit(f"delete:{path}")
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def fresh_effects() -> None:
    effects.counts.clear()


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(tmp_path / "approval.sqlite")) as s:
        yield s


CFG: Any = {"configurable": {"thread_id": "t"}}
AI = request(call("lookup", {"path": "/a"}, "c1"), call("delete_file", {"path": "/a"}, "c2"))


def approval_graph(saver: Any, *, per_call_branches: bool = False) -> Any:
    node = ToolNode([lookup, delete_file], requires_approval=["delete_file"])
    return scripted_graph(node, [AI], checkpointer=saver, per_call_branches=per_call_branches)


@pytest.mark.parametrize("per_call_branches", [False, True], ids=["one-node", "branches"])
def test_approve_runs_the_call_once_and_its_sibling_once(
    saver: SqliteSaver, per_call_branches: bool
) -> None:
    graph = approval_graph(saver, per_call_branches=per_call_branches)
    first = graph.invoke(start(), CFG)
    (pause,) = first["__interrupt__"]
    assert pause.value["type"] == "tool_approval"
    assert pause.value["tool_call"] == {"name": "delete_file", "args": {"path": "/a"}, "id": "c2"}
    assert effects.counts["delete:/a"] == 0  # nothing deleted before approval

    out = graph.invoke(Command(resume={"action": "approve"}), CFG)
    assert effects.counts == {"lookup:/a": 1, "delete:/a": 1}
    res = by_call(out["messages"])
    assert res["c2"].content == "deleted /a" and res["c2"].status == "success"
    assert out["messages"][-1] == FINAL
    validate(out["messages"], allow_pending_calls=False)


def test_one_node_mode_runs_nothing_until_the_approval_is_given(saver: SqliteSaver) -> None:
    graph = approval_graph(saver)
    graph.invoke(start(), CFG)
    assert effects.counts == {}  # the read-only sibling waits too, so it cannot run twice


def test_edit_runs_the_call_with_the_reviewers_arguments(saver: SqliteSaver) -> None:
    graph = approval_graph(saver)
    graph.invoke(start(), CFG)
    out = graph.invoke(Command(resume={"action": "edit", "args": {"path": "/tmp/a"}}), CFG)
    assert effects.counts == {"lookup:/a": 1, "delete:/tmp/a": 1}
    res = by_call(out["messages"])["c2"]
    assert res.content == "deleted /tmp/a"
    assert res.response_metadata["threadlog_approval"] == {
        "action": "edit",
        "args": {"path": "/tmp/a"},
    }


def test_an_edit_supersedes_the_call_for_the_model_and_the_log_keeps_the_original(
    saver: SqliteSaver,
) -> None:
    graph = approval_graph(saver)
    graph.invoke(start(), CFG)
    out = graph.invoke(Command(resume={"action": "edit", "args": {"path": "/tmp/a"}}), CFG)
    stored = [m for m in out["messages"] if m.id == AI.id]
    assert len(stored) == 1  # the edited request, in the original's place, once
    # The audit record: the request as the model made it, then the reviewer's edit.
    assert original_of(stored[0]).tool_calls[1]["args"] == {"path": "/a"}
    (edit,) = edits_of(stored[0])
    assert edit["source"] == "approval"
    assert [c["args"] for c in edit["tool_calls"]] == [{"path": "/a"}, {"path": "/tmp/a"}]
    seen = next(m for m in plan_context(out["messages"]).messages if m.id == AI.id)
    assert [c["args"] for c in seen.tool_calls] == [{"path": "/a"}, {"path": "/tmp/a"}]
    assert [c["id"] for c in seen.tool_calls] == ["c1", "c2"]  # pairing follows the edit
    validate(plan_context(out["messages"]).messages)  # raises if a provider would refuse it


def test_edited_arguments_are_still_checked_against_the_schema(saver: SqliteSaver) -> None:
    graph = approval_graph(saver)
    graph.invoke(start(), CFG)
    out = graph.invoke(Command(resume={"action": "edit", "args": {"file": "/a"}}), CFG)
    res = by_call(out["messages"])["c2"]
    assert res.status == "error" and res.response_metadata["threadlog_error"] == "invalid_args"
    assert effects.counts["delete:/a"] == 0


@pytest.mark.parametrize("per_call_branches", [False, True], ids=["one-node", "branches"])
def test_reject_becomes_an_error_result_saying_so_and_the_run_goes_on(
    saver: SqliteSaver, per_call_branches: bool
) -> None:
    graph = approval_graph(saver, per_call_branches=per_call_branches)
    graph.invoke(start(), CFG)
    out = graph.invoke(Command(resume={"action": "reject", "reason": "keep it"}), CFG)
    assert effects.counts == {"lookup:/a": 1}
    res = by_call(out["messages"])
    assert res["c2"].status == "error"
    assert res["c2"].response_metadata["threadlog_error"] == "rejected"
    assert "reviewer rejected" in res["c2"].content and "keep it" in res["c2"].content
    assert res["c1"].status == "success"
    assert out["messages"][-1] == FINAL


def test_two_approvals_in_one_step_are_asked_in_call_order_before_anything_runs(
    saver: SqliteSaver,
) -> None:
    ai = request(
        call("delete_file", {"path": "/x"}, "c1"),
        call("lookup", {"path": "/y"}, "c2"),
        call("delete_file", {"path": "/z"}, "c3"),
    )
    node = ToolNode([lookup, delete_file], requires_approval=["delete_file"])
    graph = scripted_graph(node, [ai], checkpointer=saver)
    first = graph.invoke(start(), CFG)
    assert first["__interrupt__"][0].value["tool_call"]["id"] == "c1"
    second = graph.invoke(Command(resume={"action": "approve"}), CFG)
    assert second["__interrupt__"][0].value["tool_call"]["id"] == "c3"
    assert effects.counts == {}
    out = graph.invoke(Command(resume={"action": "reject"}), CFG)
    assert effects.counts == {"delete:/x": 1, "lookup:/y": 1}
    res = by_call(out["messages"])
    assert [res[c].status for c in ("c1", "c2", "c3")] == ["success", "success", "error"]
    assert [m.tool_call_id for m in out["messages"] if isinstance(m, ToolMessage)] == [
        "c1",
        "c2",
        "c3",
    ]


def test_branches_ask_all_approvals_at_once_and_resume_by_interrupt_id(
    saver: SqliteSaver,
) -> None:
    ai = request(
        call("delete_file", {"path": "/x"}, "c1"),
        call("lookup", {"path": "/y"}, "c2"),
        call("delete_file", {"path": "/z"}, "c3"),
    )
    node = ToolNode([lookup, delete_file], requires_approval=["delete_file"])
    graph = scripted_graph(node, [ai], checkpointer=saver, per_call_branches=True)
    first = graph.invoke(start(), CFG)
    pending = {i.value["tool_call"]["id"]: i.id for i in first["__interrupt__"]}
    assert set(pending) == {"c1", "c3"}
    assert effects.counts == {"lookup:/y": 1}  # the branch needing no approval is done
    decisions = {pending["c1"]: {"action": "approve"}, pending["c3"]: {"action": "reject"}}
    out = graph.invoke(Command(resume=decisions), CFG)
    assert effects.counts == {"lookup:/y": 1, "delete:/x": 1}
    res = by_call(out["messages"])
    assert [res[c].status for c in ("c1", "c2", "c3")] == ["success", "success", "error"]


def test_a_bad_decision_is_a_clear_error_and_the_approval_can_be_answered_again(
    saver: SqliteSaver,
) -> None:
    graph = approval_graph(saver)
    graph.invoke(start(), CFG)
    with pytest.raises(ApprovalError, match=r"tool call 'c2' of 'delete_file' got 'yes please'"):
        graph.invoke(Command(resume="yes please"), CFG)
    with pytest.raises(ApprovalError, match="an 'edit' decision needs 'args'"):
        graph.invoke(Command(resume={"action": "edit"}), CFG)
    assert effects.counts == {}
    out = graph.invoke(Command(resume={"action": "approve"}), CFG)  # the thread is not stuck
    assert effects.counts == {"lookup:/a": 1, "delete:/a": 1}
    assert by_call(out["messages"])["c2"].content == "deleted /a"


async def test_approval_works_under_ainvoke(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as asaver:
        graph = approval_graph(asaver)
        first = await graph.ainvoke(start(), CFG)
        assert first["__interrupt__"][0].value["tool_call"]["id"] == "c2"
        out = await graph.ainvoke(Command(resume={"action": "approve"}), CFG)
    assert effects.counts == {"lookup:/a": 1, "delete:/a": 1}
    assert by_call(out["messages"])["c2"].content == "deleted /a"


def test_branches_editing_two_calls_of_one_request_in_one_step_keep_both_edits(
    saver: SqliteSaver,
) -> None:
    """Each per-call branch writes its own edit of the shared request in the same step;
    each edit applies only what it changed (`base`), so neither undoes the other."""
    ai = request(
        call("delete_file", {"path": "/x"}, "c1"),
        call("lookup", {"path": "/y"}, "c2"),
        call("delete_file", {"path": "/z"}, "c3"),
    )
    node = ToolNode([lookup, delete_file], requires_approval=["delete_file"])
    graph = scripted_graph(node, [ai], checkpointer=saver, per_call_branches=True)
    first = graph.invoke(start(), CFG)
    pending = {i.value["tool_call"]["id"]: i.id for i in first["__interrupt__"]}
    decisions = {
        pending["c1"]: {"action": "edit", "args": {"path": "/x2"}},
        pending["c3"]: {"action": "edit", "args": {"path": "/z2"}},
    }
    out = graph.invoke(Command(resume=decisions), CFG)
    assert effects.counts == {"lookup:/y": 1, "delete:/x2": 1, "delete:/z2": 1}
    (req,) = [m for m in out["messages"] if m.id == ai.id]
    assert [c["args"] for c in req.tool_calls] == [{"path": "/x2"}, {"path": "/y"}, {"path": "/z2"}]
    assert [c["args"] for c in original_of(req).tool_calls] == [
        {"path": "/x"},
        {"path": "/y"},
        {"path": "/z"},
    ]
    assert len(edits_of(req)) == 2
    validate(out["messages"], allow_pending_calls=False)
