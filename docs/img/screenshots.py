"""Regenerates the inspector screenshots in this folder (needs headless Chromium and the dev
extra; run from the repository root):

    PYTHONPATH=src python docs/img/screenshots.py

* `thread-page.png` — `threadlog inspect --html` for the weather agent with one task per tool
  call: a turn with two parallel calls (their waterfall), a second turn, and a fork made by
  `update_state` shown as its own branch.
* `notebook-4-lab.png` — notebook 4 executed, rendered with nbconvert's `lab` template
  (JupyterLab's own stylesheet), from its plot section on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    sys.exit("needs headless Chromium (apt install chromium)")


def shoot(html: str, out: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        page = Path(d) / "page.html"
        page.write_text(html, encoding="utf-8")
        subprocess.run(
            [chromium(), *FLAGS, f"--screenshot={out}", f"--window-size={width},{height}",
             page.as_uri()],
            check=True, capture_output=True, timeout=120,
        )
    print("wrote", out)


def thread_page(work: Path) -> str:
    import threadlog
    from threadlog import OfflineChatModel, inspect
    from threadlog.examples.weather import build_branching_graph

    db = f"sqlite:///{work / 'page.db'}"
    config = {"configurable": {"thread_id": "weather-7"}}
    with threadlog.checkpointer(db) as saver:
        graph = build_branching_graph(OfflineChatModel(), saver)
        graph.invoke({"messages": [("user", "北京和上海今天要带伞吗？")]}, config)
        first = graph.get_state(config)
        graph.invoke({"messages": [("user", "那广州呢？")]}, config)
        graph.update_state(first.config, {"messages": [("user", "Tokyo tomorrow?")]})
    return inspect.thread(db, "weather-7").html()


def notebook_4(work: Path) -> str:
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    kernels = work / "kernels" / "shot"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "shot", "language": "python",
    }))
    import os

    os.environ.update(JUPYTER_PATH=str(work), THREADLOG_NOTEBOOK_DIR=str(work))
    nb = nbformat.read(REPO / "notebooks" / "04_long_conversation.ipynb", as_version=4)
    NotebookClient(nb, kernel_name="shot", timeout=300).execute()
    start = next(i for i, c in enumerate(nb.cells) if "t.plot()" in c.source) - 1
    nb.cells = nb.cells[start:-1]
    html, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return html


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        shoot(thread_page(work), HERE / "thread-page.png", 1100, 1250)
        shoot(notebook_4(work), HERE / "notebook-4-lab.png", 1100, 1400)


if __name__ == "__main__":
    main()
