"""One line on stderr and exit status 1 for every error a `threadlog` command meets.

Contract: `run_command(name, body)` runs `body()` and returns its exit status. Any exception
becomes one line, `threadlog NAME: error: <what went wrong>`, on stderr with exit status 1
(`error_status`: `check` and `replay` use 2, keeping 1 for "problems found"):
the message of an error the user can act on (a bad source, a missing thread, a bad file)
as it is, anything else prefixed with its type. `THREADLOG_DEBUG=1` re-raises instead, for
the traceback. The line is terminal-safe (`threadlog.terminal.safe_line`): an error that
quotes a stored id or text, or a path typed on the command line, prints its control
characters as visible escapes. Ctrl-C is "interrupted" (130); a closed stdout (`| head`)
ends quietly (0).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from threadlog.terminal import safe_line

__all__ = ["CommandError", "one_line", "run_command"]


class CommandError(Exception):
    """A problem the user fixes by changing a flag, a path or an environment variable."""


def one_line(exc: BaseException) -> str:
    """The exception's message on one line, terminal-safe."""
    # A KeyError's str() is the repr of its key; its first argument is the sentence.
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return safe_line(text) or type(exc).__name__


def _expected(exc: BaseException) -> bool:
    from threadlog.inspect.readonly import SourceError

    return isinstance(exc, (CommandError, SourceError, LookupError, ValueError, OSError))


def run_command(name: str, body: Callable[[], int], error_status: int = 1) -> int:
    try:
        return body()
    except KeyboardInterrupt:
        print(f"threadlog {name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `threadlog ... | head`: the reader left; stop quietly, as `cat` does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if os.environ.get("THREADLOG_DEBUG"):
            raise
        text = one_line(exc)
        if not _expected(exc):
            text = f"{type(exc).__name__}: {text} (THREADLOG_DEBUG=1 shows the traceback)"
        print(f"threadlog {name}: error: {text}", file=sys.stderr)
        return error_status
