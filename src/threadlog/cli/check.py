"""`threadlog check --db SOURCE [--profile P …] [--thread T …] [--all-checkpoints] [--json]
[--repair [--dry-run]]`: `threadlog.check.database` per thread, streamed, then a summary.

Exit 0 clean, 1 problems, 2 unreadable or bad input (docs/check-and-replay.md). Without
`--repair` the database is opened read-only; a server URL refuses `--repair`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from threadlog.cli.errors import CommandError, positive, resolve_thread, writable_database
from threadlog.cli.jsonout import dumps
from threadlog.cli.types import add_flags, finish, source_parser

__all__ = ["register", "run"]

HELP = "find stored threads a provider would reject (and repair them by appending)"
DESCRIPTION = (
    "Check every thread of a database against provider profiles: calls without results, results "
    "without calls, misplaced system text, … Exit 0 clean, 1 problems, 2 unreadable or bad input."
)
DB_HELP = (
    "a SQLite file (path or sqlite:///path), postgresql://…, or a LangGraph "
    "server's URL (http://…; checked through its API, not repaired)"
)


def register(sub: Any) -> None:
    p = source_parser(sub, "check", HELP, DESCRIPTION, db=DB_HELP)
    p.add_argument(
        "--profile",
        action="append",
        metavar="P",
        help="a provider profile to check against (repeatable; default: every profile)",
    )
    p.add_argument("--thread", action="append", metavar="T", help="only this thread (repeatable)")
    add_flags(
        p,
        all_checkpoints="check every checkpoint of each thread, not only its head",
        strict_first_turn="a history that does not start with a user message is a problem, "
        "not a note (say so when the app sends the stored history as it is, with no prompt "
        "of its own)",
        json="print JSON Lines (one problem a line)",
        repair="append a 'not completed' result to each call without one (through the "
        "guarded saver; nothing is rewritten or deleted)",
        dry_run="with --repair: print the plan, write nothing",
    )
    p.add_argument(
        "--lock-timeout",
        type=positive("seconds", kind=float, below=86400),
        default=10.0,
        metavar="SECONDS",
        help="Postgres: give up (exit 2) when a lock another connection holds is not "
        "released within SECONDS (default 10)",
    )
    finish(p, run, error_status=2)


def run(args: argparse.Namespace) -> int:
    from threadlog.check.database import resolve_profiles
    from threadlog.inspect.readonly import describe, is_server_url, waiting_at_most

    with waiting_at_most(args.lock_timeout):
        try:
            profiles = resolve_profiles(args.profile)
        except ValueError as exc:
            raise CommandError(f"--profile: {exc}") from None
        if args.dry_run and not args.repair:
            raise CommandError("--dry-run goes with --repair")
        if args.thread:
            args.thread = [resolve_thread(args.db, t) for t in args.thread]
        if args.repair:
            if is_server_url(args.db):
                raise CommandError(
                    f"{describe(args.db)} is a LangGraph server; --repair writes through "
                    "threadlog's guarded saver to the database itself, never through a server: "
                    "pass that as --db (a SQLite file or postgresql://…)"
                )
            if args.all_checkpoints:
                raise CommandError(
                    "--repair answers calls at each thread's head: drop --all-checkpoints"
                )
            if not args.dry_run:
                writable_database(args.db, "check --repair")
            return _repair(args, profiles)
        return _check(args, profiles)


def _check(args: argparse.Namespace, profiles: list[Any]) -> int:
    from dataclasses import asdict

    from threadlog.check.database import Tally, problem_line
    from threadlog.terminal import safe_line

    tally = Tally(profiles)
    with _results(args, profiles) as results:
        noted: list[dict[str, Any]] = []
        for result in results:
            tally.add(result)
            if args.json:
                for p in result.problems:
                    print(dumps(asdict(p)))
                noted.extend(asdict(n) for n in result.notes)
                if result.error is not None:
                    row = {"thread_id": result.thread_id, "kind": "unreadable"}
                    print(dumps({**row, "detail": result.error}))
                continue
            if result.error is not None:
                print(safe_line(f"thread {result.thread_id}: unreadable: {result.error}"))
            elif result.problems:
                print(safe_line(f"thread {result.thread_id}: {len(result.problems)} problem(s)"))
                for p in result.problems:
                    print(problem_line(p))
            # Notes are not problems (no exit status): one line per kind, the first named.
            kinds: dict[str, list[Any]] = {}
            for n in result.notes:
                kinds.setdefault(n.kind, []).append(n)
            for kind, notes in kinds.items():
                more = f" (and {len(notes) - 1} more)" if len(notes) > 1 else ""
                text = f"thread {result.thread_id}: note: {kind}{more}: {notes[0].detail}"
                print(safe_line(text))
    if args.json:
        from threadlog.inspect.readonly import describe

        # Notes (not problems, no exit status) in the summary, as the text report lists them.
        summary = {"source": describe(args.db), **tally.as_dict(), "noted": noted}
        print(dumps({"summary": summary}))
    else:
        print(tally.line())
        if tally.profile_line():
            print(tally.profile_line())
    sys.stdout.flush()
    return tally.status()


@contextmanager
def _results(args: argparse.Namespace, profiles: list[Any]) -> Iterator[Iterator[Any]]:
    from threadlog.check.database import check_threads, open_database
    from threadlog.inspect.readonly import is_server_url

    kwargs = {
        "profiles": profiles,
        "threads": args.thread,
        "all_checkpoints": args.all_checkpoints,
        "strict_first_turn": args.strict_first_turn,
    }
    if is_server_url(args.db):
        from threadlog.check.served import check_served
        from threadlog.inspect.remote import Server

        with Server(args.db) as server:
            yield check_served(server, **kwargs)
        return
    with open_database(args.db) as saver:
        yield check_threads(saver, **kwargs, subgraphs=True)


def _repair(args: argparse.Namespace, profiles: list[Any]) -> int:
    from dataclasses import asdict

    from threadlog.check.database import open_database
    from threadlog.check.repair import apply_repairs, plan_repairs
    from threadlog.inspect.readonly import sqlite_path
    from threadlog.terminal import safe_line

    with open_database(args.db) as saver:  # plan from a read-only look first
        plans = list(plan_repairs(saver, profiles=profiles, threads=args.thread))
    if args.dry_run:
        for plan in plans:
            if args.json:
                print(dumps(plan.row()))
                continue
            for line in plan.lines():
                print(" " * (len(line) - len(line.lstrip())) + safe_line(line))
        appended = sum(len(p.results) for p in plans)
        touched = len({p.thread_id for p in plans if p.results})
        _summary(
            args,
            {"results": appended, "threads": touched, "written": False},
            f"plan: {appended} result(s) to append in {touched} thread(s); "
            "nothing written (--dry-run)",
        )
        return 1 if plans else 0
    path = sqlite_path(args.db)
    url = f"sqlite:///{path}" if path is not None and "://" not in args.db else args.db
    results = apply_repairs(
        url, [p for p in plans if p.results], args.allowed_types, lock_timeout=args.lock_timeout
    )
    for res in results:
        print(dumps(asdict(res)) if args.json else safe_line(res.line()))
    left = sum(len(p.refused) for p in plans)
    # A thread with open calls under several message keys has one result per key.
    refused_ids = {r.thread_id for r in results if r.refused is not None}
    refused, repaired = len(refused_ids), len({r.thread_id for r in results} - refused_ids)
    _summary(
        args,
        {"repaired": repaired, "refused": refused, "unanswerable_calls": left},
        f"repaired {repaired} thread(s); {refused} refused; {left} call(s) appending cannot answer",
    )
    return 1 if refused or left else 0


def _summary(args: argparse.Namespace, summary: dict[str, Any], text: str) -> None:
    print(dumps({"summary": summary}) if args.json else text)
