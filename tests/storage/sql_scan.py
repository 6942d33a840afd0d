"""Where SQL, backend dispatch and saver unwrapping live in a source tree (for the
source-scan test; run as a script on another checkout to see its counts)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

# SQL as this code base writes it: keywords in capitals, or a lower-case statement.
SQL = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|PRAGMA|WITH RECURSIVE)\b"
    r"|(?is:^\s*(select|insert|update|delete|pragma|with\s+recursive)\s.*\b(from|into|set)\b)"
)
# LangGraph's checkpoint tables (SQLite calls its writes table `writes`).
TABLE = re.compile(
    r"(?i)\b(from|join|into|update|table_info)\s*[(']*\s*"
    r"(checkpoints|checkpoint_writes|checkpoint_blobs|checkpoint_migrations|writes)\b"
)
DISPATCH = re.compile(r"isinstance\([^)]*sqlite3\.Connection|__module__\.startswith")
UNWRAP = re.compile(r"""(vars\([^)]*\)|__dict__)(\.get\(|\[)\s*["']inner["']""")


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def literals(source: str) -> list[str]:
    """Every string literal but docstrings; an f-string's text with `{}` for each field,
    implicit concatenation already joined by the parser."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    out: list[str] = []
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                inside.add(id(v))
                parts.append(v.value if isinstance(v, ast.Constant) else "{}")
            out.append("".join(str(p) for p in parts))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and id(node) not in inside
        ):
            out.append(node.value)
    return out


def code_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if not line.lstrip().startswith("#")]


def scan(root: Path) -> dict[str, list[str]]:
    """Relative paths of the files under `root` with SQL, SQL naming LangGraph's tables,
    class/module dispatch on a connection, and `.inner` unwrapping."""
    found: dict[str, list[str]] = {"sql": [], "table_sql": [], "dispatch": [], "unwrap": []}
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        rel = path.relative_to(root).as_posix()
        sql = [s for s in literals(source) if SQL.search(s)]
        if sql:
            found["sql"].append(rel)
        if any(TABLE.search(s) for s in sql):
            found["table_sql"].append(rel)
        lines = code_lines(source)
        if any(DISPATCH.search(line) for line in lines):
            found["dispatch"].append(rel)
        if any(UNWRAP.search(line) for line in lines):
            found["unwrap"].append(rel)
    return found


def dispatch_sites(root: Path) -> int:
    return sum(
        len(DISPATCH.findall(line))
        for path in root.rglob("*.py")
        for line in code_lines(path.read_text())
    )


if __name__ == "__main__":
    target = Path(sys.argv[1])
    for kind, files in scan(target).items():
        print(f"{kind}: {len(files)}", *files, sep="\n  ")
    print("dispatch sites:", dispatch_sites(target))
