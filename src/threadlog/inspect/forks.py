"""`ForkTree`: a thread's checkpoints as a tree of branches.

A checkpoint with more than one child is a fork point: the oldest child continues its
parent's branch, each later child starts a new one; branch 0 starts at the root.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadlog.inspect.records import CheckpointRecord, short
from threadlog.inspect.steps import message_line
from threadlog.inspect.table import Cell, Column, Table

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread

__all__ = ["Branch", "ForkTree"]


@dataclass(slots=True)
class Branch:
    number: int
    records: list[CheckpointRecord]
    forked_from: CheckpointRecord | None  # the fork point in the parent branch
    parent_branch: int | None
    depth: int
    children: list[Branch] = field(default_factory=list)

    @property
    def head(self) -> CheckpointRecord:
        return self.records[-1]


class ForkTree(Table):
    columns = (
        Column("branch", "branch", 14),
        Column("from", "forked at", 16),
        Column("steps", "steps", 9),
        Column("n", "ckpts", 5, ">"),
        Column("head", "head", 8),
        Column("last", "[how it starts] last message at head"),
    )

    def __init__(self, thread: Thread) -> None:
        self.thread = thread
        by_id = {r.checkpoint_id: r for r in thread.records}
        roots = [r for r in thread.records if r.parent_id not in by_id]
        self.branches: list[Branch] = []  # depth first: each before the ones forked from it
        for root in roots:
            self._walk(root, by_id, None, None, 0)
        self.title = f"{thread.label} · fork tree"

    def _walk(
        self,
        start: CheckpointRecord,
        by_id: dict[str, CheckpointRecord],
        forked_from: CheckpointRecord | None,
        parent: Branch | None,
        depth: int,
    ) -> None:
        branch = Branch(
            len(self.branches), [], forked_from, parent.number if parent else None, depth
        )
        self.branches.append(branch)
        if parent is not None:
            parent.children.append(branch)
        pending: list[tuple[CheckpointRecord, CheckpointRecord]] = []
        rec: CheckpointRecord | None = start
        while rec is not None:
            branch.records.append(rec)
            kids = [by_id[c] for c in rec.children if c in by_id]
            pending += [(k, rec) for k in kids[1:]]
            rec = kids[0] if kids else None
        for kid, fork in pending:
            self._walk(kid, by_id, fork, branch, depth + 1)

    @property
    def fork_points(self) -> list[CheckpointRecord]:
        return [r for r in self.thread.records if len(r.children) > 1]

    def rows(self) -> list[dict[str, Any]]:
        out = [
            {
                "checkpoint_id": r.checkpoint_id,
                "parent_id": r.parent_id,
                "step": r.step,
                "source": r.source,
                "branch": b.number,
                "parent_branch": b.parent_branch,
                "depth": b.depth,
                "is_fork_point": len(r.children) > 1,
                "is_head": not r.children,
                "messages": len(r.messages),
            }
            for b in self.branches
            for r in b.records
        ]
        return sorted(out, key=lambda row: str(row["checkpoint_id"]))

    def summary(self) -> list[str]:
        return [
            f"{len(self.thread.records)} checkpoints · {len(self.branches)} branches · "
            f"{len(self.fork_points)} fork point(s)"
        ]

    def display_rows(self) -> list[dict[str, Cell]]:
        out: list[dict[str, Cell]] = []
        for b in self.branches:
            first, head = b.records[0], b.head
            indent = "  " * b.depth + ("└ " if b.depth else "")
            last = head.messages[-1] if head.messages else None
            fork = b.forked_from
            out.append(
                {
                    "branch": f"{indent}#{b.number}",
                    "from": "-"
                    if fork is None
                    else f"#{b.parent_branch} {short(fork.checkpoint_id)} s{fork.step}",
                    "steps": f"{first.step}…{head.step}",
                    "n": str(len(b.records)),
                    "head": short(head.checkpoint_id),
                    "last": f"[{first.source}] "
                    + (message_line(last) if last else "(no messages)"),
                }
            )
        return out
