"""How many bytes each checkpoint of a thread occupies in its checkpointer's tables.

Contract: `stored_bytes(saver, thread_id, namespace="")` returns `{checkpoint_id: bytes}`
for one namespace (the root by default; a subgraph's `checkpoint_ns`), or `None` when the
saver keeps no measurable storage we know of. A checkpoint's bytes are what its rows hold:
the checkpoint and metadata row, the channel blobs whose version first appears in it
(Postgres and memory store values apart from the checkpoint), and the writes saved
against it (the writes of the step that runs *from* it, including those of a task that
failed). Summing every checkpoint gives the thread's total in the tables.

Only sizes are read (`length()`, `octet_length()`); values are never decoded here. The
queries are the saver's backend's (`backend_of(saver).stored_bytes`).
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from threadlog.checkpoint.backends import backend_of

__all__ = ["stored_bytes"]


def stored_bytes(
    saver: BaseCheckpointSaver[Any], thread_id: str, namespace: str = ""
) -> dict[str, int] | None:
    return backend_of(saver).stored_bytes(thread_id, namespace)
