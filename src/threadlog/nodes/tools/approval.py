"""Approval before execution: pause with `interrupt()`, resume with a decision.

Contract:

* For each call of a tool in `requires_approval`, the tool node calls `interrupt(payload)`
  **before any tool of the step runs**, with
  `{"type": "tool_approval", "tool_call": {"name", "args", "id"}, "actions": [...]}`.
* Resume with `Command(resume=decision)`: `{"action": "approve"}`,
  `{"action": "edit", "args": {...}}` or `{"action": "reject", "reason": "..."}`. An
  edited call runs with the new arguments and the node writes a `threadlog.Edit` of the
  request before its results (`approval_edits`); the result carries the decision
  (`APPROVAL_KEY`). A rejected call becomes an error result. Any other value raises
  `ApprovalError` and is not saved, so the approval can be answered again.
* Nothing runs twice: all approvals are asked before any tool starts; with per-call
  branches the paused branch re-runs alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langgraph.types import interrupt
from pydantic import BaseModel, ValidationError, model_validator

from threadlog.errors import ApprovalError

# Re-exported: what the model sees of an edit lives below both (`threadlog.log.edits`).
from threadlog.log.edits import APPROVAL_KEY, Edit

__all__ = ["APPROVAL_KEY", "Decision", "approval_edits", "approval_payload", "ask_approval"]

ACTIONS = ("approve", "edit", "reject")
_HINT = (
    'resume with Command(resume={"action": "approve"}), '
    '{"action": "edit", "args": {...}} or {"action": "reject", "reason": "..."}'
)


class Decision(BaseModel):
    """A reviewer's decision; also the interrupt's `response_schema` clients are shown."""

    action: Literal["approve", "edit", "reject"]
    args: dict[str, Any] | None = None
    reason: str | None = None
    by: str | None = None  # who decided: kept in an edit's audit record

    @model_validator(mode="after")
    def _edit_needs_args(self) -> Decision:
        if self.action == "edit" and self.args is None:
            raise ValueError("an 'edit' decision needs 'args': the new arguments as a dict")
        return self


def approval_payload(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "tool_approval",
        "tool_call": {"name": call["name"], "args": call["args"], "id": call["id"]},
        "actions": list(ACTIONS),
        "description": f"Approve running tool {call['name']!r} with these arguments?",
    }


def ask_approval(call: ToolCall) -> Decision:
    """Pause for a reviewer's decision on `call` (returns on resume)."""
    try:
        decision: Decision = interrupt(approval_payload(call), response_schema=Decision)
    except ValidationError as e:
        # LangGraph saved nothing for the bad value: the interrupt stays answerable.
        errors = e.errors()
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in errors
        )
        given = errors[0].get("input") if errors else None
        raise ApprovalError(
            f"the approval of tool call {call['id']!r} of {call['name']!r} got "
            f"{given!r} ({problems}); {_HINT}"
        ) from e
    return decision


def approval_edits(
    decisions: Mapping[str, Decision], messages: Sequence[BaseMessage]
) -> list[Edit]:
    """One `Edit` (with `base`, so branches compose) per AIMessage a reviewer edited."""
    todo = {cid: d.args or {} for cid, d in decisions.items()}
    out: list[Edit] = []
    for m in reversed(messages):
        if not todo:
            break
        if isinstance(m, AIMessage) and any(c.get("id") in todo for c in m.tool_calls):
            first = next((d for c in m.tool_calls if (d := decisions.get(c.get("id") or ""))), None)
            calls = [
                {**c, "args": dict(todo.pop(c["id"] or ""))} if c.get("id") in todo else c
                for c in m.tool_calls
            ]
            edit = Edit(
                m.model_copy(update={"tool_calls": calls}),
                base=m,
                source="approval",
                by=first.by if first else None,
                reason=first.reason if first else None,
            )
            out.append(edit)
    return out[::-1]
