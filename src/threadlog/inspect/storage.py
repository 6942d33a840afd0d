"""How many bytes each checkpoint of a thread occupies in its checkpointer's tables.

Contract: `stored_bytes(saver, thread_id, namespace="")` returns `{checkpoint_id: bytes}`,
or `None` for a saver whose storage is not measurable. A checkpoint's bytes are its
checkpoint row, the blobs whose version first appears in it, and the writes saved against
it. Only sizes are read (`backend_of(saver).stored_bytes`).
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
