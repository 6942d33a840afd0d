"""The notebooks in notebooks/ run top to bottom in a real Jupyter kernel, offline.

The kernel is this interpreter (a kernelspec written to a temp dir and found through
JUPYTER_PATH), so the tests work in any fresh virtual env without `ipykernel install`.
Each test reads what the notebook printed and checks it against the database the notebook
wrote (THREADLOG_NOTEBOOK_DIR points the notebook at a temp dir), not only that it ran.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from threadlog import inspect

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL = "threadlog-tests"


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "threadlog tests",
                "language": "python",
            }
        )
    )
    return root


class Run:
    """An executed notebook: its printed text, its HTML outputs, and its work dir."""

    def __init__(self, nb: Any, workdir: Path) -> None:
        self.workdir = workdir
        self.stdout = ""
        self.html: list[str] = []
        self.png: list[str] = []  # inline images (base64), e.g. `t.plot()`
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stdout":
                    self.stdout += out["text"]
                data = out.get("data", {})
                if "text/html" in data:
                    self.html.append(data["text/html"])
                if "image/png" in data:
                    self.png.append(data["image/png"])

    def value(self, label: str) -> str:
        m = re.search(rf"^{re.escape(label)}:? (.*)$", self.stdout, re.MULTILINE)
        assert m, f"the notebook did not print {label!r}:\n{self.stdout}"
        return m.group(1).strip()

    def db(self, name: str) -> str:
        return f"sqlite:///{self.workdir / name}"


def execute(name: str, kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    path = NOTEBOOKS / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # stored clean: nothing to trust from a previous run
        assert not cell.get("outputs") and cell.get("execution_count") is None, name
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))
    monkeypatch.setenv("THREADLOG_NOTEBOOK_DIR", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=120,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()
    return Run(nb, tmp_path)


def test_the_notebooks_extra_covers_every_import_of_the_notebooks() -> None:
    """README: `pip install -e ".[notebooks]"` is all the notebooks need."""
    import tomllib
    from importlib.metadata import packages_distributions

    def name(req: str) -> str:
        return re.split(r"[<>=!\[; ]", req, maxsplit=1)[0].lower().replace("_", "-")

    project = tomllib.loads((NOTEBOOKS.parent / "pyproject.toml").read_text())["project"]
    reqs = [*project["dependencies"], *project["optional-dependencies"]["notebooks"]]
    allowed = {name(r) for r in reqs}
    providers = packages_distributions()
    imported: set[str] = set()
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                for node in ast.walk(ast.parse(cell.source)):
                    if isinstance(node, ast.Import):
                        imported.update(a.name.split(".")[0] for a in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names} - {"threadlog"}
    missing = {
        m: providers.get(m)
        for m in third_party
        if not {d.lower().replace("_", "-") for d in providers.get(m, [])} & allowed
    }
    assert third_party and not missing


def test_weather_demo_notebook_walks_its_checkpoints(
    kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = execute("01_weather_demo", kernel_dir, tmp_path, monkeypatch)

    t = inspect.thread(run.db("weather.sqlite"), "weather-1")
    assert int(run.value("checkpoints")) == len(t.records)
    assert int(run.value("messages")) == len(t.head.messages) == 5
    assert "北京" in run.value("answer") and "上海" in run.value("answer")
    pairs = re.findall(r"^pair: get_weather (\S+) success -> ", run.stdout, re.MULTILINE)
    assert pairs == ["北京", "上海"]
    assert run.value("same log from the database") == "True"
    assert int(run.value("stored bytes")) == t.timeline().total_bytes
    assert "thread weather-1 · timeline" in run.stdout  # the CLI's text
    assert run.value("exit code") == "0"
    assert any("threadlog-inspect" in h and "get_weather" in h for h in run.html)
    ctx, log = re.findall(r"\d+", run.value("context messages"))
    assert int(ctx) == int(log) + 1  # the system prompt, sent but not logged


def test_branches_notebook_shows_the_failure_and_the_resume(
    kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = execute("02_parallel_failure_resume", kernel_dir, tmp_path, monkeypatch)

    assert "weather service for Shanghai is down" in run.value("run failed")
    assert run.value("open calls") == "3"
    assert "tools" in run.value("failed at step")
    assert run.value("errors in timeline") == "1"
    runs = run.stdout.strip().split("tool runs: ")[-1].splitlines()[0]
    assert ast.literal_eval(runs) == {"Beijing": 1, "Shanghai": 2, "Guangzhou": 1}
    pairs = re.findall(r"^pair: (\w+) (\w+) asked@(\d+) answered@(\d+) recorded$", run.stdout, re.M)
    assert [(c, s) for c, s, _, _ in pairs] == [
        ("Beijing", "success"),
        ("Shanghai", "success"),
        ("Guangzhou", "success"),
    ]
    assert len({(a, b) for _, _, a, b in pairs}) == 1  # one request, one resumed step
    t = inspect.thread(run.db("branches.sqlite"), "branches-1")
    failed = [r for r in t.records if r.errors]
    assert len(failed) == 1 and "Shanghai" in failed[0].errors[0].error
    assert run.value("error").startswith("ConnectionError('weather service for Shanghai")


def test_fork_notebook_draws_the_fork_tree(
    kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = execute("03_fork_time_travel", kernel_dir, tmp_path, monkeypatch)

    t = inspect.thread(run.db("forks.sqlite"), "forks-1")
    tree = t.forks()
    assert int(run.value("branches")) == len(tree.branches) == 3
    assert run.value("fork points") == repr([r.short_id for r in tree.fork_points])
    assert "广州" in run.value("branch answer")
    starts = re.findall(r"^branch \d: \d+ checkpoints, starts with (\w+)", run.stdout, re.M)
    assert starts == ["input", "fork", "update"]  # main line, time travel, update_state
    added, removed = re.findall(r"\d+", run.value("added"))
    # The update branch asked about 广州 (question, call, result, answer) where the main
    # line asked about 上海.
    assert (int(added), int(removed)) == (4, 4)
    assert any("fork tree" in h for h in run.html)


def test_long_conversation_notebook_compares_context_and_log(
    kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = execute("04_long_conversation", kernel_dir, tmp_path, monkeypatch)

    t = inspect.thread(run.db("long.sqlite"), "long-1")
    assert "'summary'" in run.value("compaction events")
    log_n = int(re.findall(r"\d+", run.value("full log"))[0])
    ctx_n = int(re.findall(r"\d+", run.value("context"))[0])
    assert ctx_n < log_n == len(t.head.messages) - 1
    assert run.value("summary in context") == "True"
    calls, max_ctx, log_tokens = re.findall(r"\d+", run.value("model calls"))
    assert int(calls) == 24 and int(max_ctx) < int(log_tokens)
    # The notebook's claim, checked against its own curve: once trimming starts the
    # context grows by a few tokens per call, the log by about ten times as much.
    assert int(run.value("trimming starts at model call")) > 1
    ctx_rate, log_rate = map(float, re.findall(r"[\d.]+", run.value("tokens per call after that")))
    assert 0 < ctx_rate * 5 < log_rate
    assert run.value("plot saved") == "long_conversation.png True"
    assert (tmp_path / "long_conversation.png").stat().st_size > 10_000
    assert len(run.png) == 1 and len(run.png[0]) > 10_000  # t.plot() shown inline


def test_debug_notebook_finds_the_failed_thread_and_what_the_model_saw(
    kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = execute("05_debug_a_real_thread", kernel_dir, tmp_path, monkeypatch)

    db = str(tmp_path / "app.sqlite")
    listing = inspect.threads(db)
    assert int(run.value("threads")) == len(listing.items) == 4
    assert run.value("thread with an error") == "user-2"
    assert "Shanghai timed out" in run.value("error")
    calls = re.findall(r"^call: (\w+) (\w+) (\S+)$", run.stdout, re.M)
    assert calls == [("Beijing", "success", "-"), ("Shanghai", "error", "raised")]
    assert run.value("model calls timed") == "2"
    assert run.value("failed result in context") == "True"
    t = inspect.thread(db, "user-2")
    after = [m for m in t.head.messages if m.type == "ai"][-1]
    assert int(run.value("context messages")) == (
        after.response_metadata["threadlog"]["context_messages"]
    )  # the rebuilt context has as many messages as the run recorded sending
    page = next(h for h in run.html if 'class="tl-wf-bar tool"' in h)
    assert page.count('class="tl-wf-bar tool"') == 2 and "user-2" in page
    assert any("what the model saw" in h for h in run.html)
    assert len(run.png) == 1
