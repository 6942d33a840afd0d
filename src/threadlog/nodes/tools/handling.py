"""`handle_tool_errors`: which failures become error results, and with what text.

Contract — every form LangGraph's `ToolNode(handle_tool_errors=...)` accepts, same meaning
for exceptions a tool (or a `wrap_tool_call` interceptor) raises:

* `True` (threadlog's default): every exception becomes an error result with threadlog's
  text (`response_metadata["threadlog_error"]` names the kind).
* `False`: every exception propagates (and threadlog's own refusals raise `ToolCallError`).
* a `str`: every exception becomes an error result with that text.
* an exception type or tuple of types: those become error results (threadlog's text);
  others propagate.
* a callable `handler(e) -> str`: the exceptions its first parameter's annotation names
  (all, when unannotated) become error results with `handler(e)` as text; others propagate.

Threadlog's own refusals (timeout, unknown tool, malformed arguments, forged result,
instruction, bad return, unstorable artifact) are error results under every form but
`False`: they are the node's checks, not the tool's exceptions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias, cast

from threadlog._upstream import infer_handled_types

__all__ = ["ErrorHandling", "HandleToolErrors"]

HandleToolErrors: TypeAlias = (
    bool | str | Callable[..., str] | type[Exception] | tuple[type[Exception], ...]
)


@dataclass(frozen=True, slots=True)
class ErrorHandling:
    """A `handle_tool_errors` value, checked once and asked per failure."""

    flag: HandleToolErrors
    types: tuple[type[Exception], ...]

    @classmethod
    def of(cls, flag: HandleToolErrors) -> ErrorHandling:
        types: tuple[type[Exception], ...]
        if isinstance(flag, bool):
            types = (Exception,) if flag else ()
        elif isinstance(flag, str):
            types = (Exception,)
        elif isinstance(flag, type) and issubclass(flag, Exception):
            types = (flag,)
        elif isinstance(flag, tuple) and all(
            isinstance(t, type) and issubclass(t, Exception) for t in flag
        ):
            types = flag
        elif callable(flag):
            types = infer_handled_types(cast(Callable[..., str], flag))
        else:
            raise TypeError(
                f"ToolNode(handle_tool_errors={flag!r}): expected a bool, a str, an "
                "exception type or tuple of types, or a callable(exception) -> str"
            )
        return cls(cast(HandleToolErrors, flag), types)

    @property
    def raises_refusals(self) -> bool:
        return self.flag is False

    def handles(self, error: BaseException) -> bool:
        return isinstance(error, self.types)

    def custom_text(self, error: Exception) -> str | None:
        """The user's text for a handled `error`, or None for threadlog's own."""
        if isinstance(self.flag, str):
            return self.flag
        if callable(self.flag) and not isinstance(self.flag, type):
            return str(self.flag(error))
        return None
