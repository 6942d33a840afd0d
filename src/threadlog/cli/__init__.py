"""The `threadlog` command: `demo`, `threads`, `inspect`, `export`, `check`, `replay` and `prune`.

Each subcommand module registers itself through `register(subparsers)` and imports
LangChain and LangGraph only inside `run`, so `--help` and `--version` load no LangGraph.
"""

from __future__ import annotations

import argparse
from typing import Any


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("threadlog")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="threadlog",
        description="threadlog: an append-only, pairing-safe message log for LangGraph.",
    )
    parser.add_argument("--version", action="version", version=f"threadlog {_version()}")
    from threadlog.cli import check, demo, export, inspect, prune, replay, threads
    from threadlog.cli.errors import Parser

    sub: Any = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for command in (demo, threads, inspect, export, check, replay, prune):
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from threadlog.cli.errors import parse_args

    try:
        args = parse_args(build_parser(), argv)
    except SystemExit as stopped:  # --help, --version, or bad input (already printed)
        return stopped.code if isinstance(stopped.code, int) else 2
    return int(args.func(args))
