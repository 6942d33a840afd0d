"""threadlog: an append-only, pairing-safe message log for LangGraph.

    from threadlog import MessagesState          # drop-in for langgraph's MessagesState

    class State(MessagesState):
        ...

README.md has the quickstart, docs/ARCHITECTURE.md the map of the modules behind `__all__`.
"""

from typing import TYPE_CHECKING, Any

from threadlog import errors as _errors  # small, imports nothing; its `__all__` is the list

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

_MODULES: dict[str, tuple[str, ...]] = {
    "threadlog.agent": ("create_agent",),
    "threadlog.channel": ("MessageLogChannel", "Messages", "MessagesState"),
    "threadlog.checkpoint.cache": ("HistoryCache", "with_history_cache"),
    "threadlog.checkpoint.saver": ("acheckpointer", "checkpointer"),
    "threadlog.checkpoint.serde": ("UndecodedValue",),
    "threadlog.checkpoint.state_types": ("allow_state_types",),
    "threadlog.context.compaction": ("AgentState", "Compactions"),
    "threadlog.context.policy": ("ContextPolicy", "build_context", "plan_context"),
    "threadlog.log.edits": ("Edit", "edits_of", "original_of"),
    "threadlog.errors": tuple(_errors.__all__),
    "threadlog.log.message_log": ("MessageLog", "append_messages"),
    "threadlog.log.messages": ("coerce_message", "digest", "role_of"),
    "threadlog.models.offline": ("OfflineChatModel",),
    "threadlog.nodes.model": ("ContextNode", "ModelNode"),
    "threadlog.nodes.tools.idempotent": ("idempotency_key", "idempotent"),
    "threadlog.nodes.tools.node": ("ToolNode",),
    "threadlog.nodes.tools.routing": ("send_tool_calls", "tools_condition"),
    "threadlog.providers.problems": ("validate",),
    "threadlog.providers.profiles": ("PROFILES", "SERVER_PROFILES", "Profile", "get_profile"),
    "threadlog.providers.wire": (
        "infer_profile",
        "openai_payload",
        "profile_for",
        "rewrite_payload",
        "to_wire",
        "with_profile",
    ),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


_SUBPACKAGES = ("inspect",)  # reachable as attributes after a plain `import threadlog`


def __getattr__(name: str) -> Any:
    import importlib

    if name in _SUBPACKAGES:
        return importlib.import_module(f"threadlog.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'threadlog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY, *_SUBPACKAGES])


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
