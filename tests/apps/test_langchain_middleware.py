"""LangChain's own `create_agent` with middleware, its state's `messages` on threadlog's log.

`langchain.agents.create_agent(model, tools, middleware=[...], state_schema=State,
checkpointer=threadlog.checkpointer(url))` with `State.messages: threadlog.Messages`:
LangChain merges the middleware's state schemas with `state_schema` last, so threadlog's
channel wins the `messages` key. Each test runs on SQLite and Postgres (`backend`).

* two turns with a tool call each: the log stays valid, nothing stored twice;
* `HumanInTheLoopMiddleware`: interrupt, resume (approve, edit, reject) from the database in a new
  saver; LangChain records an edit in its own state key and prefixes the result with a
  note, so the log keeps the model's original call — nothing is rewritten;
* `SummarizationMiddleware` deletes history with `RemoveMessage(REMOVE_ALL_MESSAGES)` and
  re-sends the kept messages: a removal event (`threadlog.log.removals`) — ten turns run, the
  agent reads the summary and the kept messages, the log keeps everything; the
  append-only alternative, `threadlog.ContextPolicy(summarizer=...)`, is tested on
  threadlog's `create_agent`;
* a turn whose model failed after its tool ran resumes from the database (`invoke(None)`
  in a new saver) reusing the stored result;
* `HumanInTheLoopMiddleware` and a new user message instead of the resume (sync and
  async): the paused call gets one explicit "not completed" result before the new message
  (the tool never runs), the model sees a paired history, the thread continues; a tool
  result sent as the new input answers the call itself;
* the documented human-review edit path: `update_state` re-sending the `AIMessage` with
  new args records an edit event (`source="update_state"`), the same re-send as turn input
  is refused naming `threadlog.Edit`; the approval `edit` decision records that edit event
  end to end (`tests/log/test_edit.py` has the `update_state` `Edit`);
* `edit` and `reject` decisions on two calls per pause over two turns (only edited calls
  run, one result per call, a paired history and payload for the model, the inspector's
  pairs); LangChain 1.0 to 1.4's edit, which rewrites the request in place, recorded as
  an edit event; a new message while two calls wait for decisions, batched and per call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentState,
    HumanInTheLoopMiddleware,
    SummarizationMiddleware,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

import threadlog
from tests.helpers.multi_agent import Scripted
from threadlog.examples.weather import get_weather

BEIJING = "light rain, 70% chance of precipitation, 22°C"
TOKYO = "showers, 55% chance of precipitation, 19°C"


class State(AgentState):  # type: ignore[type-arg]
    messages: threadlog.Messages


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, HumanMessage) for m in messages)


class Recorder:
    """A scripted weather model: asks for Beijing after each user message, then answers
    with the last tool result; remembers what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

    def __call__(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self.seen.append(list(messages))
        turn = _turn(messages)
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "get_weather", "args": {"city": "Beijing"}, "id": f"call-{turn}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage(f"answer {turn}: {messages[-1].content}")


def _assert_stored_once(messages: Sequence[BaseMessage]) -> None:
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), ids
    calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(calls) == len(set(calls)), calls


def test_two_turns_with_a_tool_call_each_keep_threadlogs_log_valid(backend: str) -> None:
    cfg = _cfg("two-turns")
    with threadlog.checkpointer(backend) as saver:
        app = create_agent(
            threadlog.OfflineChatModel(), [get_weather], state_schema=State, checkpointer=saver
        )
        assert type(app.channels["messages"]).__name__ == "MessageLogChannel"
        for text in ("北京今天适合带伞吗？", "What about Shanghai?"):
            out = app.invoke({"messages": [HumanMessage(text)]}, cfg)
    with threadlog.checkpointer(backend) as saver:  # what the database holds
        stored = (
            create_agent(
                threadlog.OfflineChatModel(), [get_weather], state_schema=State, checkpointer=saver
            )
            .get_state(cfg)
            .values["messages"]
        )

    roles = [type(m).__name__ for m in stored]
    assert roles == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"] * 2
    assert [m.content for m in stored if isinstance(m, ToolMessage)] == [
        "小雨，降水概率 70%，气温 22°C",
        "cloudy, 20% chance of precipitation, 26°C",
    ]
    assert [m.id for m in stored] == [m.id for m in out["messages"]]
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)


def _hitl_app(model: Recorder, saver: Any) -> Any:
    hitl = HumanInTheLoopMiddleware(interrupt_on={"get_weather": True})
    return create_agent(
        Scripted(script=model),
        [get_weather],
        middleware=[hitl],
        state_schema=State,
        checkpointer=saver,
    )


def _interrupt_then_resume(
    backend: str, thread: str, decision: dict[str, Any]
) -> tuple[list[BaseMessage], Recorder]:
    """Turn 1 pauses at the weather call; a new saver (the process restarted) resumes it."""
    cfg = _cfg(thread)
    model = Recorder()
    with threadlog.checkpointer(backend) as saver:
        paused = _hitl_app(model, saver).invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
    (request,) = paused["__interrupt__"][0].value["action_requests"]
    assert (request["name"], request["args"]) == ("get_weather", {"city": "Beijing"})
    # While paused, the log holds the call and no result yet.
    assert [type(m).__name__ for m in paused["messages"]] == ["HumanMessage", "AIMessage"]
    threadlog.validate(paused["messages"])
    with pytest.raises(threadlog.ToolPairingError):
        threadlog.validate(paused["messages"], allow_pending_calls=False)

    with threadlog.checkpointer(backend) as saver:
        app = _hitl_app(model, saver)
        app.invoke(Command(resume={"decisions": [decision]}), cfg)
        stored: list[BaseMessage] = app.get_state(cfg).values["messages"]
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)
    return stored, model


def test_hitl_middleware_approve_resumes_from_the_database(backend: str) -> None:
    stored, model = _interrupt_then_resume(backend, "approve", {"type": "approve"})
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert stored[2].content == BEIJING and stored[2].tool_call_id == "call-1"
    assert stored[3].content == f"answer 1: {BEIJING}"
    # The model's second request is exactly the log so far: each message once.
    assert [m.id for m in model.seen[-1]] == [m.id for m in stored[:3]]


def test_hitl_middleware_edit_keeps_the_original_call_and_runs_the_edited_one(
    backend: str,
) -> None:
    edit = {
        "type": "edit",
        "edited_action": {"name": "get_weather", "args": {"city": "Tokyo"}},
    }
    stored, model = _interrupt_then_resume(backend, "edit", edit)
    human, call, result, answer = stored
    # LangChain's middleware (langchain >= 1.5) does not re-send the AIMessage with the
    # edited args: the log keeps the model's own call, unchanged...
    assert isinstance(call, AIMessage)
    assert call.tool_calls[0]["args"] == {"city": "Beijing"}
    # ...and the result of the call that ran (Tokyo) says what the reviewer changed.
    assert isinstance(result, ToolMessage) and result.tool_call_id == "call-1"
    assert "a human reviewer replaced this tool call" in str(result.content)
    assert '{"city": "Tokyo"}' in str(result.content)
    assert str(result.content).endswith(TOKYO)
    # The model sees that same pair: its original call, then the annotated result.
    seen = model.seen[-1]
    assert [m.id for m in seen] == [human.id, call.id, result.id]
    assert isinstance(seen[1], AIMessage) and seen[1].tool_calls[0]["args"] == {"city": "Beijing"}
    assert str(answer.content).endswith(TOKYO)


def test_hitl_middleware_reject_answers_the_call_with_an_error_result(backend: str) -> None:
    reject = {"type": "reject", "message": "not Beijing, ask which city"}
    stored, model = _interrupt_then_resume(backend, "reject", reject)
    _, _, result, answer = stored
    assert isinstance(result, ToolMessage) and result.tool_call_id == "call-1"
    assert result.status == "error"  # LangChain's artificial result; the tool did not run
    reason = (
        "User rejected the tool call for `get_weather` with reason: not Beijing, ask which city"
    )
    assert result.content == reason
    assert [m.id for m in model.seen[-1]] == [m.id for m in stored[:3]]
    assert answer.content == f"answer 1: {reason}"


def test_summarization_middleware_runs_ten_turns_its_removals_recorded_as_events(
    backend: str,
) -> None:
    """Its `RemoveMessage(REMOVE_ALL_MESSAGES)` + summary + kept messages is a removal
    event: the agent reads the summary and the kept messages, the log keeps everything
    (an earlier checkpoint, a fresh process), ten turns unchanged."""
    summarize = SummarizationMiddleware(
        model=Scripted(script=lambda _: AIMessage("a summary")),
        trigger=("messages", 6),
        keep=("messages", 3),
    )
    model = Recorder()
    cfg = _cfg("summarize")
    with threadlog.checkpointer(backend) as saver:
        app = create_agent(
            Scripted(script=model),
            [get_weather],
            middleware=[summarize],
            state_schema=State,
            checkpointer=saver,
        )
        for k in range(10):
            out = app.invoke({"messages": [HumanMessage(f"q{k}", id=f"u{k}")]}, cfg)
            assert out["messages"][-1].content.startswith("answer")
            assert out["messages"][-2].content == BEIJING
            assert len(out["messages"]) <= 8
        stored = app.get_state(cfg).values["messages"]
    threadlog.validate(stored, allow_pending_calls=False)
    # The model saw the summary first, then the kept messages in their order.
    last = model.seen[-1]
    assert "a summary" in str(last[0].content)
    assert [m.id for m in last[1:3]] == [m.id for m in stored[1:3]]
    assert "u0" not in [m.id for m in stored]
    with threadlog.checkpointer(backend) as again:
        fresh = create_agent(
            Scripted(script=Recorder()), [get_weather], middleware=[summarize],
            state_schema=State, checkpointer=again,
        )
        assert [m.id for m in fresh.get_state(cfg).values["messages"]] == [m.id for m in stored]
        ever = {m.id for s in fresh.get_state_history(cfg) for m in s.values.get("messages", [])}
    assert {f"u{k}" for k in range(10)} <= ever


def test_context_policy_summarizer_is_the_append_only_alternative(backend: str) -> None:
    """threadlog's `create_agent` with `ContextPolicy(summarizer=...)`: the model sees a
    summary instead of the earlier turn, the log keeps every message, and the summary is a
    compaction event."""
    model = Recorder()
    policy = threadlog.ContextPolicy(
        max_turns=1, summarizer=Scripted(script=lambda _: AIMessage("turn 1 asked Beijing"))
    )
    cfg = _cfg("policy")
    with threadlog.checkpointer(backend) as saver:
        app = threadlog.create_agent(
            Scripted(script=model), [get_weather], context=policy, checkpointer=saver
        )
        for text in ("hi", "again"):
            app.invoke({"messages": [HumanMessage(text, id=f"u-{text}")]}, cfg)
        values = app.get_state(cfg).values
    stored = values["messages"]
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ] * 2
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)
    last = model.seen[-1]
    assert "turn 1 asked Beijing" in str(last[0].content)
    assert [m.content for m in last[1:]] == [m.content for m in stored[4:7]]
    assert [c["kind"] for c in values["compactions"]] == ["summary"]
    assert values["compactions"][0]["summary"] == "turn 1 asked Beijing"


def test_update_state_resend_is_an_edit_event_and_the_approval_edit_records_one_too(
    backend: str,
) -> None:
    """Issue 22 item 3 (was issue 14 item 7's refusal): re-sending the `AIMessage` id with
    new args through `update_state` — the human-edit path — records an edit event
    (`source="update_state"`, the audit keeps the original); the same re-send as turn
    input stays a `ConflictingIdError` naming `threadlog.Edit`. On another thread,
    resuming with the approval `edit` decision records that edit event: the log shows the
    edited call in place, the audit record keeps the original."""
    model = Recorder()
    with threadlog.checkpointer(backend) as saver:
        app = threadlog.create_agent(
            Scripted(script=model),
            [get_weather],
            requires_approval=["get_weather"],
            checkpointer=saver,
        )
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, _cfg("human-edit"))
        call = app.get_state(_cfg("human-edit")).values["messages"][-1]
        edited = call.model_copy(
            update={"tool_calls": [{**call.tool_calls[0], "args": {"city": "Tokyo"}}]}
        )
        app.update_state(_cfg("human-edit"), {"messages": [edited]})
        now = app.get_state(_cfg("human-edit")).values["messages"][-1]
        assert now.id == call.id and now.tool_calls[0]["args"] == {"city": "Tokyo"}
        assert [e["source"] for e in threadlog.edits_of(now)] == ["update_state"]
        assert threadlog.original_of(now).tool_calls[0]["args"] == {"city": "Beijing"}
        paris = call.model_copy(
            update={"tool_calls": [{**call.tool_calls[0], "args": {"city": "Paris"}}]}
        )
        with pytest.raises(threadlog.ConflictingIdError, match=r"threadlog\.Edit\(AIMessage"):
            app.invoke({"messages": [paris]}, _cfg("human-edit"))

    cfg = _cfg("review")
    with threadlog.checkpointer(backend) as saver:
        app = threadlog.create_agent(
            Scripted(script=model),
            [get_weather],
            requires_approval=["get_weather"],
            checkpointer=saver,
        )
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)

    with threadlog.checkpointer(backend) as saver:  # resumed from the database
        app = threadlog.create_agent(
            Scripted(script=model),
            [get_weather],
            requires_approval=["get_weather"],
            checkpointer=saver,
        )
        app.invoke(Command(resume={"action": "edit", "args": {"city": "Tokyo"}}), cfg)
        stored = app.get_state(cfg).values["messages"]
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)
    assert stored[1].tool_calls[0]["args"] == {"city": "Tokyo"}  # the call as it ran
    original = threadlog.original_of(stored[1])  # the audit record
    assert original.tool_calls[0]["args"] == {"city": "Beijing"}
    assert [e["source"] for e in threadlog.edits_of(stored[1])] == ["approval"]
    assert stored[2].content == TOKYO
    assert stored[2].response_metadata["threadlog_approval"]["action"] == "edit"
    seen_call = model.seen[-1][1]
    assert isinstance(seen_call, AIMessage)
    assert seen_call.tool_calls[0]["args"] == {"city": "Tokyo"}  # the model sees the edit
    assert stored[3].content == f"answer 1: {TOKYO}"


class FailsOnce(Recorder):
    """Raises on the model call after the first tool result: a crash mid-turn."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def __call__(self, messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage) and not self.failed:
            self.failed = True
            raise RuntimeError("model endpoint went away")
        return super().__call__(messages)


def test_a_turn_that_failed_after_its_tool_ran_resumes_from_the_database(backend: str) -> None:
    """With HITL middleware in the stack: approve, the tool runs, the model fails; a new
    saver resumes the turn with `invoke(None)` — the tool result is reused, not re-run."""
    model = FailsOnce()
    cfg = _cfg("crash")
    with threadlog.checkpointer(backend) as saver:
        app = _hitl_app(model, saver)
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        with pytest.raises(RuntimeError, match="model endpoint went away"):
            app.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
        stored = app.get_state(cfg).values["messages"]
    assert [type(m).__name__ for m in stored] == ["HumanMessage", "AIMessage", "ToolMessage"]
    result_id = stored[2].id

    with threadlog.checkpointer(backend) as saver:
        app = _hitl_app(model, saver)
        app.invoke(None, cfg)
        app.invoke({"messages": [HumanMessage("again", id="u2")]}, cfg)
        app.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
        stored = app.get_state(cfg).values["messages"]
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ] * 2
    assert stored[2].id == result_id  # the stored result, not a second run
    assert [m.content for m in stored if isinstance(m, AIMessage) and m.content] == [
        f"answer 1: {BEIJING}",
        f"answer 2: {BEIJING}",
    ]
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)


class Weather:
    """`get_weather` that records each city it ran for (the side effect a paused call must
    not have); `answer` says what it returns."""

    def __init__(self, answer: Callable[[str], str] | None = None) -> None:
        self.runs: list[str] = []
        say = answer or (lambda city: BEIJING if city == "Beijing" else TOKYO)

        @tool
        def get_weather(city: str) -> str:
            """The weather in a city."""
            self.runs.append(city)
            return say(city)

        self.tool = get_weather


def _counted_hitl_app(model: Recorder, weather: Weather, saver: Any) -> Any:
    hitl = HumanInTheLoopMiddleware(interrupt_on={"get_weather": True})
    return create_agent(
        Scripted(script=model),
        [weather.tool],
        middleware=[hitl],
        state_schema=State,
        checkpointer=saver,
    )


def _assert_abandoned_call_answered(stored: Sequence[BaseMessage], model: Recorder) -> None:
    """[u1, call-1, "not completed", u2, call-2, its result, answer]: one result for the
    abandoned call, before the new message; the model saw that paired history."""
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "AIMessage", "ToolMessage",
        "AIMessage",
    ]
    results = [m for m in stored if isinstance(m, ToolMessage) and m.tool_call_id == "call-1"]
    assert len(results) == 1
    (abandoned,) = results
    assert abandoned.status == "error" and "not completed" in str(abandoned.content)
    assert stored[2] is abandoned and stored[3].id == "u2"
    assert stored[5].tool_call_id == "call-2" and stored[5].content == BEIJING
    assert stored[6].content == f"answer 2: {BEIJING}"
    # The model's call after the new message: the paired history, each message once.
    after_u2 = model.seen[1]
    assert [m.id for m in after_u2] == [m.id for m in stored[:4]]
    threadlog.validate(after_u2, allow_pending_calls=False)


def test_hitl_middleware_new_message_instead_of_resume_answers_the_paused_call_not_completed(
    backend: str,
) -> None:
    """The reviewer never answers; the user writes again. LangChain's model node does not
    repair open calls, so the checkpointer answers the abandoned call before the new
    message; the tool never runs, and the thread continues (resumed in a new saver)."""
    model, weather, cfg = Recorder(), Weather(), _cfg("instead")
    with threadlog.checkpointer(backend) as saver:
        app = _counted_hitl_app(model, weather, saver)
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        paused = app.invoke({"messages": [HumanMessage("again", id="u2")]}, cfg)
    (request,) = paused["__interrupt__"][0].value["action_requests"]
    assert request["args"] == {"city": "Beijing"}  # turn 2's own call pauses in turn
    assert weather.runs == []  # the abandoned call never ran
    with threadlog.checkpointer(backend) as saver:  # the process restarted
        app = _counted_hitl_app(model, weather, saver)
        app.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
        snap = app.get_state(cfg)
        history = list(app.get_state_history(cfg))
    assert snap.next == ()
    _assert_abandoned_call_answered(snap.values["messages"], model)
    assert weather.runs == ["Beijing"]  # call-2 only, once
    for old in history:  # every checkpoint of the thread stays a valid log
        threadlog.validate(old.values.get("messages", []), allow_pending_calls=True)


async def test_hitl_middleware_new_message_instead_of_resume_answers_the_paused_call_async(
    backend: str,
) -> None:
    model, weather, cfg = Recorder(), Weather(), _cfg("instead-async")
    async with threadlog.acheckpointer(backend) as saver:
        app = _counted_hitl_app(model, weather, saver)
        await app.ainvoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        await app.ainvoke({"messages": [HumanMessage("again", id="u2")]}, cfg)
        assert weather.runs == []
        await app.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
        stored = (await app.aget_state(cfg)).values["messages"]
    _assert_abandoned_call_answered(stored, model)
    assert weather.runs == ["Beijing"]


def test_hitl_middleware_tool_result_sent_as_new_input_answers_the_paused_call_itself(
    backend: str,
) -> None:
    """New input that answers the paused call (the user ran the tool elsewhere) is that
    call's result: no "not completed" result is added, and the tool does not run."""
    model, weather, cfg = Recorder(), Weather(), _cfg("answered")
    with threadlog.checkpointer(backend) as saver:
        app = _counted_hitl_app(model, weather, saver)
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        given = ToolMessage("sunny, 25°C", tool_call_id="call-1", id="r1")
        out = app.invoke({"messages": [given]}, cfg)
    stored = out["messages"]
    threadlog.validate(stored, allow_pending_calls=False)
    assert [(type(m).__name__, m.id) for m in stored[2:]] == [
        ("ToolMessage", "r1"), ("AIMessage", stored[3].id)]
    assert stored[3].content == "answer 1: sunny, 25°C"
    assert weather.runs == []


# -- "edit" and "reject" decisions, several calls in one pause, over two turns ----------

CITIES = {1: ("Beijing", "Shanghai"), 2: ("Shanghai", "Beijing")}


class TwoCities:
    """Asks for two cities after each user message (call ids `call-<turn>-<i>`), then
    answers with the results of that request; remembers what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

    def __call__(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self.seen.append(list(messages))
        turn = _turn(messages)
        if isinstance(messages[-1], HumanMessage):
            calls = [
                {"name": "get_weather", "args": {"city": c}, "id": f"call-{turn}-{i}"}
                for i, c in enumerate(CITIES[turn])
            ]
            return AIMessage("", tool_calls=calls)
        tail = [m for m in messages[-2:] if isinstance(m, ToolMessage)]
        return AIMessage(f"answer {turn}: " + " | ".join(str(m.content) for m in tail))


def forecast(city: str) -> str:
    """What `Weather(forecast)` answers in the two-call tests."""
    return f"weather in {city}"


def _two_city_app(
    model: TwoCities, weather: Weather, saver: Any, hitl: HumanInTheLoopMiddleware | None = None
) -> Any:
    return create_agent(
        Scripted(script=model),
        [weather.tool],
        middleware=[hitl or HumanInTheLoopMiddleware(interrupt_on={"get_weather": True})],
        state_schema=State,
        checkpointer=saver,
    )


def _edit(city: str) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": "get_weather", "args": {"city": city}}}


def _results_by_call(stored: Sequence[BaseMessage]) -> dict[str, list[ToolMessage]]:
    out: dict[str, list[ToolMessage]] = {}
    for m in stored:
        if isinstance(m, ToolMessage):
            out.setdefault(m.tool_call_id, []).append(m)
    return out


def _inspect_json(backend: str, thread: str) -> dict[str, Any]:
    import contextlib
    import io
    import json

    from threadlog.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["inspect", "--db", backend, "--thread", thread, "--json"]) == 0
    doc: dict[str, Any] = json.loads(buf.getvalue())
    return doc


def test_hitl_middleware_edit_and_reject_in_one_pause_over_two_turns(backend: str) -> None:
    """Two calls per request, each turn paused and resumed from the database in a new
    saver: turn 1 edits the first call and rejects the second, turn 2 rejects the first
    and edits the second. Only the edited calls run, with the reviewer's arguments; each
    call has exactly one result; the model's next request is a valid, paired history."""
    model, weather, thread = TwoCities(), Weather(forecast), "decisions"
    cfg = _cfg(thread)
    turns = [
        ("u1", [_edit("Tokyo"), {"type": "reject", "message": "not Shanghai"}]),
        ("u2", [{"type": "reject"}, _edit("Paris")]),
    ]
    for uid, decisions in turns:
        with threadlog.checkpointer(backend) as saver:
            paused = _two_city_app(model, weather, saver).invoke(
                {"messages": [HumanMessage(uid, id=uid)]}, cfg
            )
        asked = [r["args"]["city"] for r in paused["__interrupt__"][0].value["action_requests"]]
        assert asked == list(CITIES[len(decisions) and int(uid[1])])
        with threadlog.checkpointer(backend) as saver:  # the process restarted
            app = _two_city_app(model, weather, saver)
            app.invoke(Command(resume={"decisions": decisions}), cfg)
            snap = app.get_state(cfg)
            history = list(app.get_state_history(cfg))
    stored: list[BaseMessage] = snap.values["messages"]
    assert snap.next == ()
    assert weather.runs == ["Tokyo", "Paris"]  # the edited calls, nothing else
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage",
    ] * 2
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)
    by_call = _results_by_call(stored)
    assert sorted(by_call) == ["call-1-0", "call-1-1", "call-2-0", "call-2-1"]
    assert all(len(rs) == 1 for rs in by_call.values())  # exactly one result each
    # Results sit in the order of their calls, right after their request.
    assert [m.tool_call_id for m in stored if isinstance(m, ToolMessage)] == sorted(by_call)
    (t1_edit,), (t1_reject,) = by_call["call-1-0"], by_call["call-1-1"]
    (t2_reject,), (t2_edit,) = by_call["call-2-0"], by_call["call-2-1"]
    for edited, city in ((t1_edit, "Tokyo"), (t2_edit, "Paris")):
        assert edited.status != "error"
        assert f'{{"city": "{city}"}}' in str(edited.content)  # LangChain's notice
        assert str(edited.content).endswith(f"weather in {city}")
    assert t1_reject.status == t2_reject.status == "error"
    assert "with reason: not Shanghai" in str(t1_reject.content)
    assert "The tool was not executed" in str(t2_reject.content)
    # The audit, where threadlog documents it for LangChain >= 1.5: the requests keep the
    # model's own calls (LangChain does not re-send them), the results name what ran.
    requests = [m for m in stored if isinstance(m, AIMessage) and m.tool_calls]
    assert [[c["args"]["city"] for c in r.tool_calls] for r in requests] == [
        list(CITIES[1]), list(CITIES[2])]
    assert all(threadlog.edits_of(r) == [] for r in requests)
    # What the model was sent after each resume: the paired history so far, which
    # langchain-openai turns into a valid Chat Completions payload.
    for sent, upto in ((model.seen[1], 4), (model.seen[3], 9)):
        assert [m.id for m in sent] == [m.id for m in stored[:upto]]
        threadlog.validate(sent, allow_pending_calls=False)
        payload = threadlog.openai_payload(sent)
        asked_ids = [c["id"] for p in payload if p["role"] == "assistant"
                     for c in p.get("tool_calls") or ()]
        answered = [p["tool_call_id"] for p in payload if p["role"] == "tool"]
        assert asked_ids == answered
    for old in history:  # every checkpoint of the thread stays a valid log
        threadlog.validate(old.values.get("messages", []), allow_pending_calls=True)
    doc = _inspect_json(backend, thread)
    assert [(p["call_id"], p["status"]) for p in doc["pairs"]] == [
        ("call-1-0", "success"), ("call-1-1", "error"),
        ("call-2-0", "error"), ("call-2-1", "success"),
    ]


class ResendingHITL(HumanInTheLoopMiddleware):
    """LangChain 1.0 to 1.4's `edit`: the reviewer's call replaces the model's in the
    `AIMessage` itself — set in place on the state's message, which is then returned
    under its id (`last_ai_msg.tool_calls = revised_tool_calls`). langchain 1.5 keeps
    the model's call instead; this subclass restores the older `_process_decision`."""

    @staticmethod
    def _process_decision(  # type: ignore[override]
        decision: Any, tool_call: Any, config: Any
    ) -> tuple[Any, ToolMessage | None]:
        if decision["type"] == "edit":
            action = decision["edited_action"]
            return {**tool_call, "name": action["name"], "args": action["args"]}, None
        return HumanInTheLoopMiddleware._process_decision(decision, tool_call, config)


def test_a_middleware_that_rewrites_the_request_in_place_records_an_edit_event(
    backend: str,
) -> None:
    """The rewritten request is not refused and does not poison the stored thread: the
    log records it as an edit event (`source="resent"`), shows the edited call in place
    with the original in its audit record, the checkpoint before it still reads the
    original, and a new saver reads the thread and runs turn 2."""
    model, weather, cfg = TwoCities(), Weather(forecast), _cfg("in-place")
    hitl = ResendingHITL(interrupt_on={"get_weather": True})
    with threadlog.checkpointer(backend) as saver:
        _two_city_app(model, weather, saver, hitl).invoke(
            {"messages": [HumanMessage("u1", id="u1")]}, cfg
        )
    with threadlog.checkpointer(backend) as saver:
        app = _two_city_app(model, weather, saver, hitl)
        app.invoke(Command(resume={"decisions": [_edit("Tokyo"), {"type": "reject"}]}), cfg)
    with threadlog.checkpointer(backend) as saver:  # read back from the database
        app = _two_city_app(model, weather, saver, hitl)
        stored: list[BaseMessage] = app.get_state(cfg).values["messages"]
        history = list(app.get_state_history(cfg))
        app.invoke({"messages": [HumanMessage("u2", id="u2")]}, cfg)
        app.invoke(Command(resume={"decisions": [{"type": "approve"}] * 2}), cfg)
        final: list[BaseMessage] = app.get_state(cfg).values["messages"]
    # Turn 1 ran the edited call; turn 2's two approved calls run in parallel, in either
    # order: each ran exactly once.
    assert weather.runs[0] == "Tokyo" and sorted(weather.runs[1:]) == ["Beijing", "Shanghai"]
    request = stored[1]
    assert isinstance(request, AIMessage)
    assert [c["args"]["city"] for c in request.tool_calls] == ["Tokyo", "Shanghai"]
    original = threadlog.original_of(request)
    assert isinstance(original, AIMessage)
    assert [c["args"]["city"] for c in original.tool_calls] == ["Beijing", "Shanghai"]
    (edit,) = threadlog.edits_of(request)
    assert edit["source"] == "resent" and "in place" in edit["reason"]
    # The checkpoint the review paused at still reads the original (stored append-only).
    paused = history[-3]
    assert paused.next == ("ResendingHITL.after_model",)
    assert [c["args"]["city"] for c in paused.values["messages"][1].tool_calls] == [
        "Beijing", "Shanghai"]
    by_call = _results_by_call(final)
    assert {k: len(v) for k, v in by_call.items()} == {
        "call-1-0": 1, "call-1-1": 1, "call-2-0": 1, "call-2-1": 1}
    assert by_call["call-1-1"][0].status == "error"
    threadlog.validate(final, allow_pending_calls=False)
    _assert_stored_once(final)
    threadlog.validate(model.seen[1], allow_pending_calls=False)
    sent_request = model.seen[1][1]
    assert isinstance(sent_request, AIMessage)
    assert [c["args"]["city"] for c in sent_request.tool_calls] == ["Tokyo", "Shanghai"]
    doc = _inspect_json(backend, "in-place")
    (shown,) = [e for row in doc["timeline"] for e in row["edited"]]
    assert [c["args"] for c in shown["superseded_calls"]] == [
        {"city": "Beijing"}, {"city": "Shanghai"}]
    assert [c["args"] for c in shown["calls"]] == [{"city": "Tokyo"}, {"city": "Shanghai"}]


def test_a_new_message_while_edit_and_reject_decisions_wait_answers_each_call_once(
    backend: str,
) -> None:
    """The middleware waits for decisions on two calls; the user writes again instead.
    Each paused call gets exactly one "not completed" result before the new message,
    neither tool runs, and the new turn's own pause takes edit and reject decisions."""
    model, weather, cfg = TwoCities(), Weather(forecast), _cfg("instead-multi")
    with threadlog.checkpointer(backend) as saver:
        _two_city_app(model, weather, saver).invoke(
            {"messages": [HumanMessage("u1", id="u1")]}, cfg
        )
    with threadlog.checkpointer(backend) as saver:
        paused = _two_city_app(model, weather, saver).invoke(
            {"messages": [HumanMessage("u2", id="u2")]}, cfg
        )
    assert [r["args"]["city"] for r in paused["__interrupt__"][0].value["action_requests"]] == [
        "Shanghai", "Beijing"]
    assert weather.runs == []
    with threadlog.checkpointer(backend) as saver:
        app = _two_city_app(model, weather, saver)
        app.invoke(Command(resume={"decisions": [_edit("Tokyo"), {"type": "reject"}]}), cfg)
        stored: list[BaseMessage] = app.get_state(cfg).values["messages"]
    assert weather.runs == ["Tokyo"]
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)
    by_call = _results_by_call(stored)
    assert {k: len(v) for k, v in by_call.items()} == {
        "call-1-0": 1, "call-1-1": 1, "call-2-0": 1, "call-2-1": 1}
    for cid in ("call-1-0", "call-1-1"):
        (abandoned,) = by_call[cid]
        assert abandoned.status == "error" and "not completed" in str(abandoned.content)
    assert [m.id for m in stored[:5]] == [
        "u1", stored[1].id, by_call["call-1-0"][0].id, by_call["call-1-1"][0].id, "u2"]
    assert str(by_call["call-2-0"][0].content).endswith("weather in Tokyo")
    assert by_call["call-2-1"][0].status == "error"
    # The model's request after the new message: the paired history, each message once.
    after_u2 = model.seen[1]
    assert [m.id for m in after_u2] == [m.id for m in stored[:5]]
    threadlog.validate(after_u2, allow_pending_calls=False)


def test_per_call_review_a_new_message_instead_then_edit_and_reject_by_interrupt_id(
    backend: str,
) -> None:
    """`interrupt_mode="per_call"`: one interrupt per call, raised inside the tool tasks
    LangChain sends. A new user message while both wait answers each paused call "not
    completed" once (the pause shows only as the checkpoint's pending sends); the next
    turn's two interrupts, resumed by id from the database, run the edited call only and
    answer the rejected one with LangChain's error result."""
    model, weather, cfg = TwoCities(), Weather(forecast), _cfg("per-call")

    def app(saver: Any) -> Any:
        hitl = HumanInTheLoopMiddleware(
            interrupt_on={"get_weather": True}, interrupt_mode="per_call"
        )
        return _two_city_app(model, weather, saver, hitl)

    with threadlog.checkpointer(backend) as saver:
        first = app(saver).invoke({"messages": [HumanMessage("u1", id="u1")]}, cfg)
    assert sorted(i.value["tool_call_id"] for i in first["__interrupt__"]) == [
        "call-1-0", "call-1-1"]
    with threadlog.checkpointer(backend) as saver:
        second = app(saver).invoke({"messages": [HumanMessage("u2", id="u2")]}, cfg)
    ids = {i.value["tool_call_id"]: i.id for i in second["__interrupt__"]}
    assert sorted(ids) == ["call-2-0", "call-2-1"] and weather.runs == []
    with threadlog.checkpointer(backend) as saver:
        agent = app(saver)
        decisions = {ids["call-2-0"]: _edit("Tokyo"), ids["call-2-1"]: {"type": "reject"}}
        agent.invoke(Command(resume=decisions), cfg)
        stored: list[BaseMessage] = agent.get_state(cfg).values["messages"]
    assert weather.runs == ["Tokyo"]
    threadlog.validate(stored, allow_pending_calls=False)
    _assert_stored_once(stored)
    by_call = _results_by_call(stored)
    assert {k: len(v) for k, v in by_call.items()} == {
        "call-1-0": 1, "call-1-1": 1, "call-2-0": 1, "call-2-1": 1}
    for cid in ("call-1-0", "call-1-1"):
        assert "not completed" in str(by_call[cid][0].content)
    assert [m.id for m in stored[:5]] == [
        "u1", stored[1].id, by_call["call-1-0"][0].id, by_call["call-1-1"][0].id, "u2"]
    assert str(by_call["call-2-0"][0].content).endswith("weather in Tokyo")
    assert by_call["call-2-1"][0].status == "error"
    for sent in model.seen[1:]:  # every request after the abandoned pause is paired
        threadlog.validate(sent, allow_pending_calls=False)
