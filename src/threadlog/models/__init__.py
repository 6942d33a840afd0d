"""Chat models that ship with threadlog: `OfflineChatModel`, deterministic and offline."""

from threadlog.models.offline import CITIES, OfflineChatModel, find_cities

__all__ = ["CITIES", "OfflineChatModel", "find_cities"]
