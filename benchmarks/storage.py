"""Storage and per-turn cost of a message history under a checkpointer (issue 8).

Contract: prints one table; asserts nothing. Every figure comes from a fresh
subprocess per (variant, backend, turns), so peak RSS is that run's own.

The loop is the issue's weather turn, built from plain nodes and a scripted model so
only the channel and the checkpointer are measured:

    human ─► AI with 2 tool calls ─► 2 tool results (two parallel `Send` tasks) ─► AI answer

5 messages and 4 supersteps per turn, ~150-byte contents. Variants:

* `threadlog`   — `threadlog.Messages`, saver wrapped by `with_history_cache`
* `add_messages` — LangGraph's `Annotated[list, add_messages]` (full list per step)
* `delta`       — `DeltaChannel(_messages_delta_reducer)` (langgraph.graph.message)
* `floor`       — the same graph whose state is one integer: LangGraph + saver alone

Usage:
    python benchmarks/storage.py --quick              # smoke run (sqlite, 30/60 turns)
    python benchmarks/storage.py                      # 100, 400, 2000 turns; sqlite+postgres
    python benchmarks/storage.py --turns 100 400 --backends sqlite
    python benchmarks/storage.py --add-messages-2000  # include the quadratic run

Postgres uses THREADLOG_TEST_POSTGRES_URL, or a throwaway `pgserver` instance.
"""



import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from operator import add
from pathlib import Path
from typing import Annotated, Any

VARIANTS = ("threadlog", "delta", "add_messages", "floor")
PAD = "x" * 100  # brings each content to ~150 bytes
CITIES = ("Beijing", "Shanghai", "Guangzhou", "Shenzhen", "Hangzhou", "Chengdu")


# -- the graph ----------------------------------------------------------------


def build_graph(variant: str, checkpointer: Any) -> Any:
    from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send
    from typing_extensions import TypedDict

    if variant == "floor":

        class FloorState(TypedDict):
            n: Annotated[int, add]

        def f_agent(state: FloorState) -> dict[str, Any]:
            return {"n": 1}

        def f_tool(_: Any) -> dict[str, Any]:
            return {"n": 0}

        def f_route(state: FloorState) -> Any:
            # +1 per input and per agent step, tools add 0: the first agent of a turn
            # leaves n ≡ 2 (mod 3), the answer leaves n ≡ 0.
            return [Send("tool", {}), Send("tool", {})] if state["n"] % 3 == 2 else END

        fg = StateGraph(FloorState)
        fg.add_node("agent", f_agent)
        fg.add_node("tool", f_tool)
        fg.add_edge(START, "agent")
        fg.add_conditional_edges("agent", f_route, ["tool", END])
        fg.add_edge("tool", "agent")
        return fg.compile(checkpointer=checkpointer)

    channel: Any
    if variant == "threadlog":
        from threadlog import Messages

        channel = Messages
    elif variant == "add_messages":
        from langgraph.graph.message import add_messages

        channel = Annotated[list[AnyMessage], add_messages]
    elif variant == "delta":
        from langgraph.channels.delta import DeltaChannel
        from langgraph.graph.message import _messages_delta_reducer

        channel = Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]
    else:
        raise SystemExit(f"unknown variant {variant!r}")

    class State(TypedDict):
        messages: channel  # type: ignore[valid-type]

    def agent(state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        if last.type == "human":
            a, b = CITIES[len(state["messages"]) % 6], CITIES[(len(state["messages"]) + 1) % 6]
            calls = [
                {"name": "get_weather", "args": {"city": c}, "id": f"call_{uuid.uuid4().hex}"}
                for c in (a, b)
            ]
            return {
                "messages": [
                    AIMessage(
                        f"Checking the weather in {a} and {b}. {PAD}",
                        tool_calls=calls,
                        id=str(uuid.uuid4()),
                    )
                ]
            }
        return {
            "messages": [
                AIMessage(f"Sunny in both cities, 23 and 25 degrees. {PAD}", id=str(uuid.uuid4()))
            ]
        }

    def tool(call: dict[str, Any]) -> dict[str, Any]:
        content = f"{call['args']['city']}: sunny, 23C, humidity 40%, wind 3 m/s NE. {PAD}"
        msg = ToolMessage(content, tool_call_id=call["id"], name=call["name"], id=str(uuid.uuid4()))
        return {"messages": [msg]}

    def route(state: State) -> Any:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [Send("tool", c) for c in last.tool_calls]
        return END

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tool", tool)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tool", END])
    g.add_edge("tool", "agent")
    return g.compile(checkpointer=checkpointer)


def human(turn: int) -> Any:
    from langchain_core.messages import HumanMessage

    return HumanMessage(
        f"Turn {turn}: what is the weather in two cities today? {PAD}", id=str(uuid.uuid4())
    )


def turn_input(variant: str, turn: int) -> dict[str, Any]:
    return {"n": 1} if variant == "floor" else {"messages": [human(turn)]}


# -- backends -------------------------------------------------------------------


@contextmanager
def open_saver(backend: str, target: str, variant: str) -> Iterator[Any]:
    if backend == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(target, check_same_thread=False)
        # WAL + synchronous=NORMAL (SQLite's advice for WAL): the same for every
        # variant; with the default rollback journal each commit is an fsync, and the
        # disk, not the channel, would be measured.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        saver: Any = SqliteSaver(conn)
        saver.setup()
        try:
            yield wrap(saver, variant)
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(target) as saver:
            saver.setup()
            yield wrap(saver, variant)


def wrap(saver: Any, variant: str) -> Any:
    if variant != "threadlog":
        return saver
    try:
        from threadlog.checkpoint.cache import with_history_cache
    except ImportError:  # before the cache exists: measure the bare channel
        return saver
    return with_history_cache(saver)


def db_bytes(backend: str, target: str) -> int:
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(target)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_count = conn.execute("PRAGMA page_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.close()
        return int(page_count * page_size)
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchone()
        return int(row[0] or 0)


def fresh_target(backend: str, base: str, workdir: Path, name: str) -> str:
    """A new empty database for one run (sizes are then that run's alone)."""
    if backend == "sqlite":
        path = workdir / f"{name}.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        return str(path)
    import psycopg

    db = name.replace("-", "_")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.execute(f"CREATE DATABASE {db}")
    return _with_db(base, db)


def _with_db(url: str, db: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + db))


@contextmanager
def postgres_base() -> Iterator[str]:
    url = os.environ.get("THREADLOG_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    import pgserver

    tmp = tempfile.mkdtemp(prefix="threadlog-bench-pg-")
    server = pgserver.get_server(tmp, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


# -- one run, in its own process -----------------------------------------------


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(
    variant: str, backend: str, target: str, turns: int, pair: str | None = None
) -> dict[str, Any]:
    """`turns` turns of `variant`; with `pair`, the floor graph runs interleaved turn by
    turn in the same process (its own database), so both see the same machine load."""
    config = {"configurable": {"thread_id": "bench"}}
    wall: list[float] = []
    cpu: list[float] = []
    fwall: list[float] = []
    fcpu: list[float] = []
    with ExitStack() as stack:
        saver = stack.enter_context(open_saver(backend, target, variant))
        graph = build_graph(variant, saver)
        floor = None
        if pair:
            floor = build_graph("floor", stack.enter_context(open_saver(backend, pair, "floor")))
        for t in range(turns):
            for g, v, ws, cs in ((graph, variant, wall, cpu), (floor, "floor", fwall, fcpu)):
                if g is None:
                    continue
                inp = turn_input(v, t)
                w0, c0 = time.perf_counter(), time.process_time()
                g.invoke(inp, config)
                ws.append(time.perf_counter() - w0)
                cs.append(time.process_time() - c0)
        gs = []
        for _ in range(5):
            t0 = time.perf_counter()
            snap = graph.get_state(config)
            gs.append(time.perf_counter() - t0)
        n_msgs = len(snap.values.get("messages", ()))
        raw = raw_bytes(snap.values.get("messages", ()), saver)
    k = max(1, turns // 10)
    out = {
        "variant": variant,
        "backend": backend,
        "turns": turns,
        "messages": n_msgs,
        "db_bytes": db_bytes(backend, target),
        "raw_bytes": raw,
        # Medians: the machine is shared, and a mean is one stall away from noise.
        "ms_turn_tail": 1000 * statistics.median(wall[-k:]),
        "ms_turn_head": 1000 * statistics.median(wall[:k]),
        "cpu_ms_turn_tail": 1000 * statistics.median(cpu[-k:]),
        "get_state_ms": 1000 * statistics.median(gs),
        "peak_rss_mb": peak_rss_mb(),
    }
    if fwall:
        out["paired_floor_ms_tail"] = 1000 * statistics.median(fwall[-k:])
        out["paired_floor_cpu_ms_tail"] = 1000 * statistics.median(fcpu[-k:])
    return out


def raw_bytes(messages: Any, saver: Any) -> int:
    """The messages stored once, in the saver's own serializer (msgpack)."""
    return sum(len(saver.serde.dumps_typed(m)[1]) for m in messages)


def cold_start(variant: str, backend: str, target: str) -> dict[str, Any]:
    """A new worker process takes over the thread: load it, then run one turn.

    `variant` is the channel the worker's graph uses; both variants read the same
    database (threadlog's run), whose stored writes are plain message lists.
    """
    config = {"configurable": {"thread_id": "bench"}}
    if variant == "decode":
        # The floor of any loader: read the channel's stored writes, decode them once.
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        serde = JsonPlusSerializer()
        t0 = time.perf_counter()
        decoded = [serde.loads_typed(b) for b in stored_message_blobs(backend, target)]
        ms = 1000 * (time.perf_counter() - t0)
        n = sum(len(d) if isinstance(d, list) else 1 for d in decoded)
        return {"messages": n, "ms": ms, "peak_rss_mb": peak_rss_mb()}
    with open_saver(backend, target, variant) as saver:
        graph = build_graph(variant, saver)
        t0 = time.perf_counter()
        snap = graph.get_state(config)
        load = time.perf_counter() - t0
        n = len(snap.values["messages"])
        del snap
        t0 = time.perf_counter()
        graph.invoke(turn_input(variant, 0), config)
        first_turn = time.perf_counter() - t0
    return {"messages": n, "ms": 1000 * load, "first_turn_ms": 1000 * first_turn,
            "peak_rss_mb": peak_rss_mb()}


def stored_message_blobs(backend: str, target: str) -> list[tuple[str, bytes]]:
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(target)
        rows = conn.execute(
            "SELECT type, value FROM writes WHERE thread_id = 'bench' AND channel = 'messages'"
        ).fetchall()
        conn.close()
        return [(t, bytes(v)) for t, v in rows]
    import psycopg

    with psycopg.connect(target) as conn:
        rows = conn.execute(
            "SELECT type, blob FROM checkpoint_writes "
            "WHERE thread_id = 'bench' AND channel = 'messages'"
        ).fetchall()
    return [(t, bytes(v)) for t, v in rows]


def cold_runs(backend: str, target: str, repeat: int) -> dict[str, Any]:
    """Each of decode / threadlog / delta in `repeat` fresh processes; medians."""
    out: dict[str, Any] = {}
    for what in ("decode", "threadlog", "delta"):
        runs = [spawn(["--cold", what, backend, target]) for _ in range(repeat)]
        out[what] = {
            "messages": runs[0]["messages"],
            "ms": statistics.median(r["ms"] for r in runs),
            "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
        }
    return out


def context_building(target: str) -> dict[str, Any]:
    """ms per turn of build_context on a 10 000-message log with a token budget."""
    try:
        from threadlog import ContextPolicy, build_context
    except ImportError:
        return {"status": "n/a: threadlog.build_context does not exist yet"}
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    msgs: list[Any] = []
    for t in range(2000):
        cid = [f"c{t}a", f"c{t}b"]
        msgs += [
            HumanMessage(f"Turn {t}: weather? {PAD}", id=f"h{t}"),
            AIMessage(f"Checking. {PAD}", id=f"a{t}", tool_calls=[
                {"name": "get_weather", "args": {"city": "Beijing"}, "id": cid[0]},
                {"name": "get_weather", "args": {"city": "Shanghai"}, "id": cid[1]}]),
            ToolMessage(f"sunny {PAD}", tool_call_id=cid[0], id=f"r{t}a"),
            ToolMessage(f"sunny {PAD}", tool_call_id=cid[1], id=f"r{t}b"),
            AIMessage(f"Sunny. {PAD}", id=f"z{t}"),
        ]
    policy = ContextPolicy(max_tokens=4000)
    times = []
    log = msgs[:-50]
    for k in range(11):
        log = msgs[: len(msgs) - 50 + 5 * k]
        t0 = time.perf_counter()
        build_context(log, [], policy)
        times.append(time.perf_counter() - t0)
    return {"status": "ok", "first_ms": 1000 * times[0],
            "after_first_ms": 1000 * statistics.fmean(times[1:]), "messages": len(log)}


# -- driver ---------------------------------------------------------------------


def spawn(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"benchmark subprocess {args} failed:\n{out.stderr[-4000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: sqlite, 30 and 60 turns")
    p.add_argument("--turns", type=int, nargs="+", default=[100, 400, 2000])
    p.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--slow-max-turns", type=int, default=400,
                   help="run add_messages and DeltaChannel only up to this many turns: "
                   "their turn cost grows with history (400 -> 2000 turns takes hours)")
    p.add_argument("--cold-repeat", type=int, default=3)
    p.add_argument("--workdir", default=None)
    p.add_argument("--json", default=None, help="also write all results to this file")
    # internal: one measurement in this process
    p.add_argument("--one", nargs=4, metavar=("VARIANT", "BACKEND", "TARGET", "TURNS"))
    p.add_argument("--pair", default=None, help=argparse.SUPPRESS)
    p.add_argument("--cold", nargs=3, metavar=("VARIANT", "BACKEND", "TARGET"))
    p.add_argument("--context", action="store_true")
    a = p.parse_args()

    if a.one:
        v, b, tgt, n = a.one
        print(json.dumps(run_one(v, b, tgt, int(n), a.pair)))
        return
    if a.cold:
        print(json.dumps(cold_start(*a.cold)))
        return
    if a.context:
        print(json.dumps(context_building("")))
        return
    if a.quick:
        a.turns, a.backends = [30, 60], ["sqlite"]

    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="threadlog-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    cold: dict[str, Any] = {}
    with contextmanager(_maybe_pg)(a.backends) as pg_base:
        for backend in a.backends:
            for turns in a.turns:
                for v in a.variants:
                    if v in ("add_messages", "delta") and turns > a.slow_max_turns:
                        results.append({"variant": v, "backend": backend, "turns": turns,
                                        "skipped": True})
                        continue
                    name = f"b_{v}_{backend}_{turns}"
                    tgt = fresh_target(backend, pg_base or "", workdir, name)
                    t0 = time.time()
                    args = ["--one", v, backend, tgt, str(turns)]
                    if v == "threadlog":  # the floor interleaved, for the time ratio
                        args += ["--pair", fresh_target(backend, pg_base or "", workdir,
                                                        name + "_pairfloor")]
                    r = spawn(args)
                    r["target"] = tgt
                    results.append(r)
                    print(f"  {backend:8} {turns:5} {v:12} done in {time.time() - t0:6.1f}s",
                          file=sys.stderr)
            tgt = next((r["target"] for r in results if r.get("target")
                        and r["variant"] == "threadlog" and r["backend"] == backend
                        and r["turns"] == max(a.turns)), None)
            if tgt:
                cold[backend] = cold_runs(backend, tgt, a.cold_repeat)
        ctx = spawn(["--context"])
        print_report(results, cold, ctx)
    if a.json:
        Path(a.json).write_text(json.dumps({"runs": results, "cold": cold, "context": ctx},
                                           indent=1))


def _maybe_pg(backends: list[str]) -> Iterator[str | None]:
    if "postgres" in backends:
        with postgres_base() as url:
            yield url
    else:
        yield None


def print_report(results: list[dict[str, Any]], cold: dict[str, Any], ctx: dict[str, Any]) -> None:
    def find(v: str, b: str, n: int) -> dict[str, Any] | None:
        return next((r for r in results if r["variant"] == v and r["backend"] == b
                     and r["turns"] == n and not r.get("skipped")), None)

    print()
    print(f"machine: {os.cpu_count()} cpus, {_ram_gb():.1f} GB RAM, {platform.platform()}, "
          f"Python {platform.python_version()}, {_versions()}")
    print()
    print("| backend | turns (msgs) | variant | DB MB | raw MB | ms/turn last 10% | "
          "CPU ms/turn last 10% | ms/turn first 10% | get_state ms | peak RSS MB |")
    print("|" + "---|" * 10)
    for r in results:
        if r.get("skipped"):
            print(f"| {r['backend']} | {r['turns']} | {r['variant']} | skipped "
                  f"(--slow-max-turns) | | | | | | |")
            continue
        print(f"| {r['backend']} | {r['turns']} ({r['messages']}) | {r['variant']} | "
              f"{r['db_bytes'] / 1e6:.2f} | {r['raw_bytes'] / 1e6:.2f} | "
              f"{r['ms_turn_tail']:.2f} | {r['cpu_ms_turn_tail']:.2f} | "
              f"{r['ms_turn_head']:.2f} | {r['get_state_ms']:.2f} | {r['peak_rss_mb']:.0f} |")
    print()
    print("| target | backend | measured | limit | met |")
    print("|---|---|---|---|---|")
    backends = sorted({r["backend"] for r in results}, key=lambda b: b != "sqlite")
    turns = sorted({r["turns"] for r in results})
    mid = 400 if 400 in turns else turns[len(turns) // 2]
    for b in backends:
        for n in turns:
            tl, fl = find("threadlog", b, n), find("floor", b, n)
            if tl and fl:
                ratio = tl["db_bytes"] / (fl["db_bytes"] + tl["raw_bytes"])
                _row(f"storage @{n} turns: DB / (floor DB + raw)", b, ratio, 1.5)
        tl = find("threadlog", b, mid)
        if tl and "paired_floor_ms_tail" in tl:
            _row(f"ms/turn, last 10% of {mid} turns: threadlog / floor, interleaved "
                 f"({tl['ms_turn_tail']:.1f} / {tl['paired_floor_ms_tail']:.1f} ms; CPU "
                 f"{tl['cpu_ms_turn_tail'] / tl['paired_floor_cpu_ms_tail']:.2f}x)", b,
                 tl["ms_turn_tail"] / tl["paired_floor_ms_tail"], 1.3)
        lo, hi = find("threadlog", b, min(turns)), find("threadlog", b, max(turns))
        if lo and hi and lo is not hi:
            _row(f"ms/turn @{max(turns)} / @{min(turns)} turns, threadlog "
                 f"(CPU: {hi['cpu_ms_turn_tail'] / lo['cpu_ms_turn_tail']:.2f}x)", b,
                 hi["ms_turn_tail"] / lo["ms_turn_tail"], 1.15)
        c = cold.get(b)
        if c:
            tl, dl, dec = c["threadlog"], c["delta"], c["decode"]
            _row(f"cold start, {tl['messages']} msgs: load / read+decode once "
                 f"({tl['ms']:.0f} / {dec['ms']:.0f} ms; DeltaChannel {dl['ms']:.0f} ms)", b,
                 tl["ms"] / dec["ms"], 1.5)
            _row(f"peak RSS, worker holding {tl['messages']} msgs: threadlog / DeltaChannel "
                 f"({tl['peak_rss_mb']:.0f} / {dl['peak_rss_mb']:.0f} MB)", b,
                 tl["peak_rss_mb"] / dl["peak_rss_mb"], 1.0)
    if ctx.get("status") == "ok":
        print(f"| context building, {ctx['messages']} msgs, token budget: ms per turn after "
              f"the first (first {ctx['first_ms']:.1f} ms) | - | {ctx['after_first_ms']:.2f} ms "
              f"| 2 ms | {'yes' if ctx['after_first_ms'] <= 2 else 'NO'} |")
    else:
        print(f"| context building | - | {ctx.get('status')} | 2 ms | - |")


def _row(name: str, backend: str, value: float, limit: float) -> None:
    met = "yes" if round(value, 2) <= limit else "NO"
    print(f"| {name} | {backend} | {value:.2f}x | {limit}x | {met} |")


def _ram_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return float("nan")


def _versions() -> str:
    from importlib.metadata import version

    names = ["langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
             "langgraph-checkpoint-postgres", "langchain-core", "threadlog"]
    out = []
    for n in names:
        try:
            out.append(f"{n} {version(n)}")
        except Exception:
            pass
    return ", ".join(out)


if __name__ == "__main__":
    main()
