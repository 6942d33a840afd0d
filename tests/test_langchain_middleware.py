"""LangChain's own `create_agent` with middleware, its state's `messages` on threadlog's log.

`langchain.agents.create_agent(model, tools, middleware=[...], state_schema=State,
checkpointer=threadlog.checkpointer(url))` with `State.messages: threadlog.Messages`:
LangChain merges the middleware's state schemas with `state_schema` last, so threadlog's
channel wins the `messages` key. Each test runs on SQLite and Postgres (`backend`).

* two turns with a tool call each: the log stays valid, nothing stored twice;
* `HumanInTheLoopMiddleware`: interrupt, resume (approve, edit, reject) from the database in a new
  saver; LangChain records an edit in its own state key and prefixes the result with a
  note, so the log keeps the model's original call — nothing is rewritten;
* `SummarizationMiddleware` deletes history with `RemoveMessage(REMOVE_ALL_MESSAGES)`:
  refused with `AppendOnlyError`, the stored log untouched; what to use instead,
  `threadlog.ContextPolicy(summarizer=...)`, is tested on threadlog's `create_agent`;
* a turn whose model failed after its tool ran resumes from the database (`invoke(None)`
  in a new saver) reusing the stored result;
* `HumanInTheLoopMiddleware` and a new user message instead of the resume (sync and
  async): the paused call gets one explicit "not completed" result before the new message
  (the tool never runs), the model sees a paired history, the thread continues; a tool
  result sent as the new input answers the call itself;
* the documented human-review edit path: `update_state` re-sending the `AIMessage` with
  new args is refused with an error naming `threadlog.Edit`; the approval `edit` decision
  records that edit event end to end (`tests/test_edit.py` has the `update_state` edit).
"""

from __future__ import annotations

from collections.abc import Sequence
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
from tests.helpers_multi_agent import Scripted
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


def test_summarization_middleware_is_refused_with_append_only_error(backend: str) -> None:
    """Its `RemoveMessage(REMOVE_ALL_MESSAGES)` would delete the log: the step fails with
    a clear error and the stored log is exactly what it was before that step."""
    summarize = SummarizationMiddleware(
        model=Scripted(script=lambda _: AIMessage("a summary")),
        trigger=("messages", 3),
        keep=("messages", 2),
    )
    cfg = _cfg("summarize")
    with threadlog.checkpointer(backend) as saver:
        app = create_agent(
            Scripted(script=Recorder()),
            [get_weather],
            middleware=[summarize],
            state_schema=State,
            checkpointer=saver,
        )
        # Turn 1 reaches 3 messages after the tool result; the next model step summarizes.
        with pytest.raises(threadlog.AppendOnlyError) as refused:
            app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        stored = app.get_state(cfg).values["messages"]
    assert "REMOVE_ALL_MESSAGES" in str(refused.value)
    assert "threadlog.ContextPolicy" in str(refused.value)
    assert [type(m).__name__ for m in stored] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert stored[2].content == BEIJING
    assert all("summary" not in str(m.content) for m in stored)
    threadlog.validate(stored, allow_pending_calls=False)


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


def test_update_state_resend_is_refused_and_the_approval_edit_records_an_edit_event(
    backend: str,
) -> None:
    """Issue 14 item 7: re-sending the `AIMessage` id with new args through `update_state`
    is refused (`ConflictingIdError` saying to write `threadlog.Edit`, nothing stored);
    resuming with the approval `edit` decision records that edit event: the log shows the
    edited call in place, the audit record keeps the original."""
    model = Recorder()
    cfg = _cfg("review")
    with threadlog.checkpointer(backend) as saver:
        app = threadlog.create_agent(
            Scripted(script=model),
            [get_weather],
            requires_approval=["get_weather"],
            checkpointer=saver,
        )
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, cfg)
        before = app.get_state(cfg)
        call = before.values["messages"][-1]
        edited = call.model_copy(
            update={"tool_calls": [{**call.tool_calls[0], "args": {"city": "Tokyo"}}]}
        )
        with pytest.raises(threadlog.ConflictingIdError, match=r"threadlog\.Edit\(AIMessage"):
            app.update_state(cfg, {"messages": [edited]})
        assert app.get_state(cfg).config == before.config  # nothing stored

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
    """`get_weather` that counts its runs (the side effect a paused call must not have)."""

    def __init__(self) -> None:
        self.runs: list[str] = []

        @tool
        def get_weather(city: str) -> str:
            """The weather in a city."""
            self.runs.append(city)
            return BEIJING if city == "Beijing" else TOKYO

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
