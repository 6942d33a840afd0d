"""`threadlog threads --db SOURCE [--search TEXT] [--limit N] [--json]`: the threads of a
database or LangGraph server, newest first (`threadlog.inspect.threads`); reads only.
"""

from __future__ import annotations

import argparse
from typing import Any

from threadlog.cli.errors import positive
from threadlog.cli.jsonout import dumps
from threadlog.cli.progress import Progress
from threadlog.cli.types import add_flags, finish, source_parser

__all__ = ["register", "run"]

HELP = "list the threads of a database or LangGraph server, newest first"
DESCRIPTION = (
    "List threads newest first: turns, messages, open calls, errors and "
    "the last user message. Reads only."
)


def register(sub: Any) -> None:
    p = source_parser(sub, "threads", HELP, DESCRIPTION)
    p.add_argument(
        "--search", metavar="TEXT", help="only threads whose id or messages contain TEXT"
    )
    p.add_argument(
        "--limit",
        type=positive("threads", zero=True),
        default=20,
        metavar="N",
        help="at most N (0: all; default 20)",
    )
    add_flags(p, json="print the rows as JSON")
    finish(p, run)


def run(args: argparse.Namespace) -> int:
    from threadlog.inspect.threads import threads

    with Progress("reading threads") as progress:
        listing = threads(args.db, search=args.search, limit=args.limit, progress=progress)
    print(dumps(listing.rows(), indent=1) if args.json else str(listing), flush=True)
    return 0
