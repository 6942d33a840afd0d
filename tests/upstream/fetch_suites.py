"""LangGraph's own tests, run against threadlog's parts: fetch, swap imports, run, compare.

    python tests/upstream/fetch_suites.py            # threadlog's parts, table + failures
    python tests/upstream/fetch_suites.py --both     # also LangGraph's own parts (baseline)
    python tests/upstream/fetch_suites.py --write-manifest   # record today's failures

What it does:

1. `pip download --no-deps --no-binary :all:` the sdists of the *installed* `langgraph`
   and `langgraph-prebuilt` (they ship `tests/`) into a cache directory
   (`$THREADLOG_UPSTREAM_CACHE`, default `~/.cache/threadlog-upstream`), once per version.
2. Extracts their `tests/` twice: as shipped ("langgraph" parts) and with the imports of
   `ToolNode`, `tools_condition`, `MessagesState` and `add_messages` swapped for threadlog's
   (`threadlog.append_messages` is threadlog's `add_messages`). Only import statements
   change; the test bodies are LangGraph's, byte for byte.
3. Runs each suite in a pytest subprocess (the upstream `tests` package must be the
   `tests` on the path, so it cannot share a process with ours) and records one outcome
   per test id: passed, failed (a failure or an error in any phase) or skipped.

The suites (one row each in docs/compatibility.md):

* `toolnode`: langgraph-prebuilt's five ToolNode test files.
* `messages_state`: langgraph's `tests/test_messages_state.py`.
* `graph`: every other langgraph test function that uses one of the swapped names, directly
  or through a module-level helper, minus `SERVICE_TESTS` (they need Docker services).
  Checkpointer parameters are upstream's with `NO_DOCKER=true`: memory and SQLite.

`expected.toml` beside this file is the manifest of tests expected to fail with threadlog's
parts, each under the deliberate difference (an id with a section in docs/compatibility.md)
that explains it; tests/upstream/test_upstream_suites.py fails on any new failure and any new pass.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "expected.toml"

# name -> (threadlog module, threadlog name)
SWAPS: dict[str, tuple[str, str]] = {
    "ToolNode": ("threadlog", "ToolNode"),
    "tools_condition": ("threadlog", "tools_condition"),
    "MessagesState": ("threadlog", "MessagesState"),
    "add_messages": ("threadlog", "append_messages"),
}
# Only these upstream modules' exports are swapped (a local `class MessagesState` stays).
SWAPPED_FROM = {
    "langgraph.prebuilt",
    "langgraph.prebuilt.tool_node",
    "langgraph.graph",
    "langgraph.graph.message",
    "langgraph.graph.state",
}

TOOLNODE_FILES = (
    "tests/test_tool_node.py",
    "tests/test_on_tool_call.py",
    "tests/test_tool_node_interceptor_unregistered.py",
    "tests/test_tool_node_validation_error_filtering.py",
    "tests/test_injected_state_not_required.py",
)
MESSAGES_STATE_FILES = ("tests/test_messages_state.py",)
# langgraph test files that need Docker services (Postgres on :5442, a server) or
# optional extras regardless of the parts under test.
SERVICE_TESTS = (
    "tests/test_prune_postgres.py",
    "tests/test_remote_graph.py",
)

# Tests that fail or hang with LangGraph's own parts in this environment: not ours to judge.
UPSTREAM_BROKEN = (
    # a sync `invoke` inside an async test blocks on aiosqlite's worker thread forever
    "tests/test_large_cases_async.py::test_weather_subgraph[sqlite_aio]",
    # with the `langchain` package installed (langgraph-supervisor, a dev dependency,
    # brings it) chat-model runs stream an extra `lc_versions` metadata key these expect not
    "tests/test_pregel.py::test_tags_stream_mode_messages",
    "tests/test_pregel_async.py::test_tags_stream_mode_messages",
    "tests/test_large_cases.py::test_weather_subgraph",
    "tests/test_large_cases_async.py::test_weather_subgraph[memory]",
)

SUITES = ("toolnode", "messages_state", "graph")
MODES = ("langgraph", "threadlog")


@dataclass(frozen=True)
class Dist:
    name: str  # distribution name on PyPI
    sdist_prefix: str  # the sdist's top directory, minus "-<version>"


DISTS = {
    "langgraph": Dist("langgraph", "langgraph"),
    "langgraph-prebuilt": Dist("langgraph-prebuilt", "langgraph_prebuilt"),
}
SUITE_DIST = {"toolnode": "langgraph-prebuilt", "messages_state": "langgraph", "graph": "langgraph"}


def cache_dir() -> Path:
    env = os.environ.get("THREADLOG_UPSTREAM_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "threadlog-upstream"


def installed_version(dist: str) -> str:
    return metadata.version(dist)


# -- fetching ---------------------------------------------------------------------------


def fetch_sdist(dist: Dist, version: str, cache: Path) -> Path:
    """The sdist of `dist==version`, downloaded with pip once and kept in `cache`."""
    dest = cache / "sdists"
    dest.mkdir(parents=True, exist_ok=True)
    for candidate in dest.glob(f"{dist.sdist_prefix}-{version}.tar.gz"):
        return candidate
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        # the build backend (hatchling) is a dev dependency: no throwaway build env
        "--no-build-isolation", "--quiet", "--dest", str(dest), f"{dist.name}=={version}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    found = list(dest.glob(f"{dist.sdist_prefix}-{version}.tar.gz"))
    if proc.returncode != 0 or not found:
        raise RuntimeError(
            f"could not download the sdist of {dist.name}=={version} with pip "
            f"(exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    return found[0]


def extract_tests(sdist: Path, into: Path) -> Path:
    """Unpack the sdist's `tests/` and `pyproject.toml` under `into`; return `into`."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        members = []
        for m in tar.getmembers():
            rel = m.name[len(top) + 1 :]
            if rel == "pyproject.toml" or rel.startswith("tests/"):
                m.name = rel
                members.append(m)
        tar.extractall(into, members=members, filter="data")
    return into


# -- swapping imports -------------------------------------------------------------------


def swap_imports(source: str) -> str:
    """`source` with LangGraph's ToolNode/tools_condition/MessagesState/add_messages
    imports replaced by threadlog's; nothing else changes."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module not in SWAPPED_FROM:
            continue
        swapped = [a for a in node.names if a.name in SWAPS]
        if not swapped:
            continue
        kept = [a for a in node.names if a.name not in SWAPS]
        indent = " " * node.col_offset
        new: list[str] = []
        if kept:
            new.append(indent + ast.unparse(ast.ImportFrom(node.module, kept, node.level)))
        for a in swapped:
            module, name = SWAPS[a.name]
            new.append(f"{indent}from {module} import {name} as {a.asname or a.name}")
        edits.append((node.lineno - 1, node.end_lineno or node.lineno, "\n".join(new) + "\n"))
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text]
    return "".join(lines)


# -- choosing the graph tests -----------------------------------------------------------


def _swapped_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in SWAPPED_FROM:
            names |= {a.asname or a.name for a in node.names if a.name in SWAPS}
    return names


def _uses(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def tests_using_swapped_names(source: str) -> list[str]:
    """Test ids (`name` or `Class::name`) in `source` that reach a swapped name, directly
    or through module-level helpers (classes, functions, constants) that do."""
    tree = ast.parse(source)
    tainted = _swapped_names(tree)
    if not tainted:
        return []
    top = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    changed = True
    while changed:  # helpers using helpers: to a fixed point
        changed = False
        for node in top:
            names = _defined_names(node)
            if names and not names <= tainted and _uses(node, tainted):
                tainted |= names
                changed = True
    found: list[str] = []
    for node in top:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test") and _uses(node, tainted):
                found.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            class_uses = any(_uses(b, tainted) for b in node.bases)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if item.name.startswith("test") and (class_uses or _uses(item, tainted)):
                        found.append(f"{node.name}::{item.name}")
    return found


# -- preparing a suite tree -------------------------------------------------------------


@dataclass
class Prepared:
    root: Path  # the directory pytest runs in (holds the upstream `tests` package)
    targets: dict[str, list[str]] = field(default_factory=dict)  # suite -> pytest args


def prepare(dist_name: str, mode: str, cache: Path | None = None) -> Prepared:
    """The upstream tests of the installed `dist_name`, as shipped or swapped (`mode`)."""
    cache = cache or cache_dir()
    dist = DISTS[dist_name]
    version = installed_version(dist.name)
    pristine = cache / "tests" / f"{dist.sdist_prefix}-{version}"
    if not (pristine / "tests").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache))
        extract_tests(fetch_sdist(dist, version, cache), tmp)
        shutil.rmtree(pristine, ignore_errors=True)
        pristine.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(pristine)
    root = cache / "run" / mode / f"{dist.sdist_prefix}-{version}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(pristine, root)
    _write_pytest_config(root)
    (root / "_threadlog_outcomes.py").write_text(_OUTCOMES_PLUGIN)
    if mode == "threadlog":
        for path in (root / "tests").rglob("*.py"):
            text = path.read_text()
            swapped = swap_imports(text)
            if swapped != text:
                path.write_text(swapped)
    prepared = Prepared(root)
    if dist_name == "langgraph-prebuilt":
        prepared.targets["toolnode"] = list(TOOLNODE_FILES)
    else:
        prepared.targets["messages_state"] = list(MESSAGES_STATE_FILES)
        prepared.targets["graph"] = graph_targets(pristine)
    return prepared


def graph_targets(pristine: Path) -> list[str]:
    skip = set(MESSAGES_STATE_FILES) | set(SERVICE_TESTS)
    targets: list[str] = []
    for path in sorted((pristine / "tests").glob("test_*.py")):
        rel = path.relative_to(pristine).as_posix()
        if rel in skip:
            continue
        targets += [f"{rel}::{t}" for t in tests_using_swapped_names(path.read_text())]
    return targets


def _write_pytest_config(root: Path) -> None:
    # Upstream's own options (asyncio mode, markers), minus reporting flags we don't need.
    data = tomllib.loads((root / "pyproject.toml").read_text())
    opts = data.get("tool", {}).get("pytest", {}).get("ini_options", {})
    lines = ["[pytest]", "asyncio_mode = auto", "asyncio_default_fixture_loop_scope = function"]
    for key, value in opts.items():
        if key in ("addopts", "asyncio_mode"):
            continue
        if isinstance(value, list):
            lines.append(f"{key} =" + "".join(f"\n    {v}" for v in value))
        else:
            lines.append(f"{key} = {value}")
    (root / "pytest.ini").write_text("\n".join(lines) + "\n")


_OUTCOMES_PLUGIN = """\
import json, os

_OUT = os.environ["THREADLOG_OUTCOMES"]
_seen = {}


def pytest_runtest_logreport(report):
    prev = _seen.get(report.nodeid)
    if report.failed:
        outcome = "failed"
    elif report.skipped:
        outcome = "skipped"
    else:
        outcome = "passed"
    if prev == "failed" or (prev == "skipped" and outcome == "passed"):
        return
    _seen[report.nodeid] = outcome


def pytest_collectreport(report):
    if report.failed:
        _seen[report.nodeid or "<collection>"] = "failed"


def pytest_sessionfinish(session):
    with open(_OUT, "w") as f:
        json.dump(_seen, f, indent=0, sort_keys=True)
"""


# -- running ----------------------------------------------------------------------------


def run_suite(prepared: Prepared, suite: str, *, timeout: float = 900) -> dict[str, str]:
    """Run one suite in a pytest subprocess; return {test id: passed|failed|skipped}."""
    out = prepared.root / f"outcomes-{suite}.json"
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(prepared.root), _threadlog_src()]),
        "THREADLOG_OUTCOMES": str(out),
        "NO_DOCKER": "true",
        "LANGGRAPH_TEST_FAST": "true",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
        "_threadlog_outcomes", "--timeout", "120", "-o", "addopts=", "--snapshot-warn-unused",
        *(f"--deselect={t}" for t in UPSTREAM_BROKEN),
        *prepared.targets[suite],
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=prepared.root, env=env, capture_output=True, text=True, timeout=timeout
    )
    if not out.exists():
        raise RuntimeError(
            f"the {suite} suite did not run (pytest exit {proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    outcomes: dict[str, str] = json.loads(out.read_text())
    return outcomes


def _threadlog_src() -> str:
    import threadlog

    return str(Path(threadlog.__file__).resolve().parent.parent)


def run_all(
    mode: str, suites: Sequence[str] = SUITES, cache: Path | None = None
) -> dict[str, dict[str, str]]:
    results: dict[str, dict[str, str]] = {}
    by_dist: dict[str, list[str]] = {}
    for s in suites:
        by_dist.setdefault(SUITE_DIST[s], []).append(s)
    for dist_name, dist_suites in by_dist.items():
        prepared = prepare(dist_name, mode, cache)
        for s in dist_suites:
            results[s] = run_suite(prepared, s)
    return results


# -- the manifest -----------------------------------------------------------------------


def load_manifest(path: Path = MANIFEST) -> dict[str, dict[str, list[str]]]:
    """{suite: {difference id: [test ids]}} from expected.toml."""
    data = tomllib.loads(path.read_text())
    return {s: {k: list(v) for k, v in data.get(s, {}).items()} for s in SUITES}


def expected_failures(manifest: dict[str, dict[str, list[str]]], suite: str) -> set[str]:
    return {t for ids in manifest.get(suite, {}).values() for t in ids}


def compare(outcomes: dict[str, str], expected: Iterable[str]) -> tuple[list[str], list[str]]:
    """(new failures, new passes) of one suite against its expected failures."""
    expected = set(expected)
    failed = {t for t, o in outcomes.items() if o == "failed"}
    new_failures = sorted(failed - expected)
    new_passes = sorted(t for t in expected - failed if outcomes.get(t) == "passed")
    return new_failures, new_passes


def counts(outcomes: dict[str, str]) -> tuple[int, int, int]:
    values = list(outcomes.values())
    return values.count("passed"), values.count("failed"), values.count("skipped")


def write_manifest(results: dict[str, dict[str, str]], path: Path = MANIFEST) -> None:
    """Rewrite the manifest from `results`, keeping each known test under its difference;
    new failures go under "unclassified" (to be sorted into docs/compatibility.md)."""
    old = load_manifest(path) if path.exists() else {s: {} for s in SUITES}
    lines = [
        "# Upstream tests expected to FAIL with threadlog's parts, by deliberate difference.",
        "# Each key is an id with a section in docs/compatibility.md. Regenerate with",
        "#   python tests/upstream/fetch_suites.py --write-manifest",
        "# and move new failures out of `unclassified` (the test refuses that key).",
    ]
    for suite in SUITES:
        if suite not in results:
            continue
        failed = {t for t, o in results[suite].items() if o == "failed"}
        where = {t: diff for diff, ids in old.get(suite, {}).items() for t in ids}
        groups: dict[str, list[str]] = {}
        for t in sorted(failed):
            groups.setdefault(where.get(t, "unclassified"), []).append(t)
        lines.append(f"\n[{suite}]")
        for diff in sorted(groups):
            lines.append(f"{diff} = [")
            lines += [f"    {json.dumps(t)}," for t in groups[diff]]
            lines.append("]")
    path.write_text("\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--both", action="store_true", help="also run with LangGraph's own parts")
    p.add_argument("--suite", action="append", choices=SUITES, help="default: all")
    p.add_argument("--write-manifest", action="store_true")
    p.add_argument("--show", action="store_true", help="print every failing test id")
    args = p.parse_args(argv)
    suites = args.suite or list(SUITES)
    modes = ["langgraph", "threadlog"] if args.both else ["threadlog"]
    manifest = load_manifest() if MANIFEST.exists() else {s: {} for s in SUITES}
    table: dict[str, dict[str, tuple[int, int, int]]] = {}
    ok = True
    for mode in modes:
        results = run_all(mode, suites)
        for s, outcomes in results.items():
            table.setdefault(s, {})[mode] = counts(outcomes)
            if mode == "threadlog":
                new_f, new_p = compare(outcomes, expected_failures(manifest, s))
                if args.show:
                    for t in sorted(t for t, o in outcomes.items() if o == "failed"):
                        print(f"FAILED {s} {t}")
                for t in new_f:
                    print(f"NEW FAILURE {s} {t}")
                for t in new_p:
                    print(f"NEW PASS {s} {t}")
                ok = ok and not new_f and not new_p
        if mode == "threadlog" and args.write_manifest:
            write_manifest(results)
    versions = ", ".join(f"{d} {installed_version(d)}" for d in DISTS)
    print(f"\nupstream tests of {versions}; passed / failed / skipped")
    print("| suite | LangGraph's parts | threadlog's parts | deliberate differences |")
    print("|---|---|---|---|")
    for s in suites:
        cells = ["{} / {} / {}".format(*table[s][m]) if m in table[s] else "—" for m in MODES]
        diffs = [k for k in manifest.get(s, {}) if k != "unclassified"]
        print(f"| {s} | {cells[0]} | {cells[1]} | {len(diffs)} |")
    return 0 if ok or args.write_manifest else 1


if __name__ == "__main__":
    sys.exit(main())
