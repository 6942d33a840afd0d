"""Inspecting checkpoints, read-only, from a graph, a saver, a database or a server.

    from threadlog import inspect

    inspect.threads("app.db")                          # the threads, newest first
    t = inspect.thread(graph, config)                  # a compiled graph + config
    t = inspect.thread("sqlite:///threads.db", "t1")  # or a database URL / path + thread id
    t = inspect.thread("http://127.0.0.1:2024", tid)   # or a LangGraph server
    t                     # in Jupyter: the thread page (turns, full content, waterfall)
    t.timeline()          # one row per checkpoint
    t.pairs()             # each tool call with its result, status, duration
    t.context(-1)         # what the model saw for its last call, next to the full log
    t.diff(a, b)          # what changed between two checkpoints
    t.state(checkpoint)   # every state key there: message keys, values, what the step changed
    inspect.thread(src, tid, key="supervisor_messages")  # views over another message key
    t.forks()             # the branches made by update_state / time travel
    t.plot()              # messages, context tokens, stored bytes, tool latency
    t.subgraphs()         # subgraph namespaces; inspect.thread(..., namespace=NS) reads one
    inspect.export.messages_at("app.db", "t1")  # the whole log; .dumps / .loads formats
    inspect.check("app.db")  # every thread a provider would reject, and why (or a server URL)
    inspect.replay(graph, "app.db", "t1")  # re-run stored turns through `graph`, no tool re-run

Every view renders as HTML in Jupyter, as plain text (100 columns), and as `.rows()` or
`.to_dataframe()`. A database is opened read-only (`SourceError`, one line, when it cannot
be read).
"""

from typing import Any

from threadlog.inspect import export
from threadlog.inspect.context_seen import ContextSeen
from threadlog.inspect.diff import CheckpointDiff
from threadlog.inspect.forks import Branch, ForkTree
from threadlog.inspect.namespaces import Subgraph, SubgraphTable
from threadlog.inspect.pairs import ToolPairs
from threadlog.inspect.readonly import SourceError
from threadlog.inspect.records import CheckpointRecord, TaskError
from threadlog.inspect.state import StateValues
from threadlog.inspect.table import Table
from threadlog.inspect.thread import Thread, thread
from threadlog.inspect.threads import ThreadList, ThreadSummary, threads
from threadlog.inspect.timeline import Timeline

# `check` and `replay` live in `threadlog.check`; resolved on first use (no import cycle).
_FROM_CHECK = {
    "CheckReport": "threadlog.check.database",
    "Problem": "threadlog.check.database",
    "ReplayReport": "threadlog.check.replay",
    "replay": "threadlog.check.replay",
    "check": "threadlog.check.served",
}


def __getattr__(name: str) -> Any:
    import importlib

    module = _FROM_CHECK.get(name)
    if module is None:
        raise AttributeError(f"module 'threadlog.inspect' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "Branch",
    "CheckReport",
    "CheckpointDiff",
    "CheckpointRecord",
    "ContextSeen",
    "ForkTree",
    "Problem",
    "ReplayReport",
    "SourceError",
    "StateValues",
    "Subgraph",
    "SubgraphTable",
    "Table",
    "TaskError",
    "Thread",
    "ThreadList",
    "ThreadSummary",
    "Timeline",
    "ToolPairs",
    "check",
    "export",
    "replay",
    "thread",
    "threads",
]
