"""A supervisor app killed right after its turn's input checkpoint, then given new input:
LangGraph stores the next input checkpoint with a snapshot of the messages (the carried
user message in it, which no stored write adds), and the agents' writes after it are
stored as references to that checkpoint's log. Reading those references must read the
snapshot: the delta history walks the checkpoint's ancestors only, which lack the
carried message, and a history cache that took it from there lost the message from the
thread's head for the rest of the process.
"""

from __future__ import annotations

from pathlib import Path

import threadlog
from scripts.kill_multi_agent import (
    Found,
    Plan,
    _config,
    _user,
    build,
    run_worker,
    thread_of,
)


def test_a_reference_to_a_snapshot_checkpoint_reads_the_carried_user_message(
    backend: str, tmp_path: Path
) -> None:
    plan = Plan(
        trial=0,
        seed=20,
        app="supervisor",
        durability="sync",
        prior_turns=2,
        kind="write",
        slot=1,  # the turn's input checkpoint, stored; nothing after it
        when="after",
        delay=0.0,
        resume="input",
    )
    run_worker(backend, plan, tmp_path / "work", out := Found(plan))  # type: ignore[arg-type]
    assert out.killed
    config = _config(thread_of(plan))
    carried = _user(plan, plan.prior_turns).id

    with threadlog.checkpointer(backend, record_calls=False) as saver:
        build(plan.app, saver).invoke({"messages": [_user(plan, 90)]}, config, durability="sync")

    with threadlog.checkpointer(backend, record_calls=False) as saver:
        graph = build(plan.app, saver)
        history = list(graph.get_state_history(config))
        assert carried in [m.id for m in history[0].values["messages"]]
        # Each checkpoint read on its own, oldest first: the agents' writes name the
        # snapshot checkpoint's log, which their reads rebuild.
        for snap in reversed(history):
            saver.get_tuple(snap.config)
        head = [m.id for m in graph.get_state(config).values["messages"]]
        newest = [m.id for m in next(iter(graph.get_state_history(config))).values["messages"]]

    assert head == newest == [m.id for m in history[0].values["messages"]]
    assert head.index(carried) < head.index(_user(plan, 90).id)
