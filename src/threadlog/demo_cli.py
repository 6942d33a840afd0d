"""`threadlog demo`: one turn of the weather demo graph (placeholder until the demo lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run one turn of the weather demo (offline, SQLite)")
    p.add_argument("question", nargs="?", default="北京今天适合带伞吗？")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(f"threadlog demo: the weather graph is not built yet (question: {args.question})")
    return 0
