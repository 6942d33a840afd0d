"""The options reading commands share: `--db`, `--thread`, `--namespace`, switches, and
`--allow-type module:Class` (repeatable or comma-separated, like `THREADLOG_ALLOW_TYPES`),
whose modules are imported before the command reads (a name that does not import is a
one-line error).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from threadlog.cli.errors import CommandError, run_command

__all__ = ["add_flags", "add_namespace", "allowing", "finish", "source_parser"]

ALLOW_TYPE_HELP = (
    "a type your state stores, as module:Class (repeatable, or comma-separated; also read "
    "from THREADLOG_ALLOW_TYPES); values of other types show as <not decoded: module.Class>"
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
    """A subcommand's parser with `--db` (`db`: its help) and, given its help, `--thread`."""
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


def finish(
    p: argparse.ArgumentParser, body: Callable[[argparse.Namespace], int], error_status: int = 1
) -> None:
    """Add `--allow-type`, and run `body(args)` inside `allowing(args)` by `run_command`."""
    p.add_argument(
        "--allow-type", action="append", default=[], metavar="MODULE:CLASS", help=ALLOW_TYPE_HELP
    )
    p.set_defaults(func=functools.partial(_run, body=body, error_status=error_status))


def _run(
    args: argparse.Namespace, body: Callable[[argparse.Namespace], int], error_status: int
) -> int:
    def allowed() -> int:
        with allowing(args) as args.allowed_types:
            return body(args)

    return run_command(args.command, allowed, error_status)


@contextlib.contextmanager
def allowing(args: argparse.Namespace) -> Iterator[list[tuple[str, str]]]:
    from threadlog.checkpoint.serde import ALLOW_TYPES_ENV, parse_type_names
    from threadlog.inspect.readonly import reading_types

    flags: list[tuple[str, str]] = []
    for value in getattr(args, "allow_type", None) or []:
        try:
            flags += parse_type_names(value)
        except ValueError as exc:
            raise CommandError(f"--allow-type: {exc}") from None
    try:
        env = parse_type_names(os.environ.get(ALLOW_TYPES_ENV, ""))
    except ValueError as exc:
        raise CommandError(f"{ALLOW_TYPES_ENV}: {exc}") from None
    if (flags or env) and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for where, names in (("--allow-type", flags), (ALLOW_TYPES_ENV, env)):
        for module, name in names:
            _check_importable(where, module, name)
    with reading_types(flags):  # the readers take the environment variable themselves
        yield [*flags, *env]


def _check_importable(where: str, module: str, name: str) -> None:
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError as exc:
        raise CommandError(
            f"{where} {module}:{name}: cannot import {module!r} ({exc}); run threadlog "
            "from the folder that holds it, or set PYTHONPATH"
        ) from None
    if not isinstance(found, type):
        raise CommandError(f"{where} {module}:{name}: {module!r} has no class {name!r}")
