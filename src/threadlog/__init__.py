"""threadlog: an append-only, pairing-safe message log for LangGraph.

    from threadlog import MessagesState          # drop-in for langgraph's MessagesState

    class State(MessagesState):
        ...

README.md has the quickstart, docs/ARCHITECTURE.md the map of the modules behind `__all__`.
"""

import functools
from typing import TYPE_CHECKING, Any

# These names load on first use (PEP 562): `import threadlog` loads no LangGraph.
if TYPE_CHECKING:
    from threadlog.agent import create_agent
    from threadlog.channel import MessageLogChannel, Messages, MessagesState
    from threadlog.checkpoint.cache import HistoryCache, with_history_cache
    from threadlog.checkpoint.saver import acheckpointer, checkpointer
    from threadlog.checkpoint.serde import UndecodedValue
    from threadlog.checkpoint.state_types import allow_state_types
    from threadlog.context.compaction import AgentState, Compactions
    from threadlog.context.policy import ContextPolicy, build_context, plan_context
    from threadlog.errors import (
        AppendOnlyError,
        ApprovalError,
        ConcurrentRunError,
        ConflictingIdError,
        EditError,
        IdempotencyError,
        InvalidMessageError,
        MessageLogError,
        ParallelWriteError,
        StoredDataError,
        ThreadlogError,
        ToolCallError,
        ToolPairingError,
        UpstreamChangedError,
    )
    from threadlog.log.edits import Edit, edits_of, original_of
    from threadlog.log.message_log import MessageLog, append_messages
    from threadlog.log.messages import coerce_message, digest, role_of
    from threadlog.models.offline import OfflineChatModel
    from threadlog.nodes.model import ContextNode, ModelNode
    from threadlog.nodes.tools.idempotent import idempotency_key, idempotent
    from threadlog.nodes.tools.node import ToolNode
    from threadlog.nodes.tools.routing import send_tool_calls, tools_condition
    from threadlog.providers.problems import validate
    from threadlog.providers.profiles import PROFILES, SERVER_PROFILES, Profile, get_profile
    from threadlog.providers.wire import (
        infer_profile,
        openai_payload,
        profile_for,
        rewrite_payload,
        to_wire,
        with_profile,
    )

_SUBPACKAGES = ("inspect",)  # reachable as attributes after a plain `import threadlog`


@functools.cache
def _lazy() -> dict[str, str]:
    # The TYPE_CHECKING imports above are the one list of what loads on first use.
    import ast
    import pathlib

    tree = ast.parse(pathlib.Path(__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If))
    imports = [node for node in block.body if isinstance(node, ast.ImportFrom)]
    return {alias.name: str(node.module) for node in imports for alias in node.names}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _SUBPACKAGES:
        return importlib.import_module(f"threadlog.{name}")
    module = _lazy().get(name)
    if module is None:
        raise AttributeError(f"module 'threadlog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_lazy(), *_SUBPACKAGES])


__version__ = "0.1.0"

__all__ = [
    "PROFILES",
    "SERVER_PROFILES",
    "AgentState",
    "AppendOnlyError",
    "ApprovalError",
    "Compactions",
    "ConcurrentRunError",
    "ConflictingIdError",
    "ContextNode",
    "ContextPolicy",
    "Edit",
    "EditError",
    "HistoryCache",
    "IdempotencyError",
    "InvalidMessageError",
    "MessageLog",
    "MessageLogChannel",
    "MessageLogError",
    "Messages",
    "MessagesState",
    "ModelNode",
    "OfflineChatModel",
    "ParallelWriteError",
    "Profile",
    "StoredDataError",
    "ThreadlogError",
    "ToolCallError",
    "ToolNode",
    "ToolPairingError",
    "UndecodedValue",
    "UpstreamChangedError",
    "acheckpointer",
    "allow_state_types",
    "append_messages",
    "build_context",
    "checkpointer",
    "coerce_message",
    "create_agent",
    "digest",
    "edits_of",
    "get_profile",
    "idempotency_key",
    "idempotent",
    "infer_profile",
    "openai_payload",
    "original_of",
    "plan_context",
    "profile_for",
    "rewrite_payload",
    "role_of",
    "send_tool_calls",
    "to_wire",
    "tools_condition",
    "validate",
    "with_history_cache",
    "with_profile",
]
