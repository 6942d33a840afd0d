"""`InMemorySaver`'s storage: its dicts, read in place; one process, so `threading` locks."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from langgraph.checkpoint.memory import InMemorySaver

from threadlog.checkpoint.backends.base import (
    Backend,
    HeadStore,
    Link,
    LocalRuns,
    Plan,
    StoredWrite,
    attribute_blobs,
)

__all__ = ["MemoryBackend", "MemoryHeadStore"]


class MemoryHeadStore:
    """Reads an `InMemorySaver`'s dicts; one process, so a thread lock is the mutex. A lock
    holds nothing but a set entry, so `max_lock_connections` has nothing to bound here."""

    def __init__(self, saver: InMemorySaver) -> None:
        self.saver = saver
        self._lock = threading.Lock()
        self._runs = LocalRuns()

    def try_run_lock(self, thread_id: str) -> bool:
        return self._runs.acquire(thread_id)

    def run_unlock(self, thread_id: str) -> None:
        self._runs.release(thread_id)

    def try_lock(self, thread_id: str) -> bool:
        return self._lock.acquire(blocking=False)

    def unlock(self, thread_id: str) -> None:
        self._lock.release()

    def head(self, thread_id: str, ns: str) -> str | None:
        ids = self.saver.storage.get(thread_id, {}).get(ns, {})
        return max(ids) if ids else None

    def has_child(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        saved = self.saver.storage.get(thread_id, {}).get(ns, {})
        return any(entry[2] == checkpoint_id for entry in saved.values())

    def writes(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str
    ) -> dict[int, StoredWrite]:
        stored = self.saver.writes.get((thread_id, ns, checkpoint_id), {})
        return {idx: w[2] for (tid, idx), w in stored.items() if tid == task_id}

    def write_keys(self, thread_id: str, ns: str, checkpoint_id: str) -> frozenset[tuple[str, str]]:
        stored = self.saver.writes.get((thread_id, ns, checkpoint_id), {})
        return frozenset((tid, w[1]) for (tid, _), w in stored.items())

    def close(self) -> None:
        pass


class MemoryBackend(Backend):
    kind: ClassVar[str] = "memory"
    saver: InMemorySaver

    def head_store(self, location: str, max_lock_connections: int | None = None) -> HeadStore:
        return MemoryHeadStore(self.saver)

    def stored_bytes(self, thread_id: str, ns: str) -> dict[str, int] | None:
        saver = self.saver
        out: dict[str, int] = {}
        versions: dict[str, Mapping[str, Any]] = {}
        for cid, (ckpt, meta, _parent) in saver.storage.get(thread_id, {}).get(ns, {}).items():
            out[cid] = len(ckpt[1]) + len(meta[1])
            versions[cid] = saver.serde.loads_typed(ckpt).get("channel_versions") or {}
        blobs = {
            (ch, str(ver)): len(blob[1])
            for (tid, bns, ch, ver), blob in saver.blobs.items()
            if tid == thread_id and bns == ns
        }
        attribute_blobs(out, [(cid, versions[cid]) for cid in sorted(versions)], blobs)
        for (tid, wns, cid), writes in saver.writes.items():
            if tid == thread_id and wns == ns:
                out[cid] = out.get(cid, 0) + sum(len(w[2][1]) for w in writes.values())
        return out

    def checkpoint_links(self, thread_id: str) -> list[Link]:
        out: list[Link] = []
        for ns, saved in self.saver.storage.get(thread_id, {}).items():
            for cid, (_ckpt, meta, parent) in saved.items():
                run = (self.saver.serde.loads_typed(meta) or {}).get("run_id")
                out.append((ns, cid, parent, None if run is None else str(run)))
        return out

    async def acheckpoint_links(self, thread_id: str) -> list[Link]:
        return self.checkpoint_links(thread_id)

    def maintain(self, plan: Plan) -> None:
        # One process: nothing can stop half-way but this process (and then nothing is left).
        saver = self.saver
        serde = saver.serde
        for src, dst in plan.copies:
            for ns, saved in saver.storage.get(src, {}).items():
                saver.storage[dst][ns].update(copy.deepcopy(dict(saved)))
            for key, writes in list(saver.writes.items()):
                if key[0] == src:
                    saver.writes[(dst, *key[1:])] = copy.deepcopy(writes)
            for bkey, blob in list(saver.blobs.items()):
                if bkey[0] == src:
                    saver.blobs[(dst, *bkey[1:])] = blob
        for rw in plan.rewrites:
            ckpt, meta, _parent = saver.storage[rw.thread_id][rw.ns][rw.checkpoint_id]
            if rw.metadata:
                meta = serde.dumps_typed(rw.merged(serde.loads_typed(meta)))
            for ch, (version, value) in rw.snapshots.items():
                saver.blobs[(rw.thread_id, rw.ns, ch, version)] = serde.dumps_typed(value)
            saver.storage[rw.thread_id][rw.ns][rw.checkpoint_id] = (ckpt, meta, rw.parent_id)
        for (tid, ns), ids in plan.drops_by_namespace().items():
            saved = saver.storage.get(tid, {}).get(ns, {})
            for cid in ids:
                saved.pop(cid, None)
                saver.writes.pop((tid, ns, cid), None)
            self._drop_unnamed_blobs(tid, ns)
        for tid in plan.drop_threads:
            saver.storage.pop(tid, None)
            for key in [k for k in saver.writes if k[0] == tid]:
                del saver.writes[key]
            for bkey in [k for k in saver.blobs if k[0] == tid]:
                del saver.blobs[bkey]

    def _drop_unnamed_blobs(self, thread_id: str, ns: str) -> None:
        saver = self.saver
        named: set[tuple[str, Any]] = set()
        for ckpt, _meta, _parent in saver.storage.get(thread_id, {}).get(ns, {}).values():
            versions = saver.serde.loads_typed(ckpt).get("channel_versions") or {}
            named.update(versions.items())
        for key in [
            k for k in saver.blobs if k[0] == thread_id and k[1] == ns and (k[2], k[3]) not in named
        ]:
            del saver.blobs[key]
