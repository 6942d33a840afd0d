"""The key of an idempotent tool's call (`threadlog.nodes.tools.idempotent`) and its mark."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool

from threadlog._upstream import PREGEL

__all__ = ["IDEMPOTENT_KEY", "call_key", "config_key", "is_idempotent"]

IDEMPOTENT_KEY = "threadlog_idempotent"  # the `tool.metadata` flag of a marked tool


def call_key(thread_id: Any, checkpoint_ns: str, tool_call_id: str) -> str:
    # The namespace without task ids: a re-run task may get another id.
    ns = PREGEL.ns_sep.join(
        part.split(PREGEL.ns_end, 1)[0] for part in checkpoint_ns.split(PREGEL.ns_sep) if part
    )
    parts = (str(thread_id or ""), ns, tool_call_id)
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=16).hexdigest()
    return f"tl-idem-{digest}"


def config_key(config: Mapping[str, Any], tool_call_id: str) -> str:
    conf = config.get("configurable") or {}
    return call_key(conf.get("thread_id"), str(conf.get("checkpoint_ns") or ""), tool_call_id)


def is_idempotent(tool: Any) -> bool:
    return isinstance(tool, BaseTool) and bool((tool.metadata or {}).get(IDEMPOTENT_KEY))
