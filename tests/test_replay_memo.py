"""The drop-in path on a plain saver (no threadlog wrapper, as LangGraph Server runs it):
a warm process replays only the writes it has not replayed before, and never reads a
history other than the one the saver returned — other processes' turns, forks and
`update_state` branches included."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers_perf import build_loop, say
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from threadlog.replay_memo import replay_memo

CFG = {"configurable": {"thread_id": "shared"}}

# A second process on the same database: one turn, or a fork through update_state on
# an older checkpoint (a branch the first process has never seen).
WORKER = """
import sqlite3, sys
sys.path.insert(0, {tests!r})
from tests.helpers_perf import build_loop, say
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
conn = sqlite3.connect({db!r}, check_same_thread=False, timeout=30)
graph = build_loop(SqliteSaver(conn))
cfg = {{"configurable": {{"thread_id": "shared"}}}}
what, arg = sys.argv[1], sys.argv[2]
if what == "turn":
    graph.invoke(say(arg), cfg)
else:
    old = list(graph.get_state_history(cfg))[int(arg)]
    graph.update_state(old.config, {{"messages": [HumanMessage("edited", id="edit-1")]}})
conn.close()
"""


def _other_process(db: Path, what: str, arg: str) -> None:
    code = WORKER.format(tests=str(Path(__file__).parent), db=str(db))
    subprocess.run([sys.executable, "-c", code, what, arg], check=True, timeout=120)


def _read(graph: Any, config: dict[str, Any] = CFG) -> list[Any]:
    return list(graph.get_state(config).values["messages"])


def _cold(graph: Any, config: dict[str, Any] = CFG) -> list[Any]:
    replay_memo.clear()
    return _read(graph, config)


def test_a_warm_process_reads_another_processs_turns_and_forks_exactly(tmp_path: Path) -> None:
    db = tmp_path / "plain.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False, timeout=30)
    graph = build_loop(SqliteSaver(conn))
    for t in range(3):
        graph.invoke(say(f"q{t}"), CFG)
    hits = replay_memo.hits
    graph.invoke(say("q3"), CFG)
    assert replay_memo.hits > hits  # the warm load reused what it had replayed

    _other_process(db, "turn", "from the other process")
    warm = _read(graph)
    assert "h-from the other process" in [m.id for m in warm]
    assert warm == _cold(graph)

    graph.invoke(say("q4"), CFG)  # the memo now holds the other process's turn too
    _other_process(db, "fork", "7")  # a branch from an older checkpoint
    warm = _read(graph)
    assert warm[-1].id == "edit-1" and "h-q4" not in [m.id for m in warm]
    assert warm == _cold(graph)
    conn.close()


def test_two_update_state_branches_from_one_checkpoint_each_read_their_own_message(
    tmp_path: Path,
) -> None:
    # Both branches start from one checkpoint: the first branch's write is a pending
    # write of that checkpoint, the second is stored as a snapshot. Alternating warm
    # reads must each give their own branch.
    conn = sqlite3.connect(tmp_path / "branches.sqlite", check_same_thread=False)
    graph = build_loop(SqliteSaver(conn))
    graph.invoke(say("q0"), CFG)
    base = graph.get_state(CFG).config
    a = graph.update_state(base, {"messages": [HumanMessage("branch a", id="edit-a")]})
    b = graph.update_state(base, {"messages": [HumanMessage("branch b", id="edit-b")]})
    for _ in range(2):  # warm reads, alternating
        assert _read(graph, a)[-1].id == "edit-a"
        assert _read(graph, b)[-1].id == "edit-b"
    assert _read(graph, a) == _cold(graph, a)
    assert _read(graph, b) == _cold(graph, b)
    conn.close()


def test_the_memo_stays_within_its_message_bound() -> None:
    from threadlog.log import MessageLog
    from threadlog.replay_memo import ReplayMemo

    memo = ReplayMemo(max_messages=10)
    writes = {}
    for t in range(5):
        log = MessageLog([HumanMessage(str(i), id=f"{t}-{i}") for i in range(4)])
        writes[t] = [(f"task-{t}", "messages", list(log.messages))]
        memo.store(writes[t], -1, log, 4)
    assert memo.size <= 10 and len(memo) == 2
    assert memo.lookup(writes[4], -1) is not None
    assert memo.lookup(writes[0], -1) is None  # evicted, oldest first


def test_writes_with_a_known_task_id_but_other_messages_are_replayed_not_reused() -> None:
    from threadlog.log import MessageLog
    from threadlog.replay_memo import ReplayMemo

    memo = ReplayMemo()
    log = MessageLog([HumanMessage("hi", id="u0")])
    memo.store([("task-0", "messages", list(log.messages))], -1, log, 1)
    assert memo.lookup([("task-0", "messages", [HumanMessage("hi", id="u0")])], -1)
    for other in (HumanMessage("bye", id="u0"), HumanMessage("hi", id="u1")):
        assert memo.lookup([("task-0", "messages", [other])], -1) is None
