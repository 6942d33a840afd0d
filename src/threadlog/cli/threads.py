"""`threadlog threads --db SOURCE [--search TEXT] [--limit N] [--json]`; and the options
the reading commands share.

Contract: lists the threads of a database or a LangGraph server, newest first, as text
that fits in 100 columns or as JSON (`threadlog.inspect.threads` rows). Reads only. Bad
input: one line, exit 2 (`cli/errors.py`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "run"]

HELP = "list the threads of a database or LangGraph server, newest first"
DESCRIPTION = (
    "List threads newest first: turns, messages, open calls, errors and "
    "the last user message. Reads only."
)

SOURCE_HELP = (
    "where the threads are: a SQLite file (path or sqlite:///path), postgresql://…, or a "
    "LangGraph server URL (http://127.0.0.1:2024)"
)


def source_parser(
    sub: Any,
    name: str,
    help: str,
    description: str,
    *,
    thread: str | None = None,
    db: str = SOURCE_HELP,
    db_metavar: str = "SOURCE",
) -> argparse.ArgumentParser:
    """The parser of a subcommand that reads `--db SOURCE` (`db` its help), and with
    `thread` its help, one `--thread`."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    p.add_argument("--db", required=True, metavar=db_metavar, help=db)
    if thread is not None:
        p.add_argument("--thread", required=True, help=thread)
    return p


def add_namespace(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--namespace", metavar="NS", default="", help=help)


def add_flags(p: argparse.ArgumentParser, **helps: str) -> None:
    """One `--name` switch per keyword (`dry_run` is `--dry-run`), in the order given."""
    for name, text in helps.items():
        p.add_argument(f"--{name.replace('_', '-')}", action="store_true", help=text)


def finish(p: argparse.ArgumentParser, run: Any) -> None:
    """The last option every reading command takes, and the function that runs it."""
    from threadlog.cli.types import add_allow_type

    add_allow_type(p)
    p.set_defaults(func=run)


def register(sub: Any) -> None:
    from threadlog.cli.errors import positive

    p = source_parser(sub, "threads", HELP, DESCRIPTION)
    p.add_argument(
        "--search", metavar="TEXT", help="only threads whose id or messages contain TEXT"
    )
    p.add_argument(
        "--limit",
        type=positive("--limit", "threads", zero=True),
        default=20,
        metavar="N",
        help="at most N (0: all; default 20)",
    )
    add_flags(p, json="print the rows as JSON")
    finish(p, run)


def run(args: argparse.Namespace) -> int:
    from threadlog.cli.errors import run_command
    from threadlog.cli.types import reading

    return run_command("threads", lambda: reading(args, _run))


def _run(args: argparse.Namespace) -> int:
    from threadlog.cli.jsonout import dumps
    from threadlog.cli.progress import Progress
    from threadlog.inspect.threads import threads

    with Progress("reading threads") as progress:
        listing = threads(args.db, search=args.search, limit=args.limit, progress=progress)
    if args.json:
        text = dumps(listing.rows(), indent=1)
    else:
        text = str(listing)
    print(text)
    sys.stdout.flush()
    return 0
