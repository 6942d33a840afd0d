"""The import graph of `src/threadlog` has no circles, and every import points down.

The graph is read from the source (AST): module-level and function-level imports alike
(a deferred import is still a dependency), imports under `if TYPE_CHECKING:` left out
(they never run). `LAYERS` is the order docs/ARCHITECTURE.md states in "Layering, bottom
up", as data: keep the two in step. A new module fails `test_every_module_has_a_layer`
until it is given its place.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "threadlog"


class Branches(tuple[list[tuple[object, ...]], ...]):
    """Parallel stacks of ranks: a module of one never imports a module of another."""


# Bottom first. A rank is a tuple of modules (names under `threadlog`; "" is the face,
# `threadlog/__init__.py`) that do not import each other, or one `Branches`. A module may
# import any module of a lower rank; inside a branch, a lower rank of its own branch.
LAYERS: list[tuple[object, ...]] = [
    ("errors", "flows", "terminal"),
    ("_upstream",),
    ("log.message_values",),
    ("log.messages",),
    ("log.call_ids", "log.refusals"),
    ("log.edits",),
    ("log.removals",),
    ("log.pairing", "log.events"),
    ("log.message_log", "providers.profiles"),
    ("channel", "providers.wire", "providers.problems"),
    ("log", "providers"),
    (
        Branches(
            (
                [("context.policy", "context.events"), ("context.compaction",), ("context",)],
                [
                    ("checkpoint.shared_records",),
                    ("checkpoint.serde", "checkpoint.backends.base", "checkpoint.receipts"),
                    (
                        "checkpoint.backends.memory",
                        "checkpoint.backends.sqlite",
                        "checkpoint.backends.postgres",
                        "checkpoint.backends.postgres_inline",
                    ),
                    ("checkpoint.backends",),
                    (
                        "checkpoint.layered",
                        "checkpoint.recover",
                        "checkpoint.state_types",
                        "checkpoint.call_records",
                        "checkpoint.store_ops",
                    ),
                    ("checkpoint.own_writes", "checkpoint.resent"),
                    ("checkpoint.cache",),
                    (
                        "checkpoint.calls",
                        "checkpoint.input_check",
                        "checkpoint.integrity",
                        "checkpoint.stopped_work",
                    ),
                    ("checkpoint.lifecycle",),
                    ("checkpoint.guard",),
                    ("checkpoint.saver",),
                    ("checkpoint",),
                ],
                [("models.offline", "models.servers", "models.text_calls"), ("models",)],
            )
        ),
    ),
    ("nodes.state", "nodes.trace", "nodes.turns", "nodes.choice"),
    (
        Branches(
            (
                [
                    (
                        "nodes.tools.checks",
                        "nodes.tools.handling",
                        "nodes.tools.storage_check",
                        "nodes.tools.routing",
                        "nodes.tools.approval",
                        "nodes.tools.started",
                        "nodes.tools.keys",
                    ),
                    ("nodes.tools.results", "nodes.tools.rerun"),
                    ("nodes.tools.running", "nodes.tools.idempotent"),
                    ("nodes.tools.node",),
                    ("nodes.tools",),
                ],
                [("nodes.model",)],
            )
        ),
    ),
    ("nodes",),
    ("agent",),
    (
        "inspect.table",
        "inspect.records",
        "inspect.catalog",
        "inspect.readonly",
    ),
    ("inspect.steps", "inspect.source"),
    ("inspect.keys",),
    (
        "inspect.summary",
        "inspect.state",
        "inspect.namespaces",
        "inspect.timeline",
        "inspect.forks",
        "inspect.diff",
        "inspect.pairs",
        "inspect.context_seen",
        "inspect.calls",
        "inspect.handoffs",
    ),
    (
        "inspect.remote",
        "inspect.plot",
        "inspect.page",
        "inspect.store_items",
    ),
    (
        "inspect.threads",
        "inspect.export",
    ),
    ("inspect.thread",),
    ("inspect",),
    ("check.database", "check.boundary", "check.requests"),
    ("check.served", "check.repair", "check.replay"),
    ("check",),
    ("",),
    ("examples.weather", "testing", "server"),
    ("examples",),
    ("cli.progress", "cli.errors", "cli.transcript", "cli.jsonout"),
    ("cli.types",),
    ("cli.threads", "cli.demo", "cli.check", "cli.replay"),
    ("cli.inspect",),
    ("cli.export", "cli.prune"),
    ("cli",),
    ("cli.__main__", "__main__"),
]

# -- the graph ---------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def _type_checking_only(node: ast.AST) -> list[ast.stmt]:
    if isinstance(node, ast.If):
        test = node.test
        name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
        if name == "TYPE_CHECKING":
            return node.body
    return []


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    skipped = {id(s) for n in ast.walk(tree) for s in _type_checking_only(n)}
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if id(node) in skipped:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        todo.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (a `from pkg import name` that names a
    submodule counts as importing the submodule)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                targets = [
                    f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target
                    for a in node.names
                ]
            out.update(t for t in targets if t in mods and t != name)
        graph[name] = out
    return graph


# -- the order ---------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where a module sits: (rank, branch) per nesting level, then its rank."""

    path: tuple[int, ...]


def places() -> dict[str, Place]:
    out: dict[str, Place] = {}

    def walk(stack: list[tuple[object, ...]], prefix: tuple[int, ...]) -> None:
        for r, rank in enumerate(stack):
            for item in rank:
                if isinstance(item, Branches):
                    for b, branch in enumerate(item):
                        walk(branch, (*prefix, r, b))
                else:
                    name = f"{PACKAGE}.{item}" if item else PACKAGE
                    assert name not in out, f"{name} is placed twice in LAYERS"
                    out[name] = Place((*prefix, r))

    walk(LAYERS, ())
    return out


def points_down(importer: Place, imported: Place) -> bool:
    a, b = importer.path, imported.path
    for level in range(0, min(len(a), len(b)), 2):
        if b[level] != a[level]:
            return b[level] < a[level]
        # The same rank: only modules of one branch, one level in, can still be ordered.
        inside = level + 1 < len(a) and level + 1 < len(b)
        if not inside or a[level + 1] != b[level + 1]:
            return False
    return False


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# -- the tests ---------------------------------------------------------------------


def test_every_module_has_a_layer_and_every_layer_names_a_module() -> None:
    placed, present = set(places()), set(modules())
    assert sorted(present - placed) == [], "modules missing from LAYERS (and the doc)"
    assert sorted(placed - present) == [], "LAYERS names modules that do not exist"


def test_the_import_graph_has_no_cycles() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" ⇄ ".join(c) for c in found)


def test_every_import_points_down_the_documented_layers() -> None:
    where = places()
    upward = sorted(
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        for b in targets
        if not points_down(where[a], where[b])
    )
    assert upward == [], "imports that do not point down:\n" + "\n".join(upward)


def test_the_checks_see_a_function_level_import_and_skip_type_checking_ones() -> None:
    graph = import_graph()
    # `cli/errors.py` imports the read-only source's error inside a function only.
    assert "threadlog.inspect.readonly" in graph["threadlog.cli.errors"]
    assert "threadlog.agent" not in graph[PACKAGE]  # the face's are under TYPE_CHECKING
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    down = places()
    assert points_down(down["threadlog.log.message_log"], down["threadlog.log.pairing"])
    assert not points_down(down["threadlog.log.pairing"], down["threadlog.log.message_log"])
    log, profiles = down["threadlog.log.message_log"], down["threadlog.providers.profiles"]
    assert not points_down(log, profiles)  # one rank
    # Sibling branches: context/ and checkpoint/ never import each other.
    assert not points_down(down["threadlog.checkpoint.saver"], down["threadlog.context.policy"])
    assert points_down(down["threadlog.checkpoint.saver"], down["threadlog.checkpoint.cache"])
    assert points_down(down["threadlog.nodes.model"], down["threadlog.checkpoint.recover"])
