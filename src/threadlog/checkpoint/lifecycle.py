"""A thread's lifecycle on threadlog's saver: rollback, copy, prune — pairs kept whole.

Each operation holds its threads by the run guard's lock, reads the backend saver, checks
delta history against the checksums, and applies one `backends.Plan` in one transaction;
then forgets what this process remembered of the threads. A kept checkpoint whose parent
goes is *materialized* (each delta channel's value stored as a snapshot, by threadlog's
log channels: another channel is a `ValueError`, nothing changed). docs/durability.md,
"Thread lifecycle", is the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from threadlog._upstream import MISSING, DeltaSnapshot
from threadlog.channel import LOG_KINDS
from threadlog.checkpoint.backends import Link, Plan, Rewrite, backend_of
from threadlog.checkpoint.cache import HistoryLayer
from threadlog.checkpoint.calls import CallsLayer
from threadlog.checkpoint.integrity import (
    CHAIN_KEY,
    ChecksumLayer,
    chain_metadata,
    chain_minus,
    read_chain,
)
from threadlog.checkpoint.layered import Layer
from threadlog.checkpoint.own_writes import OwnWritesLayer
from threadlog.checkpoint.resent import ResentLayer, snapshot_ref
from threadlog.flows import Flow, Io, call, listed

__all__ = [
    "PRUNE_STRATEGIES",
    "Maintenance",
    "PruneReport",
    "copy_thread",
    "delete_for_runs",
    "prune",
]

PRUNE_STRATEGIES = ("keep_latest", "delete")

T = TypeVar("T")
Key = tuple[str, str, str]  # thread_id, checkpoint_ns, checkpoint_id


@dataclass(frozen=True)
class Maintenance:
    """The backend saver, the layers above it, the guard's hold on a thread (`hold(tid)`:
    whether to `release(tid)` after)."""

    inner: BaseCheckpointSaver[Any]
    layers: Sequence[Layer]
    hold: Callable[[str], Flow[bool]]
    release: Callable[[str], Io]


@dataclass
class PruneReport:
    """What a prune removes (or, dry, would), the heads kept, their snapshots' size."""

    strategy: str
    threads: list[str] = field(default_factory=list)
    dropped: list[Key] = field(default_factory=list)
    kept: list[Key] = field(default_factory=list)
    snapshot_bytes: int = 0
    plan: Plan = field(default_factory=Plan)


def delete_for_runs(m: Maintenance, run_ids: Sequence[str]) -> Flow[None]:
    wanted = _ids(run_ids, "run_ids")
    threads: set[str] = set()
    for rid in wanted:
        for tup in (yield from listed(m.inner, None, filter={"run_id": rid})):
            threads.add(str(tup.config["configurable"]["thread_id"]))
    if threads:  # a run id on no thread changes nothing
        yield from _holding(m, threads, _delete_for_runs(m, sorted(threads), set(wanted)))


def _delete_for_runs(m: Maintenance, threads: list[str], wanted: set[str]) -> Flow[None]:
    plan = Plan()
    chains: dict[Key, Any] = {}
    for tid in threads:
        for ns, links in (yield from _links_by_namespace(m, tid)).items():
            yield from _rollback_namespace(m, tid, ns, links, wanted, plan, chains)
    yield from _apply(m, plan, threads, chains)


def _rollback_namespace(
    m: Maintenance,
    tid: str,
    ns: str,
    links: list[Link],
    wanted: set[str],
    plan: Plan,
    chains: dict[Key, Any],
) -> Flow[None]:
    parents = {cid: parent for _, cid, parent, _ in links}
    removed = {cid for _, cid, _, run in links if run in wanted}
    if not removed:
        return
    # Per kept checkpoint, the rows its chain must lose: those counted up to a checkpoint
    # materialized below it, for channels no checkpoint between stores.
    lose: dict[str, dict[str, tuple[int, int]]] = {}
    for _, cid, parent, _ in links:  # oldest first: a parent before its children
        if cid in removed:
            plan.drops.append((tid, ns, cid))
            continue
        kept_parent = parent
        seen: set[str] = set()
        while kept_parent in removed and kept_parent not in seen:
            seen.add(kept_parent)
            kept_parent = parents.get(kept_parent)
        if kept_parent != parent:
            tup = yield from _tuple(m, tid, ns, cid)
            snaps = yield from _snapshots(m, tup)
            lose[cid] = {ch: v for ch, v in (read_chain(tup.metadata) or {}).items() if ch in snaps}
            plan.rewrites.append(_rewrite(tup, kept_parent, snaps, chains))
            continue
        below = lose.get(parent or "")
        if not below:
            continue
        tup = yield from _tuple(m, tid, ns, cid)
        values = tup.checkpoint.get("channel_values") or {}
        inherited = {ch: v for ch, v in below.items() if ch not in values}
        if inherited:
            lose[cid] = inherited
            if read_chain(tup.metadata) is not None:
                plan.rewrites.append(_rewrite(tup, parent, {}, chains, inherited))


def copy_thread(m: Maintenance, source: str, target: str) -> Flow[None]:
    source, target = str(source), str(target)
    if source == target:
        raise ValueError(f"copy_thread: source and target are the same thread {source!r}")
    yield from _holding(m, {source, target}, _copy_thread(m, source, target))


def _copy_thread(m: Maintenance, source: str, target: str) -> Flow[None]:
    if (yield from listed(m.inner, {"configurable": {"thread_id": target}}, limit=1)):
        raise ValueError(
            f"copy_thread: target thread {target!r} already has checkpoints; nothing copied "
            "(delete it first, or copy to a new thread id)"
        )
    if (yield from listed(m.inner, {"configurable": {"thread_id": source}}, limit=1)):
        yield from _apply(m, Plan(copies=[(source, target)]), [target], {})


def prune(
    m: Maintenance, thread_ids: Sequence[str], strategy: str = "keep_latest", *, dry: bool = False
) -> Flow[PruneReport]:
    threads = _ids(thread_ids, "thread_ids")
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(
            f"unknown prune strategy {strategy!r}; the strategies are "
            f"{', '.join(repr(s) for s in PRUNE_STRATEGIES)} (nothing was pruned)"
        )
    report = PruneReport(strategy, sorted(set(threads)))
    if not threads:
        return report
    return (yield from _holding(m, set(threads), _prune(m, report, dry)))


def _prune(m: Maintenance, report: PruneReport, dry: bool) -> Flow[PruneReport]:
    plan = report.plan
    chains: dict[Key, Any] = {}
    for tid in report.threads:
        for ns, links in (yield from _links_by_namespace(m, tid)).items():
            keys = [(tid, ns, cid) for _, cid, _, _ in links]
            if report.strategy == "delete":
                report.dropped.extend(keys)
                continue
            report.kept.append(keys[-1])
            if len(keys) == 1:
                continue
            # Only the head is read (decoded): the older checkpoints just go.
            head = yield from _tuple(m, tid, ns, keys[-1][2])
            snaps = yield from _snapshots(m, head)
            report.snapshot_bytes += sum(
                len(m.inner.serde.dumps_typed(v)[1]) for _, v in snaps.values()
            )
            plan.rewrites.append(_rewrite(head, None, snaps, chains))
            plan.drops.extend(keys[:-1])
            report.dropped.extend(keys[:-1])
    if report.strategy == "delete":
        plan.drop_threads.extend(report.threads)
    if not dry:
        yield from _apply(m, plan, report.threads, chains)
    return report


def _holding(m: Maintenance, threads: Iterable[str], body: Flow[T]) -> Flow[T]:
    """`body` with every thread held (in sorted order: two callers cannot deadlock)."""
    taken: list[str] = []
    try:
        for tid in sorted(threads):
            if (yield from m.hold(tid)):
                taken.append(tid)
        return (yield from body)
    finally:
        for tid in reversed(taken):
            yield m.release(tid)


def _apply(
    m: Maintenance, plan: Plan, threads: Iterable[str], chains: dict[Key, Any]
) -> Flow[None]:
    if plan:
        backend = backend_of(m.inner)
        yield Io(backend.maintain, backend.amaintain, (plan,))
    _forget(m, threads, chains)


def _forget(m: Maintenance, threads: Iterable[str], chains: dict[Key, Any]) -> None:
    threads = list(threads)
    for layer in m.layers:
        if isinstance(layer, OwnWritesLayer):
            for tid in threads:
                layer.record.forget(tid)
        elif isinstance(layer, HistoryLayer):
            for tid in threads:
                layer.cache.forget(tid)
        elif isinstance(layer, (CallsLayer, ResentLayer)):
            for tid in threads:
                layer.forget(tid)
        elif isinstance(layer, ChecksumLayer):
            for key, chain in chains.items():
                layer.resealed(key, chain)


def _rewrite(
    tup: CheckpointTuple,
    parent: str | None,
    snaps: dict[str, tuple[Any, Any]],
    chains: dict[Key, Any],
    lose: dict[str, tuple[int, int]] | None = None,
) -> Rewrite:
    """`tup` re-parented with `snaps` stored in it, its chain re-sealed (or `lose` subtracted)."""
    metadata: dict[str, Any] = {}
    chain = read_chain(tup.metadata)
    if chain is not None:
        kept = {c: v for c, v in chain.items() if c not in snaps}
        new = chain_minus(chain, lose) if lose else kept
        if new != chain:
            metadata[CHAIN_KEY] = chain_metadata(new)
            chains[_key(tup)] = new
    return Rewrite(*_key(tup), parent, snaps, metadata)


def _snapshots(m: Maintenance, tup: CheckpointTuple) -> Flow[dict[str, tuple[Any, Any]]]:
    """`channel -> (version, snapshot)` for each delta channel `tup` does not store."""
    ckpt = tup.checkpoint
    values = ckpt.get("channel_values") or {}
    versions = ckpt.get("channel_versions") or {}
    # A snapshot referring to an earlier one (`resent`) may lose its base: rebuilt too.
    stored = {ch for ch, v in values.items() if not snapshot_ref(v)}
    # LangGraph's own channels (branch triggers, __start__, __pregel_…) are empty at a head.
    absent = [ch for ch in versions if not ch.startswith(("branch:", "__")) and ch not in stored]
    if not absent:
        return {}
    histories = yield from call(
        m.inner, "get_delta_channel_history", config=tup.config, channels=absent
    )
    for layer in m.layers:
        if isinstance(layer, ChecksumLayer):
            layer.verify(tup, histories)
    out: dict[str, tuple[Any, Any]] = {}
    for ch in absent:
        history = histories.get(ch) or {"writes": []}
        seed = history.get("seed", MISSING)
        writes = list(history.get("writes") or ())
        if writes:
            out[ch] = (versions[ch], DeltaSnapshot(_rebuilt(tup, ch, seed, writes)))
        elif seed is not MISSING and seed is not None:
            out[ch] = (
                versions[ch],
                seed if isinstance(seed, DeltaSnapshot) else DeltaSnapshot(seed),
            )
    return out


def _rebuilt(tup: CheckpointTuple, ch: str, seed: Any, writes: list[Any]) -> Any:
    """The channel's value, by the first of threadlog's log channels that accepts it."""
    for kind in LOG_KINDS:
        try:
            channel = kind().from_checkpoint(MISSING if seed is None else seed)
            channel.replay_writes(writes)
            return channel.get()
        except Exception:  # not this kind's values: the next one
            continue
    raise ValueError(
        f"thread {_key(tup)[0]!r}, checkpoint {_key(tup)[2]!r}: channel {ch!r} is rebuilt from "
        "older checkpoints' writes and is not one of threadlog's logs (messages, compaction "
        "events), so its value cannot be kept as a snapshot; nothing was changed"
    )


def _links_by_namespace(m: Maintenance, thread_id: str) -> Flow[dict[str, list[Link]]]:
    """A thread's checkpoints by namespace, oldest first, without decoding any."""
    backend = backend_of(m.inner)
    found: list[Link] = yield Io(backend.checkpoint_links, backend.acheckpoint_links, (thread_id,))
    out: dict[str, list[Link]] = {}
    for link in sorted(found, key=lambda link: link[1]):
        out.setdefault(link[0], []).append(link)
    return out


def _tuple(m: Maintenance, thread_id: str, ns: str, checkpoint_id: str) -> Flow[CheckpointTuple]:
    conf = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
    tup: CheckpointTuple | None = yield from call(m.inner, "get_tuple", {"configurable": conf})
    if tup is None:  # held by the run lock: nothing deletes it meanwhile
        raise LookupError(f"thread {thread_id!r}: checkpoint {checkpoint_id!r} is not stored")
    return tup


def _ids(ids: Sequence[str], name: str) -> list[str]:
    if isinstance(ids, str):
        raise TypeError(f"{name} must be a sequence of ids, not the str {ids!r}")
    return [str(i) for i in ids]


def _key(tup: CheckpointTuple) -> Key:
    conf = tup.config["configurable"]
    return str(conf["thread_id"]), str(conf.get("checkpoint_ns") or ""), str(conf["checkpoint_id"])
