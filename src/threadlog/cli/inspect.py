"""`threadlog inspect --db SOURCE --thread ID [--namespace NS] [--key KEY] [--checkpoint ID]
[--json] [--html FILE] [--last N] [--context CALL] [--calls] [--store]`: a thread's views
(`threadlog.inspect.thread`) as text, JSON or HTML; reads only (docs/inspect.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from threadlog.cli.errors import CommandError, positive, resolve_thread
from threadlog.cli.jsonout import dumps
from threadlog.cli.progress import Progress
from threadlog.cli.types import add_flags, add_namespace, finish, source_parser

__all__ = ["check_output_path", "register", "run"]

HELP = "show a thread's checkpoints: timeline, tool pairs, forks, what the model saw"
DESCRIPTION = "Show a thread's checkpoints (timeline, tool pairs, fork tree). Reads only."
THREAD_HELP = "thread id (see `threadlog threads`)"


def register(sub: Any) -> None:
    p = source_parser(sub, "inspect", HELP, DESCRIPTION, thread=THREAD_HELP)
    add_namespace(p, "a subgraph's namespace (listed under 'subgraphs'): show its checkpoints")
    p.add_argument(
        "--key",
        metavar="KEY",
        help="the state key whose messages to show (default: messages; see the state view)",
    )
    p.add_argument("--checkpoint", help="a checkpoint id (or a unique suffix): show its branch")
    p.add_argument(
        "--context",
        metavar="CALL",
        help="also show what the model saw for this model call: an AIMessage id, or an "
        "index among the model calls (-1: the last)",
    )
    add_flags(
        p,
        calls="list every model call the thread recorded (messages sent with the system "
        "prompt, tools, model, reply) instead of the views; with --json a JSON list",
        store="list the BaseStore items each step read and wrote (when the graph has a "
        "store) instead of the views; with --json a JSON list",
        json="print rows as JSON instead of tables",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write the thread as an HTML page; prints one line, 'wrote FILE' (with --json, "
        "the JSON, that line on stderr)",
    )
    p.add_argument(
        "--last",
        type=positive("checkpoints"),
        metavar="N",
        help="read only the newest N checkpoints (long threads)",
    )
    finish(p, run)


def check_output_path(path: str) -> None:
    """Refuse an output file that cannot be written, before any slow read."""

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CommandError(f"{path!r} is a directory; give a file name")
    if not os.path.isdir(folder):
        raise CommandError(f"cannot write {path!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise CommandError(f"cannot write {path!r}: the folder {folder!r} is not writable")


def _call(value: str) -> str | int:
    try:
        return int(value)
    except ValueError:
        return value


def run(args: argparse.Namespace) -> int:
    from threadlog.inspect.readonly import is_server_url
    from threadlog.inspect.thread import thread
    from threadlog.terminal import safe

    args.thread = resolve_thread(args.db, args.thread)
    if args.calls or args.store:
        return _calls(args)
    if args.html:
        check_output_path(args.html)
    hint = "" if args.last else "--last N reads only the newest N checkpoints"
    with Progress(f"reading thread {args.thread}", hint) as progress:
        t = thread(
            args.db,
            args.thread,
            last=args.last,
            progress=progress,
            namespace=args.namespace,
            key=args.key,
            calls=bool(args.html or args.context is not None) and not is_server_url(args.db),
        )
    at = t.get(args.checkpoint) if args.checkpoint else None
    cid = at.checkpoint_id if at else None
    views: dict[str, Any] = {"timeline": t.timeline(branch=cid), "pairs": t.pairs(cid)}
    if set((at or t.head).values) - {*t.message_keys[:1], "compactions"}:
        views["state"] = t.state(cid)
    if (handoffs := t.handoffs(cid)).rows():
        views["handoffs"] = handoffs
    if len((forks := t.forks()).branches) > 1:
        views["forks"] = forks
    if t.subgraph_list:
        views["subgraphs"] = t.subgraphs()
    if at is not None and at.parent_id:
        views["diff"] = t.diff(at.parent_id, at.checkpoint_id)
    if args.context is not None:
        views["context"] = t.context(_call(args.context), checkpoint=cid)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(t.html(*[v for k, v in views.items() if k == "context"]))
        # One line, naming the file (escaped: a path is the user's, but may hold anything).
        print(f"wrote {safe(args.html)}", file=sys.stderr if args.json else sys.stdout, flush=True)
        if not args.json:
            return 0
    if args.json:
        doc = {
            "thread": t.thread_id,
            **({"namespace": t.namespace} if t.namespace else {}),
            **({"key": t.key} if t.key != "messages" else {}),
            **{k: v.rows() for k, v in views.items()},
        }
        text = dumps(doc, indent=1)
    else:
        text = "\n\n".join(str(v) for v in views.values())
    print(text, flush=True)
    return 0


def _calls(args: argparse.Namespace) -> int:
    from threadlog.inspect.calls import recorded_calls
    from threadlog.inspect.readonly import is_server_url
    from threadlog.inspect.store_items import store_items

    flag = "--calls" if args.calls else "--store"
    if is_server_url(args.db):
        raise ValueError(
            f"{flag} reads a checkpointer's database (the server's SQLite file or "
            "Postgres URL); a LangGraph server's API does not return what was recorded"
        )
    if args.calls and args.store:
        raise ValueError("--calls and --store are two listings: pass one")
    shown = (recorded_calls if args.calls else store_items)(args.db, args.thread)
    print(shown.json_text() if args.json else str(shown), flush=True)
    return 0
