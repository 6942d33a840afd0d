"""Give one saver object a capability by swapping its class for a cached subclass.

Why not a proxy: LangGraph (and LangGraph Server) look savers up by class —
`isinstance(saver, SqliteSaver)`, capability detection for `copy_thread`/`prune` — so
the history cache, the write chain, the own-writes record and finished-work carrying
each mix into the saver's own class instead. One subclass per (capability, saver
class), made once and shared by every saver of that class.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

__all__ = ["mix_into"]

S = TypeVar("S")

_classes: dict[tuple[type[Any], type[Any]], type[Any]] = {}
_classes_lock = threading.Lock()


def mix_into(saver: S, mixin: type[Any], prefix: str) -> S:
    """Swap `saver`'s class for `type(prefix + name, (mixin, type(saver)), {})`; the
    caller checks `isinstance(saver, mixin)` first and sets the mixin's state after."""
    cls = type(saver)
    with _classes_lock:
        sub = _classes.get((mixin, cls))
        if sub is None:
            sub = type(f"{prefix}{cls.__name__}", (mixin, cls), {})
            sub.__module__ = cls.__module__
            _classes[(mixin, cls)] = sub
    saver.__class__ = sub
    return saver
