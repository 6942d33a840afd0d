"""The `threadlog` command: `threadlog demo` and `threadlog inspect`.

Each subcommand lives with the code it drives and registers itself here through a
`register(subparsers)` function, so this file stays a table of contents.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _subcommands() -> list[Register]:
    from threadlog.cli import demo as demo_cli
    from threadlog.cli import inspect as inspect_cli

    return [demo_cli.register, inspect_cli.register]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="threadlog",
        description="threadlog: an append-only, pairing-safe message log for LangGraph.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in _subcommands():
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
