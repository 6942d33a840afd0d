"""The errors threadlog raises when a write or a history breaks the log's rules.

Every error is a `ValueError` (so code that already catches LangGraph's own
`InvalidUpdateError`-style value errors keeps working) and names the offending
message — its id, role and position — and says what to do instead.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AppendOnlyError",
    "ConflictingIdError",
    "InvalidMessageError",
    "MessageLogError",
    "ParallelWriteError",
    "ToolPairingError",
]


class MessageLogError(ValueError):
    """Base class: a write or history that would break the message log."""

    def __init__(
        self,
        problem: str,
        *,
        message_id: str | None = None,
        role: str | None = None,
        position: int | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.message_id = message_id
        self.role = role
        self.position = position
        self.fix = fix
        where = []
        if position is not None:
            where.append(f"position {position}")
        if role is not None:
            where.append(f"role={role}")
        if message_id is not None:
            where.append(f"id={message_id!r}")
        text = problem
        if where:
            text += f" [message at {', '.join(where)}]"
        if fix:
            text += f". {fix}"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments do not survive the default pickling, and errors
        # cross process boundaries (subprocess workers, langgraph dev).
        return (
            _rebuild,
            (
                type(self),
                self.problem,
                self.message_id,
                self.role,
                self.position,
                self.fix,
            ),
        )


def _rebuild(
    cls: type[MessageLogError],
    problem: str,
    message_id: str | None,
    role: str | None,
    position: int | None,
    fix: str | None,
) -> MessageLogError:
    return cls(problem, message_id=message_id, role=role, position=position, fix=fix)


class InvalidMessageError(MessageLogError):
    """Input that is not a message threadlog can store (unknown role, missing field…)."""


class ConflictingIdError(MessageLogError):
    """A message id that is already in the log, arriving with different content."""


class ToolPairingError(MessageLogError):
    """A tool result with no open call, a second result for a call, or a reused call id."""


class AppendOnlyError(MessageLogError):
    """An attempt to delete or overwrite history (`RemoveMessage`, `Overwrite`)."""


class ParallelWriteError(MessageLogError):
    """Two tasks of one superstep both appended conversation (non-tool) messages."""
