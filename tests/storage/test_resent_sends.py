"""A `Send` packet carrying the state (langgraph-prebuilt's `ToolNode` payload, as a
`create_react_agent` supervisor writes one per tool call) is stored as what its message
list adds, and read back through `get_tuple` exactly as LangGraph's own saver keeps it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.constants import TASKS
from langgraph.types import Send

import threadlog
from tests.helpers.delta_apps import bytes_per_turn, cfg, reference_saver
from tests.helpers.multi_agent import Scripted
from threadlog.log.message_log import is_resent

TURNS = 12


class SupState(threadlog.MessagesState):
    remaining_steps: int


def _turns(messages: Any) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


def _supervisor_reply(messages: Any) -> AIMessage:
    if isinstance(messages[-1], HumanMessage):
        call = {"name": "transfer_to_bob", "args": {}, "id": f"sup-{_turns(messages)}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage(f"supervisor closes turn {_turns(messages)}")


def _supervisor(saver: Any) -> Any:
    from langgraph_supervisor import create_supervisor

    bob = threadlog.create_agent(
        Scripted(script=lambda ms: AIMessage(f"bob on turn {_turns(ms)}")), [], name="bob"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation
        builder = create_supervisor(
            [bob], model=Scripted(script=_supervisor_reply), state_schema=SupState
        )
    return builder.compile(checkpointer=saver)


def _turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"turn {i}", id=f"u{i}")]}


def test_a_supervisor_stores_flat_bytes_per_turn(backend: str) -> None:
    with threadlog.checkpointer(backend) as saver:
        turns = [_turn(i) for i in range(TURNS)]
        per_turn = bytes_per_turn(_supervisor(saver), backend, turns, "s")
    half = TURNS // 2
    first, second = sum(per_turn[1:half]), sum(per_turn[half + 1 :])
    # The supervisor's tool-call packets, each carrying the whole history, made every
    # turn cost more than the one before.
    assert second <= 1.15 * first, per_turn
    assert max(per_turn[1:]) <= 1.3 * min(per_turn[1:]), per_turn


def _norm(value: Any) -> Any:
    """A value as comparable data: messages without their ids (LangGraph stamps random
    ones on the scripted replies and on the hand-back's call), `Send`s by node and
    argument."""
    if isinstance(value, BaseMessage):
        calls = tuple(
            (c["name"], _call_id(c["id"])) for c in getattr(value, "tool_calls", None) or ()
        )
        return (value.type, value.content, calls, _call_id(getattr(value, "tool_call_id", None)))
    if isinstance(value, Send):
        return ("Send", value.node, _norm(value.arg))
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _norm(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    return value


def _call_id(cid: str | None) -> str | None:
    return cid if cid is None or cid.startswith("sup-") else "random"


def _checkpoints(app: Any, saver: Any) -> list[tuple[Any, ...]]:
    """Every checkpoint of thread "s", every namespace (invocations in the order they
    ran, checkpoints oldest first): its state, its tasks value and its message and task
    writes, as `get_tuple` hands them over."""
    by_ns: dict[str, list[Any]] = {}
    for tup in saver.list(cfg("s")):
        by_ns.setdefault(tup.config["configurable"].get("checkpoint_ns") or "", []).append(
            tup.config
        )
    out = []
    for configs in sorted(by_ns.values(), key=lambda c: min(_cid(x) for x in c)):
        for config in sorted(configs, key=_cid):
            tup = saver.get_tuple(config)
            writes = sorted(
                repr(_norm((ch, v)))
                for _, ch, v in tup.pending_writes or ()
                if ch in ("messages", TASKS)
            )
            tasks = tup.checkpoint["channel_values"].get(TASKS)
            values = app.get_state(config).values
            out.append((_norm(values.get("messages")), _norm(tasks), writes))
    return out


def _cid(config: Any) -> str:
    return str(config["configurable"]["checkpoint_id"])


def _stored_sends(saver: Any) -> list[Send]:
    """The tool-call packets as stored (`list` hands writes over in the stored form)."""
    return [
        v
        for tup in saver.list(cfg("s"))
        for _, ch, v in tup.pending_writes or ()
        if ch == TASKS
        and isinstance(v, Send)
        and isinstance(v.arg, Mapping)
        and is_resent((v.arg.get("state") or {}).get("messages"))
    ]


def test_every_checkpoint_of_a_supervisor_reads_back_as_on_langgraphs_saver(
    backend: str, tmp_path: Any, request: Any
) -> None:
    turns = [_turn(i) for i in range(5)]
    with reference_saver(backend, tmp_path, request) as saver:
        app = _supervisor(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        expected = _checkpoints(app, saver)
    with threadlog.checkpointer(backend) as saver:
        app = _supervisor(saver)
        for turn in turns:
            app.invoke(turn, cfg("s"))
        warm = _checkpoints(app, saver)
        # the first turn's packet re-sends no history: every later one is a reference
        assert len(_stored_sends(saver)) == len(turns) - 1, "packets stored as written"
    with threadlog.checkpointer(backend) as saver:  # a new process's view: nothing cached
        cold = _checkpoints(_supervisor(saver), saver)
    sent = [tasks for _, tasks, _ in expected if tasks]
    assert len(sent) == len(turns)  # one checkpoint per turn waits on a tool-call packet
    assert warm == expected
    assert cold == expected
