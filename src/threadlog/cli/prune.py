"""`threadlog prune --db URL (--keep-latest | --older-than 30d) [--thread T…]
[--archive FILE] [--dry-run] [--vacuum] [--allow-type module:Class]`: retention by the rules
of `saver.prune` (`threadlog.checkpoint.lifecycle`; docs/durability.md).

`--archive FILE` first writes each thread to prune, whole, to a new SQLite file (removed
again if the prune fails). Every selected thread is held (the run guard's lock) for the
whole call, then all are pruned in one transaction. Errors: one line, exit 2, nothing changed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from threadlog.cli.errors import CommandError, resolve_thread, writable_database
from threadlog.cli.types import add_flags, finish, source_parser

__all__ = ["parse_duration", "register", "run"]

HELP = "drop old checkpoints (keep each thread's head) or old threads; archive first"
DESCRIPTION = (
    "Retention for a checkpoint database: keep each thread's head "
    "(--keep-latest) or delete threads idle longer than a duration (--older-than), "
    "optionally archiving what goes to a SQLite file the inspector opens."
)
DB_HELP = "sqlite:///path, a path, or postgresql://…"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def register(sub: Any) -> None:
    p = source_parser(sub, "prune", HELP, DESCRIPTION, db=DB_HELP, db_metavar="URL")
    add_flags(p, keep_latest="keep only each thread's head")
    p.add_argument("--older-than", metavar="DURATION", help="delete threads idle longer (30d, 12h)")
    p.add_argument(
        "--thread", action="append", default=[], metavar="T", help="only thread T (repeat)"
    )
    p.add_argument("--archive", metavar="FILE", help="write the pruned threads whole to FILE first")
    add_flags(
        p,
        dry_run="print what would go; change nothing",
        vacuum="after pruning, run VACUUM so a SQLite file shrinks to what it holds",
    )
    finish(p, run)


def parse_duration(text: str) -> timedelta:
    """`30d` → 30 days (units s, m, h, d, w); CommandError otherwise."""
    found = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text or "")
    bad = CommandError(
        f"bad duration {text!r} for --older-than: a positive number and a unit "
        "s, m, h, d or w (30d, 12h), at most 999999999 days; nothing was pruned"
    )
    if not found or int(found.group(1)) <= 0:
        raise bad
    try:
        return timedelta(seconds=int(found.group(1)) * _UNITS[found.group(2)])
    except OverflowError:
        raise bad from None


def run(args: argparse.Namespace) -> int:
    types = args.allowed_types
    if bool(args.keep_latest) == (args.older_than is not None):
        raise CommandError(
            "choose one strategy: --keep-latest or --older-than DURATION; nothing was pruned"
        )
    older = parse_duration(args.older_than) if args.older_than is not None else None
    if args.archive and os.path.lexists(args.archive):
        raise CommandError(f"archive {args.archive!r} exists; nothing was pruned (name a new file)")

    url = writable_database(args.db, "prune")
    args.thread = [resolve_thread(url, t) for t in args.thread]

    import threadlog.context.events  # noqa: F401  (its log channel rebuilds compaction events)
    from threadlog.checkpoint import lifecycle
    from threadlog.checkpoint.backends import backend_of
    from threadlog.checkpoint.backends.sqlite import file_weight
    from threadlog.checkpoint.saver import checkpointer
    from threadlog.errors import ConcurrentRunError
    from threadlog.flows import run as run_flow
    from threadlog.inspect.readonly import sqlite_path

    with checkpointer(url, multitask_strategy="reject", cache=False, allowed_types=types) as opened:
        saver: Any = opened  # a GuardedSaver: exclusive(), maintenance
        backend = backend_of(saver.inner)
        heads = {tid: head for tid, head, _, _ in backend.thread_heads()}
        missing = [t for t in args.thread if t not in heads]
        if missing:
            raise CommandError(f"no thread {missing[0]!r} in the database; nothing was pruned")
        chosen = sorted(args.thread or heads)
        strategy = "keep_latest" if older is None else "delete"
        if older is not None:
            chosen = [t for t in chosen if _idle(saver, t, heads[t]) > older]
        with contextlib.ExitStack() as held:
            for tid in chosen:
                try:
                    held.enter_context(saver.exclusive(tid))
                except ConcurrentRunError:
                    raise CommandError(
                        f"thread {tid!r} is held by a run; nothing was pruned (retry later)"
                    ) from None
            m = saver.maintenance
            report = run_flow(lifecycle.prune(m, chosen, strategy, dry=True))
            sizes = _sizes(backend, report)
            if args.dry_run:
                _print(report, sizes, dry=True, archive=args.archive)
                path = sqlite_path(url)
                if path is not None:
                    after = _rehearsed(path, chosen, strategy, types)
                    print(
                        f"the file weighs {file_weight(path)[0]:,} bytes; after the prune and "
                        f"VACUUM {after:,} (a rehearsal on a copy; without VACUUM the file "
                        "does not shrink: --vacuum runs it)"
                    )
                return 0
            if args.archive:
                _archive(saver, args.archive, report.threads if report.dropped else [])
            try:
                run_flow(lifecycle.prune(m, chosen, strategy))
            except BaseException:
                if args.archive:
                    with contextlib.suppress(OSError):
                        os.remove(args.archive)
                raise
            _print(report, sizes, dry=False, archive=args.archive)
    if args.vacuum:
        vacuum(url)
    _print_weight(url, vacuum=args.vacuum)
    return 0


def vacuum(url: str) -> None:
    from threadlog.checkpoint.backends import postgres, sqlite
    from threadlog.inspect.readonly import sqlite_path

    path = sqlite_path(url)
    if path is not None:
        sqlite.vacuum_file(path)
    else:
        postgres.vacuum_tables(url)


def _rehearsed(path: str, threads: list[str], strategy: str, types: Any) -> int:
    """What the SQLite file weighs after this prune and `VACUUM`, measured on a temporary copy."""
    import sqlite3
    import tempfile
    from contextlib import closing
    from urllib.parse import quote

    from threadlog.checkpoint import lifecycle
    from threadlog.checkpoint.backends.sqlite import file_weight
    from threadlog.checkpoint.saver import checkpointer
    from threadlog.flows import run as run_flow

    with tempfile.TemporaryDirectory(prefix="threadlog-prune-") as folder:
        copy = os.path.join(folder, "rehearsal.db")
        ro = f"file:{quote(os.path.abspath(path))}?mode=ro"
        with closing(sqlite3.connect(ro, uri=True)) as source, closing(sqlite3.connect(copy)) as to:
            source.backup(to)
        with checkpointer(
            f"sqlite:///{copy}", multitask_strategy="reject", cache=False, allowed_types=types
        ) as opened:
            saver: Any = opened
            run_flow(lifecycle.prune(saver.maintenance, threads, strategy))
        vacuum(f"sqlite:///{copy}")
        return file_weight(copy)[0]


def _print_weight(url: str, *, vacuum: bool) -> None:
    from threadlog.checkpoint.backends.sqlite import file_weight
    from threadlog.inspect.readonly import sqlite_path

    path = sqlite_path(url)
    if path is None:
        if vacuum:
            print("vacuumed the checkpoint tables: their space is reusable")
        return
    on_disk, used = file_weight(path)
    if vacuum:
        print(f"vacuumed: the file weighs {on_disk:,} bytes")
    else:
        print(
            f"the file weighs {on_disk:,} bytes; VACUUM would bring it to about {used:,} "
            "(--vacuum runs it)"
        )


def _idle(saver: Any, thread_id: str, head: str) -> timedelta:
    conf = {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": head}
    tup = saver.inner.get_tuple({"configurable": conf})
    ts = tup.checkpoint.get("ts") if tup is not None else None
    if not ts:
        return timedelta(0)
    when = datetime.fromisoformat(str(ts))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return datetime.now(UTC) - when


def _sizes(backend: Any, report: Any) -> dict[str, int]:
    dropped: dict[tuple[str, str], set[str]] = defaultdict(set)
    for tid, ns, cid in report.dropped:
        dropped[tid, ns].add(cid)
    out: Counter[str] = Counter()
    for (tid, ns), ids in dropped.items():
        stored = backend.stored_bytes(tid, ns) or {}
        out[tid] += sum(n for cid, n in stored.items() if cid in ids)
    return dict(out)


def _print(report: Any, sizes: dict[str, int], *, dry: bool, archive: str | None) -> None:
    from threadlog.terminal import safe_line

    by_thread = Counter(tid for tid, _, _ in report.dropped)
    freed = max(sum(sizes.values()) - report.snapshot_bytes, 0)
    verb = "would prune" if dry else "pruned"
    snapshots = report.snapshot_bytes
    gain = f" (heads gain snapshots of {snapshots:,} bytes)" if snapshots else ""
    print(
        f"{verb} {len(by_thread)} thread(s) ({report.strategy}): "
        f"{len(report.dropped)} checkpoint(s), {freed:,} bytes of rows{gain}"
    )
    for tid in sorted(by_thread):
        bytes_ = sizes.get(tid, 0)
        print(f"  {safe_line(tid)}: {by_thread[tid]} checkpoint(s), {bytes_:,} bytes of rows")
    if archive and by_thread:
        where = safe_line(archive)
        print(f"{'would archive' if dry else 'archived'} {len(by_thread)} thread(s) to {where}")


def _archive(saver: Any, path: str, threads: list[str]) -> None:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    try:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            archive = SqliteSaver(conn, serde=saver.inner.serde)
            archive.setup()
            for tid in threads:
                tups = sorted(
                    saver.inner.list({"configurable": {"thread_id": tid}}),
                    key=lambda t: str(t.config["configurable"]["checkpoint_id"]),
                )
                for tup in tups:
                    ns = tup.config["configurable"].get("checkpoint_ns", "")
                    where: Any = {"thread_id": tid, "checkpoint_ns": ns}
                    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
                    if parent:
                        where["checkpoint_id"] = parent
                    versions = tup.checkpoint.get("channel_versions") or {}
                    meta = tup.metadata
                    stored = archive.put({"configurable": where}, tup.checkpoint, meta, versions)
                    by_task: dict[str, list[tuple[str, Any]]] = {}
                    for task_id, channel, value in tup.pending_writes or ():
                        by_task.setdefault(str(task_id), []).append((channel, value))
                    for task_id, writes in by_task.items():
                        archive.put_writes(stored, writes, task_id)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(path)
        raise
