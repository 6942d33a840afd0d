"""`threadlog replay --db SOURCE --thread T --graph module:attr [--turns A:B]
[--model stored|live] [--tools live] [--json]`: `threadlog.check.replay`, one line per turn.

Exit 0 every turn matches, 1 a turn diverges, 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from threadlog.cli.errors import resolve_thread
from threadlog.cli.jsonout import dumps
from threadlog.cli.types import add_flags, finish, source_parser

__all__ = ["load_graph", "register", "run"]

HELP = "re-run a stored thread's turns through the current graph; report divergences"
DESCRIPTION = (
    "Replay each stored turn of a thread through a graph on a scratch copy "
    "(stored tool results served, never re-run). Exit 0 when every turn matches."
)
DB_HELP = "a SQLite file (path or sqlite:///path) or postgresql://…"


def register(sub: Any) -> None:
    p = source_parser(sub, "replay", HELP, DESCRIPTION, db=DB_HELP)
    p.add_argument("--thread", required=True, metavar="T", help="the thread to replay")
    p.add_argument(
        "--graph",
        required=True,
        metavar="MODULE:ATTR",
        help="the graph to replay through: a compiled graph or a function returning one",
    )
    p.add_argument("--turns", metavar="A:B", help="only turns A to B (1-based, inclusive)")
    p.add_argument(
        "--model",
        choices=("stored", "live"),
        default="stored",
        help="serve the stored replies (default) or call the graph's model",
    )
    p.add_argument(
        "--tools",
        choices=("stored", "live"),
        default="stored",
        help="live: run calls the stored turn did not make (default: report them)",
    )
    add_flags(p, json="print the turns as JSON")
    finish(p, run, error_status=2)


def load_graph(path: str) -> Any:
    """The graph `module:attr` names (module doc); ValueError saying why not."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--graph {path!r}: give module:attribute, e.g. myapp.agent:graph")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(f"--graph {path!r} does not import: {type(exc).__name__}: {exc}") from None
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"--graph {path!r}: module {module_name!r} has no {attr!r}") from None
    if not hasattr(value, "invoke") and callable(value):
        value = value()
    if not hasattr(value, "get_state") or not hasattr(value, "builder"):
        raise ValueError(
            f"--graph {path!r} is a {type(value).__name__}, not a compiled LangGraph graph"
        )
    return value


def run(args: argparse.Namespace) -> int:
    from threadlog.check.replay import replay
    from threadlog.inspect.readonly import describe

    graph = load_graph(args.graph)
    args.thread = resolve_thread(args.db, args.thread)
    report = replay(
        graph, args.db, args.thread, turns=args.turns, model=args.model, tools=args.tools
    )
    if args.json:
        doc = {
            "thread_id": args.thread,
            "source": describe(args.db),
            "graph": args.graph,
            "model": args.model,
            "tools": args.tools,
            "summary": report.summary()[0],
            "turns": report.rows(),
        }
        print(dumps(doc, indent=1), flush=True)
    else:
        print(str(report), flush=True)
    return report.status
