"""`threadlog inspect` (placeholder until the inspector lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("inspect", help="show a thread's checkpoints")
    p.add_argument("--db", required=True)
    p.add_argument("--thread", required=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("threadlog inspect: not built yet")
    return 1
