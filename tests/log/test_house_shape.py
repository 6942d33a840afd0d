"""The shape docs/ARCHITECTURE.md promises a newcomer: a package root of at most 12 modules,
no function in `src/` over 80 lines, at most 12 sync/async twin pairs (8+ lines a side,
counted by `scripts/twins.py`). Read from the source, nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

from scripts.twins import twins

SRC = Path(__file__).resolve().parents[2] / "src" / "threadlog"


def test_the_package_root_holds_at_most_12_modules() -> None:
    modules = sorted(p.name for p in SRC.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= 12, modules


def test_no_function_in_src_is_over_80_lines() -> None:
    long = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines})")
    assert long == []


def test_src_has_at_most_12_sync_async_twin_pairs() -> None:
    pairs = [
        f"{path.relative_to(SRC)}:{a.lineno} {a.name} ~ {b.name}"
        for path in sorted(SRC.rglob("*.py"))
        for a, b in twins(path, 8)
    ]
    assert len(pairs) <= 12, pairs
