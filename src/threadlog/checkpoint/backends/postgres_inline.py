"""`InlineDumpAsyncPostgresSaver`: upstream's `AsyncPostgresSaver` with plainly small values
dumped and loaded on the event loop instead of in a worker thread (the hop costs more than
the dump: BENCHMARKS.md, "the thread hop"); larger ones keep the thread. Same SQL, same rows;
its private names are rows of `threadlog._upstream`'s table (`POSTGRES_PRIVATE`).

langgraph-checkpoint-postgres and psycopg are imported on first use only.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Sequence
from typing import Any

from threadlog._upstream import DeltaSnapshot, postgres_cursor

__all__ = ["INLINE_DUMP_BYTES", "inline_dump_async_postgres_saver", "small"]

# What is dumped or loaded on the loop: at most this many bytes of text and blobs, and
# this many values walked (a dump of that size takes well under a millisecond).
INLINE_DUMP_BYTES = 64 * 1024
INLINE_DUMP_ITEMS = 512
_ATOMS = (bool, int, float, type(None))
_ATOM_TYPES = frozenset(_ATOMS)
_TEXT_TYPES = frozenset((str, bytes, bytearray))
_SEQUENCE_TYPES = frozenset((list, tuple, collections.deque))


def small(value: Any) -> bool:
    """Whether `value` is plainly small: built of messages, containers and atoms, with at
    most `INLINE_DUMP_BYTES` of text. Any other object's dump cost is unknown: not small."""
    from langchain_core.messages import BaseMessage

    # Exact types first, isinstance only for subclasses: this runs on the loop, every step.
    stack, size, items = [value], 0, 0
    pop, push = stack.pop, stack.extend
    while stack:
        item = pop()
        items += 1
        if items > INLINE_DUMP_ITEMS:
            return False
        kind = type(item)
        if kind in _ATOM_TYPES:
            continue
        if kind in _TEXT_TYPES or isinstance(item, (str, bytes, bytearray)):
            size += len(item)
            if size > INLINE_DUMP_BYTES:
                return False
        elif kind is dict or isinstance(item, dict):
            push(item.keys())
            push(item.values())
        elif kind in _SEQUENCE_TYPES or isinstance(item, (list, tuple, collections.deque)):
            push(item)  # LangGraph's writes: a deque
        elif isinstance(item, BaseMessage):
            push(vars(item).values())  # every field, `artifact` included
        elif isinstance(item, _ATOMS):
            continue
        else:
            return False
    return True


async def _dumped(values: Any, dump: Callable[..., Any], *args: Any) -> Any:
    return dump(*args) if small(values) else await asyncio.to_thread(dump, *args)


def _batched(saver: Any, statements: int) -> bool:
    # For one statement a pipeline costs more than it saves (unless the saver was given one).
    return statements > 1 or saver.pipe is not None


def _blob_values(checkpoint: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the checkpoint without its blob values, those values), split as upstream's `aput`
    does: a delta snapshot leaves `True` in its place."""
    copy = {**checkpoint, "channel_values": dict(checkpoint["channel_values"])}
    blob_values = {}
    for k, v in checkpoint["channel_values"].items():
        if isinstance(v, DeltaSnapshot):
            blob_values[k] = copy["channel_values"].pop(k)
            copy["channel_values"][k] = True
        elif v is not None and not isinstance(v, (str, int, float, bool)):
            blob_values[k] = copy["channel_values"].pop(k)
    return copy, blob_values


@functools.cache
def inline_dump_async_postgres_saver() -> type[Any]:
    """`AsyncPostgresSaver` with small writes dumped and loaded on the loop (module doc)."""
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        CheckpointTuple,
        get_serializable_checkpoint_metadata,
    )
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.types.json import Jsonb

    class InlineDumpAsyncPostgresSaver(AsyncPostgresSaver):
        async def aput(
            self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any
        ) -> Any:
            conf = config["configurable"]
            thread_id, ns = conf["thread_id"], conf["checkpoint_ns"]
            copy, blob_values = _blob_values(checkpoint)
            blobs: list[Any] = []
            if versions := {k: v for k, v in new_versions.items() if k in blob_values}:
                blobs = await _dumped(list(blob_values.values()), self._dump_blobs,
                                      thread_id, ns, blob_values, versions)
            row = (thread_id, ns, checkpoint["id"], conf.get("checkpoint_id"), Jsonb(copy),
                   Jsonb(get_serializable_checkpoint_metadata(config, metadata)))
            async with postgres_cursor(self, pipeline=_batched(self, len(blobs) + 1)) as cur:
                if blobs:
                    await cur.executemany(self.UPSERT_CHECKPOINT_BLOBS_SQL, blobs)
                await cur.execute(self.UPSERT_CHECKPOINTS_SQL, row)
            return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": checkpoint["id"]}}

        async def aput_writes(
            self,
            config: Any,
            writes: Sequence[tuple[str, Any]],
            task_id: str,
            task_path: str = "",
        ) -> None:
            query = (
                self.UPSERT_CHECKPOINT_WRITES_SQL
                if all(w[0] in WRITES_IDX_MAP for w in writes)
                else self.INSERT_CHECKPOINT_WRITES_SQL
            )
            conf = config["configurable"]
            params = await _dumped(writes, self._dump_writes, conf["thread_id"],
                                   conf["checkpoint_ns"], conf["checkpoint_id"], task_id,
                                   task_path, writes)
            async with postgres_cursor(self, pipeline=_batched(self, len(params))) as cur:
                if len(params) == 1:
                    await cur.execute(query, params[0])
                else:
                    await cur.executemany(query, params)

        async def _load_checkpoint_tuple(self, value: Any) -> Any:
            pending = value["pending_writes"]
            if not small(pending):
                return await super()._load_checkpoint_tuple(value)
            # Upstream's tuple, the writes loaded here (its blobs load on the loop there too).
            def conf(checkpoint_id: Any) -> Any:
                return {"configurable": {"thread_id": value["thread_id"],
                                         "checkpoint_ns": value["checkpoint_ns"],
                                         "checkpoint_id": checkpoint_id}}

            checkpoint = value["checkpoint"]
            values = {**(checkpoint.get("channel_values") or {}),
                      **self._load_blobs(value["channel_values"])}
            parent = value["parent_checkpoint_id"]
            return CheckpointTuple(
                conf(value["checkpoint_id"]),
                {**checkpoint, "channel_values": values},  # type: ignore[typeddict-item]
                value["metadata"],
                conf(parent) if parent else None,
                self._load_writes(pending),
            )

    return InlineDumpAsyncPostgresSaver
