"""Every public error threadlog raises, in one tree (httpx's `_exceptions.py` is the model).

    ThreadlogError                      catch-all for threadlog's own errors
    ├── MessageLogError (ValueError)    a write or history that breaks the log's rules;
    │   │                               names the message (id, role, position) and the fix
    │   ├── InvalidMessageError         not a message the log can store
    │   ├── ConflictingIdError          a known id with different content
    │   ├── ToolPairingError            a result with no open call, a second result, a reused id
    │   ├── AppendOnlyError             delete / overwrite attempts (RemoveMessage, Overwrite)
    │   ├── EditError                   a `threadlog.Edit` the log cannot record (unknown or
    │   │                               non-AI target, a call that already has a result)
    │   └── ParallelWriteError          two tasks of one step both appended conversation
    ├── ConcurrentRunError (RuntimeError)  the thread moved on under this write (another
    │                                   run, a stale head); retry from the head
    ├── ToolCallError (RuntimeError)    a tool call failed and `handle_errors=False`
    ├── StoredDataError (ValueError)    stored data that cannot be trusted: a record naming
    │                                   a type outside the allowlist, a broken writes chain
    ├── ApprovalError (ValueError)      a resume value that is no approval decision
    ├── IdempotencyError (ValueError)   `idempotent()` given no tool, two tools one name;
    │                                   `idempotency_key()` outside a marked tool's call
    └── UpstreamChangedError (RuntimeError)  the installed LangGraph no longer does what
                                        threadlog hooks into; names its version and the
                                        entry point (raised before anything runs unguarded)

Builtin bases keep `except ValueError` / `RuntimeError` working. Errors pickle with all
their fields: they cross process boundaries (worker pools, `langgraph dev`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AppendOnlyError",
    "ApprovalError",
    "ConcurrentRunError",
    "ConflictingIdError",
    "EditError",
    "IdempotencyError",
    "InvalidMessageError",
    "MessageLogError",
    "ParallelWriteError",
    "StoredDataError",
    "ThreadlogError",
    "ToolCallError",
    "ToolPairingError",
    "UpstreamChangedError",
]


class ThreadlogError(Exception):
    """Base class of every error threadlog raises on purpose."""

    _fields: tuple[str, ...] = ()  # the `__init__` arguments, kept as attributes

    def __reduce__(self) -> str | tuple[Any, ...]:
        # Keyword-only arguments do not survive the default pickling.
        if not self._fields:
            return super().__reduce__()
        return (_rebuild, (type(self), {name: getattr(self, name) for name in self._fields}))


def _rebuild(cls: type[ThreadlogError], fields: dict[str, Any]) -> ThreadlogError:
    return cls(**fields)


class MessageLogError(ThreadlogError, ValueError):
    """Base class: a write or history that would break the message log."""

    _fields = ("problem", "message_id", "role", "position", "fix")

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
        parts = (f"position {position}", f"role={role}", f"id={message_id!r}")
        given = (position, role, message_id)
        where = [part for part, value in zip(parts, given, strict=True) if value is not None]
        text = problem
        if where:
            text += f" [message at {', '.join(where)}]"
        if fix:
            text += f". {fix}"
        super().__init__(text)


class InvalidMessageError(MessageLogError):
    """Input that is not a message threadlog can store (unknown role, missing field…)."""


class ConflictingIdError(MessageLogError):
    """A message id that is already in the log, arriving with different content."""


class ToolPairingError(MessageLogError):
    """A tool result with no open call, a second result for a call, or a reused call id."""


class AppendOnlyError(MessageLogError):
    """An `Overwrite`, or a `RemoveMessage` naming a message the log never held."""


class EditError(MessageLogError):
    """A `threadlog.Edit` the log refuses (unknown or non-AI target, an answered call)."""


class ParallelWriteError(MessageLogError):
    """Two tasks of one superstep both appended conversation (non-tool) messages."""


class ConcurrentRunError(ThreadlogError, RuntimeError):
    """The thread moved on under this write; retry from the thread's head."""

    _fields = ("problem", "thread_id", "checkpoint_id", "head")

    def __init__(
        self,
        problem: str,
        *,
        thread_id: str,
        checkpoint_id: str | None = None,
        head: str | None = None,
    ) -> None:
        self.problem = problem
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.head = head
        super().__init__(
            f"thread {thread_id!r}: {problem}. Nothing of this step was stored — retry the "
            "call without a checkpoint_id (it starts from the thread's head), or fork on "
            "purpose: invoke with the older checkpoint's config (its checkpoint_id)"
        )


class ToolCallError(ThreadlogError, RuntimeError):
    """A failed tool call under `handle_errors=False`; the original exception is `__cause__`."""

    _fields = ("kind", "text", "call_id", "tool")

    def __init__(self, kind: str, text: str, *, call_id: str, tool: str) -> None:
        self.kind = kind
        self.call_id = call_id
        self.tool = tool
        self.text = text
        super().__init__(f"{text} [tool call {call_id!r} of {tool!r}]")


class ApprovalError(ThreadlogError, ValueError):
    """A resume value for a tool approval that is no accepted decision (nothing is saved)."""


class IdempotencyError(ThreadlogError, ValueError):
    """`threadlog.idempotent()` or `threadlog.idempotency_key()` misused (module doc)."""


class StoredDataError(ThreadlogError, ValueError):
    """Stored checkpoint data that cannot be trusted (module doc)."""


class UpstreamChangedError(ThreadlogError, RuntimeError):
    """The installed LangGraph (or langchain) no longer does what threadlog relies on."""

    _fields = ("problem", "package", "version")

    def __init__(self, problem: str, *, package: str, version: str) -> None:
        self.problem = problem
        self.package = package
        self.version = version
        super().__init__(
            f"threadlog does not work with the installed {package} {version}: {problem}. "
            f"Install a {package} version threadlog supports (docs/compatibility.md, "
            '"Tested versions"), or a threadlog release that supports this one'
        )
