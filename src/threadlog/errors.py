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

The builtin bases are kept so code that catches `ValueError` / `RuntimeError` (as for
LangGraph's own errors) keeps working. Errors pickle with all their fields: they cross
process boundaries (worker pools, `langgraph dev`).
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

    _fields: tuple[str, ...] = ()
    """The `__init__` arguments, kept as attributes of the same names, that rebuild it."""

    def __reduce__(self) -> str | tuple[Any, ...]:
        # Keyword-only arguments do not survive the default pickling, and errors cross
        # process boundaries (worker pools, langgraph dev).
        if not self._fields:
            return super().__reduce__()
        return (_rebuild, (type(self), {name: getattr(self, name) for name in self._fields}))


def _rebuild(cls: Any, fields: dict[str, Any]) -> ThreadlogError:
    error: ThreadlogError = cls(**fields)
    return error


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


class InvalidMessageError(MessageLogError):
    """Input that is not a message threadlog can store (unknown role, missing field…)."""


class ConflictingIdError(MessageLogError):
    """A message id that is already in the log, arriving with different content."""


class ToolPairingError(MessageLogError):
    """A tool result with no open call, a second result for a call, or a reused call id."""


class AppendOnlyError(MessageLogError):
    """An attempt to overwrite history (`Overwrite`), or a `RemoveMessage` naming a message
    the log never held. (`RemoveMessage` itself is recorded as a removal event.)"""


class EditError(MessageLogError):
    """A `threadlog.Edit` the log refuses: its target is unknown or not an AIMessage, or
    it would change or drop a call that already has a result."""


class ParallelWriteError(MessageLogError):
    """Two tasks of one superstep both appended conversation (non-tool) messages."""


class ConcurrentRunError(ThreadlogError, RuntimeError):
    """The thread moved on under this write (another run wrote first, or the checkpoint
    it started from is no longer the head); retry from the thread's head."""

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
        # The problem says who moved the thread: the advice must not guess.
        super().__init__(
            f"thread {thread_id!r}: {problem}. Nothing of this step was stored — retry the "
            "call without a checkpoint_id (it starts from the thread's head), or fork on "
            "purpose: invoke with the older checkpoint's config (its checkpoint_id)"
        )


class ToolCallError(ThreadlogError, RuntimeError):
    """A tool call that failed, raised instead of returned when `handle_errors=False`;
    `kind` is the `ErrorKind`, the original exception `__cause__`."""

    _fields = ("kind", "text", "call_id", "tool")

    def __init__(self, kind: str, text: str, *, call_id: str, tool: str) -> None:
        self.kind = kind
        self.call_id = call_id
        self.tool = tool
        self.text = text
        super().__init__(f"{text} [tool call {call_id!r} of {tool!r}]")


class ApprovalError(ThreadlogError, ValueError):
    """A resume value for a tool approval that is not one of the accepted decisions.

    Nothing is saved for such a value, so the same approval can be answered again.
    """


class IdempotencyError(ThreadlogError, ValueError):
    """Idempotent tools misused: `threadlog.idempotent()` given something that is not a
    tool, a name that is no tool or that two tools share, or `threadlog.idempotency_key()`
    called outside the run of a marked tool for a tool call. The message names it."""


class StoredDataError(ThreadlogError, ValueError):
    """Stored checkpoint data that reads back as something other than what was written:
    a type outside the allowlist, or writes that no longer form their stored chain."""


class UpstreamChangedError(ThreadlogError, RuntimeError):
    """The installed LangGraph (or langchain) release no longer does what threadlog relies
    on; `package` and `version` name it, `problem` says what stopped working."""

    _fields = ("problem", "package", "version")

    def __init__(self, problem: str, *, package: str, version: str) -> None:
        self.problem = problem
        self.package = package
        self.version = version
        super().__init__(
            f"threadlog does not work with the installed {package} {version}: {problem}. "
            f"Install a {package} version threadlog supports (docs/compatibility.md, "
            "\"Tested versions\"), or a threadlog release that supports this one"
        )
