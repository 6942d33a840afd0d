"""`threadlog.server.checkpointer`: threadlog's saver as LangGraph Server's checkpointer.

In `langgraph.json` (`langgraph dev`, `langgraph up`, LangGraph Platform):

    "checkpointer": {"backend": "custom", "path": "threadlog.server.checkpointer"}

Contract:

* It stores at `THREADLOG_CHECKPOINTER_URL` when set (`postgresql://…`, `sqlite:///…`,
  relative to the server's working folder), else `.threadlog/checkpoints.sqlite` under
  that folder. `memory://` is refused (not shared between the server's worker threads).
* It is `threadlog.acheckpointer(url)` with its defaults; the run guard keeps `"enqueue"`:
  the server's run queue decides which run holds a thread (docs/server.md).
* The server's adapter hands delta-channel history reads to the saver
  (`threadlog._upstream.forward_server_delta_history`).
* A server that only loads files takes a one-line file:
  `from threadlog.server import checkpointer`, `"path": "./checkpointer.py:checkpointer"`;
  other options through `functools.partial(threadlog.server.checkpointer, ...)`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from threadlog._upstream import forward_server_delta_history
from threadlog.checkpoint.saver import acheckpointer, parse_url

__all__ = ["DEFAULT_FILE", "ENV_VAR", "checkpointer", "checkpointer_url"]

ENV_VAR = "THREADLOG_CHECKPOINTER_URL"
DEFAULT_FILE = Path(".threadlog") / "checkpoints.sqlite"  # under the server's working folder


def checkpointer_url(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """The URL `checkpointer` opens (module doc); creates the default file's folder."""
    env = os.environ if environ is None else environ
    url = env.get(ENV_VAR, "").strip()
    if not url:
        path = (Path.cwd() if cwd is None else cwd) / DEFAULT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path.resolve()}"
    return _checked(url, ENV_VAR)


def _checked(url: str, source: str) -> str:
    try:
        target = parse_url(url)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    if target.kind == "memory":
        raise ValueError(
            f"{source}={url!r}: LangGraph Server opens its checkpointer once per worker "
            "thread, and memory:// is neither shared between them nor kept across a "
            "restart; use sqlite:///path.db or postgresql://…"
        )
    return url


@contextlib.asynccontextmanager
async def checkpointer(
    url: str | None = None,
    *,
    allowed_types: Iterable[tuple[str, str] | type] = (),
    max_input_chars: int | None = None,
    max_lock_connections: int | None = None,
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The saver for LangGraph Server (module doc), closed when the server stops."""
    forward_server_delta_history()
    url = checkpointer_url() if url is None else _checked(url, "url")
    async with acheckpointer(
        url,
        multitask_strategy="enqueue",
        allowed_types=allowed_types,
        max_input_chars=max_input_chars,
        max_lock_connections=max_lock_connections,
    ) as saver:
        yield saver
