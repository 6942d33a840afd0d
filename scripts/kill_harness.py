"""Randomized SIGKILL harness: kill a worker at a random moment, resume like a user, count.

    python scripts/kill_harness.py --trials 200 --backend sqlite --seed 1
    python scripts/kill_harness.py --trials 200 --backend postgres --seed 1 [--pg-url URL]
    python scripts/kill_harness.py --trials 200 --backend sqlite --seed 11 --durability async

Each trial is one thread. A worker process (forked, its own `threadlog.checkpointer(url)`)
runs 0-2 finished turns of a `threadlog.create_agent(OfflineChatModel(), [get_weather])`
weather agent, then one more turn that is SIGKILLed; every run, the parent's too, uses
`--durability` (default "sync"; "async" is LangGraph's default, "exit" stores a run
only as it returns). Where, is
drawn from a seeded RNG (`random.Random(f"{seed}:{trial}")`), so a trial is reproduced
by its seed and number (`--only N`):

* `write` (most trials): the k-th saver write of the killed turn (`put` or
  `put_writes`), just before or just after it reaches the database;
* `tool`: inside a tool, before or after its side effect;
* `timer`: the parent kills the worker after a random delay (reproducible in
  distribution only: it depends on the machine's speed).

`--fault pgterm` (Postgres) instead terminates the worker's database sessions
(`pg_terminate_backend`) after a random delay into the turn; `--fault diskfull` (SQLite)
lets the database file (one per trial) grow by a random number of bytes (0-16 KB) and
then fails every write with EFBIG, as a full disk does. The worker's turn then fails with an error.

The parent then reads the thread (`get_state`, `get_state_history`,
`threadlog.inspect.thread`), resumes it the way a user would — `invoke(None)` or a new
message, chosen by the RNG — sends one more message, and checks:

* **lost**: a message the worker stored (an independent journal of every write that
  returned, fsynced by the worker) is missing from the final log. Each is traced to the
  checkpoint its first write was on (or was) and whether that checkpoint's row exists:
  under "async" / "exit" a message of the killed turn whose checkpoint was never stored
  is allowed (`Outcome.lost_unstored_step`) and counted apart; any other loss fails;
* **duplicated**: a message id twice in the log, or a call with two results;
* **split**: a tool result whose call is not before it (after the kill or at the end),
  or a call without its result in the final log;
* **repeated**: a tool's side effect (an fsynced line per finished call, outside the
  database) happened twice for a call whose result was already stored;
* **unfinished shown finished**: right after the kill, `get_state` shows `next=()` while
  the log does not end with an answer;
* **unreadable**: any read raised, or the final log fails `threadlog.validate`.

Re-runs of a tool whose result was never stored are allowed (documented: make side
effects idempotent) and counted as `rerun_unstored`; under "async", re-runs of one whose
result was written on a checkpoint never stored, as `rerun_unreachable`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph

import threadlog
import threadlog.inspect

QUESTIONS = (
    "What's the weather in Beijing?",
    "Beijing and Shanghai: do I need an umbrella?",
    "How about Chengdu?",
    "Weather in Hangzhou and Shenzhen?",
    "And Guangzhou?",
)
DURABILITIES = ("sync", "async", "exit")
"""LangGraph's `durability` values (`langgraph.types.Durability`); "async" is its default."""
WRITE_SLOTS = 14
"""Saver writes a turn makes at most, counted (`tests/storage/test_kill_harness.py`,
`test_every_write_of_a_turn_is_a_kill_point`): the input checkpoint, the `__start__`
writes, their checkpoint; the model's call, its checkpoint; the tool node's "started"
marker and the tool's result (two cities: two markers and two results, one task or a
task per call, each also storing its "finished" marker), their checkpoint; the answer,
its checkpoint. A one-city turn makes 10 (11 as a task per call), two cities 11 (one task)
or 14 (a task per call)."""
SUBGRAPH_WRITE_SLOTS = 19
"""The same turn with the agent as a subgraph: the parent's input, start and step
checkpoints around the subgraph's own (its namespace) and the subgraph task's writes
(15 for one city, 16 for two as one task; a task per call adds its finished markers)."""
NESTED_WRITE_SLOTS = 24
"""The agent two levels down (parent -> team -> agent): the team subgraph's own input,
start and step checkpoints, and its agent-task writes, around the subgraph turn's."""
DEEP_WRITE_SLOTS = 29
"""The agent three levels down (parent -> team -> subteam -> agent): one more level's
input, start and step checkpoints and task writes around the nested turn's."""
EXIT_WRITE_SLOTS = {"agent": 7}
"""Under "exit" a run stores only as it returns: on a thread's first run an empty stub
checkpoint (LangGraph's anchor for a delta channel's writes), the agent's task writes
grouped per step (4; 5 with a task per call) and the final checkpoint — 6-7 writes, one
fewer on a later run (anchored on the head, no stub); a subgraph app 4 / 3 at every
depth (the subgraph's own steps are not stored)."""
EXIT_SUBGRAPH_WRITE_SLOTS = 4


@dataclass(frozen=True)
class Plan:
    """Everything random about one trial, drawn from its seed."""

    trial: int
    seed: int
    prior_turns: int
    branches: bool
    kind: str  # write | tool | timer (SIGKILL) | pgterm | diskfull (other faults)
    slot: int  # write: k-th write; tool: k-th tool call; diskfull: bytes the file may grow
    when: str  # before | after
    delay: float  # timer: seconds after the worker started
    resume: str  # none | input
    app: str = "agent"  # agent | subgraph (of a parent graph) | nested / deep (2 / 3 levels)
    durability: str = "sync"  # LangGraph's `durability` for every run: sync | async | exit

    @classmethod
    def draw(
        cls,
        seed: int,
        trial: int,
        fault: str = "kill",
        app: str = "agent",
        durability: str = "sync",
    ) -> Plan:
        rng = random.Random(f"{seed}:{trial}")
        kind = rng.choices(("write", "tool", "timer"), weights=(7, 1, 2))[0]
        if fault != "kill":
            kind = fault
        return cls(
            trial=trial,
            seed=seed,
            prior_turns=rng.randint(0, 2),
            branches=rng.random() < 0.5,
            kind=kind,
            # One draw scaled to the mode's writes: the other fields are the same in
            # every mode, and the write is at the same place in the turn.
            slot=1 + int(rng.random() * (_slots(app, durability) if kind == "write" else 2))
            if kind != "diskfull"
            else rng.randint(0, 16_000),
            when=rng.choice(("before", "after")),
            delay=rng.uniform(0.0, 0.12),
            resume=rng.choice(("none", "input")),
            app=app,
            durability=durability,  # drawn from nothing: one seed plans alike in every mode
        )


def turn_writes(plan: Plan) -> int:
    """Saver writes the plan's killed turn makes (the constants above are the most): a
    write kill point past them does not land."""
    two = len(QUESTIONS[(plan.trial + plan.prior_turns) % len(QUESTIONS)].split(" and ")) > 1
    if plan.durability == "exit":
        # A thread's first run stores an empty stub checkpoint first (LangGraph anchors
        # a delta channel's writes on it); a later run anchors them on the head.
        most = EXIT_WRITE_SLOTS.get(plan.app, EXIT_SUBGRAPH_WRITE_SLOTS)
        return most - (plan.prior_turns > 0) - (plan.app == "agent" and not (two and plan.branches))
    # A task per call also stores each call's "finished" marker (its result, before the
    # task returns): one more write per call.
    finished = (2 if two else 1) if plan.branches else 0
    return _slots(plan.app) - (2 if two and plan.branches else 3 if two else 4) + finished


def _slots(app: str, durability: str = "sync") -> int:
    """Saver writes the killed turn makes at most, in this app and mode."""
    if durability == "exit":
        return EXIT_WRITE_SLOTS.get(app, EXIT_SUBGRAPH_WRITE_SLOTS)
    slots = {"subgraph": SUBGRAPH_WRITE_SLOTS, "nested": NESTED_WRITE_SLOTS}
    return {**slots, "deep": DEEP_WRITE_SLOTS}.get(app, WRITE_SLOTS)


@dataclass
class Outcome:
    plan: Plan
    killed: bool = False
    stored: int = 0
    lost: list[str] = field(default_factory=list)
    # Where each lost message was first stored: `ns|checkpoint` of the checkpoint its write
    # was on (or was), and whether that checkpoint's row exists after the kill.
    lost_on: dict[str, str] = field(default_factory=dict)
    lost_on_missing: list[str] = field(default_factory=list)  # rows never stored
    lost_before_the_kill: list[str] = field(default_factory=list)  # a finished turn's
    # …of `lost_on_missing`: a subgraph's stored checkpoint whose parent-level one is not
    lost_under_missing_parent: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    split: list[str] = field(default_factory=list)  # a call without its result, or back
    repeated: list[str] = field(default_factory=list)
    rerun_unstored: int = 0
    rerun_unreachable: int = 0  # its result was stored, on a checkpoint never stored
    shown_finished: bool = False
    unreadable: list[str] = field(default_factory=list)

    @property
    def lost_unstored_step(self) -> list[str]:
        """Lost messages of the killed turn whose write was on (or was) a checkpoint that
        was never stored: unreachable, as LangGraph reads writes through their checkpoint."""
        missing = set(self.lost_on_missing)
        early = set(self.lost_before_the_kill)
        return [i for i in self.lost if self.lost_on.get(i) in missing and i not in early]

    @property
    def lost_beyond_mode(self) -> list[str]:
        """Lost messages the trial's durability does not allow: any under "sync" (each
        step is stored before the next starts); under "async" / "exit", any but
        `lost_unstored_step` (the docs' promise, docs/durability.md)."""
        if self.plan.durability == "sync":
            return self.lost
        allowed = set(self.lost_unstored_step)
        return [i for i in self.lost if i not in allowed]

    @property
    def ok(self) -> bool:
        return not (
            self.lost_beyond_mode
            or self.duplicated
            or self.split
            or self.repeated
            or self.shown_finished
            or self.unreadable
        )


# -- the agent and its journals ------------------------------------------------------


def _append(path: Path, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def build(
    saver: BaseCheckpointSaver[Any] | None,
    effects: Path,
    branches: bool,
    hook: Any = None,
    app: str = "agent",
) -> Any:
    @tool
    def get_weather(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Today's weather for a city."""
        if hook is not None:
            hook("before", tool_call_id)
        _append(effects, {"call": tool_call_id, "city": city})
        if hook is not None:
            hook("after", tool_call_id)
        return f"{city}: sunny, 21°C"

    if app in ("subgraph", "nested", "deep"):
        # The agent is a node of a parent graph sharing its `messages` log: its own
        # model/tool steps are checkpointed in the subgraph's namespace ("nested": the
        # parent's node is a `team` subgraph whose node is the agent, "agent:<t>|agent:<t>";
        # "deep": parent -> team -> subteam -> agent, "team:<t>|subteam:<t>|agent:<t>").
        agent = threadlog.create_agent(
            threadlog.OfflineChatModel(), [get_weather], per_call_branches=branches
        )
        if app == "deep":
            for node in ("agent", "subteam"):  # subteam runs the agent; team, subteam
                g = StateGraph(threadlog.AgentState)
                g.add_node(node, agent)
                g.add_edge(START, node)
                agent = g.compile()
            parent = StateGraph(threadlog.AgentState)
            parent.add_node("team", agent)
            parent.add_edge(START, "team")
            return parent.compile(checkpointer=saver)
        if app == "nested":
            team = StateGraph(threadlog.AgentState)
            team.add_node("agent", agent)
            team.add_edge(START, "agent")
            agent = team.compile()
        parent = StateGraph(threadlog.AgentState)
        parent.add_node("agent", agent)
        parent.add_edge(START, "agent")
        return parent.compile(checkpointer=saver)
    return threadlog.create_agent(
        threadlog.OfflineChatModel(),
        [get_weather],
        checkpointer=saver,
        per_call_branches=branches,
    )


def _messages(value: Any) -> Iterator[tuple[str, str, str | None]]:
    """(id, kind, the call a tool result answers) of every message inside a stored value."""
    if isinstance(value, BaseMessage):
        if value.id:
            kind = "user" if isinstance(value, HumanMessage) else value.type
            if isinstance(value, AIMessage):
                kind = "ai_call" if value.tool_calls else "answer"
            call = value.tool_call_id if isinstance(value, ToolMessage) else None
            yield value.id, kind, call
    elif isinstance(value, dict):
        if "role" in value and isinstance(value.get("id"), str):
            kind = "user" if value["role"] in ("user", "human") else value["role"]
            yield value["id"], kind, value.get("tool_call_id")
        else:
            for v in value.values():
                yield from _messages(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _messages(v)


class Journal(BaseCheckpointSaver[Any]):
    """Wraps the backend saver in the worker: records every write that returned, and
    kills the process at the planned write."""

    def __init__(self, inner: BaseCheckpointSaver[Any], path: Path, plan: Plan | None) -> None:
        super().__init__(serde=inner.serde)
        self.inner, self.path, self.plan, self.count = inner, path, plan, 0
        self.armed = False
        self._count_lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def get_tuple(self, config: RunnableConfig) -> Any:
        return self.inner.get_tuple(config)

    def list(self, config: RunnableConfig | None, **kw: Any) -> Any:
        return self.inner.list(config, **kw)

    def get_delta_channel_history(self, **kw: Any) -> Any:
        return self.inner.get_delta_channel_history(**kw)

    def get_next_version(self, current: Any, channel: Any = None) -> Any:
        return self.inner.get_next_version(current, channel)

    def _next(self) -> int:
        # A run's writes may reach the saver concurrently (LangGraph stores a step's
        # checkpoint and task writes in the background): each call takes its own number.
        with self._count_lock:
            self.count += 1
            return self.count

    def _tick(self, when: str, n: int) -> None:
        plan = self.plan
        if self.armed and plan is not None and plan.kind == "write" and plan.when == when:
            if n == plan.slot:
                os.kill(os.getpid(), signal.SIGKILL)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        n = self._next()
        self._tick("before", n)
        out = self.inner.put(config, checkpoint, metadata, new_versions)
        found = list(_messages(checkpoint.get("channel_values", {})))
        self._note(found, "put", config, checkpoint["id"], step=metadata.get("step"))
        self._tick("after", n)
        return out

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        n = self._next()
        self._tick("before", n)
        self.inner.put_writes(config, writes, task_id, task_path)
        found = list(_messages([v for _, v in writes]))
        self._note(found, "writes", config, config["configurable"].get("checkpoint_id"))
        self._tick("after", n)

    def _note(
        self,
        found: Sequence[tuple[str, str, str | None]],
        op: str,
        config: Any,
        checkpoint: str | None,
        step: int | None = None,
    ) -> None:
        """One line per write that returned, with the checkpoint it is stored as (put) or
        on (writes): a lost message is then traced to a checkpoint row that is missing."""
        ns = config["configurable"].get("checkpoint_ns", "")
        ids = [[mid, kind] for mid, kind, _ in found]
        calls = sorted({call for _, _, call in found if call})  # calls answered here
        record = {"ids": ids, "calls": calls, "op": op, "ns": ns, "checkpoint": checkpoint}
        record["step"] = step
        _append(self.path, {**record, "killed_turn": self.armed})


# -- the worker ----------------------------------------------------------------------


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _user(plan: Plan, turn: int) -> dict[str, Any]:
    return {
        "role": "user",
        "content": QUESTIONS[(plan.trial + turn) % len(QUESTIONS)],
        "id": f"t{plan.trial}-u{turn}",
    }


def _worker(url: str, thread_id: str, plan: Plan, work: Path) -> None:
    code = 1
    try:
        calls = Counter[str]()

        def tool_hook(when: str, call_id: str) -> None:
            if journal.armed and plan.kind == "tool" and when == plan.when:
                calls["n"] += 1
                if calls["n"] == plan.slot:
                    os.kill(os.getpid(), signal.SIGKILL)

        journal: Journal
        holder: list[Journal] = []

        def wrap(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
            holder.append(Journal(saver, work / "stored.jsonl", plan))
            return holder[0]

        # The write slots below count the message log's writes; recorded model calls
        # (a write of their own per model call) are left out of this harness.
        with threadlog.checkpointer(url, wrap=wrap, record_calls=False) as saver:
            journal = holder[0]
            graph = build(saver, work / "effects.jsonl", plan.branches, tool_hook, plan.app)
            for turn in range(plan.prior_turns + 1):
                if turn == plan.prior_turns:
                    journal.armed, journal.count = True, 0
                    if plan.kind == "diskfull":
                        _disk_full_after(url, plan.slot)
                    _append(work / "progress.jsonl", {"kill_turn": turn})
                graph.invoke(
                    {"messages": [_user(plan, turn)]},
                    _config(thread_id),
                    durability=plan.durability,
                )
        code = 0
    except BaseException as exc:
        (work / "error.txt").write_text(f"{type(exc).__name__}: {exc}"[:500])
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def _disk_full_after(url: str, extra: int) -> None:
    """Let files grow by `extra` bytes past the SQLite database's size, then fail
    writes with EFBIG ("database or disk is full"), as a full disk would."""
    import resource

    size = Path(url[len("sqlite:///") :]).stat().st_size
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write, do not kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + extra, resource.RLIM_INFINITY))


def _terminate_backends(url: str) -> None:
    """`pg_terminate_backend` every other session of the database: a torn connection."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


# -- checks --------------------------------------------------------------------------


def _read_all(graph: Any, url: str, thread_id: str, out: Outcome, stage: str) -> Any:
    """Every reader on the thread; a failure is an unreadable thread."""
    config = _config(thread_id)
    try:
        snap = graph.get_state(config)
        graph.get_state(config, subgraphs=True)
        if list(graph.get_state_history(config)):  # a thread killed before it stored
            view = threadlog.inspect.thread(url, thread_id)  # anything has no history
            view.timeline().rows()
            view.pairs().rows()
        return snap
    except Exception as exc:
        out.unreadable.append(f"{stage}: {type(exc).__name__}: {exc}"[:300])
        return None


def _answered(messages: Sequence[BaseMessage]) -> bool:
    last = messages[-1] if messages else None
    return last is None or (isinstance(last, AIMessage) and not last.tool_calls)


def _stored_results(snap: Any) -> set[str]:
    """Call ids whose result is visible in the state or in pending task writes — and,
    for a subgraph that was running (`get_state(subgraphs=True)`), in its own state."""
    found = {m.tool_call_id for m in snap.values.get("messages", []) if isinstance(m, ToolMessage)}
    for task in snap.tasks or ():
        for m in (task.result or {}).get("messages", []) if isinstance(task.result, dict) else []:
            if isinstance(m, ToolMessage):
                found.add(m.tool_call_id)
        if task.state is not None and hasattr(task.state, "values"):
            found |= _stored_results(task.state)
    return found


def _pairs(messages: Sequence[BaseMessage], *, open_calls: bool) -> tuple[list[str], list[str]]:
    """(split, doubled) call ids: a result whose call is not before it, or (unless
    `open_calls`: mid-turn) a call without a result; a call with two results."""
    calls: set[str] = set()
    results = Counter[str]()
    split: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            calls.update(c["id"] for c in m.tool_calls if c["id"])
        elif isinstance(m, ToolMessage):
            results[m.tool_call_id] += 1
            if m.tool_call_id not in calls:
                split.add(m.tool_call_id)
    if not open_calls:
        split |= calls - set(results)
    return sorted(split), sorted(c for c, n in results.items() if n > 1)


def _trace_lost(
    backend: BaseCheckpointSaver[Any], thread_id: str, records: list[dict[str, Any]], out: Outcome
) -> None:
    """For each lost message, the checkpoint its first stored write was on (or was) and
    whether that checkpoint's row exists: a write whose checkpoint was never stored is
    unreachable (LangGraph reads writes through their checkpoint). So is a subgraph's
    checkpoint whose enclosing graph's checkpoint, the one it ran from (its metadata's
    `parents`), was never stored: nothing at the parent level leads to it."""
    first: dict[str, dict[str, Any]] = {}
    for rec in records:
        for mid, _ in rec["ids"]:
            first.setdefault(mid, rec)

    def stored(ns: str, checkpoint: str | None) -> Any:
        if checkpoint is None:
            return None
        return backend.get_tuple(
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint,
                }
            }
        )

    missing: set[str] = set()
    under: set[str] = set()
    for item in out.lost:
        rec = first[item.split(":", 1)[1]]
        where = f"{rec['ns']}|{rec['checkpoint']}"
        out.lost_on[item] = where
        saved = stored(rec["ns"], rec["checkpoint"])
        if saved is None:
            missing.add(where)
        elif any(stored(ns, c) is None for ns, c in (saved.metadata.get("parents") or {}).items()):
            missing.add(where)
            under.add(where)
    out.lost_on_missing = sorted(missing)
    out.lost_under_missing_parent = sorted(under)
    out.lost_before_the_kill = [i for i in out.lost if not first[i.split(":", 1)[1]]["killed_turn"]]


def thread_of(plan: Plan) -> str:
    app = "" if plan.app == "agent" else f"-{plan.app}"
    return f"kill-{plan.seed}-{plan.trial}{app}" + (
        "" if plan.durability == "sync" else f"-{plan.durability}"
    )


def run_trial(url: str, plan: Plan, root: Path) -> Outcome:
    out = Outcome(plan)
    work = root / f"trial{plan.trial}"
    if plan.kind == "diskfull":
        # A database of its own: it grows at its end as the turn writes, so the size
        # limit lands at a random write (in a shared file, rows go into inner pages).
        url = f"sqlite:///{work / 'db.sqlite'}"
    run_worker(url, plan, work, out)
    check_after_fault(url, plan, work, out)
    return out


def run_worker(url: str, plan: Plan, work: Path, out: Outcome) -> None:
    """Run the trial's worker until its fault (or its end); sets `out.killed`."""
    work.mkdir(parents=True, exist_ok=True)
    thread_id = thread_of(plan)
    proc = multiprocessing.get_context("fork").Process(
        target=_worker, args=(url, thread_id, plan, work)
    )
    proc.start()
    if plan.kind in ("timer", "pgterm"):
        deadline = time.monotonic() + 60
        while not (work / "progress.jsonl").exists() and proc.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.001)
        proc.join(plan.delay)
        if proc.is_alive() and proc.pid is not None:
            if plan.kind == "pgterm":
                _terminate_backends(url)
            else:
                os.kill(proc.pid, signal.SIGKILL)
    proc.join(120)
    if proc.is_alive() and proc.pid is not None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        out.unreadable.append("worker hung")
    faulted = plan.kind in ("pgterm", "diskfull")
    out.killed = proc.exitcode == -signal.SIGKILL or (faulted and proc.exitcode == 1)
    if proc.exitcode not in (0, -signal.SIGKILL) and not faulted:
        out.unreadable.append(f"worker failed with exit code {proc.exitcode}")


def check_after_fault(url: str, plan: Plan, work: Path, out: Outcome) -> None:
    """Read, resume like a user, send one more message, and count (module doc)."""
    thread_id = thread_of(plan)
    effects = work / "effects.jsonl"

    records = _read(work / "stored.jsonl")
    stored = {mid: kind for rec in records for mid, kind in rec["ids"]}
    answered = {call for rec in records for call in rec.get("calls", ())}
    out.stored = len(stored)
    effects_before = Counter(r["call"] for r in _read(effects))
    backends: list[BaseCheckpointSaver[Any]] = []

    def keep(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
        backends.append(saver)  # the database as it is, under every threadlog layer
        return saver

    with threadlog.checkpointer(url, wrap=keep, record_calls=False) as saver:
        graph = build(saver, effects, plan.branches, app=plan.app)
        config = _config(thread_id)
        snap = _read_all(graph, url, thread_id, out, "after the kill")
        results_stored: set[str] = set()
        if snap is not None:
            messages = list(snap.values.get("messages", []))
            results_stored = _stored_results(graph.get_state(config, subgraphs=True))
            if not snap.next and not _answered(messages):
                out.shown_finished = True
            split, doubled = _pairs(messages, open_calls=True)
            out.split += [f"after the kill: {c}" for c in split]
            out.duplicated += [f"after the kill: two results for {c}" for c in doubled]
        mode = plan.durability
        runs: list[tuple[str, Any]] = [("new input", {"messages": [_user(plan, 90)]})]
        if plan.resume == "none" and snap is not None and snap.values:
            runs.insert(0, ("invoke(None)", None))
        runs.append(("one more message", {"messages": [_user(plan, 91)]}))
        for what, value in runs:  # each on its own: a failed resume still gets new input
            try:
                graph.invoke(value, config, durability=mode)
            except Exception as exc:
                out.unreadable.append(f"resume, {what}: {type(exc).__name__}: {exc}"[:300])
        final = _read_all(graph, url, thread_id, out, "after the resume")
        head = list(final.values.get("messages", [])) if final is not None else []
        ids = [m.id for m in head]
        if final is not None:
            out.lost = sorted(f"{kind}:{mid}" for mid, kind in stored.items() if mid not in ids)
            _trace_lost(backends[0], thread_id, records, out)
    if final is not None:
        out.duplicated += sorted({i for i in ids if ids.count(i) > 1 and i is not None})
        split, doubled = _pairs(head, open_calls=False)
        out.split += split
        out.duplicated += [f"two results for {c}" for c in doubled]
        try:
            threadlog.validate(head, allow_pending_calls=False)
        except Exception as exc:
            out.unreadable.append(f"final log invalid: {type(exc).__name__}: {exc}"[:300])
        if not _answered(head):
            out.unreadable.append("the last user message is unanswered")
    effects_after = Counter(r["call"] for r in _read(effects))
    for call, n in effects_after.items():
        if n > 1:
            if call in results_stored and effects_after[call] > effects_before[call]:
                out.repeated.append(call)
            elif effects_before[call] > 1:
                out.repeated.append(call)  # the worker itself ran it twice
            elif call in answered:
                out.rerun_unreachable += 1
            else:
                out.rerun_unstored += 1


# -- runs ----------------------------------------------------------------------------


@dataclass
class Summary:
    backend: str
    seed: int
    trials: int
    killed: int = 0
    # Kills by plan kind: a write or tool kill point lands (or not) the same way on any
    # machine; a timer's depends on the machine's speed.
    killed_by_kind: Counter[str] = field(default_factory=Counter)
    stored_messages: int = 0
    lost: int = 0
    # Lost messages of the killed turn whose write was on (or was) a checkpoint that was
    # never stored (`Outcome.lost_unstored_step`), those the trial's durability does not
    # allow, and the most checkpoints one trial's lost messages were on (one per step: a
    # step's tasks write on the checkpoint before it).
    lost_unstored_step: int = 0
    lost_under_unstored_parent: int = 0  # …of those: in a subgraph whose parent's was not
    lost_beyond_mode: int = 0
    lost_steps_most: int = 0
    trials_by_lost_steps: Counter[int] = field(default_factory=Counter)  # 1 step: n trials…
    trials_with_loss: int = 0
    lost_by_kind: Counter[str] = field(default_factory=Counter)  # user, ai_call, tool, answer
    lost_before_the_kill: int = 0  # from a turn that had returned before the killed one
    duplicated: int = 0
    split: int = 0
    repeated: int = 0
    rerun_unstored: int = 0
    rerun_unreachable: int = 0
    shown_finished: int = 0
    unreadable: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.killed += o.killed
        self.killed_by_kind[o.plan.kind] += o.killed
        self.stored_messages += o.stored
        self.lost += len(o.lost)
        self.lost_unstored_step += len(o.lost_unstored_step)
        under = set(o.lost_under_missing_parent)
        self.lost_under_unstored_parent += sum(o.lost_on[i] in under for i in o.lost_unstored_step)
        self.lost_beyond_mode += len(o.lost_beyond_mode)
        self.lost_steps_most = max(self.lost_steps_most, len(set(o.lost_on.values())))
        if o.lost:
            self.trials_by_lost_steps[len(set(o.lost_on.values()))] += 1
        self.trials_with_loss += bool(o.lost)
        self.lost_by_kind.update(item.split(":", 1)[0] for item in o.lost)
        self.lost_before_the_kill += len(o.lost_before_the_kill)
        self.duplicated += len(o.duplicated)
        self.split += len(o.split)
        self.repeated += len(o.repeated)
        self.rerun_unstored += o.rerun_unstored
        self.rerun_unreachable += o.rerun_unreachable
        self.shown_finished += o.shown_finished
        self.unreadable += bool(o.unreadable)
        if not o.ok:
            failure = asdict(o)
            failure["plan"] = asdict(o.plan)
            self.failures.append(failure)

    def line(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.killed_by_kind.items()))
        lost = f"lost {self.lost}"
        if self.lost:
            by_kind = ", ".join(f"{k} {n}" for k, n in sorted(self.lost_by_kind.items()))
            steps = ", ".join(f"{n}: {k}" for n, k in sorted(self.trials_by_lost_steps.items()))
            lost += (
                f" ({by_kind}; in {self.trials_with_loss} trials — by how many checkpoints "
                f"their lost messages were on, {steps}; {self.lost_unstored_step} of the "
                "killed turn on a checkpoint never stored"
                + (
                    f" ({self.lost_under_unstored_parent} in a subgraph whose enclosing "
                    "checkpoint was never stored)"
                    if self.lost_under_unstored_parent
                    else ""
                )
                + f"; {self.lost_before_the_kill} from "
                f"a turn finished before the kill; {self.lost_beyond_mode} beyond what "
                "the durability mode allows)"
            )
        return (
            f"{self.backend}: {self.trials} trials (seed {self.seed}), {self.killed} killed "
            f"({kinds}), {self.stored_messages} stored messages — {lost}, duplicated "
            f"{self.duplicated}, split pairs {self.split}, repeated side effects "
            f"{self.repeated}, shown finished {self.shown_finished}, unreadable "
            f"{self.unreadable} (re-run, result never stored: {self.rerun_unstored}; "
            f"re-run, result stored on a checkpoint never stored: {self.rerun_unreachable}); "
            f"{self.seconds:.0f} s"
        )

    def as_json(self) -> dict[str, Any]:
        """The summary as JSON values (`asdict` would rebuild the Counter from its
        (key, count) pairs, counting tuples: keys JSON cannot write)."""
        out = asdict(self)
        out["killed_by_kind"] = dict(self.killed_by_kind)
        out["lost_by_kind"] = dict(self.lost_by_kind)
        out["trials_by_lost_steps"] = dict(self.trials_by_lost_steps)
        return out


def run_trials(
    url: str,
    backend: str,
    *,
    trials: int,
    seed: int,
    only: int | None = None,
    root: Path | None = None,
    fault: str = "kill",
    app: str = "agent",
    durability: str = "sync",
) -> Summary:
    label = backend if fault == "kill" else f"{backend} ({fault})"
    label += "" if app == "agent" else f", {app}"
    label += "" if durability == "sync" else f", durability={durability}"
    summary = Summary(label, seed, trials if only is None else 1)
    return run_each(
        summary,
        trials,
        only,
        root,
        "killharness-",
        lambda trial, base: run_trial(url, Plan.draw(seed, trial, fault, app, durability), base),
    )


class Tally(Protocol):
    seconds: float

    def add(self, outcome: Any) -> None: ...


S = TypeVar("S", bound=Tally)


def run_each(
    summary: S,
    trials: int,
    only: int | None,
    root: Path | None,
    prefix: str,
    one: Callable[[int, Path], Any],
) -> S:
    """`one(trial, folder)` for each trial (or only `only`), added to `summary` and timed;
    the folder is `root`, else a temporary one (shared by the kill harnesses)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        base = root or Path(tmp)
        for trial in [only] if only is not None else range(trials):
            summary.add(one(trial, base))
    summary.seconds = time.monotonic() - started
    return summary


def postgres_url(url: str | None, prefix: str = "killharness-pg-") -> tuple[str, Any]:
    """`url`, or a throwaway pgserver's (returned too, to keep it alive) when none is given."""
    if url:
        return url, None
    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix=prefix), cleanup_mode="delete")
    return server.get_uri(), server


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", type=int, help="run this one trial (reproduce a failure)")
    p.add_argument("--pg-url", help="an existing Postgres server (default: a pgserver)")
    p.add_argument("--json", type=Path, help="write the summary and failures here")
    p.add_argument(
        "--fault",
        choices=("kill", "pgterm", "diskfull"),
        default="kill",
        help="kill: SIGKILL (default); pgterm: pg_terminate_backend mid-turn (postgres); "
        "diskfull: file size limit mid-turn (sqlite)",
    )
    p.add_argument(
        "--app",
        choices=("agent", "subgraph", "nested", "deep"),
        default="agent",
        help="agent: the weather agent (default); subgraph: the same agent as a node of a "
        "parent graph sharing its messages log, so the fault lands inside the subgraph; "
        "nested: the agent two subgraph levels down (parent -> team -> agent); "
        "deep: three levels down (parent -> team -> subteam -> agent)",
    )
    p.add_argument(
        "--durability",
        choices=DURABILITIES,
        default="sync",
        help="LangGraph's durability for every run of the trial: sync (default: each "
        "step stored before the next starts), async (LangGraph's default: stored while "
        "the next step runs), exit (stored when the run returns)",
    )
    args = p.parse_args(argv)
    if (args.fault, args.backend) in (("pgterm", "sqlite"), ("diskfull", "postgres")):
        p.error(f"--fault {args.fault} does not apply to {args.backend}")
    server = None
    with tempfile.TemporaryDirectory(prefix="killharness-db-") as tmp:
        if args.backend == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'threads.sqlite'}"
        else:
            url, server = postgres_url(args.pg_url)
        try:
            summary = run_trials(
                url,
                args.backend,
                trials=args.trials,
                seed=args.seed,
                only=args.only,
                fault=args.fault,
                app=args.app,
                durability=args.durability,
            )
        finally:
            if server is not None:
                server.cleanup()
    if args.json:
        args.json.write_text(json.dumps(summary.as_json(), indent=1, ensure_ascii=False))
    print(summary.line())
    for failure in summary.failures[:20]:
        print(json.dumps(failure, ensure_ascii=False)[:600])
    return 0 if not summary.failures else 1


if __name__ == "__main__":
    sys.exit(main())
