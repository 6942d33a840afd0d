"""`threadlog.server.checkpointer`: threadlog's saver as LangGraph Server's checkpointer.

In `langgraph.json` (`langgraph dev`, `langgraph up`, LangGraph Platform):

    "checkpointer": {"backend": "custom", "path": "threadlog.server.checkpointer"}

Contract:

* **Where it stores.** `THREADLOG_CHECKPOINTER_URL` when set (`postgresql://…`, or
  `sqlite:///…`; a relative SQLite path is relative to the server's working folder),
  else the SQLite file `.threadlog/checkpoints.sqlite` under the server's working
  folder — the folder `langgraph dev` is started in, which is also where it resolves
  langgraph.json's `graphs` and `dependencies` and keeps its own `.langgraph_api/`.
  `memory://` is refused: the server opens the checkpointer once per worker thread, and
  memory is neither shared between them nor kept across a restart.
* **What it is.** `threadlog.acheckpointer(url)` with its defaults: the guarded,
  strict, history-cached saver (`threadlog.checkpoint`). The run guard keeps its
  `"enqueue"` strategy: under the server the server's run queue decides which run holds
  a thread (`reject`, `enqueue`, `interrupt`, `rollback`); the guard only makes a run
  the server already started wait until a cancelled one has let go of the thread, and
  never refuses one (docs/server.md).
* **Reads through the server.** The server wraps the saver in its own adapter; the entry
  point makes that adapter hand a run's delta-channel history reads to the saver
  (`threadlog._upstream.forward_server_delta_history`), so a turn reads only the new
  writes, checked, as it does without the server.
* **Path form.** langgraph-api 0.16 loads a module path split at its last dot
  (`threadlog.server.checkpointer`); its docs' `package.module:name` form does not load
  there. A server that only loads files takes a one-line file instead:
  `from threadlog.server import checkpointer` and `"path": "./checkpointer.py:checkpointer"`.

For other options (`allowed_types=` for your own state classes, `max_input_chars=`), the
one-line file fixes them: `checkpointer = functools.partial(threadlog.server.checkpointer,
allowed_types=[MyState])` (the server calls what it loads with no arguments).
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
DEFAULT_FILE = Path(".threadlog") / "checkpoints.sqlite"
"""The default SQLite file, relative to the server's working folder."""


def checkpointer_url(
    environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> str:
    """The URL `checkpointer` opens (module doc); creates the default file's folder.

    A bad `THREADLOG_CHECKPOINTER_URL` raises one `ValueError` naming the variable."""
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
    """The saver for LangGraph Server (module doc), closed when the server stops.

    The server calls it with no arguments; a one-line file can fix others with
    `functools.partial` (`url` instead of the variable, and `acheckpointer`'s
    `allowed_types`, `max_input_chars`, `max_lock_connections`)."""
    # The server's adapter would walk delta-channel history itself, past the history cache
    # and the checksum check: O(history) per turn (`_upstream.forward_server_delta_history`).
    forward_server_delta_history()
    url = checkpointer_url() if url is None else _checked(url, "url")
    # "enqueue": the server's run queue decides; the guard never refuses a run it started.
    async with acheckpointer(
        url,
        multitask_strategy="enqueue",
        allowed_types=allowed_types,
        max_input_chars=max_input_chars,
        max_lock_connections=max_lock_connections,
    ) as saver:
        yield saver
