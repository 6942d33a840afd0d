"""`replay`: re-run a stored thread's turns through the current graph, as a regression test.

Contract: `replay(graph, source, thread_id, turns=None, model="stored", tools="stored")`
returns a `ReplayReport`, one row per turn (a user message and what followed it): `match`,
or the turn's first divergence:

* `context` — a model call sends other than the stored call sent: the recorded request
  (`threadlog.check.requests`), else `ModelNode`'s trace (system prompt id, message count).
* `tool_schema` — a stored call no longer fits the current graph's tool.
* `call` — another call, more or fewer calls; `args` — other arguments; `answer` — another
  final answer.
* `interrupt` — the turn paused in `interrupt()` after everything before it matched.

Each turn runs on a scratch thread in an in-memory saver (the source is never written);
how tools and models are served, and which graphs are refused: docs/check-and-replay.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, ToolException

from threadlog.check.boundary import StandIn, outside, replying, serving, unreachable
from threadlog.check.requests import Difference, Request, RequestCapture, difference
from threadlog.inspect.table import INDENT, WIDTH, Cell, Column, Table
from threadlog.nodes.trace import TRACE_KEY
from threadlog.terminal import display_width, fit, safe

__all__ = ["ModelMode", "ReplayReport", "ToolsMode", "TurnResult", "parse_turns", "replay"]

ModelMode = Literal["stored", "live"]
ToolsMode = Literal["stored", "live"]
HANDOFF_KEY = "__handoff_destination"  # in langgraph-swarm's and -supervisor's handoff tools


@dataclass(frozen=True, slots=True)
class TurnResult:
    turn: int  # 1-based
    user_message_id: str | None
    user_text: str
    kind: str  # `match`, or the first divergence (module doc)
    model_call: int | None  # which model call of the turn diverged (1-based)
    detail: str
    stored: str | None = None
    replayed: str | None = None
    diff: str | None = None  # recorded → replayed, for a system prompt or tool schema

    @property
    def matched(self) -> bool:
        return self.kind == "match"


class _Stop(BaseException):
    """Ends a replayed turn at its divergence (a BaseException: no tool node catches it)."""

    def __init__(self, kind: str, model_call: int | None, detail: str) -> None:
        super().__init__(detail)
        self.kind, self.model_call, self.detail = kind, model_call, detail


@dataclass(slots=True)
class _Turn:
    index: int
    user: HumanMessage
    before: dict[str, Any]  # the state values stored right before the user message
    replies: list[AIMessage]
    results: list[ToolMessage]
    removed: str = ""  # why the turn cannot be replayed: its user message was removed
    inputs: dict[str, Any] = field(default_factory=dict)  # other keys of the turn's input


def _calls(ai: AIMessage) -> list[tuple[str, str]]:
    return [(c["name"], json.dumps(c["args"], sort_keys=True, default=str)) for c in ai.tool_calls]


def _text(m: BaseMessage) -> str:
    return m.text if isinstance(m.text, str) else str(m.content)


def _turns(saver: Any, thread_id: str) -> list[_Turn]:
    """The stored turns, each with the state stored right before it (oldest first)."""
    from threadlog.inspect.source import head_shape, quiet_stand_in, stand_in

    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    # Every key the head stores, not only the messages: a turn starts from all of them.
    graph = stand_in(saver, None, head_shape(saver, config))
    with quiet_stand_in(True):
        history = list(graph.get_state_history(config))[::-1]
    if not history:
        raise LookupError(f"no thread {thread_id!r} in this database")
    head = [m for m in history[-1].values.get("messages") or [] if isinstance(m, BaseMessage)]
    in_head = {m.id for m in head if isinstance(m, HumanMessage)}
    users: dict[str | None, HumanMessage] = {}  # every user message ever stored, in order
    gone: dict[str, str] = {}  # a removed one's id → where it went
    before: dict[str, dict[str, Any]] = {}  # a user message's id → the values before it
    inputs: dict[str, dict[str, Any]] = {}
    shown: set[str | None] = set()
    prev: dict[str, Any] = {}
    prev_source = None
    for snap in history:
        values = snap.values if isinstance(snap.values, dict) else {}
        now = [m for m in values.get("messages") or [] if isinstance(m, HumanMessage)]
        ids = {m.id for m in now}
        for m in (m for m in now if m.id not in users):
            users[m.id] = m
            before[m.id or ""] = prev
            if prev_source == "input":
                # The step applying a run's input: the other keys that input set.
                inputs[m.id or ""] = {
                    k: v
                    for k, v in values.items()
                    if k not in ("messages", "compactions") and prev.get(k) != v
                }
        for vanished in shown - ids:
            if vanished not in in_head and str(vanished) not in gone:
                step = f"step {(snap.metadata or {}).get('step')}"
                cid = snap.config["configurable"]["checkpoint_id"]
                gone[str(vanished)] = f"its user message was removed at {step} (checkpoint {cid})"
        shown = ids
        prev, prev_source = values, (snap.metadata or {}).get("source")
    out: list[_Turn] = []
    for n, user in enumerate(users.values(), 1):
        if user.id not in in_head:
            why = gone.get(str(user.id), "its user message is not in the thread's head")
            out.append(_Turn(n, user, {}, [], [], removed=why))
            continue
        at = next(i for i, m in enumerate(head) if m.id == user.id)
        end = next(
            (i for i in range(at + 1, len(head)) if isinstance(head[i], HumanMessage)), len(head)
        )
        seed = before.get(user.id or "")
        if seed is None:  # written by update_state in one go: the stored prefix
            seed = {"messages": head[:at]}
        body = head[at + 1 : end]
        replies = [m for m in body if isinstance(m, AIMessage)]
        results = [m for m in body if isinstance(m, ToolMessage)]
        given = inputs.get(user.id or "", {})
        out.append(_Turn(n, user, dict(seed), replies, results, inputs=given))
    return out


def parse_turns(text: str | None, count: int) -> range:
    """`A:B` (1-based, inclusive, either side optional) or `N` as a range of turns."""
    if not text:
        return range(1, count + 1)
    a, colon, b = text.partition(":")
    try:
        lo = int(a) if a or not colon else 1
        hi = (int(b) if b else count) if colon else lo
    except ValueError:
        raise ValueError(
            f"--turns {text!r}: give A:B, A:, :B or N (1-based turn numbers)"
        ) from None
    if lo < 1 or hi > count or lo > hi:
        raise ValueError(f"--turns {text!r}: the thread has turns 1 to {count}")
    return range(lo, hi + 1)


class _Served:
    def __init__(self, turn: _Turn, tools_live: bool, schemas: Mapping[str, BaseTool]) -> None:
        self.turn = turn
        self.requests = RequestCapture()  # what each model call of the turn sends
        self.tools_live = tools_live
        self.schemas = schemas
        self.model_calls = self.tool_calls = 0
        self.used: set[int] = set()
        self.stored_calls = [
            (c["name"], c["args"], c["id"]) for ai in turn.replies for c in ai.tool_calls
        ]
        self.results: dict[str | None, ToolMessage] = {r.tool_call_id: r for r in turn.results}
        self.lock = threading.Lock()  # a step's calls run in parallel threads

    def reply(self, _wire: Any) -> AIMessage:
        k = self.model_calls
        self.model_calls += 1
        if k >= len(self.turn.replies):
            raise _Stop(
                "call",
                k + 1,
                f"the replay calls the model a {k + 1}. time; the stored "
                f"turn ended after {len(self.turn.replies)} call(s)",
            )
        stored = self.turn.replies[k]
        self.requests.replies.add(str(stored.id))
        # Tools out of the node list (an agent a node function invokes) have no schemas here.
        for call in stored.tool_calls if self.schemas else []:
            problem = _schema_problem(self.schemas, call["name"], call["args"])
            if problem:
                raise _Stop("tool_schema", k + 1, problem)
        meta = {key: v for key, v in stored.response_metadata.items() if key != TRACE_KEY}
        return stored.model_copy(update={"response_metadata": meta})

    def node_reply(self, wire: Any) -> AIMessage:
        self.requests.add(Request.from_wire(wire))
        return self.reply(wire)

    def stand_in(self, real: BaseTool) -> BaseTool:
        if HANDOFF_KEY in (real.metadata or {}):
            # A handoff only routes (a `Command` to the next agent): it runs as it is.
            self._take(real.name)
            return real
        fields = _call_fields(real)
        schema: Any = real.args_schema or real.get_input_schema()

        def serve(*args: Any, **kwargs: Any) -> Any:
            if args:  # a single-input tool given its input positionally
                kwargs = {**dict(zip(list(fields or ["input"]), args, strict=False)), **kwargs}
            sent = {k: v for k, v in kwargs.items() if fields is None or k in fields}
            return self.result(real.name, sent, real, kwargs)

        return StandIn(
            name=real.name,
            description=real.description,
            args_schema=schema,
            func=serve,
            response_format=real.response_format,
            return_direct=real.return_direct,
            # A stored failure is served as one: the caller gets an error result.
            handle_tool_error=True,
        )

    def _take(self, name: str, args: dict[str, Any] | None = None) -> int | None:
        """The unused stored call of `name` (and `args`), else at this position; now used."""
        with self.lock:
            position = self.tool_calls
            self.tool_calls += 1
            calls = self.stored_calls
            named = [i for i, c in enumerate(calls) if i not in self.used and c[0] == name]
            found = next((i for i in named if args is None or calls[i][1] == args), None)
            if found is None and position in named:
                found = position
            if found is not None:
                self.used.add(found)
            return found

    def result(self, name: str, args: dict[str, Any], real: BaseTool, given: dict[str, Any]) -> Any:
        found = self._take(name, args)
        if found is not None:
            stored = self.results.get(self.stored_calls[found][2])
            if stored is not None:
                if stored.status == "error":  # the stored call failed: so does this one
                    raise ToolException(stored.content)
                if real.response_format == "content_and_artifact":
                    return stored.content, stored.artifact
                return stored.content
            # No stored result: its tool raised and the run stopped there; so does the replay.
            raise _Stop(
                "unanswered",
                None,
                f"the stored turn's call {name}({json.dumps(args, ensure_ascii=False)}) "
                "stored no result (its tool failed and the run stopped); the replay "
                "stops at the same call",
            )
        if self.tools_live:
            with outside():
                return real.invoke(given)
        raise _Stop(
            "call",
            None,
            f"a call the stored turn did not make: {name}({json.dumps(args)}) "
            "— not executed (--tools live runs it)",
        )


def _call_fields(tool: BaseTool) -> list[str] | None:
    """The arguments a model passes `tool` (not the ones a tool node injects)."""
    schema: Any = tool.tool_call_schema
    if isinstance(schema, dict):
        return list(schema.get("properties") or {}) or None
    return list(getattr(schema, "model_fields", {}) or {}) or None


def _schema_problem(tools: Mapping[str, BaseTool], name: str, args: Mapping[str, Any]) -> str:
    tool = tools.get(name)
    if tool is None:
        return f"the stored call {name!r} names no tool of the graph now ({sorted(tools)})"
    # What the model fills in: arguments a tool node injects are not the model's to give.
    schema: Any = tool.tool_call_schema
    if isinstance(schema, dict) or not hasattr(schema, "model_validate"):
        return ""
    try:
        schema.model_validate(dict(args))
    except Exception as exc:
        first = " ".join(str(exc).split())[:160]
        call = f"{name}({json.dumps(dict(args), ensure_ascii=False)})"
        return f"the stored call {call} does not fit the tool's schema now: {first}"
    extra = set(args) - set(schema.model_fields)
    if extra:
        return f"the stored call {name} passes {sorted(extra)}, which the tool's schema has no more"
    return ""


def _walk(graph: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    builder = getattr(graph, "builder", None)
    for name, spec in getattr(builder, "nodes", {}).items():
        path = f"{prefix}{name}"
        yield path, spec.runnable
        if hasattr(spec.runnable, "builder") and hasattr(spec.runnable, "get_state"):
            yield from _walk(spec.runnable, f"{path}/")


def _nodes(graph: Any) -> tuple[list[Any], list[Any]]:
    from langgraph.prebuilt import ToolNode as LangGraphToolNode

    from threadlog.nodes.model import ModelNode

    nodes = [node for _, node in _walk(graph)]
    models = [n for n in nodes if isinstance(n, ModelNode)]
    return models, [n for n in nodes if isinstance(n, LangGraphToolNode)]


def refusal(graph: Any) -> str:
    """Why a replay of `graph` could run a real tool ("" when it cannot), naming the node."""
    from langgraph.prebuilt import ToolNode as LangGraphToolNode
    from langgraph.pregel.remote import RemoteGraph

    for path, node in _walk(graph):
        if isinstance(node, RemoteGraph):
            return (
                f"node {path!r} is a RemoteGraph: its tools run on a server, where a replay "
                "cannot serve stored results; replay that server's graph itself"
            )
        if isinstance(node, LangGraphToolNode):
            for tool in node.tools_by_name.values():
                why = unreachable(tool)
                if why:
                    return (
                        f"node {path!r}: tool {tool.name!r} cannot be served stored results "
                        f"({why}); a replay would run it"
                    )
    return ""


@contextlib.contextmanager
def _swapped(graph: Any, served: _Served, model: ModelMode) -> Iterator[None]:
    models, _ = _nodes(graph)
    saved_models = [(m, m.bound, m.bound_first) for m in models]
    try:
        if model == "stored":
            stub = RunnableLambda(served.node_reply)
            for m in models:
                m.bound = m.bound_first = stub
        # With stored replies and no ModelNode, every chat model is answered at `invoke`.
        with contextlib.ExitStack() as stack:
            stack.enter_context(serving(served.stand_in))
            if model == "stored" and not models:
                stack.enter_context(replying(lambda _model, wire: served.reply(wire)))
            yield
    finally:
        for m, bound, first in saved_models:
            m.bound, m.bound_first = bound, first


_FEWER = "the replay made"


# kind, model call, detail, stored, replayed, diff
Found = tuple[str, int | None, str, str | None, str | None, str | None]


def _context(k: int, d: Difference) -> Found:
    return ("context", k + 1, d.detail, d.recorded, d.replayed, d.diff)


def _compare(
    turn: _Turn,
    replayed: Sequence[BaseMessage],
    recorded: Sequence[Request | None] = (),
    sent: Sequence[Request] = (),
) -> Found:
    ais = [m for m in replayed if isinstance(m, AIMessage)]
    for k, stored in enumerate(turn.replies):
        # What the call sends is compared before its reply; tools and parameters after it.
        was = recorded[k] if k < len(recorded) else None
        late: Difference | None = None
        if was is not None and k < len(sent):
            d = difference(was, sent[k])
            if d is not None and d.part in ("system_prompt", "messages"):
                return _context(k, d)
            late = d
        if k >= len(ais):
            made = f"{_FEWER} {len(ais)} model call(s); the stored turn made {len(turn.replies)}"
            return ("call", k + 1, made, _summary(stored), None, None)
        got = ais[k]
        s_trace = stored.response_metadata.get(TRACE_KEY) or {}
        r_trace = got.response_metadata.get(TRACE_KEY) or {}
        if was is None and s_trace and r_trace:  # no recorded request: ModelNode's trace
            for key in ("system_prompt", "context_messages"):
                then, now = s_trace.get(key), r_trace.get(key)
                if then != now:
                    detail = "the system prompt sent differs from the stored one"
                    if key == "context_messages":
                        detail = f"the model was sent another context: {now} message(s), "
                        detail += f"stored {then}"
                    return ("context", k + 1, detail, str(then), str(now), None)
        sc, rc = _calls(stored), _calls(got)
        if sc != rc:
            kind, what = "args", "the same tools with other arguments"
            if [n for n, _ in sc] != [n for n, _ in rc]:
                kind, what = "call", "the model made other calls"
            return (kind, k + 1, what, _summary(stored), _summary(got), None)
        if not sc and _text(stored) != _text(got):
            return ("answer", k + 1, "a different final answer", _text(stored), _text(got), None)
        if late is not None:
            return _context(k, late)
    if len(ais) > len(turn.replies):
        extra = _summary(ais[len(turn.replies)])
        more = "the replay called the model more times"
        return ("call", len(turn.replies) + 1, more, None, extra, None)
    return ("match", None, "", None, None, None)


def _summary(ai: AIMessage) -> str:
    if ai.tool_calls:
        return "; ".join(
            f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in ai.tool_calls
        )
    return _text(ai)


def _seed(graph: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    keys = {k for k in getattr(graph, "channels", {}) if not k.startswith(("__", "branch:"))}
    kept = {k: v for k, v in values.items() if k in keys and v is not None}
    return {k: v for k, v in kept.items() if v or k not in ("messages", "compactions")}


def _replay_turn(
    graph: Any,
    turn: _Turn,
    model: ModelMode,
    tools: ToolsMode,
    recorded: Sequence[Request | None] = (),
    models_only: bool = False,
) -> TurnResult:
    """One turn replayed; `models_only`: compare only the AIMessages a model call produced."""
    from langgraph.checkpoint.memory import InMemorySaver

    from threadlog.nodes.model import ModelNode

    _, tool_nodes = _nodes(graph)
    schemas = {n: t for node in tool_nodes for n, t in node.tools_by_name.items()}
    served = _Served(turn, tools == "live", schemas)
    scratch = graph.copy(update={"checkpointer": InMemorySaver()})
    config: Any = {"configurable": {"thread_id": f"replay-{turn.index}"}}
    seed = _seed(graph, turn.before)
    if seed:
        top = [n for n, spec in graph.builder.nodes.items() if isinstance(spec.runnable, ModelNode)]
        scratch.update_state(config, seed, as_node=top[0] if top else None)
    stopped: _Stop | None = None
    run_config = {**config, "callbacks": [served.requests]}
    with _swapped(graph, served, model):
        try:
            scratch.invoke({**_seed(graph, turn.inputs), "messages": [turn.user]}, run_config)
        except _Stop as stop:
            stopped = stop
    snap = scratch.get_state(config)
    messages = list(snap.values.get("messages") or [])
    at = next((i for i, m in enumerate(messages) if m.id == turn.user.id), len(messages))
    after = messages[at + 1 :]
    if models_only:
        made = served.requests.replies
        after = [m for m in after if not isinstance(m, AIMessage) or str(m.id) in made]
    kind, call, detail, stored, replayed, diff = _compare(
        turn, after, recorded, served.requests.requests
    )
    if stopped is None and snap.next and (kind == "match" or detail.startswith(_FEWER)):
        # The decision that let the stored turn go on past interrupt() is not replayed.
        kind = "interrupt"
        detail = (
            f"the turn paused at {', '.join(snap.next)} (interrupt()); replay does not "
            "answer interrupts: what ran before the pause matches"
        )
    if stopped is not None and stopped.kind == "unanswered":
        if kind == "match":  # everything up to the call the stored run stopped at matched
            detail = stopped.detail
    elif stopped is not None and (kind == "match" or detail.startswith(_FEWER)):
        kind, call, detail = stopped.kind, stopped.model_call, stopped.detail
    elif stopped is not None and stopped.kind == "tool_schema":
        if not (kind == "context" and (call or 0) < (stopped.model_call or 0)):
            kind, call, detail = stopped.kind, stopped.model_call, stopped.detail
            stored = replayed = diff = None
    return TurnResult(
        turn.index, turn.user.id, _text(turn.user), kind, call, detail, stored, replayed, diff
    )


def _wrapped(line: str) -> list[str]:
    """One diff line as terminal lines under a row, none cut: the rest goes on after `↪`."""
    text = safe(line.expandtabs(4))
    width = WIDTH - INDENT
    out: list[str] = []
    while display_width(text) > width:
        used, cut = 0, 0
        for i, ch in enumerate(text):
            used += display_width(ch)
            if used > width - 1:
                break
            cut = i + 1
        out.append(text[:cut])
        text = "↪" + text[cut:]
    return [*out, text]


class ReplayReport(Table):
    columns: tuple[Column, ...] = (
        Column("turn", "turn", 4, ">"),
        Column("kind", "result", 11),
        Column("call", "call", 4, ">"),
        Column("user", "user message", 26),
        Column("detail", "first divergence"),
        Column("diff", "stored / replayed", 0, below=True, verbatim=True),
    )

    def __init__(self, title: str, results: list[TurnResult]) -> None:
        self.title = title
        self.results = results

    @property
    def matched(self) -> bool:
        return all(r.matched or r.kind == "skipped" for r in self.results)

    @property
    def status(self) -> int:
        return 0 if self.matched else 1

    def rows(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.results]

    def summary(self) -> list[str]:
        bad = [r for r in self.results if not r.matched and r.kind != "skipped"]
        skipped = sum(r.kind == "skipped" for r in self.results)
        ran = len(self.results) - skipped
        text = f"{ran} turn(s) replayed: {ran - len(bad)} match"
        if skipped:
            text = f"{len(self.results)} stored turn(s), {skipped} skipped; {text}"
        if bad:
            text += f", {len(bad)} diverge (first at turn {bad[0].turn}: {bad[0].kind})"
        return [text]

    def display_rows(self) -> list[dict[str, Cell]]:
        out: list[dict[str, Cell]] = []
        for r in self.results:
            if r.diff is not None:  # a text diff, every line shown (wrapped, escaped)
                diff = [part for line in r.diff.split("\n") for part in _wrapped(line)]
            else:
                shown = (("stored:   ", r.stored), ("replayed: ", r.replayed))
                diff = [
                    fit(label + text, WIDTH - INDENT) for label, text in shown if text is not None
                ]
            out.append(
                {
                    "turn": str(r.turn),
                    "kind": r.kind,
                    "call": "-" if r.model_call is None else str(r.model_call),
                    "user": r.user_text,
                    "detail": r.detail or "-",
                    "diff": diff,
                }
            )
        return out


def _requests(saver: Any, thread_id: str) -> dict[str, Request | None]:
    from threadlog.inspect.calls import recorded_calls

    out: dict[str, Request | None] = {}
    for call in recorded_calls(saver, thread_id):  # in the order they started
        if call.reply_id is not None and call.error is None:
            # None when part of what it sent is no longer stored (a pruned step).
            missing = any(m.get("missing") for m in call.messages)
            args = (call.messages, list(call.tools), call.tool_schemas, call.model, call.params)
            out[call.reply_id] = None if missing else Request(*args)
    return out


def replay(
    graph: Any,
    source: Any,
    thread_id: str,
    *,
    turns: str | range | None = None,
    model: ModelMode = "stored",
    tools: ToolsMode = "stored",
) -> ReplayReport:
    """Replay `thread_id` of `source` through `graph` (module doc)."""
    from threadlog.check.database import opened

    for what, mode in (("model", model), ("tools", tools)):
        if mode not in ("stored", "live"):
            raise ValueError(f"{what} must be 'stored' or 'live', not {mode!r}")
    with opened(source, "replay from") as (saver, name):
        stored, requests = _turns(saver, thread_id), _requests(saver, thread_id)
    refused = refusal(graph)
    if refused:
        raise ValueError(f"cannot replay safely: {refused}")
    chosen = turns if isinstance(turns, range) else parse_turns(turns, len(stored))
    results = []
    for n in chosen:
        turn = stored[n - 1]
        if turn.removed:
            detail = (
                f"skipped: {turn.removed} (a summarizing or trimming step); what followed it "
                "is not in the head to compare against"
            )
            results.append(TurnResult(n, turn.user.id, _text(turn.user), "skipped", None, detail))
            continue
        # With recorded calls, serve only the AIMessages a model call produced.
        made = [ai for ai in turn.replies if str(ai.id) in requests]
        models_only = bool(made) and len(made) < len(turn.replies)
        if models_only:
            turn = dataclasses.replace(turn, replies=made)
        recorded = [requests.get(str(ai.id)) for ai in turn.replies]
        results.append(_replay_turn(graph, turn, model, tools, recorded, models_only))
    return ReplayReport(f"replay of thread {thread_id} from {name} (model {model})", results)
