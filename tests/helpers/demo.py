"""Helpers for the demo tests: the installed `threadlog` command and a `langgraph dev` server.

* `install_wheel(repo, workdir)` builds the project's wheel (no build isolation: hatchling
  is a dev dependency, so no network) and installs it, non-editable, into a fresh venv
  whose only other packages are this environment's dependencies (a `.pth` line; the
  editable checkout is *not* on its path). Returns the venv's `bin` directory.
* `LangGraphDev(app_dir, env=...)` runs `langgraph dev --no-browser --no-reload` on a free
  port in `app_dir` as a subprocess, importing `threadlog` from this checkout's `src/`
  (not whatever copy the environment has installed), with `env` added to `clean_env()`;
  `url` when it answers `/ok`; stopped (process group) on exit.
* `clean_env()` is `os.environ` without anything that would point a subprocess at the
  checkout or at a network service.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "OPENAI_", "LANGSMITH_", "LANGCHAIN_", "VIRTUAL_ENV"))
    }
    env.update(
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGSMITH_TRACING="false",
        PYTHONIOENCODING="utf-8",
        **extra,
    )
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def install_wheel(repo: Path, workdir: Path) -> Path:
    dist = workdir / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(repo),
        ],
        check=True,
        capture_output=True,
        env=clean_env(),
    )
    (wheel,) = dist.glob("threadlog-*.whl")
    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        env=clean_env(),
    )
    # The dependencies (langgraph, langchain, ...) come from this environment. A plain
    # path line does not process that directory's own .pth files, so the editable
    # checkout stays invisible and `import threadlog` finds the installed wheel.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "_threadlog_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


class LangGraphDev:
    """`langgraph dev` in a subprocess (see the module docstring)."""

    def __init__(
        self,
        app_dir: Path,
        *,
        startup_timeout: float = 120.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.app_dir = app_dir
        self.env = clean_env(PYTHONPATH=str(REPO / "src"), **(env or {}))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_timeout = startup_timeout
        self.log = app_dir / "langgraph-dev.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LangGraphDev:
        log = self.log.open("wb")
        self.proc = subprocess.Popen(
            [
                str(BIN / "langgraph"),
                "dev",
                "--no-browser",
                "--no-reload",
                "--port",
                str(self.port),
            ],
            cwd=self.app_dir,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,  # its own process group, so the workers stop with it
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited early:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/ok", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.__exit__(None, None, None)
        raise RuntimeError(f"langgraph dev did not start:\n{self.log.read_text()[-3000:]}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
