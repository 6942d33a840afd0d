"""The one convention every `threadlog` command follows for bad input and errors.

* `run_command(name, body)`: bad input (`CommandError`, `SourceError`, `LookupError`,
  `ValueError`, `OSError`) is one terminal-safe line, `threadlog NAME: error: <what>`, on
  stderr, exit 2, nothing written; a `CommandFailed` its line, exit `error_status` (1); any
  other exception one line prefixed with its type. `THREADLOG_DEBUG=1` re-raises. Ctrl-C
  exits 130; a closed stdout, 0.
* `Parser`: a mistyped or missing flag shows the subcommand's usage, then the error; a bad
  value of a known flag is one line naming the flag (exit 2).
* `writable_database` refuses a file or database that is not LangGraph's before writing;
  `resolve_thread` takes a thread id or a unique prefix (no match or several: bad input).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from threadlog.terminal import safe_line

__all__ = [
    "BAD_INPUT",
    "CommandError",
    "CommandFailed",
    "Parser",
    "one_line",
    "resolve_thread",
    "run_command",
    "writable_database",
]

BAD_INPUT = 2


class CommandError(Exception):
    """A problem the user fixes by changing a flag, a path or an environment variable."""


class CommandFailed(Exception):
    """A failure the user fixes by changing a setting (a key, an endpoint): exit 1."""


def one_line(exc: BaseException) -> str:
    """The exception's message on one line, terminal-safe; a source's error names `--db`."""
    from threadlog.inspect.readonly import SourceError

    # A KeyError's str() is the repr of its key; its first argument is the sentence.
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = safe_line(text) or type(exc).__name__
    if isinstance(exc, SourceError) and not text.startswith("--db"):
        text = f"--db: {text}"  # every SourceError is about the source --db names
    return text


def run_command(name: str, body: Callable[[], int], error_status: int = 1) -> int:
    """`body()`'s exit status, or one line on stderr and 2 (bad input) / `error_status`."""
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
        from threadlog.inspect.readonly import SourceError

        if os.environ.get("THREADLOG_DEBUG"):
            raise
        text = one_line(exc)
        status = BAD_INPUT
        if isinstance(exc, CommandFailed):
            status = error_status
        elif not isinstance(exc, (CommandError, SourceError, LookupError, ValueError, OSError)):
            text = f"{type(exc).__name__}: {text} (THREADLOG_DEBUG=1 shows the traceback)"
            status = error_status
        print(f"threadlog {name}: error: {text}", file=sys.stderr)
        return status


class Parser(argparse.ArgumentParser):
    """A subcommand's parser (module doc): usage for a mistyped flag, one line for a bad value."""

    def error(self, message: str) -> NoReturn:
        if message.startswith(("unrecognized arguments", "the following arguments")):
            self.print_usage(sys.stderr)
        self.exit(BAD_INPUT, safe_line(f"{self.prog}: error: {message}") + "\n")


def writable_database(db: str, command: str, *, create: bool = False) -> str:
    """`db` as a checkpointer URL, once it is known to be LangGraph's (module doc)."""
    from urllib.parse import urlsplit

    from threadlog.inspect.readonly import describe, is_server_url, open_readonly, sqlite_path

    if is_server_url(db):
        raise CommandError(
            f"--db {describe(db)} is a LangGraph server; {command} writes to the database "
            "itself: pass a SQLite file or postgresql://…"
        )
    path = sqlite_path(db)
    if path is not None:
        if path in ("", ":memory:"):
            raise CommandError(f"--db {db!r}: give a SQLite file")
        if not os.path.exists(path):
            if not create:
                raise CommandError(f"--db: no database at {path!r}; nothing was written")
            return f"sqlite:///{path}"
        with open_readonly(path):  # SourceError unless LangGraph's tables are there
            pass
        return f"sqlite:///{os.path.abspath(path)}"
    scheme = urlsplit(db).scheme.lower()
    if scheme == "memory" and create:
        return db
    if scheme not in ("postgresql", "postgres"):
        raise CommandError(
            f"--db {describe(db)!r}: use a SQLite file (path or sqlite:///path) or a "
            "postgresql:// URL"
        )
    if not create:
        with open_readonly(db):
            pass
    return db


def resolve_thread(db: str, thread: str) -> str:
    """The thread `thread` names in `db`: itself, or the one thread it is a prefix of."""
    from threadlog.inspect.catalog import thread_heads
    from threadlog.inspect.readonly import describe, is_server_url, open_readonly

    if is_server_url(db):
        return thread
    with open_readonly(db) as saver:
        ids = [h.thread_id for h in thread_heads(saver)]
    if thread in ids:
        return thread
    found = [t for t in ids if t.startswith(thread)] if thread else []
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(repr(t) for t in sorted(found)[:3])
        raise CommandError(
            f"--thread {thread!r} is the prefix of {len(found)} threads ({shown}…); give more"
        )
    raise CommandError(
        f"--thread: no thread {thread!r} in {describe(db)} ({len(ids)} thread(s) there; "
        "`threadlog threads --db …` lists them)"
    )


def positive(
    what: str, zero: bool = False, kind: type[float] = int, below: float = math.inf
) -> Callable[[str], Any]:
    """An argparse `type`: a positive number of `kind` (or 0 when `zero`) under `below`."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if not 0 <= value < below or (value == 0 and not zero):
            least = "0 or more" if zero else "a positive number of"
            raise argparse.ArgumentTypeError(f"{text!r}: give {least} {what}")
        return value

    return parse


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> Any:
    """`parser.parse_args(argv)`, with a mistyped flag reported by its subcommand."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args
