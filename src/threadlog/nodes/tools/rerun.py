"""New input on a thread whose idempotent call never reported back: run it again, same key
(safe by construction), so the log gets the call's real result instead of a guess.

Contract:

* `rerun_flow(nodes, saver, head, calls, recovered)`: for each call the new-input repair
  is about to answer (stored results win) whose tool, found by name on a tool node of the
  running graph, is marked idempotent, the tool runs once, here, with the key it had
  (namespace `"<node>:rerun"`, the head as step checkpoint), storing a receipt on the head.
* What it returned becomes the call's result (id `tl-rerun-<blake2b(call id)>`, the key
  in `response_metadata`), logged before the new input. A tool that raises, or needs what
  only its node injects, gets "outcome unknown".
* The tool is looked for in the root graph's nodes, then in compiled subgraphs.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER

from threadlog._upstream import PREGEL
from threadlog.checkpoint.receipts import KEY_METADATA, set_rerun
from threadlog.flows import Flow, Io
from threadlog.log.messages import calls_of
from threadlog.log.pairing import Recovered
from threadlog.nodes.tools.keys import call_key, is_idempotent

__all__ = ["rerun_flow"]

_log = logging.getLogger("threadlog.tools")
_MAX_DEPTH = 8  # subgraph levels looked through for a tool node


def _marked(nodes: Mapping[str, Any], name: str, depth: int = 0) -> tuple[str, BaseTool] | None:
    """(the tool node's namespace path, the tool), in the nodes and compiled subgraphs."""
    for node_name, node in nodes.items():
        bound = getattr(node, "bound", None)
        tools = getattr(bound, "tools_by_name", None)
        if isinstance(tools, Mapping):
            tool = tools.get(name)
            if isinstance(tool, BaseTool) and is_idempotent(tool):
                return str(node_name), tool
        inner = getattr(bound, "nodes", None)
        if isinstance(inner, Mapping) and depth < _MAX_DEPTH:
            found = _marked(inner, name, depth + 1)
            if found is not None:
                return f"{node_name}{PREGEL.ns_sep}{found[0]}", found[1]
    return None


def rerun_flow(
    nodes: Mapping[str, Any],
    saver: BaseCheckpointSaver[Any],
    head: Mapping[str, Any],
    calls: Mapping[str, AIMessage],
    recovered: Recovered,
) -> Flow[Recovered]:
    """`recovered` with the real results of the marked calls run again (module doc)."""
    found = dict(recovered)
    started = set(recovered.started)
    ran = False
    for cid, request in calls.items():
        if cid in found:
            continue
        call = next((c for c in calls_of(request) if c.get("id") == cid), None)
        if call is None or call.get("type") == "invalid_tool_call":
            continue
        where = _marked(nodes, str(call.get("name")))
        if where is None:
            continue
        node_name, tool = where
        started.add(cid)  # unless it now reports back: its tool may have run
        config: dict[str, Any] = {
            "configurable": {
                "thread_id": head["thread_id"],
                "checkpoint_ns": f"{node_name}{PREGEL.ns_end}rerun",
                PREGEL.checkpoint_map: {"": head["checkpoint_id"]},
                CONFIG_KEY_CHECKPOINTER: saver,
                PREGEL.durability: "sync",
            }
        }
        tool_call = {"type": "tool_call", "id": cid, "name": call["name"], "args": call["args"]}
        try:
            result = yield Io(tool.invoke, tool.ainvoke, (tool_call, config))
        except Exception as e:  # left to the usual answer
            _log.warning(
                "threadlog: re-running idempotent tool call %r (%s) failed: %s: %s",
                cid,
                call["name"],
                type(e).__name__,
                e,
            )
            continue
        if not isinstance(result, ToolMessage):
            continue  # a Command: only its node can apply it
        key = call_key(head["thread_id"], node_name, cid)
        digest = hashlib.blake2b(cid.encode(), digest_size=12).hexdigest()
        found[cid] = result.model_copy(
            update={
                "id": f"tl-rerun-{digest}",
                "response_metadata": {**result.response_metadata, KEY_METADATA: key},
            }
        )
        ran = True
    if not ran and started == recovered.started:
        return recovered
    return Recovered(found, started - found.keys())


# The new-input repair sits below the tool nodes and asks through this hook.
set_rerun(rerun_flow)
