"""Randomized SIGKILL harness: kill a worker at a random moment, resume like a user, count.

    python scripts/kill_harness.py --trials 200 --backend sqlite --seed 1
    python scripts/kill_harness.py --trials 200 --backend postgres --seed 1 [--pg-url URL]

Each trial is one thread. A worker process (forked, its own `threadlog.checkpointer(url)`)
runs 0-2 finished turns of a `threadlog.create_agent(OfflineChatModel(), [get_weather])`
weather agent with `durability="sync"`, then one more turn that is SIGKILLed. Where, is
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
  returned, fsynced by the worker) is missing from the final log;
* **duplicated**: a message id twice in the log, or a call with two results;
* **repeated**: a tool's side effect (an fsynced line per finished call, outside the
  database) happened twice for a call whose result was already stored;
* **unfinished shown finished**: right after the kill, `get_state` shows `next=()` while
  the log does not end with an answer;
* **unreadable**: any read raised, or the final log fails `threadlog.validate`.

Re-runs of a tool whose result was never stored are allowed (documented: make side
effects idempotent) and counted as `rerun_unstored`.
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
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

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
WRITE_SLOTS = 9
"""Saver writes a turn makes at most (input, start, model, tools, model: puts and writes)."""
SUBGRAPH_WRITE_SLOTS = 15
"""The same turn with the agent as a subgraph: the parent's input, start and step
checkpoints around the subgraph's own (its namespace) and the subgraph task's writes."""
NESTED_WRITE_SLOTS = 19
"""The agent two levels down (parent -> team -> agent): the team subgraph's own input,
start and step checkpoints, and its agent-task writes, around the subgraph turn's."""
DEEP_WRITE_SLOTS = 24
"""The agent three levels down (parent -> team -> subteam -> agent): one more level's
input, start and step checkpoints and task writes around the nested turn's."""


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

    @classmethod
    def draw(cls, seed: int, trial: int, fault: str = "kill", app: str = "agent") -> Plan:
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
            slot=rng.randint(1, _slots(app) if kind == "write" else 2)
            if kind != "diskfull"
            else rng.randint(0, 16_000),
            when=rng.choice(("before", "after")),
            delay=rng.uniform(0.0, 0.12),
            resume=rng.choice(("none", "input")),
            app=app,
        )


def _slots(app: str) -> int:
    slots = {"subgraph": SUBGRAPH_WRITE_SLOTS, "nested": NESTED_WRITE_SLOTS}
    return {**slots, "deep": DEEP_WRITE_SLOTS}.get(app, WRITE_SLOTS)


@dataclass
class Outcome:
    plan: Plan
    killed: bool = False
    stored: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)
    rerun_unstored: int = 0
    shown_finished: bool = False
    unreadable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.repeated or self.shown_finished or self.unreadable
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


def _message_ids(value: Any) -> Iterator[tuple[str, str]]:
    """(id, kind) of every message inside a stored value (writes, channel values)."""
    if isinstance(value, BaseMessage):
        if value.id:
            kind = "user" if isinstance(value, HumanMessage) else value.type
            if isinstance(value, AIMessage):
                kind = "ai_call" if value.tool_calls else "answer"
            yield value.id, kind
    elif isinstance(value, dict):
        if "role" in value and isinstance(value.get("id"), str):
            yield value["id"], "user" if value["role"] in ("user", "human") else value["role"]
        else:
            for v in value.values():
                yield from _message_ids(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _message_ids(v)


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
        self._note(list(_message_ids(checkpoint.get("channel_values", {}))))
        self._tick("after", n)
        return out

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        n = self._next()
        self._tick("before", n)
        self.inner.put_writes(config, writes, task_id, task_path)
        self._note(list(_message_ids([v for _, v in writes])))
        self._tick("after", n)

    def _note(self, ids: list[tuple[str, str]]) -> None:
        if ids:
            _append(self.path, {"ids": ids})


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

        with threadlog.checkpointer(url, wrap=wrap) as saver:
            journal = holder[0]
            graph = build(saver, work / "effects.jsonl", plan.branches, tool_hook, plan.app)
            for turn in range(plan.prior_turns + 1):
                if turn == plan.prior_turns:
                    journal.armed, journal.count = True, 0
                    if plan.kind == "diskfull":
                        _disk_full_after(url, plan.slot)
                    _append(work / "progress.jsonl", {"kill_turn": turn})
                graph.invoke(
                    {"messages": [_user(plan, turn)]}, _config(thread_id), durability="sync"
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


def thread_of(plan: Plan) -> str:
    return f"kill-{plan.seed}-{plan.trial}" + ("" if plan.app == "agent" else f"-{plan.app}")


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

    stored = {mid: kind for rec in _read(work / "stored.jsonl") for mid, kind in rec["ids"]}
    out.stored = len(stored)
    effects_before = Counter(r["call"] for r in _read(effects))
    with threadlog.checkpointer(url) as saver:
        graph = build(saver, effects, plan.branches, app=plan.app)
        config = _config(thread_id)
        snap = _read_all(graph, url, thread_id, out, "after the kill")
        results_stored: set[str] = set()
        if snap is not None:
            messages = list(snap.values.get("messages", []))
            results_stored = _stored_results(graph.get_state(config, subgraphs=True))
            if not snap.next and not _answered(messages):
                out.shown_finished = True
        try:
            if plan.resume == "none" and snap is not None and snap.values:
                graph.invoke(None, config, durability="sync")
            graph.invoke({"messages": [_user(plan, 90)]}, config, durability="sync")
            graph.invoke({"messages": [_user(plan, 91)]}, config, durability="sync")
        except Exception as exc:
            out.unreadable.append(f"resume: {type(exc).__name__}: {exc}"[:300])
        final = _read_all(graph, url, thread_id, out, "after the resume")
    if final is not None:
        head = list(final.values.get("messages", []))
        ids = [m.id for m in head]
        out.lost = sorted(f"{kind}:{mid}" for mid, kind in stored.items() if mid not in ids)
        out.duplicated = sorted({i for i in ids if ids.count(i) > 1 and i is not None})
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
    duplicated: int = 0
    repeated: int = 0
    rerun_unstored: int = 0
    shown_finished: int = 0
    unreadable: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.killed += o.killed
        self.killed_by_kind[o.plan.kind] += o.killed
        self.stored_messages += o.stored
        self.lost += len(o.lost)
        self.duplicated += len(o.duplicated)
        self.repeated += len(o.repeated)
        self.rerun_unstored += o.rerun_unstored
        self.shown_finished += o.shown_finished
        self.unreadable += bool(o.unreadable)
        if not o.ok:
            failure = asdict(o)
            failure["plan"] = asdict(o.plan)
            self.failures.append(failure)

    def line(self) -> str:
        return (
            f"{self.backend}: {self.trials} trials (seed {self.seed}), {self.killed} killed, "
            f"{self.stored_messages} stored messages — lost {self.lost}, duplicated "
            f"{self.duplicated}, repeated side effects {self.repeated}, shown finished "
            f"{self.shown_finished}, unreadable {self.unreadable} (re-run, result never "
            f"stored: {self.rerun_unstored}); {self.seconds:.0f} s"
        )


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
) -> Summary:
    label = backend if fault == "kill" else f"{backend} ({fault})"
    summary = Summary(
        label if app == "agent" else f"{label}, {app}", seed, trials if only is None else 1
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="killharness-") as tmp:
        base = root or Path(tmp)
        for trial in [only] if only is not None else range(trials):
            summary.add(run_trial(url, Plan.draw(seed, trial, fault, app), base))
    summary.seconds = time.monotonic() - started
    return summary


def _postgres(url: str | None) -> tuple[str, Any]:
    if url:
        return url, None
    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix="killharness-pg-"), cleanup_mode="delete")
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
    args = p.parse_args(argv)
    if (args.fault, args.backend) in (("pgterm", "sqlite"), ("diskfull", "postgres")):
        p.error(f"--fault {args.fault} does not apply to {args.backend}")
    server = None
    with tempfile.TemporaryDirectory(prefix="killharness-db-") as tmp:
        if args.backend == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'threads.sqlite'}"
        else:
            url, server = _postgres(args.pg_url)
        try:
            summary = run_trials(
                url,
                args.backend,
                trials=args.trials,
                seed=args.seed,
                only=args.only,
                fault=args.fault,
                app=args.app,
            )
        finally:
            if server is not None:
                server.cleanup()
    print(summary.line())
    for failure in summary.failures[:20]:
        print(json.dumps(failure, ensure_ascii=False)[:600])
    if args.json:
        args.json.write_text(json.dumps(asdict(summary), indent=1, ensure_ascii=False))
    return 0 if not summary.failures else 1


if __name__ == "__main__":
    sys.exit(main())
