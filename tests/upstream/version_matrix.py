"""Run the LangGraph-facing tests on the oldest and the newest versions pyproject.toml allows.

    python tests/upstream/version_matrix.py                  # both ends, the default tests
    python tests/upstream/version_matrix.py --only oldest -- tests/nodes/test_tool_node.py

For each end it makes a venv under `$THREADLOG_MATRIX_DIR` (default
`~/.cache/threadlog-matrix/<end>`; `--fresh` deletes it first) and installs `.[dev]` with
pip (its cache is used): "oldest" pins every LangGraph / LangChain runtime dependency to
the lower bound of its specifier (`langgraph>=1.2.22,<2` → `langgraph==1.2.22`), "newest"
upgrades everything the specifiers allow. It runs pytest there with
`THREADLOG_UPSTREAM_BASELINE=1` (upstream tests that fail with LangGraph's own parts at
that end are left out): by default the tests that touch LangGraph's private names and
APIs most — `_upstream`, the tool node, the upstream suites and the conformance suite. It
prints one line per end with the resolved versions, pytest's summary and the time taken,
and exits non-zero if either end fails. `.ci/run` runs it after the main suite with
`--newest-venv .venv`: that venv is fresh from the README's command, so it is the newest
end already and the whole suite has just run there; the matrix checks that pip would
upgrade nothing in it, and builds and tests only the oldest end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TESTS = [
    "tests/upstream/test_upstream.py",
    "tests/upstream/test_hooks.py",
    "tests/nodes/test_tool_node.py",
    "tests/nodes/test_tool_node_langgraph_api.py",
    "tests/upstream/test_upstream_suites.py",
    "tests/storage/test_checkpoint_conformance.py",
]
SHOWN = (
    "langgraph",
    "langgraph-prebuilt",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "langchain-openai",
)


def lower_bounds() -> list[str]:
    """`name==lower` for each runtime dependency with a `>=` bound."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = list(data["project"]["dependencies"])
    deps += data["project"]["optional-dependencies"].get("postgres", [])
    pins = []
    for dep in deps:
        m = re.match(r"^([A-Za-z0-9_.\-\[\],]+?)\s*>=\s*([0-9][^,;\s]*)", dep)
        if m:
            name = re.sub(r"\[.*\]", "", m.group(1))
            # LangGraph's and LangChain's packages are what the matrix is about; a driver's
            # oldest release may not even install (psycopg 3.2.0 needs a dev wheel).
            if name.startswith(("langgraph", "langchain")):
                pins.append(f"{name}=={m.group(2)}")
    return pins


def _pip(cmd: list[str]) -> None:
    """A pip install, quiet unless it fails (then its output, and the exception)."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        proc.check_returncode()


def install(end: str, base: Path, fresh: bool) -> float:
    """Make `end`'s venv and install `.[dev]` at that end; the seconds it took."""
    venv = base / end
    started = time.monotonic()
    if fresh:
        shutil.rmtree(venv, ignore_errors=True)
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q"]
    if end == "oldest":
        constraints = venv / "constraints.txt"
        constraints.write_text("\n".join(lower_bounds()) + "\n")
        _pip([*pip, "-c", str(constraints), "-e", f"{ROOT}[dev]"])
    else:
        _pip([*pip, "--upgrade", "--upgrade-strategy", "eager", "-e", f"{ROOT}[dev]"])
    return time.monotonic() - started


def verify_newest(venv: Path) -> float:
    """Check that `venv` (CI: the main suite's fresh venv) is the newest end already: pip,
    asked to upgrade everything `.[dev]` allows, would install nothing but threadlog."""
    started = time.monotonic()
    report = venv / "newest-check.json"
    py = str(venv / "bin" / "python")
    _pip([py, "-m", "pip", "install", "-q", "--dry-run", "--upgrade", "--upgrade-strategy",
          "eager", "--report", str(report), "-e", f"{ROOT}[dev]"])  # fmt: skip
    would = [
        f"{item['metadata']['name']} {item['metadata']['version']}"
        for item in json.loads(report.read_text())["install"]
        if item["metadata"]["name"] != "threadlog"
    ]
    if would:
        raise SystemExit(f"newest: {venv} is not at the newest versions; pip would install {would}")
    return time.monotonic() - started


def versions_in(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from importlib import metadata as m; import sys; "
         "print(', '.join(f'{d} {m.version(d)}' for d in sys.argv[1:]))", *SHOWN],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def run_tests(end: str, tests: list[str], base: Path, install_s: float) -> bool:
    venv = base / end
    py = venv / "bin" / "python"
    started = time.monotonic()
    versions = versions_in(venv)
    env = {
        **os.environ,
        "THREADLOG_UPSTREAM_CACHE": str(venv / "upstream-cache"),
        "THREADLOG_UPSTREAM_BASELINE": "1",  # ignore upstream tests LangGraph itself fails
    }
    proc = subprocess.run(
        [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
    took = f"install {install_s:.0f} s, tests {time.monotonic() - started:.0f} s"
    print(f"{end}: {versions} -> {summary} ({took})", flush=True)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], flush=True)
    return proc.returncode == 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=["oldest", "newest"])
    p.add_argument("--fresh", action="store_true", help="delete the venvs first")
    p.add_argument(
        "--newest-venv", type=Path, metavar="VENV",
        help="the newest end is this venv, whose whole suite already ran (CI: .venv, fresh "
        "from the README's command): check that pip would upgrade nothing in it instead of "
        "building another venv and running the same tests at the same versions again",
    )  # fmt: skip
    p.add_argument("tests", nargs="*", help=f"pytest arguments (default: {DEFAULT_TESTS})")
    args = p.parse_args(argv)
    base = Path(os.environ.get("THREADLOG_MATRIX_DIR", Path.home() / ".cache/threadlog-matrix"))
    base.mkdir(parents=True, exist_ok=True)
    ends = [args.only] if args.only else ["oldest", "newest"]
    reused = args.newest_venv if "newest" in ends else None
    built = [end for end in ends if not (end == "newest" and reused)]

    # The installs wait mostly on the package index: all at once. The tests use the CPU
    # (and each its own Postgres server): one end after the other.
    def prepare(end: str) -> float:
        if end == "newest" and reused:
            return verify_newest(reused)
        return install(end, base, args.fresh)

    with ThreadPoolExecutor(len(ends)) as pool:
        took = dict(zip(ends, pool.map(prepare, ends), strict=True))
    tests = args.tests or DEFAULT_TESTS
    ok = [run_tests(end, tests, base, took[end]) for end in built]
    if reused:
        print(f"newest: {versions_in(reused)} -> the main suite's run in {reused} (pip would "
              f"upgrade nothing; checked in {took['newest']:.0f} s)", flush=True)  # fmt: skip
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
