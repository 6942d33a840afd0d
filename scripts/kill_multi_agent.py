"""SIGKILL a multi-agent app mid-turn (inside handoffs too), resume it, compare every checkpoint.

    python scripts/kill_multi_agent.py --trials 60 --backend sqlite          # seed drawn, printed
    python scripts/kill_multi_agent.py --trials 60 --backend postgres --seed 123456
    python scripts/kill_multi_agent.py --backend sqlite --seed 123456 --only 7   # one trial again

The apps, on `threadlog.checkpointer(url)`, with scripted models (no network):

* `swarm` — langgraph-swarm: `alice` and `bob` (`threadlog.create_agent` workers) hand
  off to each other on every user message (`create_handoff_tool`, whose
  `Command(graph=PARENT, update={"messages": [*history, tool_message]})` re-sends the
  agent's whole history to the parent), and the receiving agent answers;
* `supervisor` — langgraph-supervisor: the supervisor hands each turn to `bob`, who
  answers; `create_supervisor` hands back and the supervisor closes the turn.

Each trial is one thread. A forked worker runs 0-2 finished turns, then one more that is
SIGKILLed. Where is drawn from `random.Random(f"{seed}:{trial}")` (the seed comes from
`os.urandom` unless `--seed` is given, and is printed, so `--seed S --only N` replays a
trial): `write`, the k-th saver write of the killed turn (`put` or `put_writes`, any
namespace), before or after it reaches the database; `handoff`, the write that stores a
handoff's tool message (the `Command(graph=PARENT)` update, or the supervisor's hand
back), before or after; `timer`, a random delay into the turn. The trial's durability is
drawn too: LangGraph's default (no `durability=` argument: "async") or "sync".

The worker journals every message of every write that returned (fsynced, as
scripts/kill_harness.py does) and, after each finished turn, every checkpoint of the
thread as read back then: each namespace's `get_state_history`, each checkpoint's
messages as (id, digest of type, content, calls, call id, name). A fresh process then
reads the thread, resumes it (`invoke(None)` or a new message, drawn), sends one more
message, and counts:

* **lost**: a journaled message missing from the final head (under the default
  durability a message of the killed turn whose checkpoint row was never stored is
  allowed and counted apart: `kill_harness.Outcome.lost_unstored_step`);
* **duplicated**: a message id, or a message's digest, twice in any checkpoint;
* **changed**: a checkpoint read after the kill or at the end whose messages differ from
  what it held when first read back (after its turn, in the worker; after the kill), or
  a checkpoint of a finished turn that is gone;
* **not append-only**: a checkpoint whose parent's messages are not a prefix of its own;
* **not as on LangGraph**: the finished turns' checkpoints (each namespace's sequence of
  message contents) differ from the same turns run on LangGraph's `InMemorySaver`;
* **read differently**: a checkpoint the resuming process (its warm cache) reads with
  other messages than a new saver in the same process (an empty cache) does; and
  **missing read by a new saver**, `lost` counted on that cold read;
* **check**: `threadlog check --db URL --thread T --all-checkpoints --json` exits non-0, right
  after the kill or at the end;
* **unreadable**: any read or resume raised.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
import traceback
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

import threadlog  # noqa: E402
from scripts.kill_harness import (  # noqa: E402
    Journal,
    Outcome,
    _append,
    _read,
    _trace_lost,
    postgres_url,
    run_each,
)
from threadlog.cli import main as threadlog_main  # noqa: E402

APPS = ("swarm", "supervisor")
LANES = ("threadlog", "langgraph")
"""How the app is ported (benchmarks/multi_agent.py's lanes), on threadlog's saver either
way: `threadlog`, `threadlog.create_agent` workers and a `threadlog.MessagesState`
state; `langgraph`, the app as LangGraph's docs write it (`create_react_agent` workers,
the default states, LangGraph's `add_messages`) with only the checkpointer swapped."""
DURABILITIES = ("default", "sync")
""""default": no `durability=` argument (LangGraph's default, "async")."""
WRITE_SLOTS = {
    "swarm/threadlog": 18,
    "supervisor/threadlog": 24,
    "swarm/langgraph": 17,
    "supervisor/langgraph": 24,
}
"""Saver writes one turn makes (`put` and `put_writes`, every namespace), counted with
`--count`: the same on every turn and in both durabilities (a write kill point past
them does not land). The `langgraph` lane re-sends whole lists: a handoff write on a
later turn also carries the earlier turns' handoffs (4 and 6; 3 and 5 on a first turn)."""
HANDOFF_SLOTS = {
    "swarm/threadlog": 3,
    "supervisor/threadlog": 5,
    "swarm/langgraph": 4,
    "supervisor/langgraph": 6,
}
"""Writes of one turn that carry a handoff's tool message (`--count`): in the swarm, the
parent's write of the agent's `Command(graph=PARENT)` update, the receiving agent's
input and the parent's write of its answer (both re-send the history); in the
supervisor, in order: the parent's write of the supervisor's `Command(graph=PARENT)` to
bob, bob's input, the parent's write of bob's output with its hand-back, the
supervisor's input and the parent's write of its closing answer."""


@dataclass(frozen=True)
class Plan:
    """Everything random about one trial, drawn from its seed."""

    trial: int
    seed: int
    app: str
    durability: str  # default | sync
    prior_turns: int
    kind: str  # write | handoff | timer
    slot: int
    when: str  # before | after
    delay: float
    resume: str  # none | input
    lane: str = "threadlog"  # threadlog | langgraph (LANES)

    @classmethod
    def draw(cls, seed: int, trial: int, app: str | None = None, lane: str | None = None) -> Plan:
        rng = random.Random(f"{seed}:{trial}")
        picked = rng.choice(APPS)
        app = app or picked
        kind = rng.choices(("write", "handoff", "timer"), weights=(6, 3, 1))[0]
        durability = rng.choice(DURABILITIES)
        prior_turns = rng.randint(0, 2)
        where = rng.random()  # scaled to the lane's writes, drawn last
        when = rng.choice(("before", "after"))
        delay = rng.uniform(0.0, 0.3)
        resume = rng.choice(("none", "input"))
        lane = lane or rng.choice(LANES)
        slots = (WRITE_SLOTS if kind == "write" else HANDOFF_SLOTS)[f"{app}/{lane}"]
        return cls(
            trial=trial,
            seed=seed,
            app=app,
            durability=durability,
            prior_turns=prior_turns,
            kind=kind,
            slot=1 + int(where * slots),
            when=when,
            delay=delay,
            resume=resume,
            lane=lane,
        )

    def invoke_kwargs(self) -> dict[str, Any]:
        return {} if self.durability == "default" else {"durability": self.durability}


@dataclass
class Found(Outcome):
    changed: list[str] = field(default_factory=list)
    not_append_only: list[str] = field(default_factory=list)
    not_as_langgraph: list[str] = field(default_factory=list)
    check: str = ""
    check_after_kill: str = ""
    checkpoints: int = 0
    lost_cold: list[str] = field(default_factory=list)  # read by a new saver
    read_differs: list[str] = field(default_factory=list)  # warm read != cold read

    @property
    def ok(self) -> bool:
        return super().ok and not (
            self.changed
            or self.not_append_only
            or self.not_as_langgraph
            or self.check
            or self.check_after_kill
            or self.read_differs
            or self.lost_cold
        )


# -- the apps ------------------------------------------------------------------------


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def _id() -> str:
    return f"run-{uuid.uuid4()}"  # as a provider's reply carries: new on every call


def _hand_off(me: str, to: str, answer: str) -> Callable[[Sequence[BaseMessage]], AIMessage]:
    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        turn = _turn(messages)
        if isinstance(messages[-1], HumanMessage):
            call = {"name": f"transfer_to_{to}", "args": {}, "id": f"{me}-handoff-{turn}"}
            return AIMessage("", tool_calls=[call], id=_id())
        return AIMessage(f"{me} {answer} turn {turn}", id=_id())

    return reply


def _worker_agent(lane: str, model: Any, tools: list[Any], name: str) -> Any:
    if lane == "threadlog":
        return threadlog.create_agent(model, tools, name=name)
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, name=name)


def build(app: str, saver: BaseCheckpointSaver[Any], lane: str = "threadlog") -> Any:
    from tests.helpers.multi_agent import Scripted

    if app == "swarm":
        from langgraph_swarm import create_handoff_tool, create_swarm

        class SwarmState(threadlog.MessagesState):
            active_agent: str | None

        alice = _worker_agent(
            lane,
            Scripted(script=_hand_off("alice", "bob", "answers")),
            [create_handoff_tool(agent_name="bob")],
            "alice",
        )
        bob = _worker_agent(
            lane,
            Scripted(script=_hand_off("bob", "alice", "answers")),
            [create_handoff_tool(agent_name="alice")],
            "bob",
        )
        agents = [alice, bob]
        if lane == "langgraph":
            swarm = create_swarm(agents, default_active_agent="alice")
        else:
            swarm = create_swarm(agents, default_active_agent="alice", state_schema=SwarmState)
        return swarm.compile(checkpointer=saver)
    from langgraph_supervisor import create_supervisor

    class SupervisorState(threadlog.MessagesState):
        remaining_steps: int

    def bob_reply(messages: Sequence[BaseMessage]) -> AIMessage:
        return AIMessage(f"bob works on turn {_turn(messages)}", id=_id())

    bob = _worker_agent(lane, Scripted(script=bob_reply), [], "bob")
    model = Scripted(script=_hand_off("supervisor", "bob", "closes"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lane == "langgraph":
            supervisor = create_supervisor([bob], model=model)
        else:
            supervisor = create_supervisor([bob], model=model, state_schema=SupervisorState)
    return supervisor.compile(checkpointer=saver)


QUESTIONS = ("Book a table in Rome", "And one in Paris?", "Cancel Rome", "What is booked?")


def _user(plan: Plan, turn: int) -> HumanMessage:
    text = f"{QUESTIONS[turn % len(QUESTIONS)]} (turn {turn})"  # no two alike: a digest
    return HumanMessage(text, id=f"t{plan.trial}-u{turn}")  # seen twice is a duplicate


def _config(thread_id: str, ns: str = "") -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}


# -- what a thread holds -------------------------------------------------------------


def digest(m: BaseMessage) -> str:
    """A message's content as a short hash: its type, text, calls, call id and name."""
    calls = [
        [c.get("name"), c.get("args"), c.get("id")] for c in getattr(m, "tool_calls", None) or ()
    ]
    body = [m.type, m.content, calls, getattr(m, "tool_call_id", None), m.name]
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _content(m: BaseMessage) -> list[Any]:
    """What a reference run must reproduce: the type, text and called tools (ids differ
    from run to run: the models' and the handoffs' are fresh on every call)."""
    calls = [c.get("name") for c in getattr(m, "tool_calls", None) or ()]
    return [m.type, m.content, calls, m.name]


Snapshot = dict[str, dict[str, Any]]
"""`ns|checkpoint_id` -> {"parent": its parent's key or None, "step": its step,
"messages": [[id, digest], ...]}."""


def namespaces(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[str]:
    """Every checkpoint namespace the thread has, the parent's ("") first."""
    found = {
        t.config["configurable"].get("checkpoint_ns", "")
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    }
    return sorted(found | {""})


def snapshot(graph: Any, saver: BaseCheckpointSaver[Any], thread_id: str) -> Snapshot:
    """Every checkpoint of every namespace, as `get_state_history` reads it back."""
    out: Snapshot = {}
    for ns in namespaces(saver, thread_id):
        for snap in graph.get_state_history(_config(thread_id, ns)):
            key = f"{ns}|{snap.config['configurable']['checkpoint_id']}"
            parent = snap.parent_config
            out[key] = {
                "parent": f"{ns}|{parent['configurable']['checkpoint_id']}" if parent else None,
                "step": (snap.metadata or {}).get("step"),
                "messages": [[m.id, digest(m)] for m in snap.values.get("messages", [])],
                "contents": [_content(m) for m in snap.values.get("messages", [])],
            }
    return out


def _agent(key: str) -> str:
    """A namespace's agent ("" for the parent): its task ids differ from run to run."""
    ns = key.split("|", 1)[0]
    return "|".join(part.split(":", 1)[0] for part in ns.split("|")) if ns else ""


def shape(snap: Snapshot) -> list[tuple[str, list[list[list[Any]]]]]:
    """Each namespace's checkpoints' message contents, oldest first, in a run-independent
    order: what a LangGraph saver must show for the same turns."""
    by_ns: dict[str, list[tuple[int, list[list[Any]]]]] = {}
    for key, row in snap.items():
        by_ns.setdefault(key.split("|", 1)[0], []).append((row["step"], row["contents"]))
    out = []
    for ns, rows in by_ns.items():
        ordered = [contents for _, contents in sorted(rows, key=lambda r: r[0])]
        out.append((_agent(f"{ns}|"), ordered))
    return sorted(out, key=lambda r: json.dumps(r, default=str))


# -- the worker ----------------------------------------------------------------------


def _tool_names(value: Any) -> Iterator[str]:
    """The names of the tool messages inside a stored write value (a list, or threadlog's
    `threadlog.resent` record of a re-sent history)."""
    if isinstance(value, ToolMessage):
        yield value.name or ""
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tool_names(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tool_names(v)


class HandoffJournal(Journal):
    """kill_harness's journal, also killing at the plan's handoff write."""

    handoffs = 0

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        plan: Any = self.plan
        names = _tool_names([v for _, v in writes])  # `writes` may be a deque
        handoff = self.armed and any("transfer" in name for name in names)
        self.handoffs += handoff
        hit = handoff and plan is not None and plan.kind == "handoff" and self.handoffs == plan.slot
        if hit and plan.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        super().put_writes(config, writes, task_id, task_path)
        if hit and plan.when == "after":
            os.kill(os.getpid(), signal.SIGKILL)


def thread_of(plan: Plan) -> str:
    return f"ma-{plan.seed}-{plan.trial}-{plan.app}-{plan.lane}-{plan.durability}"


def _worker(url: str, plan: Plan, work: Path, count: bool) -> None:
    code = 1
    try:
        holder: list[Journal] = []

        def wrap(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
            holder.append(HandoffJournal(saver, work / "stored.jsonl", None if count else plan))
            return holder[0]

        with threadlog.checkpointer(url, wrap=wrap, record_calls=False) as saver:
            journal = holder[0]
            graph = build(plan.app, saver, plan.lane)
            thread_id = thread_of(plan)
            for turn in range(plan.prior_turns + 1):
                if turn == plan.prior_turns and not count:
                    journal.armed, journal.count = True, 0
                    _append(work / "progress.jsonl", {"kill_turn": turn})
                if count:
                    journal.armed = True  # counts handoff writes, kills nothing
                before, journal.handoffs = journal.count, 0
                graph.invoke(
                    {"messages": [_user(plan, turn)]}, _config(thread_id), **plan.invoke_kwargs()
                )
                _append(
                    work / "turns.jsonl",
                    {
                        "turn": turn,
                        "writes": journal.count - before,
                        "handoffs": journal.handoffs,
                        "seen": snapshot(graph, saver, thread_id),
                    },
                )
        code = 0
    except BaseException as exc:
        (work / "error.txt").write_text(f"{type(exc).__name__}: {exc}"[:500])
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def run_worker(url: str, plan: Plan, work: Path, out: Found, count: bool = False) -> None:
    work.mkdir(parents=True, exist_ok=True)
    proc = multiprocessing.get_context("fork").Process(
        target=_worker, args=(url, plan, work, count)
    )
    proc.start()
    if plan.kind == "timer" and not count:
        deadline = time.monotonic() + 60
        while not (work / "progress.jsonl").exists() and proc.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.001)
        proc.join(plan.delay)
        if proc.is_alive() and proc.pid is not None:
            os.kill(proc.pid, signal.SIGKILL)
    proc.join(180)
    if proc.is_alive() and proc.pid is not None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        out.unreadable.append("worker hung")
    out.killed = proc.exitcode == -signal.SIGKILL
    if proc.exitcode not in (0, -signal.SIGKILL):
        out.unreadable.append(f"worker failed with exit code {proc.exitcode}")


# -- checks --------------------------------------------------------------------------


def _compare(before: Snapshot, after: Snapshot, stage: str, out: Found, *, kept: bool) -> None:
    """Every checkpoint of `before` reads back the same in `after` (or, unless `kept`
    is required, is absent: a checkpoint is never rewritten)."""
    for key, row in before.items():
        now = after.get(key)
        if now is None:
            if kept:
                out.changed.append(f"{stage}: {key} gone")
        elif now["messages"] != row["messages"]:
            out.changed.append(f"{stage}: {key} reads differently")


def _append_only(snap: Snapshot, out: Found) -> None:
    for key, row in snap.items():
        ids = [i for i, _ in row["messages"]]
        digests = [d for _, d in row["messages"]]
        doubled = {i for i in ids if ids.count(i) > 1}
        doubled |= {d for d in digests if digests.count(d) > 1}
        if doubled:
            out.duplicated.append(f"{key}: {sorted(doubled)}")
        parent = snap.get(row["parent"]) if row["parent"] else None
        if parent is not None and row["messages"][: len(parent["messages"])] != parent["messages"]:
            out.not_append_only.append(key)


def _reference(plan: Plan, turns: int) -> Snapshot:
    """The same turns on LangGraph's own saver."""
    saver = InMemorySaver()
    graph = build(plan.app, saver, plan.lane)
    thread_id = "reference"
    for turn in range(turns):
        graph.invoke({"messages": [_user(plan, turn)]}, _config(thread_id), **plan.invoke_kwargs())
    return snapshot(graph, saver, thread_id)


def _check(url: str, thread_id: str) -> str:
    """`threadlog check` on the thread: "" when it exits 0, else what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = threadlog_main(
            ["check", "--db", url, "--thread", thread_id, "--all-checkpoints", "--json"]
        )
    return "" if code == 0 else f"exit {code}: {printed.getvalue()[:400]}"


def check_after_kill(url: str, plan: Plan, work: Path, out: Found) -> None:
    thread_id = thread_of(plan)
    records = _read(work / "stored.jsonl")
    stored = {mid: kind for rec in records for mid, kind in rec["ids"]}
    out.stored = len(stored)
    finished = _read(work / "turns.jsonl")
    seen: Snapshot = {}
    for turn in finished:
        seen.update(turn["seen"])
    backends: list[BaseCheckpointSaver[Any]] = []

    def keep(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
        backends.append(saver)
        return saver

    final: Snapshot = {}
    if any(rec["op"] == "put" for rec in records):  # else there is no thread to check
        out.check_after_kill = _check(url, thread_id)
    with threadlog.checkpointer(url, wrap=keep, record_calls=False) as saver:
        graph = build(plan.app, saver, plan.lane)
        config = _config(thread_id)
        try:
            killed = snapshot(graph, saver, thread_id)
            head = graph.get_state(config, subgraphs=True)
        except Exception as exc:
            out.unreadable.append(f"after the kill: {type(exc).__name__}: {exc}"[:300])
            return
        _compare(seen, killed, "after the kill", out, kept=True)
        runs: list[tuple[str, Any]] = [("new input", {"messages": [_user(plan, 90)]})]
        if plan.resume == "none" and head.next:
            runs.insert(0, ("invoke(None)", None))
        runs.append(("one more message", {"messages": [_user(plan, 91)]}))
        for what, value in runs:
            try:
                graph.invoke(value, config, **plan.invoke_kwargs())
            except Exception as exc:
                out.unreadable.append(f"resume, {what}: {type(exc).__name__}: {exc}"[:300])
        try:
            final = snapshot(graph, saver, thread_id)
            messages = graph.get_state(config).values.get("messages", [])
        except Exception as exc:
            out.unreadable.append(f"after the resume: {type(exc).__name__}: {exc}"[:300])
            return
        ids = [m.id for m in messages]
        out.lost = sorted(f"{kind}:{mid}" for mid, kind in stored.items() if mid not in ids)
        _trace_lost(backends[0], thread_id, records, out)
    # The same thread through a new saver (an empty cache): what another process reads.
    with threadlog.checkpointer(url, record_calls=False) as saver:
        graph = build(plan.app, saver, plan.lane)
        try:
            cold = snapshot(graph, saver, thread_id)
            cold_ids = [m.id for m in graph.get_state(config).values.get("messages", [])]
        except Exception as exc:
            out.unreadable.append(f"read cold: {type(exc).__name__}: {exc}"[:300])
            cold, cold_ids = {}, []
    out.read_differs = sorted(
        k
        for k in cold.keys() | final.keys()
        if cold.get(k, {}).get("messages") != final.get(k, {}).get("messages")
    )
    out.lost_cold = sorted(f"{kind}:{mid}" for mid, kind in stored.items() if mid not in cold_ids)
    if plan.durability != "sync":  # the mode's allowance, as for `lost`
        allowed = {i for i in out.lost_unstored_step}
        out.lost_cold = [i for i in out.lost_cold if i not in allowed]
    out.checkpoints = len(final)
    _compare(seen, final, "at the end", out, kept=True)
    _compare(killed, final, "at the end, read after the kill", out, kept=False)
    _append_only(final, out)
    if finished:
        ours = shape(seen)
        theirs = shape(_reference(plan, len(finished)))
        if ours != theirs:
            out.not_as_langgraph.append(
                f"finished turns: {json.dumps(ours, default=str)[:300]} != "
                f"{json.dumps(theirs, default=str)[:300]}"
            )
    out.check = _check(url, thread_id)


# -- runs ----------------------------------------------------------------------------


@dataclass
class Summary:
    backend: str
    seed: int
    trials: int
    killed: int = 0
    killed_by_kind: Counter[str] = field(default_factory=Counter)
    killed_by_app: Counter[str] = field(default_factory=Counter)
    stored_messages: int = 0
    checkpoints: int = 0
    lost: int = 0
    lost_unstored_step: int = 0
    lost_beyond_mode: int = 0
    duplicated: int = 0
    changed: int = 0
    not_append_only: int = 0
    not_as_langgraph: int = 0
    check_failed: int = 0
    check_failed_after_kill: int = 0
    lost_cold: int = 0
    read_differs: int = 0
    unreadable: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, o: Found) -> None:
        self.killed += o.killed
        self.killed_by_kind[o.plan.kind] += o.killed
        self.killed_by_app[f"{o.plan.app}/{o.plan.lane}/{o.plan.durability}"] += o.killed
        self.stored_messages += o.stored
        self.checkpoints += o.checkpoints
        self.lost += len(o.lost)
        self.lost_unstored_step += len(o.lost_unstored_step)
        self.lost_beyond_mode += len(o.lost_beyond_mode)
        self.duplicated += len(o.duplicated)
        self.changed += len(o.changed)
        self.not_append_only += len(o.not_append_only)
        self.not_as_langgraph += len(o.not_as_langgraph)
        self.check_failed += bool(o.check)
        self.check_failed_after_kill += bool(o.check_after_kill)
        self.lost_cold += len(o.lost_cold)
        self.read_differs += len(o.read_differs)
        self.unreadable += bool(o.unreadable)
        if not o.ok:
            failure = asdict(o)
            failure["plan"] = asdict(o.plan)
            self.failures.append(failure)

    def line(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.killed_by_kind.items()))
        apps = ", ".join(f"{k} {n}" for k, n in sorted(self.killed_by_app.items()))
        return (
            f"{self.backend}: {self.trials} trials (seed {self.seed}), {self.killed} killed "
            f"({kinds}; {apps}), {self.stored_messages} stored messages, "
            f"{self.checkpoints} checkpoints compared — lost {self.lost} "
            f"({self.lost_unstored_step} of the killed turn on a checkpoint never stored, "
            f"{self.lost_beyond_mode} beyond what the durability allows; "
            f"{self.lost_cold} missing read by a new saver), checkpoints read differently "
            f"by the warm saver and a new one {self.read_differs}, duplicated "
            f"{self.duplicated}, changed {self.changed}, not append-only "
            f"{self.not_append_only}, not as on LangGraph {self.not_as_langgraph}, "
            f"`threadlog check` not clean {self.check_failed} (right after the kill: "
            f"{self.check_failed_after_kill}), unreadable {self.unreadable}; "
            f"{self.seconds:.0f} s"
        )

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("killed_by_kind", "killed_by_app"):
            out[name] = dict(getattr(self, name))
        return out


def run_trial(url: str, plan: Plan, root: Path) -> Found:
    out = Found(plan)  # type: ignore[arg-type]  # kill_harness's Outcome reads .durability
    work = root / f"trial{plan.trial}"
    run_worker(url, plan, work, out)
    check_after_kill(url, plan, work, out)
    return out


def run_trials(
    url: str,
    backend: str,
    *,
    trials: int,
    seed: int,
    only: int | None = None,
    root: Path | None = None,
    app: str | None = None,
    lane: str | None = None,
) -> Summary:
    summary = Summary(backend, seed, trials if only is None else 1)
    return run_each(
        summary,
        trials,
        only,
        root,
        "killmulti-",
        lambda trial, base: run_trial(url, Plan.draw(seed, trial, app, lane), base),
    )


def count_writes(
    url: str, app: str, lane: str, durability: str, root: Path
) -> list[tuple[int, int]]:
    """Saver writes and handoff writes each of three finished turns makes (`WRITE_SLOTS`,
    `HANDOFF_SLOTS`)."""
    plan = Plan(
        trial=int(time.time() * 1000) % 10**6,
        seed=0,
        app=app,
        durability=durability,
        prior_turns=2,
        kind="write",
        slot=0,
        when="after",
        delay=0.0,
        resume="none",
        lane=lane,
    )
    work = root / f"count-{app}-{lane}-{durability}"
    run_worker(url, plan, work, Found(plan), count=True)  # type: ignore[arg-type]
    return [(t["writes"], t["handoffs"]) for t in _read(work / "turns.jsonl")]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=60)
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--seed", type=int, help="default: drawn from os.urandom (printed)")
    p.add_argument("--only", type=int, help="run this one trial (reproduce a failure)")
    p.add_argument("--app", choices=APPS, help="default: drawn per trial")
    p.add_argument("--lane", choices=LANES, help="default: drawn per trial")
    p.add_argument("--pg-url", help="an existing Postgres server (default: a pgserver)")
    p.add_argument("--json", type=Path, help="write the summary and failures here")
    p.add_argument("--count", action="store_true", help="print each app's writes per turn")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}", flush=True)
    server = None
    with tempfile.TemporaryDirectory(prefix="killmulti-db-") as tmp:
        if args.backend == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'threads.sqlite'}"
        else:
            url, server = postgres_url(args.pg_url, "killmulti-pg-")
        try:
            if args.count:
                for app in APPS:
                    for lane in LANES:
                        for durability in DURABILITIES:
                            got = count_writes(url, app, lane, durability, Path(tmp))
                            print(f"{app}/{lane}", durability, got)
                return 0
            summary = run_trials(
                url,
                args.backend,
                trials=args.trials,
                seed=seed,
                only=args.only,
                app=args.app,
                lane=args.lane,
            )
        finally:
            if server is not None:
                server.cleanup()
    if args.json:
        args.json.write_text(json.dumps(summary.as_json(), indent=1, ensure_ascii=False))
    print(summary.line())
    for failure in summary.failures[:20]:
        print(json.dumps(failure, ensure_ascii=False, default=str)[:1200])
    return 0 if not summary.failures else 1


if __name__ == "__main__":
    sys.exit(main())
