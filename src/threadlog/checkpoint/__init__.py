"""Checkpoint helpers: `checkpointer(url)` / `acheckpointer(url)` and the saver they return.

The contract of that saver (`GuardedSaver`, one `LayeredSaver` around LangGraph's own saver
for the URL, layers ordered in `saver._finish`): each promise, its layer, its tests.

    promise                                       layer          proved by
    --------------------------------------------  -------------  -------------------------------
    a run holds its thread for its whole turn; a  guard          test_checkpoint_guard.py,
      second run waits ("enqueue") or gets                       test_shared_thread.py
      ConcurrentRunError before anything is
      stored ("reject"), across processes
    no silent fork: a run's put follows the       guard          test_checkpoint_guard.py,
      thread's head; `update_state` and a run                    test_checkpoint_conformance.py
      naming an older checkpoint fork on
      purpose; a direct root put is stored as
      given
    a refused write stores nothing (the input is  guard          test_refused_writes.py
      dry-run first)
    get_state answers after a step failed on      guard          test_refused_writes.py
      refused writes
    a task's writes never land before their       guard          test_kill_harness.py
      checkpoint's put, once it has started
      (durability="sync": always)
    a message-log write that re-sends messages    resent         test_resent_writes.py,
      the log holds is stored as what it adds                    test_resent_sends.py
      (a Send's state too); get_tuple rebuilds
      it as written
    nothing lost or duplicated across a SIGKILL   stopped_work   test_durability.py,
      under durability="sync": a head read                       test_kill_harness.py
      carries the work a stopped step stored;
      under "async" (LangGraph's default) only
      the killed turn's unstored steps are lost
    new input on a head with a task to run:       stopped_work   test_abandoned_calls.py,
      stored results kept, each abandoned call                   test_langchain_middleware.py,
      answered "not completed" once                              test_subgraph_by_send.py
    ... but "outcome unknown" when its tool       stopped_work   test_outcome_unknown.py
      started and never reported back (the tool
      node's marker, read with the results)
    a subgraph's stored work is carried on new    stopped_work   test_subgraph_recovery.py,
      input, at every level                                      test_deep_subgraph_recovery.py
    every chat-model call of a run is stored with calls          test_recorded_calls.py
      the step that made it (messages as sent,
      tools, model, reply id), at O(new) cost;
      kept by kill, copy, prune, rollback
    a deleted or swapped writes row is an error   checksums      test_integrity.py
      on read
    a warm turn's history walk needs no query     own_writes     test_own_writes.py
    a warm turn reads only new writes, and every  history        test_history_cache.py,
      read equals what the uncached saver reads                  test_cache_history_reads.py
    storage grows with the messages, not with     history        test_dropin_snapshots.py,
      messages x turns                                           test_compactions_storage.py
    LangGraph's checkpointer conformance suite    (all)          test_checkpoint_conformance.py
      passes, its copy_thread, prune and
      delete_for_runs tests included, on every
      backend (the backend's class untouched)
    rollback (delete_for_runs), copy_thread and   (lifecycle.py) test_thread_lifecycle.py,
      prune keep each thread readable, its                       test_cli_prune.py
      checksums passing (re-sealed), its log
      fully paired: a pruned head materialized,
      with its open calls' stored results
    a SIGKILL inside rollback, copy or prune      (lifecycle.py) test_lifecycle_kills.py
      leaves a thread as before or as after
      (one transaction)
    a lifecycle call on a thread a run holds      guard          test_thread_lifecycle.py
      waits ("enqueue") or is refused before
      anything changes ("reject")
    sync and async run the same code (one flow    (all)          test_async_drifts.py,
      each)                                                      test_layered_saver.py
    stored blobs rebuild only allowlisted types   (serde.py)     test_checkpoint.py
    a LangGraph whose entry points the guard's    (_upstream)    test_hooks.py
      hook no longer sees is refused when the
      saver is built (UpstreamChangedError),
      never run unguarded

Not promised: subgraph namespaces are not guarded (their parent's checkpoints are); a
direct put that names a stale parent is refused where a plain saver stores it; rows
swapped *within* one task's writes to one channel are not detected; nothing here holds
across two SQLite files or two Postgres databases; `durability="exit"` has no crash promise
(the kill harness finds turns shown finished and unreadable threads under it); a
lifecycle call cannot materialize a delta channel that is not one of threadlog's logs
(your own `DeltaChannel`: refused, nothing changed); writes a rolled-back run stored on a
checkpoint it did not make (a resumed step's results carry no run id) stay; the lifecycle
calls are the guarded saver's (`guard=False` keeps the backend's own).

Names load on first use: `import threadlog` imports no saver backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadlog.checkpoint.cache import HistoryCache, with_history_cache
    from threadlog.checkpoint.guard import GuardedSaver
    from threadlog.checkpoint.saver import SCHEMES, acheckpointer, checkpointer, parse_url
    from threadlog.checkpoint.serde import strict_serializer

_WHERE = {
    "SCHEMES": "saver",
    "acheckpointer": "saver",
    "checkpointer": "saver",
    "parse_url": "saver",
    "GuardedSaver": "guard",
    "HistoryCache": "cache",
    "with_history_cache": "cache",
    "strict_serializer": "serde",
}

__all__ = [
    "SCHEMES",
    "GuardedSaver",
    "HistoryCache",
    "acheckpointer",
    "checkpointer",
    "parse_url",
    "strict_serializer",
    "with_history_cache",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'threadlog.checkpoint' has no attribute {name!r}")
    return getattr(importlib.import_module(f"threadlog.checkpoint.{module}"), name)
