"""threadlog: an append-only, pairing-safe message log for LangGraph.

    from threadlog import MessagesState          # drop-in for langgraph's MessagesState

    class State(MessagesState):
        ...

See README.md for the quickstart and docs/ARCHITECTURE.md for the module map.
"""

from threadlog.channel import MessageLogChannel, Messages, MessagesState
from threadlog.errors import (
    AppendOnlyError,
    ConflictingIdError,
    InvalidMessageError,
    MessageLogError,
    ParallelWriteError,
    ToolPairingError,
)
from threadlog.log import MessageLog, append_messages
from threadlog.messages import coerce_message, digest, role_of
from threadlog.profiles import PROFILES, Profile, get_profile, validate

__version__ = "0.1.0"

__all__ = [
    "PROFILES",
    "AppendOnlyError",
    "ConflictingIdError",
    "InvalidMessageError",
    "MessageLog",
    "MessageLogChannel",
    "MessageLogError",
    "Messages",
    "MessagesState",
    "ParallelWriteError",
    "Profile",
    "ToolPairingError",
    "append_messages",
    "coerce_message",
    "digest",
    "get_profile",
    "role_of",
    "validate",
]
