"""`check`: which stored threads would a provider reject, and why — a whole database at once.

Contract: `check(source, profiles=None, threads=None, all_checkpoints=False)` reads every
thread head of `source` (a database URL or SQLite path, opened read-only, or a
checkpointer) — or every checkpoint — and returns a `CheckReport` of the problems
(`threadlog.providers.problems`) of every message channel, a threadlog log or a plain list,
and of the subgraph namespaces that ran from the head (not `repairable`). Notes
(`in_progress`, `first_not_user` unless `strict_first_turn`) are not problems. An unknown
profile raises `ValueError`, an unknown thread `LookupError`. `check_threads` streams one
`ThreadCheck` per thread, an undecodable one with `error` set. Kinds, notes and exit
status: docs/check-and-replay.md.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.constants import TASKS
from langgraph.types import Send

from threadlog._upstream import PREGEL
from threadlog.checkpoint.backends import backend_of
from threadlog.checkpoint.integrity import chain_writes
from threadlog.inspect.catalog import Head, checkpoint_ids, thread_heads
from threadlog.inspect.keys import DEFAULT_KEY
from threadlog.inspect.source import Shape, shape_of, stand_in
from threadlog.inspect.table import Cell, Column, Table
from threadlog.providers.problems import REPAIRABLE, Finding, find_problems
from threadlog.providers.profiles import PROFILES, Profile, get_profile
from threadlog.terminal import safe_line

__all__ = [
    "CheckReport",
    "Problem",
    "StandIns",
    "Tally",
    "ThreadCheck",
    "check",
    "check_threads",
    "open_database",
    "problems_of",
    "resolve_profiles",
]

LOG_FORMAT = "threadlog"
PLAIN_FORMAT = "add_messages"


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem of one stored history (a row of `CheckReport`)."""

    thread_id: str
    checkpoint_id: str
    channel: str
    format: str  # `threadlog` (the message log) or `add_messages` (a plain list)
    kind: str
    position: int
    message_id: str | None
    call_id: str | None
    call_name: str | None
    detail: str
    profiles: list[str]
    repairable: bool  # `check --repair` can answer it by appending
    namespace: str = ""  # "" the root, else a subgraph's (`node:task_id`, nested joined by `|`)


@dataclass(slots=True)
class ThreadCheck:
    thread_id: str
    checkpoints: int = 0
    problems: list[Problem] = field(default_factory=list)
    error: str | None = None
    notes: list[Problem] = field(default_factory=list)  # not failures (module doc)


IN_PROGRESS = "in_progress"  # a call open at a checkpoint whose pending step runs next


def pending_steps(tup: CheckpointTuple) -> tuple[str, ...]:
    """The nodes `tup`'s next step runs: `branch:to:<node>` triggers and waiting `Send`s."""
    values = tup.checkpoint.get("channel_values") or {}
    nodes = [str(k)[len(PREGEL.branch_to) :] for k in values if str(k).startswith(PREGEL.branch_to)]
    waiting = (v for _, ch, v in tup.pending_writes or () if ch == TASKS)
    nodes += [s.node for s in (*(values.get(TASKS) or ()), *waiting) if isinstance(s, Send)]
    return tuple(dict.fromkeys(nodes))


_PENDING = "; in progress: the pending step ({}) runs next when the thread resumes"
_NOT_STRICT = (
    " (fine when the app sends its own prompt first; --strict-first-turn makes it a problem)"
)


def sort_findings(
    findings: Sequence[Finding], pending: Sequence[str], *, strict_first_turn: bool = False
) -> tuple[list[Finding], list[Finding]]:
    problems: list[Finding] = []
    notes: list[Finding] = []
    for f in findings:
        if f.kind == "open_call" and f.closed_by is None and pending:
            detail = f.detail + _PENDING.format(", ".join(pending))
            notes.append(replace(f, kind=IN_PROGRESS, detail=detail, profiles=()))
        elif f.kind == "first_not_user" and not strict_first_turn:
            notes.append(replace(f, detail=f.detail + _NOT_STRICT))
        else:
            problems.append(f)
    return problems, notes


@contextlib.contextmanager
def open_database(source: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """`source` opened read-only, its writes checked against their checksums; no server URL."""
    from threadlog.inspect.readonly import SourceError, describe, is_server_url, open_readonly

    if is_server_url(source):
        raise SourceError(
            f"{describe(source)} is a LangGraph server; this reads its database "
            "(a SQLite file or postgresql://…): pass that as --db"
        )
    with open_readonly(source) as saver:
        yield chain_writes(saver)


@contextlib.contextmanager
def opened(source: Any, verb: str) -> Iterator[tuple[BaseCheckpointSaver[Any], str]]:
    """A checkpointer as it is, or a database URL or path opened read-only; and its name."""
    from threadlog.inspect.readonly import describe

    if isinstance(source, BaseCheckpointSaver):
        yield source, type(source).__name__
    elif isinstance(source, str):
        with open_database(source) as saver:
            yield saver, describe(source)
    else:
        raise TypeError(
            f"cannot {verb} a {type(source).__name__}: pass a checkpointer or a database URL "
            "or path"
        )


def resolve_profiles(profiles: Iterable[str | Profile] | None) -> list[Profile]:
    """`profiles` as `Profile`s (default: every one in `PROFILES`); unknown: ValueError."""
    if profiles is None:
        return list(PROFILES.values())
    out = [get_profile(p) for p in profiles]
    if not out:
        raise ValueError("no profile to check against; name one, or none for every profile")
    return out


class StandIns:
    """One stand-in graph per set of stored keys, made on first use (`source.stand_in`)."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.graphs: dict[Shape, Any] = {}

    def __call__(self, tup: CheckpointTuple) -> Any:
        # Only the keys matter for reading values: node names would make a graph per thread.
        shape = Shape(shape_of(tup).keys)
        if shape not in self.graphs:
            self.graphs[shape] = stand_in(self.saver, None, shape)
        return self.graphs[shape]


def checkpoint_tuple(
    saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_id: str
) -> CheckpointTuple:
    conf = {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
    tup = saver.get_tuple({"configurable": conf})
    if tup is None:
        raise LookupError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}")
    return tup


def tuple_channels(
    saver: BaseCheckpointSaver[Any], readers: StandIns, tup: CheckpointTuple
) -> list[tuple[str, str, list[Any]]]:
    """`(channel, format, messages)` of each message channel: the logs first, then plain lists."""
    from threadlog.channel import MessageLogChannel

    stored = tup.config["configurable"]
    conf = {
        "thread_id": stored["thread_id"],
        "checkpoint_ns": "",  # a namespace view (`InNamespace`) maps it
        "checkpoint_id": stored["checkpoint_id"],
    }
    values = tup.checkpoint.get("channel_values") or {}
    versions = tup.checkpoint.get("channel_versions") or {}
    out: list[tuple[str, str, list[Any]]] = []
    for key, value in values.items():
        if isinstance(value, list) and value and all(isinstance(m, BaseMessage) for m in value):
            out.append((key, PLAIN_FORMAT, value))
    graph = readers(tup)
    logs = [k for k, ch in graph.channels.items() if isinstance(ch, MessageLogChannel)]
    logs = [k for k in logs if k in versions and not isinstance(values.get(k), list)]
    if logs:
        # threadlog's log stores deltas: LangGraph's loader rebuilds it (a stand-in graph).
        snap = graph.get_state({"configurable": conf})
        state = snap.values if isinstance(snap.values, dict) else {}
        ordered = sorted(logs, key=lambda k: (k != DEFAULT_KEY, k))
        out[:0] = [(k, LOG_FORMAT, list(state.get(k) or [])) for k in ordered]
    return out


def problems_of(
    thread_id: str,
    checkpoint_id: str,
    channel: str,
    fmt: str,
    findings: Sequence[Finding],
    namespace: str = "",
    *,
    writable: bool = True,
) -> list[Problem]:
    """`find_problems`' findings of one history as rows; `writable=False`: not repairable."""
    root = writable and not namespace  # `--repair` writes at the root only
    return [
        Problem(
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            channel=channel,
            format=fmt,
            kind=f.kind,
            position=f.position,
            message_id=f.message_id,
            call_id=f.call_id,
            call_name=f.call_name,
            detail=f.detail,
            profiles=list(f.profiles),
            # A plain list only appends: a call the conversation moved past stays open.
            repairable=root and f.kind in REPAIRABLE and (fmt == LOG_FORMAT or f.closed_by is None),
            namespace=namespace,
        )
        for f in findings
    ]


def check_threads(
    saver: BaseCheckpointSaver[Any],
    *,
    profiles: Sequence[Profile],
    threads: Sequence[str] | None = None,
    all_checkpoints: bool = False,
    subgraphs: bool = False,
    strict_first_turn: bool = False,
) -> Iterator[ThreadCheck]:
    """One `ThreadCheck` per thread of `saver`, newest first (module doc)."""
    from threadlog.inspect.source import quiet_stand_in

    heads = thread_heads(saver)
    if threads is not None:
        by_id = {h.thread_id: h for h in heads}
        missing = [t for t in threads if t not in by_id]
        if missing:
            raise LookupError(
                f"no thread {missing[0]!r} in this database ({len(heads)} thread(s) there; "
                "`threadlog threads --db …` lists them)"
            )
        heads = [by_id[t] for t in dict.fromkeys(threads)]
    readers = StandIns(saver)
    # One grouped query says which threads have subgraph namespaces at all.
    with_subgraphs = backend_of(saver).subgraph_counts() if subgraphs else {}
    with quiet_stand_in(True):
        for head in heads:
            result = ThreadCheck(head.thread_id)
            ids = checkpoint_ids(saver, head.thread_id) if all_checkpoints else [head.head_id]
            try:
                _check_at(
                    saver, readers, ids, head.head_id, result, "", profiles, strict_first_turn
                )
                if head.thread_id in with_subgraphs:
                    _subgraph_problems(
                        saver, head, profiles, all_checkpoints, result, strict_first_turn
                    )
            except Exception as exc:  # one unreadable thread must not hide the others
                result.error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            yield result


def _check_at(
    saver: BaseCheckpointSaver[Any],
    readers: StandIns,
    ids: Sequence[str],
    head_id: str,
    result: ThreadCheck,
    namespace: str,
    profiles: Sequence[Profile],
    strict: bool,
) -> None:
    for cid in ids:
        tup = checkpoint_tuple(saver, result.thread_id, cid)
        channels = tuple_channels(saver, readers, tup)
        at_head = cid == head_id
        add_findings(
            result, cid, channels, pending_steps(tup), profiles, strict, namespace, at_head=at_head
        )
        result.checkpoints += 0 if namespace else 1


def add_findings(
    result: ThreadCheck,
    cid: str,
    channels: Iterable[tuple[str, str, list[Any]]],
    pending: Sequence[str],
    profiles: Sequence[Profile],
    strict_first_turn: bool,
    namespace: str = "",
    *,
    at_head: bool = True,
    writable: bool = True,
) -> None:
    tid = result.thread_id
    for channel, fmt, messages in channels:
        found, noted = sort_findings(
            find_problems(messages, profiles), pending, strict_first_turn=strict_first_turn
        )
        result.problems += problems_of(tid, cid, channel, fmt, found, namespace, writable=writable)
        if not at_head:
            noted = [n for n in noted if n.kind != IN_PROGRESS]
        result.notes += problems_of(tid, cid, channel, fmt, noted, namespace, writable=False)


def _subgraph_problems(
    saver: BaseCheckpointSaver[Any],
    head: Head,
    profiles: Sequence[Profile],
    every: bool,
    result: ThreadCheck,
    strict: bool,
) -> None:
    from threadlog.inspect.namespaces import InNamespace, subgraph_namespaces

    for sub in subgraph_namespaces(saver, head.thread_id):
        if not every and sub.parent_checkpoint != head.head_id:
            continue
        view = InNamespace(saver, sub.namespace)
        ids = checkpoint_ids(saver, head.thread_id, sub.namespace) if every else [sub.head_id]
        readers = StandIns(view)
        _check_at(view, readers, ids, sub.head_id, result, sub.namespace, profiles, strict)


class Tally:
    """Counts over `ThreadCheck`s: the summary line and the exit status."""

    def __init__(self, profiles: Sequence[Profile]) -> None:
        self.profiles = [p.name for p in profiles]
        self.threads = self.checkpoints = self.clean = self.with_problems = self.unreadable = 0
        self.by_kind: Counter[str] = Counter()
        self.by_profile: Counter[str] = Counter()  # threads each profile rejects
        self.notes: Counter[str] = Counter()  # notes by kind (not failures)

    def add(self, result: ThreadCheck) -> None:
        self.threads += 1
        self.notes.update(n.kind for n in result.notes)
        self.checkpoints += result.checkpoints
        if result.error is not None:
            self.unreadable += 1
        elif result.problems:
            self.with_problems += 1
        else:
            self.clean += 1
        self.by_kind.update(p.kind for p in result.problems)
        self.by_profile.update({n for p in result.problems for n in p.profiles})

    def status(self) -> int:
        """0 every thread clean, 1 problems found, 2 a thread could not be read."""
        if self.unreadable:
            return 2
        return 1 if self.with_problems else 0

    def line(self) -> str:
        text = (
            f"checked {self.threads} thread(s), {self.checkpoints} checkpoint(s): "
            f"{self.clean} clean, {self.with_problems} with problems"
        )
        if self.unreadable:
            text += f", {self.unreadable} unreadable"
        if self.by_kind:
            text += " — " + ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items()))
        if self.notes:
            text += "; notes (not problems): " + ", ".join(
                f"{k} {n}" for k, n in sorted(self.notes.items())
            )
        return text

    def profile_line(self) -> str:
        if not self.by_profile:
            return ""
        return "threads each profile rejects: " + ", ".join(
            f"{name} {self.by_profile[name]}" for name in self.profiles if self.by_profile[name]
        )

    def as_dict(self) -> dict[str, Any]:
        counts = ("threads", "checkpoints", "clean", "with_problems", "unreadable")
        return {
            **{name: getattr(self, name) for name in counts},
            "by_kind": dict(sorted(self.by_kind.items())),
            "by_profile": {n: self.by_profile[n] for n in self.profiles if self.by_profile[n]},
            "notes": dict(sorted(self.notes.items())),
        }


def profiles_cell(names: Sequence[str]) -> str:
    return "every profile" if list(names) == list(PROFILES) else ", ".join(names)


def where(p: Problem) -> str:
    message = f" id {p.message_id}" if p.message_id else ""
    namespace = f" (namespace {p.namespace})" if p.namespace else ""
    return f"{p.channel}[{p.position}]{message}{namespace}"


class CheckReport(Table):
    columns: tuple[Column, ...] = (
        Column("thread", "thread", 24),
        Column("kind", "kind", 19),
        Column("where", "where"),
        Column("detail", "why", 0, below=True),
    )

    def __init__(
        self, source: str, tally: Tally, results: list[ThreadCheck], notes: Sequence[Problem] = ()
    ) -> None:
        self.title = f"check of {source}"
        self.tally = tally
        self.results = results
        self.noted = list(notes)  # of every thread checked: not problems

    @property
    def problems(self) -> list[Problem]:
        return [p for r in self.results for p in r.problems]

    @property
    def status(self) -> int:
        return self.tally.status()

    def rows(self) -> list[dict[str, Any]]:
        return [asdict(p) for p in self.problems]

    def summary(self) -> list[str]:
        return [line for line in (self.tally.line(), self.tally.profile_line()) if line]

    def display_rows(self) -> list[dict[str, Cell]]:
        out: list[dict[str, Cell]] = []
        for r in self.results:
            if r.error is not None:
                out.append(
                    {"thread": r.thread_id, "kind": "unreadable", "where": "-", "detail": r.error}
                )
            out += [
                {
                    "thread": p.thread_id,
                    "kind": p.kind,
                    "where": where(p),
                    "detail": [p.detail, "rejected by " + profiles_cell(p.profiles)],
                }
                for p in r.problems
            ]
        for n in self.noted:
            note = {"thread": n.thread_id, "kind": f"note: {n.kind}", "where": where(n)}
            out.append({**note, "detail": n.detail})
        return out

    def notes(self) -> list[str]:
        if not any(p.repairable for p in self.problems):
            return []
        return [
            "open_call can be repaired by appending: threadlog check --db … --repair "
            "(--dry-run prints the plan)"
        ]


def report_of(
    results: Iterable[ThreadCheck],
    name: str,
    chosen: list[Profile],
    report: type[CheckReport] = CheckReport,
) -> CheckReport:
    """The `report` of `results`: all tallied and their notes kept, and those that failed."""
    tally = Tally(chosen)
    kept: list[ThreadCheck] = []
    notes: list[Problem] = []
    for result in results:
        tally.add(result)
        notes += result.notes
        if result.problems or result.error is not None:
            kept.append(result)
    return report(name, tally, kept, notes)


def check(
    source: Any,
    *,
    profiles: Iterable[str | Profile] | None = None,
    threads: Sequence[str] | None = None,
    all_checkpoints: bool = False,
    subgraphs: bool = True,
    strict_first_turn: bool = False,
) -> CheckReport:
    """Check the threads of `source` against `profiles` (module doc)."""
    chosen = resolve_profiles(profiles)
    with opened(source, "check") as (saver, name):
        results = check_threads(
            saver,
            profiles=chosen,
            threads=threads,
            all_checkpoints=all_checkpoints,
            subgraphs=subgraphs,
            strict_first_turn=strict_first_turn,
        )
        return report_of(results, name, chosen)


def problem_line(p: Problem) -> str:
    """One problem as a terminal-safe line (stored ids and text escaped)."""
    text = safe_line(f"{where(p)}: {p.detail} — rejected by {profiles_cell(p.profiles)}")
    return f"  {p.kind:<19} {text}"
