"""Count sync/async twin pairs: the same operation written twice, once per driver.

    python scripts/twins.py [ROOT] [--min-lines N] [--list]

A twin pair is a plain `def x` and an `async def ax` (leading underscores kept:
`_put_steps` / `_aput_steps`) in one module — in the same scope, or in two (a sync
class's `maintain` and its async sibling's `amaintain`) — both at least `--min-lines`
lines long (default 8; a definition's lines run from its `def` to its last line,
decorators not counted). Each definition is in one pair at most, its own scope's twin
first. Sync/async forms made
from one flow by a driver (`flows.run` / `arun`) without a `def` of their own do not
count. Prints the number of pairs found under ROOT (default `src`); `--list` also
prints each pair as `path:line name ~ line aname (lines, alines)`. Reads files only.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

Def = ast.FunctionDef | ast.AsyncFunctionDef


def _defs(tree: ast.AST) -> Iterator[tuple[int, Def]]:
    """Every definition in the tree with the id of the scope holding it."""
    for scope in ast.walk(tree):
        for node in ast.iter_child_nodes(scope):
            if isinstance(node, Def):
                yield id(scope), node


def _lines(node: Def) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


def _async_name(name: str) -> str:
    bare = name.lstrip("_")
    return name[: len(name) - len(bare)] + "a" + bare


def twins(path: Path, min_lines: int) -> list[tuple[ast.FunctionDef, ast.AsyncFunctionDef]]:
    """The twin pairs of one file, each as (sync def, async def)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    defs = [(scope, n) for scope, n in _defs(tree) if _lines(n) >= min_lines]
    async_ = [(scope, n) for scope, n in defs if isinstance(n, ast.AsyncFunctionDef)]
    found = []
    for scope, node in defs:
        if not isinstance(node, ast.FunctionDef):
            continue
        named = [(s, n) for s, n in async_ if n.name == _async_name(node.name)]
        if named:
            pick = next(((s, n) for s, n in named if s == scope), named[0])
            async_.remove(pick)
            found.append((node, pick[1]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="src")
    parser.add_argument("--min-lines", type=int, default=8)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    total = 0
    for path in sorted(Path(args.root).rglob("*.py")):
        for a, b in twins(path, args.min_lines):
            total += 1
            if args.list:
                print(f"{path}:{a.lineno} {a.name} ~ {b.lineno} {b.name} "
                      f"({_lines(a)}, {_lines(b)})")
    print(f"{total} sync/async twin pairs of >= {args.min_lines} lines a side")
    return 0


if __name__ == "__main__":
    sys.exit(main())
