"""Every private LangGraph / langchain name threadlog uses (`threadlog._upstream`) still
exists and still behaves the way threadlog relies on. A minor upstream release that renames
or changes one fails here, naming it, instead of in users' apps."""

from __future__ import annotations

import inspect
import pathlib
import re
import sqlite3
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER, TASKS
from langgraph.types import Overwrite
from pydantic import BaseModel, ValidationError

import threadlog
from threadlog import _upstream


def test_runnable_callable_injects_config_and_runs_sync_and_async() -> None:
    seen = {}

    def run(state: dict, config: RunnableConfig) -> dict:
        seen["config"] = config
        return {"n": state["n"] + 1}

    async def arun(state: dict, config: dict) -> dict:
        return {"n": state["n"] + 2}

    node = _upstream.RunnableCallable(run, arun, name="x", trace=False)
    assert node.invoke({"n": 1}, {"configurable": {"k": 1}}) == {"n": 2}
    assert seen["config"]["configurable"]["k"] == 1


async def test_runnable_callable_runs_its_async_twin() -> None:
    node = _upstream.RunnableCallable(lambda s: s, _plus_two, name="x", trace=False)
    assert await node.ainvoke({"n": 1}) == {"n": 3}


async def _plus_two(state: dict) -> dict:
    return {"n": state["n"] + 2}


def test_overwrite_is_recognised_in_object_and_dict_form() -> None:
    assert _upstream.is_overwrite(Overwrite([]))
    assert _upstream.is_overwrite({"__overwrite__": []})
    assert not _upstream.is_overwrite([HumanMessage("hi")])


def test_stamp_message_ids_gives_message_objects_ids_in_place_and_leaves_dicts() -> None:
    # `_upstream.stamp_message_ids` runs LangGraph's `ensure_message_ids` on a run's input.
    channel = threadlog.MessageLogChannel()
    message = HumanMessage("hi")
    given = HumanMessage("b", id="given")
    as_dict = {"role": "user", "content": "x"}
    _upstream.stamp_message_ids({"messages": channel}, {"messages": [message, given, as_dict]})
    assert message.id and given.id == "given"
    assert as_dict == {"role": "user", "content": "x"}
    other = HumanMessage("not a message-log key")
    _upstream.stamp_message_ids({"messages": channel}, {"other": [other]})
    assert other.id is None


def test_missing_and_delta_snapshot_are_the_delta_channel_contract() -> None:
    from langgraph.channels.delta import DeltaChannel

    source = inspect.getsource(DeltaChannel)
    assert "MISSING" in source and "_DeltaSnapshot" in source
    snap = _upstream.DeltaSnapshot([1, 2])
    assert snap.value == [1, 2]


def test_tool_node_validation_filter_and_injected_args_exist() -> None:
    class Args(BaseModel):
        city: str

    try:
        Args.model_validate({})
    except ValidationError as e:
        assert _upstream.filter_validation_errors(e, None)
    # The map ToolNode hands the filter (`ToolNode._injected_args` values; typed Any here).
    from langgraph.prebuilt.tool_node import _InjectedArgs

    assert "tool_runtime" in inspect.signature(_InjectedArgs).parameters or hasattr(
        _InjectedArgs, "__dataclass_fields__"
    )


def test_config_keys_are_the_ones_langgraph_sets_for_a_running_task() -> None:
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    seen: dict = {}

    def node(state: S, config: RunnableConfig) -> S:
        seen.update(config["configurable"])
        return {"n": 1}

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    saver = threadlog.checkpointer("memory://")
    with saver as s:
        g.compile(checkpointer=s).invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    for key in (
        CONFIG_KEY_CHECKPOINTER,  # public: langgraph.constants
        _upstream.PREGEL.checkpoint_map,
        "checkpoint_ns",  # public: the checkpointer API's config key
        _upstream.CONFIG_KEY_RUNTIME,
    ):
        assert key in seen, key
    assert _upstream.PREGEL.ns_sep == "|"
    assert TASKS == "__pregel_tasks"


def test_a_running_task_reads_its_runs_durability_under_the_durability_key() -> None:
    # The tool node stores no "started" marker under durability="exit".
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    seen: list[Any] = []

    def node(state: S, config: RunnableConfig) -> S:
        seen.append(config["configurable"].get(_upstream.PREGEL.durability))
        return {"n": 1}

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    with threadlog.checkpointer("memory://") as s:
        graph = g.compile(checkpointer=s)
        for durability in ("exit", "sync", "async"):
            cfg: RunnableConfig = {"configurable": {"thread_id": durability}}
            graph.invoke({"n": 0}, cfg, durability=durability)
    assert seen == ["exit", "sync", "async"]


def test_sqlite_saver_still_keeps_its_task_path_flag(tmp_path: pathlib.Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    assert isinstance(_upstream.saver_task_path(saver), bool)


def test_msgpack_tables_and_strict_allowlist_are_readable() -> None:
    from langgraph.checkpoint.serde import _msgpack
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from threadlog.checkpoint.serde import strict_serializer

    assert _msgpack.SAFE_MSGPACK_TYPES
    assert _msgpack.SAFE_MSGPACK_METHODS is not None
    rebuilds = _upstream.msgpack_rebuilds(strict_serializer())
    assert rebuilds is not None  # the allowlist is read: strict
    assert all(rebuilds(key) for key in _msgpack.SAFE_MSGPACK_TYPES)
    assert all(rebuilds(key) for key in _msgpack.SAFE_MSGPACK_METHODS)
    assert not rebuilds(("os", "system"))
    assert _upstream.msgpack_rebuilds(JsonPlusSerializer()) is None  # not strict


def test_a_serializers_msgpack_record_loader_reads_a_record_as_loads_typed_does() -> None:
    import ormsgpack
    from langchain_core.messages import AIMessage

    from threadlog.checkpoint.serde import strict_serializer

    serde = strict_serializer()
    msg = AIMessage("hi", id="a1", tool_calls=[{"name": "t", "args": {}, "id": "c1"}])
    _, blob = serde.dumps_typed([msg])
    records: list[tuple[int, bytes]] = []
    ormsgpack.unpackb(blob, ext_hook=lambda c, d: records.append((c, d)))
    hook = _upstream.msgpack_ext_hook(serde)
    assert hook is not None and len(records) == 1
    assert hook(*records[0]) == msg == serde.loads_typed(("msgpack", blob))[0]


class _Kind(__import__("enum").Enum):
    A = "a"


@__import__("dataclasses").dataclass
class _Leg:
    kind: _Kind


class _Trip(BaseModel):
    legs: list[_Leg]


def test_schema_types_walks_a_state_schema_as_compile_does() -> None:
    from typing import TypedDict

    class State(TypedDict):
        trip: _Trip | None

    found = _upstream.schema_types([State, None], {})
    names = {name for _, name in found}
    assert {"_Trip", "_Leg", "_Kind"} <= names
    assert (_Trip.__module__, "_Trip") in found


def test_ls_provider_names_the_provider_of_a_chat_model() -> None:
    from langchain_openai import ChatOpenAI

    assert _upstream.ls_provider(ChatOpenAI(model="gpt-4o-mini", api_key="x")) == "openai"
    assert _upstream.ls_provider(object()) is None


def test_the_guard_finds_a_starting_run_and_get_state_through_the_hooks() -> None:
    # The run guard takes a thread's run lock when a Pregel loop's __enter__ reads the
    # thread through the saver, and releases it from the loop's exit stack; get_state's
    # own read (not update_state's) is where refused writes are shown as task errors.
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    seen: list[tuple[str, bool, bool]] = []
    nodes: list[Any] = []

    class Probe(InMemorySaver):
        def get_tuple(self, config: RunnableConfig) -> Any:
            loop = _upstream.running_loop()
            seen.append(("get", loop is not None and hasattr(loop, "stack"),
                         _upstream.in_get_state()))
            if loop is not None:  # the new-input re-run finds tool nodes here
                nodes.append(getattr(loop.nodes.get("node"), "bound", None))
            return super().get_tuple(config)

        async def aget_tuple(self, config: RunnableConfig) -> Any:
            loop = _upstream.running_loop()
            seen.append(("aget", loop is not None and hasattr(loop, "stack"),
                         _upstream.in_get_state()))
            return await super().aget_tuple(config)

    g = StateGraph(S)
    g.add_node("node", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "node")
    # The hooks act only for threadlog's savers and channels: the probe is marked as one.
    graph = g.compile(checkpointer=_upstream.own(Probe()))
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"n": 0}, config)
    graph.get_state(config)
    graph.update_state(config, {"n": 5})
    asyncio.run(graph.ainvoke({"n": 0}, config))
    assert seen[0] == ("get", True, False)  # the run's read
    assert nodes and all(n is not None and hasattr(n, "invoke") for n in nodes)
    assert ("get", False, True) in seen  # get_state's read
    assert ("aget", True, False) in seen  # the async run's read
    assert ("get", False, False) in seen  # update_state's read: neither
    assert ERROR == "__error__"
    assert len(_upstream.PREGEL.null_task_id) == 36


def test_a_handler_added_to_the_running_loops_manager_sees_every_task_and_subgraph() -> None:
    # `RunningLoop.manager` is the run's callback manager: each task's callbacks are its
    # `get_child()`, so a handler put in its `inheritable_handlers` while the loop reads
    # the thread sees every node's callbacks, a subgraph's too (`checkpoint/calls.py`).
    import asyncio

    from langchain_core.callbacks import BaseCallbackHandler
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    nodes: list[str] = []

    class Seen(BaseCallbackHandler):
        def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
            if (kw.get("metadata") or {}).get("langgraph_node") == kw.get("name"):
                nodes.append(str(kw.get("name")))

    class Probe(InMemorySaver):
        def get_tuple(self, config: RunnableConfig) -> Any:
            loop = _upstream.running_loop()
            if loop is not None and not any(
                isinstance(h, Seen) for h in loop.manager.inheritable_handlers
            ):
                loop.manager.inheritable_handlers = [*loop.manager.inheritable_handlers, Seen()]
            return super().get_tuple(config)

        async def aget_tuple(self, config: RunnableConfig) -> Any:
            return self.get_tuple(config)

    inner = StateGraph(S)
    inner.add_node("inner_node", lambda s: {"n": s["n"] + 1})
    inner.add_edge(START, "inner_node")
    g = StateGraph(S)
    g.add_node("outer_node", inner.compile())
    g.add_edge(START, "outer_node")
    # The loop hooks serve threadlog's savers only.
    graph = g.compile(checkpointer=_upstream.own(Probe()))
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    assert nodes == ["outer_node", "inner_node"]
    nodes.clear()
    asyncio.run(graph.ainvoke({"n": 0}, {"configurable": {"thread_id": "u"}}))
    assert nodes == ["outer_node", "inner_node"]


def test_no_module_but_upstream_touches_private_upstream_names() -> None:
    root = pathlib.Path(threadlog.__file__).parent
    pattern = re.compile(
        r"_internal|from langgraph[\w.]* import _|import _|__pregel_|\._cursor\(|"
        r"_allowed_msgpack|_get_ls_params\(|\._has_task_path|_get_request_payload|"
        r"_convert_message_to_dict|_construct_responses_api_input|"
        # The hooks: only `_upstream` wraps LangGraph's entry points or reads its loops.
        r"PregelLoop|_prepare_state_snapshot|_getframe|\bf_back\b|\bf_locals\b"
    )
    comment = re.compile(r"^\s*#")
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "_upstream.py" or path.parent.name == "models":
            continue  # models/offline.py *implements* _get_ls_params as a chat model must
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and not comment.match(line):
                offenders.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert offenders == []


def test_ai_message_still_carries_tool_calls_the_way_the_log_reads_them() -> None:
    m = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    assert m.tool_calls[0]["id"] == "c1"


def test_a_saver_told_it_has_no_task_path_reads_an_older_writes_table(
    tmp_path: pathlib.Path,
) -> None:
    from threadlog.inspect.readonly import open_readonly

    path = tmp_path / "old.db"
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.put(
            config,
            empty_checkpoint(),
            {"source": "input", "step": -1},
            {},
        )
        head = saver.get_tuple(config)
        assert head is not None
        saver.put_writes(head.config, [("messages", "hi")], task_id="task-1")
    with sqlite3.connect(path) as conn:  # the table as LangGraph stored it before task_path
        conn.execute("ALTER TABLE writes DROP COLUMN task_path")
    conn.close()

    with open_readonly(str(path)) as ro:  # no setup(): it is told instead
        assert _upstream.saver_task_path(ro) is False
        tup = ro.get_tuple(config)
    assert tup is not None and tup.pending_writes == [("task-1", "messages", "hi")]


def test_request_payload_hook_rewrites_every_body_langchain_openai_sends() -> None:
    import asyncio

    from langchain_core.messages import ToolMessage
    from langchain_openai import ChatOpenAI

    from tests.helpers.openai_server import OpenAIServer

    history = [
        HumanMessage("hi"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1"),
    ]
    with OpenAIServer([{"role": "assistant", "content": "ok"}] * 4) as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0)  # type: ignore[arg-type]
        body = model._get_request_payload(history)
        assert body["messages"][1]["content"] is None  # what the hook exists to change

        def mark(b: dict) -> dict:
            return {**b, "messages": [*b["messages"], {"role": "user", "content": "marked"}]}

        wired = _upstream.with_request_payload_rewrite(model, "mark", mark)
        wired.invoke(history)
        asyncio.run(wired.ainvoke(history))
        list(wired.stream(history))
        model.invoke(history)  # the caller's model is not changed
    marked = [r["messages"][-1]["content"] == "marked" for r in server.requests]
    assert marked == [True, True, True, False]


def test_langchain_openai_message_converters_build_chat_and_responses_json() -> None:
    assert _upstream.openai_message_json([HumanMessage("hi")], responses_api=False) == [{
        "content": "hi",
        "role": "user",
    }]
    items = _upstream.openai_message_json([HumanMessage("hi")], responses_api=True)
    assert items and items[0]["role"] == "user"


def test_task_status_channels_and_null_task_id_are_what_the_loop_uses() -> None:
    # A finished task is one with writes and none on ERROR/INTERRUPT; NULL_TASK_ID writes
    # are applied before anything else when a run starts (checkpoint/finished.py).
    from langgraph.pregel import _loop
    from langgraph.pregel._task_status import CONTROL_WRITES

    assert {ERROR, INTERRUPT} <= CONTROL_WRITES
    assert _upstream.PREGEL.null_task_id == "00000000-0000-0000-0000-000000000000"
    assert "w[0] == NULL_TASK_ID" in inspect.getsource(_loop.PregelLoop._first)


def test_subgraph_namespaces_and_node_triggers_are_named_as_finished_subgraphs_reads() -> None:
    # A subgraph's namespace is "node:task_id" (NS_END), nested ones joined by NS_SEP; a
    # StateGraph edge triggers its node through a "branch:to:<node>" channel; each
    # checkpoint records its enclosing checkpoints in metadata["parents"]
    # (checkpoint/finished_subgraphs.py).
    from langgraph.graph import state
    from langgraph.pregel import _loop

    assert (_upstream.PREGEL.ns_end, _upstream.PREGEL.ns_sep) == (":", "|")
    assert f'"{_upstream.PREGEL.branch_to}{{node}}"' in inspect.getsource(state)
    assert 'metadata["parents"]' in inspect.getsource(_loop)
    # A run's input is the loop's `input` (None or a Command: a resume), read while the
    # loop enters to tell new input from a resume (checkpoint/finished.py).
    assert "self.input = input" in inspect.getsource(_loop.PregelLoop.__init__)
    assert "self.input is None" in inspect.getsource(_loop.PregelLoop._first)
    # Its `specs` (channel name -> channel) tell the message-log channels whose open calls
    # new input abandons (checkpoint/finished.py).
    assert "self.specs = specs" in inspect.getsource(_loop.PregelLoop.__init__)


def test_a_runs_own_head_read_carries_the_runtime_key_and_get_state_does_not() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph

    seen: list[dict] = []

    class Spy(InMemorySaver):
        def get_tuple(self, config: RunnableConfig):  # type: ignore[no-untyped-def]
            seen.append(dict(config["configurable"]))
            return super().get_tuple(config)

    g = StateGraph(threadlog.MessagesState)
    g.add_node("n", lambda s: {})
    g.add_edge(START, "n")
    graph = g.compile(checkpointer=Spy())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "hi")]}, config)
    assert _upstream.CONFIG_KEY_RUNTIME in seen[0]
    seen.clear()
    graph.get_state(config)
    assert all(_upstream.CONFIG_KEY_RUNTIME not in c for c in seen)

def test_infer_handled_types_reads_a_handlers_annotation() -> None:
    def one(e: ValueError) -> str:
        return ""

    def unannotated(e) -> str:  # type: ignore[no-untyped-def]
        return ""

    assert _upstream.infer_handled_types(one) == (ValueError,)
    assert _upstream.infer_handled_types(unannotated) == (Exception,)


def test_pregel_formats_are_how_langgraph_spells_what_a_run_stores_and_passes() -> None:
    # Each `PREGEL` field observed on a real run with a subgraph: the task_path of a root
    # pull task (checkpoint/guard.py), a subgraph's namespace and `metadata["parents"]`
    # (checkpoint/finished_subgraphs.py), a task's checkpoint map (checkpoint/recover.py),
    # and the `branch:to:` trigger channels of a head (checkpoint/finished_subgraphs.py).
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    fmt = _upstream.PREGEL

    class S(TypedDict):
        n: int

    task_paths: list[tuple[str, str]] = []  # (namespace, task_path)
    maps: list[dict] = []

    class Spy(InMemorySaver):
        def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[no-untyped-def]
            task_paths.append((config["configurable"].get("checkpoint_ns", ""), task_path))
            return super().put_writes(config, writes, task_id, task_path)

    def leaf(state: S, config: RunnableConfig) -> S:
        maps.append(dict(config["configurable"][fmt.checkpoint_map]))
        return {"n": state["n"] + 1}

    sub = StateGraph(S)
    sub.add_node("leaf", leaf)
    sub.add_edge(START, "leaf")
    g = StateGraph(S)
    g.add_node("inner", sub.compile())
    g.add_edge(START, "inner")
    saver = Spy()
    config: Any = {"configurable": {"thread_id": "t"}}
    g.compile(checkpointer=saver).invoke({"n": 0}, config)

    root_paths = {path for ns, path in task_paths if ns == ""}
    assert fmt.root_pull_task_path.format(node="__start__") in root_paths
    assert fmt.root_pull_task_path.format(node="inner") in root_paths
    assert {p.rsplit(", ", 1)[-1] for p in root_paths} == {"__start__", "inner"}  # guard's read

    subs = [c for c in saver.list(None) if c.config["configurable"]["checkpoint_ns"]]
    ns = subs[0].config["configurable"]["checkpoint_ns"]
    node, task_id = ns.split(fmt.ns_end)
    assert node == "inner" and fmt.ns_sep not in ns and len(task_id) == 36
    roots = {c.config["configurable"]["checkpoint_id"] for c in saver.list(config)}
    parents = [c.metadata[fmt.parents] for c in subs]  # type: ignore[literal-required]
    assert all(set(p) == {""} and p[""] in roots for p in parents)
    assert maps and set(maps[0]) == {"", ns} and maps[0][""] in roots

    versions = [set(c.checkpoint["channel_versions"]) for c in saver.list(config)]
    assert any(f"{fmt.branch_to}inner" in v for v in versions)



def test_a_store_set_while_the_loop_enters_is_the_one_every_task_and_subgraph_sees() -> None:
    # `set_run_store` while the loop reads the thread: `get_store()` and `runtime.store`
    # in a node, and in a subgraph's node, are the run's replacement; the graph's own
    # store is left as it was, and the next run starts from it again.
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.config import get_store
    from langgraph.graph import START, StateGraph
    from langgraph.runtime import Runtime
    from langgraph.store.memory import InMemoryStore
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    seen: list[Any] = []

    class Marked(InMemoryStore):
        pass

    class Probe(InMemorySaver):
        def get_tuple(self, config: RunnableConfig) -> Any:
            loop = _upstream.running_loop()
            if loop is not None and not isinstance(_upstream.run_store(loop), Marked):
                _upstream.set_run_store(loop, Marked())
            return super().get_tuple(config)

    def leaf(state: S, runtime: Runtime[None]) -> S:
        seen.append((type(get_store()).__name__, type(runtime.store).__name__))
        return {"n": state["n"] + 1}

    inner = StateGraph(S)
    inner.add_node("leaf", leaf)
    inner.add_edge(START, "leaf")
    g = StateGraph(S)
    g.add_node("outer", leaf)
    g.add_node("sub", inner.compile())
    g.add_edge(START, "outer")
    g.add_edge("outer", "sub")
    own = InMemoryStore()
    graph = g.compile(checkpointer=_upstream.own(Probe()), store=own)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    assert seen == [("Marked", "Marked")] * 2
    assert graph.store is own


def test_only_a_tasks_own_run_carries_the_task_run_tag_with_the_task_input() -> None:
    # checkpoint/calls.py reads a task's input state from the start of the one run that
    # carries `PREGEL.task_run_tag`, not from the runnables the task calls.
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import RunnableLambda
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    tagged: list[tuple[str | None, Any]] = []

    class Seen(BaseCallbackHandler):
        def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
            if any(t.startswith(_upstream.PREGEL.task_run_tag) for t in kw.get("tags") or ()):
                tagged.append((kw.get("name"), inputs))

    inner = RunnableLambda(lambda n: n + 1)

    def node(state: S) -> S:
        return {"n": inner.invoke(state["n"])}

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.compile().invoke({"n": 1}, {"callbacks": [Seen()]})
    assert tagged == [("node", {"n": 1})]


_SERVER_ADAPTER_CHECK = """
import asyncio
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from threadlog import _upstream

assert _upstream.forward_server_delta_history() is False  # no server here: nothing to do
from langgraph_api._checkpointer import _adapter  # noqa: E402

module_name, class_name = _upstream.SERVER_ADAPTER
assert _adapter.__name__ == module_name
cls = getattr(_adapter, class_name)
for name in ("get_delta_channel_history", "aget_delta_channel_history"):
    # Inherited from the base class: its walk runs through the adapter.
    assert [k for k in cls.__mro__ if name in vars(k)] == [BaseCheckpointSaver], name
assert _upstream.forward_server_delta_history() is True
assert _upstream.forward_server_delta_history() is True  # once is enough


class Recording(InMemorySaver):
    calls = 0

    async def aget_delta_channel_history(self, *, config: Any, channels: Any) -> Any:
        Recording.calls += 1
        return await super().aget_delta_channel_history(config=config, channels=channels)


inner = Recording()
adapter = cls(inner, _adapter.CheckpointerCapabilities.from_type(Recording))
stored = inner.put(
    {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
    empty_checkpoint(),
    {"source": "input", "step": -1, "parents": {}},
    {},
)
got = asyncio.run(adapter.aget_delta_channel_history(config=stored, channels=["messages"]))
assert Recording.calls == 1, Recording.calls
assert got == inner.get_delta_channel_history(config=stored, channels=["messages"])
print("forwarded")
"""


def test_the_server_adapter_forwards_delta_history_reads_to_the_saver_it_wraps() -> None:
    """langgraph-api's checkpointer adapter inherits `(a)get_delta_channel_history` from the
    base class (so its walk would run through the adapter, past the wrapped saver's own);
    `forward_server_delta_history` hands both reads to the wrapped saver. In a subprocess:
    langgraph-api reads its configuration from the environment when imported."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "PYTHONPATH": str(pathlib.Path(threadlog.__file__).parents[1]),
        "REDIS_URI": "fake",
        "DATABASE_URI": ":memory:",
        "MIGRATIONS_PATH": "__inmem",
        "LANGGRAPH_RUNTIME_EDITION": "inmem",
    }
    done = subprocess.run(
        [sys.executable, "-c", _SERVER_ADAPTER_CHECK], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "forwarded"


def test_the_postgres_saver_names_the_inline_dump_overrides_use_still_exist() -> None:
    """`InlineDumpAsyncPostgresSaver` overrides `aput`, `aput_writes` and
    `_load_checkpoint_tuple` with upstream's own helpers and SQL; each name is still there,
    and the overridden methods still take the arguments the overrides take."""
    import inspect

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from threadlog.checkpoint.backends.postgres_inline import inline_dump_async_postgres_saver

    missing = [n for n in _upstream.POSTGRES_PRIVATE if not hasattr(AsyncPostgresSaver, n)]
    assert missing == []
    ours = inline_dump_async_postgres_saver()
    assert issubclass(ours, AsyncPostgresSaver)
    for name in ("aput", "aput_writes", "_load_checkpoint_tuple"):
        assert name in vars(ours)
        upstream_params = list(inspect.signature(getattr(AsyncPostgresSaver, name)).parameters)
        assert list(inspect.signature(getattr(ours, name)).parameters) == upstream_params


def _touch_points() -> list[tuple[int, str, str]]:
    """(number, kind, dotted upstream path) of each row of `_upstream`'s table."""
    row = re.compile(r"^\s*(\d+)\s+(name|format|hook|fork)\s+(\S+)\s*$")
    found = [row.match(line) for line in (_upstream.__doc__ or "").splitlines()]
    return [(int(m[1]), m[2], m[3]) for m in found if m]


def _resolve(path: str) -> Any:
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, name in enumerate(parts[cut:], cut):
            if hasattr(obj, name):
                obj = getattr(obj, name)
            elif i == len(parts) - 1 and name in inspect.getsource(obj):
                return obj  # an attribute its instances set (`self.<name> = ...`)
            else:
                raise AttributeError(f"{path}: no {name} in {'.'.join(parts[:i])}")
        return obj
    raise ImportError(path)


def test_the_touch_point_table_lists_at_most_30_rows_and_each_resolves_upstream() -> None:
    rows = _touch_points()
    assert [n for n, _, _ in rows] == list(range(1, len(rows) + 1))
    assert 0 < len(rows) <= 30
    for _, _, path in rows:
        if path.startswith("langgraph_api."):
            continue  # imported in a fresh interpreter only: the server adapter test
        assert _resolve(path) is not None, path
    # Each private name `_upstream` imports (or name of a private module) is in a row.
    source = pathlib.Path(_upstream.__file__).read_text()
    imports = re.findall(
        r"^from (langgraph[\w.]*) import (?:\(([^)]*)\)|([^(\n]+))$", source, re.M
    )
    listed = {path for _, _, path in rows}
    unlisted = []
    for module, grouped, single in imports:
        for name in re.findall(r"\b\w+\b", (grouped or single).split(" as ")[0]):
            private = name.startswith("_") or "._" in module
            covered = any(f".{name}." in f"{p}." or p.startswith(f"{module}.") for p in listed)
            if private and not covered:
                unlisted.append(f"{module}.{name}")
    assert unlisted == []


def test_a_stored_message_record_builds_as_validating_it_does() -> None:
    from langchain_core.messages import AIMessage

    msg = AIMessage("hi", id="a1", tool_calls=[{"name": "t", "args": {"q": 1}, "id": "c1"}])
    dump = msg.model_dump()
    built = _upstream.built_message("langchain_core.messages.ai", "AIMessage", dict(dump))
    assert type(built) is AIMessage and built == msg == AIMessage(**dump)
    assert built.model_fields_set == AIMessage(**dump).model_fields_set
    assert built.model_dump() == dump and built.model_copy(update={"content": "x"}).content == "x"
    # Not exactly the class's fields, or not a safe message class: not built here.
    assert _upstream.built_message("langchain_core.messages.ai", "AIMessage", {"id": "a"}) is None
    assert _upstream.built_message("builtins", "dict", dict(dump)) is None
