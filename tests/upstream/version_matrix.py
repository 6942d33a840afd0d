"""Run the test suite on the oldest and the newest versions pyproject.toml allows.

    python tests/upstream/version_matrix.py                  # both ends, the default tests
    python tests/upstream/version_matrix.py --only oldest -- tests/test_tool_node.py

For each end it makes a venv under `$THREADLOG_MATRIX_DIR` (default
`~/.cache/threadlog-matrix/<end>`) and installs `.[dev]` with pip: "oldest" pins every
LangGraph / LangChain runtime dependency to the lower bound of its specifier
(`langgraph>=1.2.22,<2` → `langgraph==1.2.22`), "newest" upgrades everything the
specifiers allow. It runs pytest there with `THREADLOG_UPSTREAM_BASELINE=1` (upstream tests
that fail with LangGraph's own parts at that end are left out); by default the tests that
touch LangGraph's private names and APIs most: `_upstream`, the tool node, the upstream
suites and the conformance suite. It prints one line per end with the resolved LangGraph
versions and pytest's summary, and exits non-zero if either end fails. CI does not run it
(two fresh venvs take longer than CI's budget); run it before raising or lowering a pin.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TESTS = [
    "tests/test_upstream.py",
    "tests/test_tool_node.py",
    "tests/test_tool_node_langgraph_api.py",
    "tests/test_upstream_suites.py",
    "tests/test_checkpoint_conformance.py",
]
SHOWN = ("langgraph", "langgraph-prebuilt", "langgraph-checkpoint", "langchain-core")


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


def run_end(end: str, tests: list[str], base: Path) -> bool:
    venv = base / end
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q"]
    if end == "oldest":
        constraints = venv / "constraints.txt"
        constraints.write_text("\n".join(lower_bounds()) + "\n")
        subprocess.run([*pip, "-c", str(constraints), "-e", f"{ROOT}[dev]"], check=True)
    else:
        subprocess.run(
            [*pip, "--upgrade", "--upgrade-strategy", "eager", "-e", f"{ROOT}[dev]"], check=True
        )
    versions = subprocess.run(
        [str(py), "-c", "from importlib import metadata as m; import sys; "
         "print(', '.join(f'{d} {m.version(d)}' for d in sys.argv[1:]))", *SHOWN],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
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
    print(f"{end}: {versions} -> {summary}")
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
    return proc.returncode == 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=["oldest", "newest"])
    p.add_argument("tests", nargs="*", help=f"pytest arguments (default: {DEFAULT_TESTS})")
    args = p.parse_args(argv)
    base = Path(os.environ.get("THREADLOG_MATRIX_DIR", Path.home() / ".cache/threadlog-matrix"))
    base.mkdir(parents=True, exist_ok=True)
    ends = [args.only] if args.only else ["oldest", "newest"]
    ok = [run_end(end, args.tests or DEFAULT_TESTS, base) for end in ends]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
