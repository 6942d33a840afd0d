"""SIGKILL an agent that pays, at seeded random points; count duplicated and lost charges.

    python scripts/kill_payments.py --trials 200 --backend sqlite
    python scripts/kill_payments.py --trials 200 --backend postgres [--pg-url URL]
    python scripts/kill_payments.py --trials 50 --backend sqlite --durability sync --seed 1234
    python scripts/kill_payments.py --trials 50 --backend sqlite --durability exit

With `--durability exit` nothing of a killed run is stored, receipts included: the
recovery runs the whole turn again, and the model's same calls get the same keys.

Each trial is one thread. A forked worker runs one turn of a model ⇄ tools agent whose
model asks for three payments in one step: two through `pay`, a tool marked
`threadlog.idempotent` that passes its `threadlog.idempotency_key()` to a small local
payment service, and one through `pay_raw`, an unmarked tool calling the same service
without a key. The service is a SQLite table (`charges`, `key` UNIQUE): a second charge
with a known key returns the first charge; a charge without a key is always new. Each
row also records which call asked (for counting only).

The worker is SIGKILLed at a point drawn from the trial's RNG (`random.Random(seed)`,
the seed from `os.urandom` unless `--seed` is given; printed, so a trial reproduces
with `--seed S --trials 1`):

* `model`: in the model's first step (before any tool starts);
* `before` / `during` / `after`: in call k's tool before it charges, after it charged
  and before it returns, or (in a `wrap_tool_call` interceptor) right after the node's
  per-call work returned — the tool returned, its step's writes not stored yet;
* `model2`: in the model's second step (the tool step's checkpoint stored);
* `timer`: the parent kills the worker after a random delay into the turn.

The tool node (threadlog's `ToolNode` or LangGraph's prebuilt one) and the recovery —
`invoke(None)` (resume) or a new message (new input) — are drawn too; the recovery
runs in a fresh forked process. Then the parent reads the thread and the charges:

* marked calls (`pay`): **duplicated** = a call with two charges; **lost** = a charge
  whose id is not in the call's result; **unknown** = a result that is not a charge
  ("outcome unknown", "not completed", any error); **uncharged** = a call with no charge
  at all after recovery. All must be 0.
* the unmarked call (`pay_raw`) is counted per outcome as docs/durability.md documents
  it: duplicated (a resume re-ran it after it charged), "outcome unknown" or "not
  completed" (new input), charged once.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode as LangGraphToolNode

import threadlog
from threadlog.log.pairing import NOT_COMPLETED, OUTCOME_UNKNOWN

POINTS = ("model", "before", "during", "after", "model2", "timer")
WEIGHTS = (1, 2, 2, 2, 1, 4)
CALLS = ("m1", "m2", "u1")  # two marked payments, one unmarked


@dataclass(frozen=True)
class Plan:
    seed: int
    point: str
    call: str  # which call's tool/interceptor kills (tool points)
    node: str  # "threadlog" | "langgraph"
    recovery: str  # "resume" | "new input"
    delay: float  # timer: fraction of a calibrated turn
    jitter: tuple[float, ...]  # per-call sleep before/after the charge, seconds

    @classmethod
    def draw(cls, seed: int) -> Plan:
        rng = random.Random(seed)
        return cls(
            seed=seed,
            point=rng.choices(POINTS, WEIGHTS)[0],
            call=rng.choice(CALLS),
            node=rng.choice(("threadlog", "langgraph")),
            recovery=rng.choice(("resume", "new input")),
            delay=rng.uniform(0.0, 1.2),
            jitter=tuple(rng.uniform(0.0, 0.01) for _ in range(2 * len(CALLS))),
        )


# -- the payment service --------------------------------------------------------------


def _service(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(
        "CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, key TEXT UNIQUE, "
        "call_id TEXT NOT NULL, amount INTEGER NOT NULL)"
    )
    return con


def charge(path: Path, key: str | None, call_id: str, amount: int) -> int:
    """One charge; with a key, a second request returns the first charge's id."""
    con = _service(path)
    try:
        con.execute("BEGIN IMMEDIATE")
        if key is not None:
            row = con.execute("SELECT id FROM charges WHERE key = ?", (key,)).fetchone()
            if row is not None:
                con.execute("COMMIT")
                return int(row[0])
        cur = con.execute(
            "INSERT INTO charges (key, call_id, amount) VALUES (?, ?, ?)",
            (key, call_id, amount),
        )
        con.execute("COMMIT")
        return int(cur.lastrowid or 0)
    finally:
        con.close()


def charges_by_call(path: Path) -> dict[str, list[int]]:
    con = _service(path)
    try:
        out: dict[str, list[int]] = {}
        for cid, rid in con.execute("SELECT call_id, id FROM charges ORDER BY id"):
            out.setdefault(cid, []).append(rid)
        return out
    finally:
        con.close()


# -- the agent ------------------------------------------------------------------------


def _die_if(plan: Plan | None, point: str, call: str | None = None) -> None:
    if plan is not None and plan.point == point and (call is None or plan.call == call):
        os.kill(os.getpid(), signal.SIGKILL)


def build(service: Path, saver: Any, thread: str, plan: Plan | None) -> Any:
    """The agent of one trial; `plan` None: nothing kills (recovery, calibration)."""
    jitter = (
        dict(zip(CALLS, zip(plan.jitter[::2], plan.jitter[1::2], strict=True), strict=True))
        if plan
        else {}
    )

    def _suffix(cid: str) -> str:
        return cid.rsplit("-", 1)[-1]

    def _pay(key: str | None, cid: str, amount: int) -> str:
        short = _suffix(cid)
        before, after = jitter.get(short, (0.0, 0.0))
        time.sleep(before)
        _die_if(plan, "before", short)
        rid = charge(service, key, cid, amount)
        time.sleep(after)
        _die_if(plan, "during", short)
        return f"charge {rid}"

    @tool
    def pay(amount: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Charge an amount through the payment service, with an idempotency key."""
        return _pay(threadlog.idempotency_key(), tool_call_id, amount)

    @tool
    def pay_raw(amount: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Charge an amount through the payment service, without a key."""
        return _pay(None, tool_call_id, amount)

    def after(request: Any, execute: Any) -> Any:
        out = execute(request)
        _die_if(plan, "after", _suffix(request.tool_call["id"]))
        return out

    def model(state: threadlog.MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        if not any(isinstance(m, AIMessage) for m in messages):
            _die_if(plan, "model")
            calls = [
                {"id": f"{thread}-m1", "name": "pay", "args": {"amount": 10}},
                {"id": f"{thread}-m2", "name": "pay", "args": {"amount": 20}},
                {"id": f"{thread}-u1", "name": "pay_raw", "args": {"amount": 30}},
            ]
            return {"messages": [AIMessage("", id=f"{thread}-ai", tool_calls=calls)]}
        if isinstance(messages[-1], ToolMessage):
            _die_if(plan, "model2")
        return {"messages": [AIMessage("done", id=f"{thread}-ai-{len(messages)}")]}

    node_kind = plan.node if plan else "threadlog"
    marked = threadlog.idempotent(pay)
    if node_kind == "threadlog":
        node: Any = threadlog.ToolNode([marked, pay_raw], wrap_tool_call=after)
    else:
        node = LangGraphToolNode([marked, pay_raw], wrap_tool_call=after)
    g = StateGraph(threadlog.MessagesState)
    g.add_node("model", model)
    g.add_node("tools", node)
    g.add_edge(START, "model")
    g.add_conditional_edges(
        "model",
        lambda s: "tools" if getattr(s["messages"][-1], "tool_calls", None) else END,
        ["tools", END],
    )
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


# -- one trial ------------------------------------------------------------------------


def _quiet(node: str) -> Plan:
    """A plan that kills nothing (recovery, calibration), on tool node `node`."""
    return Plan(0, "none", "", node, "", 0.0, (0.0,) * (2 * len(CALLS)))


def _run(
    url: str, service: Path, thread: str, plan: Plan, given: Any, durability: str | None
) -> None:
    kw = {} if durability is None else {"durability": durability}
    with threadlog.checkpointer(url) as saver:
        graph = build(service, saver, thread, plan)
        cfg = {"configurable": {"thread_id": thread}}
        if given is None:
            head = graph.get_state(cfg)
            last = (head.values.get("messages") or [None])[-1]
            if not head.next and isinstance(last, AIMessage) and not last.tool_calls:
                # Killed after the turn was stored whole (under "exit", between its one
                # store and the process's end): nothing is left to resume.
                return
            if not head.next:
                # Killed before the run stored anything, or (under "exit") while its one
                # store was under way, leaving only the input: nothing to resume, so a
                # user sends the message again (same id).
                given = {"messages": [HumanMessage("pay three bills", id=f"{thread}-h1")]}
        graph.invoke(given, cfg, **kw)


def _forked(target: Any, *args: Any) -> multiprocessing.Process:
    proc = multiprocessing.get_context("fork").Process(target=_exit_after, args=(target, *args))
    proc.start()
    return proc


def _exit_after(target: Any, *args: Any) -> None:
    try:
        target(*args)
    except BaseException as e:
        print(f"worker failed: {type(e).__name__}: {e}", file=sys.stderr)
        os._exit(1)
    os._exit(0)


@dataclass
class Tally:
    trials: int = 0
    killed: int = 0
    by_point: Counter[str] = field(default_factory=Counter)
    marked: Counter[str] = field(default_factory=Counter)
    unmarked: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def bad(self) -> int:
        return sum(self.marked[k] for k in ("duplicated", "lost", "unknown", "uncharged"))


def run_trial(
    url: str, service: Path, plan: Plan, durability: str | None, turn: float, tally: Tally
) -> None:
    thread = f"s{plan.seed}"
    first = {"messages": [HumanMessage("pay three bills", id=f"{thread}-h1")]}
    proc = _forked(_run, url, service, thread, plan, first, durability)
    if plan.point == "timer":
        proc.join(plan.delay * turn)
        if proc.is_alive():
            os.kill(proc.pid or 0, signal.SIGKILL)
    proc.join(120)
    if proc.is_alive():
        os.kill(proc.pid or 0, signal.SIGKILL)
        proc.join()
    tally.trials += 1
    killed = proc.exitcode == -signal.SIGKILL
    if killed:
        tally.killed += 1
        tally.by_point[plan.point] += 1
        given = (
            None
            if plan.recovery == "resume"
            else {"messages": [HumanMessage("did it go through?", id=f"{thread}-h2")]}
        )
        # The recovery runs the same graph (the same tool node), killing nothing.
        rec = _forked(_run, url, service, thread, _quiet(plan.node), given, durability)
        rec.join(120)
        if rec.exitcode != 0:
            tally.failures.append(f"seed {plan.seed}: recovery exited {rec.exitcode}")
            return
    elif proc.exitcode != 0:
        tally.failures.append(f"seed {plan.seed}: worker exited {proc.exitcode}")
        return
    _count(url, service, thread, plan, tally, killed)


def _count(url: str, service: Path, thread: str, plan: Plan, tally: Tally, killed: bool) -> None:
    with threadlog.checkpointer(url) as saver:
        state = build(service, saver, thread, None).get_state(
            {"configurable": {"thread_id": thread}}
        )
    results: dict[str, list[ToolMessage]] = {}
    for m in state.values.get("messages", []):
        if isinstance(m, ToolMessage):
            results.setdefault(m.tool_call_id, []).append(m)
    rows = charges_by_call(service)
    for short in CALLS:
        cid = f"{thread}-{short}"
        got = results.get(cid, [])
        charged = rows.get(cid, [])
        kind = tally.marked if short.startswith("m") else tally.unmarked
        kind["calls"] += 1
        if len(got) != 1:
            tally.failures.append(f"seed {plan.seed}: call {cid} has {len(got)} results")
            continue
        content = str(got[0].content)
        if len(charged) > 1:
            kind["duplicated"] += 1
        if content == OUTCOME_UNKNOWN:
            kind["unknown" if short.startswith("m") else "outcome unknown"] += 1
        elif content == NOT_COMPLETED:
            kind["unknown" if short.startswith("m") else "not completed"] += 1
        elif not content.startswith("charge "):
            kind["unknown" if short.startswith("m") else "other error"] += 1
            tally.failures.append(f"seed {plan.seed}: {cid} answered {content[:80]!r}")
        if charged and content.startswith("charge ") and int(content.split()[1]) not in charged:
            kind["lost"] += 1
        if charged and not content.startswith("charge "):
            kind["lost"] += 1  # it charged, and the log does not say so
        if not charged:
            kind["uncharged"] += 1
        if short.startswith("m") and (len(charged) > 1 or not content.startswith("charge ")):
            tally.failures.append(
                f"seed {plan.seed} ({plan.point} {plan.call}, {plan.node}, {plan.recovery}): "
                f"{cid} charged {charged}, answered {content[:80]!r}"
            )


def _warm(root: Path, url: str) -> None:
    """Run one turn in this process first: every module a worker needs is then imported
    before the first fork, so all trials run the same code even if files change."""
    with threadlog.checkpointer(f"sqlite:///{root / 'warm.sqlite'}") as saver:
        graph = build(root / "warm-payments.sqlite", saver, "warm", _quiet("threadlog"))
        graph.invoke(
            {"messages": [HumanMessage("x", id="warm-h")]}, {"configurable": {"thread_id": "warm"}}
        )
        build(root / "warm-payments.sqlite", saver, "warm2", _quiet("langgraph"))
    if not url.startswith("sqlite"):
        with threadlog.checkpointer(url):  # the backend's own modules
            pass


def calibrate(url: str, service: Path) -> float:
    """Seconds one unkilled turn takes in a forked worker (timer kills fall within it)."""
    times = []
    for k in range(3):
        t0 = time.perf_counter()
        given = {"messages": [HumanMessage("x", id=f"c{k}-h")]}
        thread = f"calibrate-{k}-{os.getpid()}"
        proc = _forked(_run, url, service, thread, _quiet("threadlog"), given, None)
        proc.join(120)
        times.append(time.perf_counter() - t0)
    return sorted(times)[1]


def _pgserver_url() -> str:
    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix="killpay-pg-"), cleanup_mode="delete")
    return str(server.get_uri())


def run_trials(
    backend: str,
    trials: int,
    *,
    root: Path,
    durability: str | None = None,
    seed: int | None = None,
    pg_url: str | None = None,
    out: Any = sys.stdout,
) -> Tally:
    service = root / "payments.sqlite"
    if backend == "sqlite":
        url = f"sqlite:///{root / 'checkpoints.sqlite'}"
    elif backend.startswith(("postgres://", "postgresql://", "sqlite://")):
        url = backend  # a ready database URL (the tests' `backend` fixture)
    else:
        url = pg_url or _pgserver_url()
    _warm(root, url)
    turn = calibrate(url, service)
    base = seed if seed is not None else int.from_bytes(os.urandom(6), "big")
    print(
        f"kill_payments: backend={backend} durability={durability or 'default'} "
        f"trials={trials} base seed={base} (trial k: seed base+k) turn={turn * 1000:.0f} ms",
        file=out,
    )
    tally = Tally()
    for k in range(trials):
        run_trial(url, service, Plan.draw(base + k), durability, turn, tally)
    return tally


def report(tally: Tally) -> dict[str, Any]:
    return {
        "trials": tally.trials,
        "killed": tally.killed,
        "kills_by_point": dict(tally.by_point),
        "marked": {
            k: tally.marked[k] for k in ("calls", "duplicated", "lost", "unknown", "uncharged")
        },
        "unmarked": dict(tally.unmarked),
        "failures": tally.failures[:20],
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument(
        "--durability", choices=("default", "sync", "async", "exit"), default="default"
    )
    p.add_argument("--seed", type=int, help="base seed (default: from os.urandom)")
    p.add_argument("--pg-url", help="an existing Postgres server (default: a pgserver)")
    p.add_argument("--dir", type=Path, help="where the databases go (default: a temp dir)")
    args = p.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="killpay-"))
    root.mkdir(parents=True, exist_ok=True)
    durability = None if args.durability == "default" else args.durability
    tally = run_trials(
        args.backend,
        args.trials,
        root=root,
        durability=durability,
        seed=args.seed,
        pg_url=args.pg_url,
    )
    print(json.dumps(report(tally), indent=2))
    return 1 if tally.bad() or tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
