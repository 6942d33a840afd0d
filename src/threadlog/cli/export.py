"""`threadlog export --db SOURCE --thread ID [--namespace NS] [--format jsonl|openai|langchain]
[--checkpoint C] [-o FILE]`: one thread's whole message history
(`threadlog.inspect.export.whole_history`), read-only.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from threadlog.cli.errors import resolve_thread
from threadlog.cli.types import add_namespace, finish, source_parser

__all__ = ["register", "run"]

HELP = "print a thread's whole message history (jsonl, openai, langchain); reads only"
DESCRIPTION = "Print a thread's message history, complete, without running anything."
THREAD_HELP = "thread id"


def register(sub: Any) -> None:
    p = source_parser(sub, "export", HELP, DESCRIPTION, thread=THREAD_HELP)
    p.add_argument(
        "--format",
        choices=("jsonl", "openai", "langchain"),
        default="jsonl",
        help="jsonl (default): a message per line; openai: the Chat Completions messages; "
        "langchain: messages_to_dict",
    )
    add_namespace(
        p, "a subgraph's namespace (see `threadlog inspect`'s 'subgraphs'): export its log"
    )
    p.add_argument("--checkpoint", help="export the log at this checkpoint (id or unique suffix)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    finish(p, run)


def run(args: argparse.Namespace) -> int:
    from threadlog.cli.inspect import check_output_path
    from threadlog.inspect.export import dumps, whole_history

    if args.output:
        check_output_path(args.output)
    args.thread = resolve_thread(args.db, args.thread)
    messages, _ = whole_history(args.db, args.thread, args.checkpoint, namespace=args.namespace)
    text = dumps(messages, args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
