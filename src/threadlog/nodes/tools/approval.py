"""Approval before execution: pause with `interrupt()`, resume with a decision.

Contract:

* For each call of a tool listed in `requires_approval`, the tool node calls LangGraph's
  `interrupt(payload)` **before any tool of the step runs**. The payload is a plain dict:
  `{"type": "tool_approval", "tool_call": {"name", "args", "id"}, "actions": [...]}`.
* Resume with `Command(resume=decision)` where decision is
  `{"action": "approve"}`, `{"action": "edit", "args": {...}}` or
  `{"action": "reject", "reason": "..."}` (reason optional). An edited call runs with the
  new arguments (still checked against the tool's schema) and the node writes a
  `threadlog.Edit` of the request before its results (`approval_edits`): the same event an
  `update_state` edit records, so the log shows the edited call in place, keeps the
  original in the audit record, and the model sees the call as it ran. The result also
  carries the decision (`response_metadata["threadlog_approval"]`, `APPROVAL_KEY`; what
  the model sees of such a record on a thread stored before edits were events is
  `threadlog.log.edits.apply_edits`). A rejected call
  becomes an error result saying a reviewer rejected it. Any other value raises `ApprovalError`
  and is not saved (LangGraph's `response_schema` check), so the same approval can
  simply be answered again.
* Why nothing runs twice: in the one-node mode all approvals are asked, one interrupt
  per call in call order, before any tool starts, so a resume re-enters a node that has
  executed nothing yet. With per-call branches (`send_tool_calls`) each call is its own
  task: the paused branch re-runs alone and its finished siblings are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langgraph.types import interrupt
from pydantic import BaseModel, ValidationError, model_validator

from threadlog.errors import ApprovalError

# `APPROVAL_KEY` and `apply_edits` are re-exported: what the model sees of an edit is
# the context's business, so it lives below both (`threadlog.log.edits`).
from threadlog.log.edits import APPROVAL_KEY, Edit, apply_edits

__all__ = [
    "APPROVAL_KEY",
    "ApprovalError",
    "Decision",
    "apply_edits",
    "approval_edits",
    "approval_payload",
    "ask_approval",
]

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
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in e.errors()
        )
        raise ApprovalError(
            f"the approval of tool call {call['id']!r} of {call['name']!r} got "
            f"{_input_of(e)!r} ({problems}); {_HINT}"
        ) from e
    return decision


def _input_of(e: ValidationError) -> Any:
    errors = e.errors()
    return errors[0].get("input") if errors else None


def approval_edits(
    edited: Mapping[str, Mapping[str, Any]],
    messages: Sequence[BaseMessage],
    decisions: Mapping[str, Decision] | None = None,
) -> list[Edit]:
    """One `Edit` per AIMessage of `messages` whose calls a reviewer edited (call id ->
    the new arguments), oldest first. Each carries `base` (the request as the node saw
    it), so parallel branches that edit different calls of one request compose; `by` and
    `reason` come from the first edited call's decision."""
    todo = dict(edited)
    decisions = decisions or {}
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
