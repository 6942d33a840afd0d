"""`threadlog inspect --db URL --thread ID [--checkpoint ID] [--json]`.

Contract: prints the thread's timeline and its tool pairs (and the fork tree when the thread
has branches) as plain text that fits in 100 columns, for any checkpointer URL that
`threadlog.inspect.thread` reads (SQLite, Postgres). `--checkpoint` narrows to one branch:
the path from the root to that checkpoint, the pairs at it, and the diff from its parent.
`--json` prints the same views as `.rows()` in one JSON object instead; `--html FILE` also
writes them as one HTML page (what Jupyter shows), to share or screenshot. Exit status 0 on
success, 1 when the database or thread cannot be read (the error says which).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "inspect",
        help="show a thread's checkpoints: timeline, tool pairs, forks",
        description="Show a thread's checkpoints (timeline, tool pairs, fork tree).",
    )
    p.add_argument("--db", required=True, help="checkpointer URL: sqlite:///path or postgresql://…")
    p.add_argument("--thread", required=True, help="thread id")
    p.add_argument("--checkpoint", help="a checkpoint id (or a unique suffix): show its branch")
    p.add_argument("--json", action="store_true", help="print rows as JSON instead of tables")
    p.add_argument("--html", metavar="FILE", help="also write the views as an HTML page")
    p.add_argument(
        "--last", type=int, metavar="N", help="read only the newest N checkpoints (long threads)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from threadlog.inspect.thread import thread

    url: str = args.db
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not os.path.exists(path):  # opening would create an empty database
            print(f"threadlog inspect: no database at {path!r}", file=sys.stderr)
            return 1
    try:
        t = thread(url, args.thread, last=args.last)
        at = t.get(args.checkpoint) if args.checkpoint else None
    except (LookupError, ValueError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"threadlog inspect: {msg}", file=sys.stderr)
        return 1
    cid = at.checkpoint_id if at else None
    views: dict[str, Any] = {
        "timeline": t.timeline(branch=cid),
        "pairs": t.pairs(cid),
    }
    forks = t.forks()
    if len(forks.branches) > 1:
        views["forks"] = forks
    if at is not None and at.parent_id:
        views["diff"] = t.diff(at.parent_id, at.checkpoint_id)
    if args.html:
        from threadlog.inspect.table import render_page

        page = render_page(list(views.values()), f"thread {t.thread_id}")
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(page)
    if args.json:
        doc = {"thread": t.thread_id, **{k: v.rows() for k, v in views.items()}}
        text = json.dumps(doc, ensure_ascii=False, indent=1, default=str)
    else:
        text = "\n\n".join(str(v) for v in views.values())
    try:
        print(text)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stdout = open(os.devnull, "w")
    return 0
