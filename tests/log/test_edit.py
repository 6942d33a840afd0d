"""Human review edits as events (`threadlog.Edit`, issue 14): the original request stays in
the stored log and its audit record, the edit is a later write, everything that reads the
state (tools, the model, `to_wire`, the inspector) sees the edited call once, in place, and
pairing follows the edit. Graph tests run on real SQLite and Postgres (`backend`), each
resumed in a new saver (from the database)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command
from typing_extensions import TypedDict

import threadlog
from tests.helpers.multi_agent import Scripted
from tests.helpers.review import review_app
from threadlog import Edit, EditError, MessageLog, edits_of, original_of
from threadlog.cli import main
from threadlog.examples.weather import get_weather

BEIJING = "light rain, 70% chance of precipitation, 22°C"
TOKYO = "showers, 55% chance of precipitation, 19°C"
CFG: Any = {"configurable": {"thread_id": "review"}}


class Recorder:
    """Asks for Beijing's weather after each user message, then answers with the last
    result; remembers every request it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

    def __call__(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self.seen.append(list(messages))
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "get_weather", "args": {"city": "Beijing"}, "id": "call-1"}
            return AIMessage("", id="ai-1", tool_calls=[call])
        return AIMessage(f"answer: {messages[-1].content}", id=f"ai-{len(self.seen)}")


def edited(message: AIMessage, **args: Any) -> AIMessage:
    calls = [{**message.tool_calls[0], "args": args}]
    return message.model_copy(update={"tool_calls": calls})


def pause(url: str, model: Recorder) -> AIMessage:
    with threadlog.checkpointer(url) as saver:
        app = review_app(model, saver)
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, CFG)
        request = app.get_state(CFG).values["messages"][-1]
    assert isinstance(request, AIMessage)
    return request


def test_update_state_edit_then_resume_runs_the_edited_call_and_keeps_the_original(
    backend: str,
) -> None:
    model = Recorder()
    request = pause(backend, model)
    with threadlog.checkpointer(backend) as saver:
        app = review_app(model, saver)
        app.update_state(CFG, {"messages": [Edit(edited(request, city="Tokyo"), by="alice")]})
    with threadlog.checkpointer(backend) as saver:  # resumed from the database
        app = review_app(model, saver)
        app.invoke(None, CFG)
        stored = app.get_state(CFG).values["messages"]

    assert [m.id for m in stored] == ["u1", "ai-1", stored[2].id, stored[3].id]
    ai, result = stored[1], stored[2]
    assert ai.tool_calls[0]["args"] == {"city": "Tokyo"}  # what everyone reads
    assert isinstance(result, ToolMessage) and result.tool_call_id == "call-1"
    assert result.content == TOKYO  # the tool ran with the edited arguments
    assert original_of(ai).tool_calls[0]["args"] == {"city": "Beijing"}  # the audit record
    (edit,) = edits_of(ai)
    assert (edit["by"], edit["source"]) == ("alice", "edit") and edit["at"]
    # The model's next request holds the edited call once, at the original's place.
    # (The model gets `to_wire` copies: no ids, none of threadlog's bookkeeping.)
    sent = model.seen[-1]
    assert [type(m).__name__ for m in sent] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert isinstance(sent[1], AIMessage)
    assert [c["args"] for c in sent[1].tool_calls] == [{"city": "Tokyo"}]
    assert "threadlog_edit" not in sent[1].response_metadata
    assert sent[2].content == TOKYO
    assert stored[3].content == f"answer: {TOKYO}"
    threadlog.validate(stored, allow_pending_calls=False)


def test_approval_edit_through_command_resume_records_the_same_event(backend: str) -> None:
    model = Recorder()
    with threadlog.checkpointer(backend) as saver:
        app = threadlog.create_agent(
            Scripted(script=model), [get_weather], requires_approval=["get_weather"],
            checkpointer=saver,
        )
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, CFG)
    with threadlog.checkpointer(backend) as saver:
        app = threadlog.create_agent(
            Scripted(script=model), [get_weather], requires_approval=["get_weather"],
            checkpointer=saver,
        )
        decision = {"action": "edit", "args": {"city": "Tokyo"}, "by": "bob", "reason": "typo"}
        app.invoke(Command(resume=decision), CFG)
        stored = app.get_state(CFG).values["messages"]
        history = list(app.get_state_history(CFG))
    ai = stored[1]
    assert ai.tool_calls[0]["args"] == {"city": "Tokyo"} and stored[2].content == TOKYO
    assert original_of(ai).tool_calls[0]["args"] == {"city": "Beijing"}
    assert [(e["source"], e["by"], e["reason"]) for e in edits_of(ai)] == [
        ("approval", "bob", "typo")
    ]
    # Stored append-only: the checkpoint before the tool step still reads the original.
    paused = next(s for s in history if s.next == ("tools",))
    assert paused.values["messages"][1].tool_calls[0]["args"] == {"city": "Beijing"}
    assert not edits_of(paused.values["messages"][1])
    assert model.seen[-1][1].tool_calls[0]["args"] == {"city": "Tokyo"}
    threadlog.validate(stored, allow_pending_calls=False)


def test_an_edit_after_the_result_is_refused_naming_the_call_and_nothing_is_stored(
    sqlite_url: str,
) -> None:
    model = Recorder()
    request = pause(sqlite_url, model)
    with threadlog.checkpointer(sqlite_url) as saver:
        app = review_app(model, saver)
        app.invoke(None, CFG)  # the call runs with its own arguments
        before = app.get_state(CFG)
        with pytest.raises(EditError, match=r"message 'ai-1'.*call 'call-1'") as refused:
            app.update_state(CFG, {"messages": [Edit(edited(request, city="Tokyo"))]})
        assert app.get_state(CFG).config == before.config  # nothing stored
    assert refused.value.message_id == "ai-1"
    assert "append a new message" in str(refused.value)


def test_a_fork_before_the_edit_does_not_see_it(backend: str) -> None:
    model = Recorder()
    request = pause(backend, model)
    with threadlog.checkpointer(backend) as saver:
        app = review_app(model, saver)
        paused = app.get_state(CFG)
        app.update_state(CFG, {"messages": [Edit(edited(request, city="Tokyo"))]})
        app.invoke(None, CFG)
    with threadlog.checkpointer(backend) as saver:
        app = review_app(model, saver)
        main_head = app.get_state(CFG).config
        old = app.get_state(paused.config)  # time travel: the checkpoint before the edit
        assert old.values["messages"][1].tool_calls[0]["args"] == {"city": "Beijing"}
        assert not edits_of(old.values["messages"][1])
        fork = app.update_state(paused.config, {"messages": [Edit(edited(request, city="Paris"))]})
        forked = app.get_state(fork).values["messages"][1]
        head = app.get_state(main_head).values["messages"][1]
    # The fork has its own edit only; the main branch keeps Tokyo.
    assert forked.tool_calls[0]["args"] == {"city": "Paris"}
    assert [e["tool_calls"][0]["args"] for e in edits_of(forked)] == [{"city": "Paris"}]
    assert head.tool_calls[0]["args"] == {"city": "Tokyo"}


def test_the_inspector_shows_the_original_as_superseded_in_text_and_json(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = Recorder()
    request = pause(backend, model)
    with threadlog.checkpointer(backend) as saver:
        app = review_app(model, saver)
        app.update_state(CFG, {"messages": [Edit(edited(request, city="Tokyo"), by="alice")]})
        app.invoke(None, CFG)

    assert main(["inspect", "--db", backend, "--thread", "review", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (edit,) = [e for row in doc["timeline"] for e in row["edited"]]
    assert edit["message_id"] == "ai-1" and edit["by"] == "alice"
    assert [c["args"] for c in edit["superseded_calls"]] == [{"city": "Beijing"}]
    assert [c["args"] for c in edit["calls"]] == [{"city": "Tokyo"}]
    assert [p["call_id"] for p in doc["pairs"]] == ["call-1"]

    assert main(["inspect", "--db", backend, "--thread", "review"]) == 0
    text = capsys.readouterr().out
    assert "✎ edit of ai-1 by alice" in text
    assert "get_weather(Tokyo) supersede get_weather(Beijing)" in text


class SnapshotState(TypedDict):
    messages: Annotated[list[AnyMessage], threadlog.MessageLogChannel(snapshot_frequency=1)]


class SaysCall1Again(Recorder):
    """A server that numbers calls per reply: turn 2's request says `call-1` again (under
    a new message id)."""

    def __call__(self, messages: Sequence[BaseMessage]) -> AIMessage:
        ai = super().__call__(messages)
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        return ai.model_copy(update={"id": f"ai-t{turn}"}) if ai.tool_calls and turn > 1 else ai


def test_the_audit_survives_a_snapshot_and_pairing_follows_a_renamed_call(
    sqlite_url: str,
) -> None:
    """Every checkpoint a full snapshot: the edited message carries its own audit record,
    so a thread read back from a snapshot still knows the edit and refuses a result for
    the call it renamed; open-call repair answers the renamed call; a later reply that
    says the renamed call's old id is re-keyed (the audit record keeps that id)."""
    model = SaysCall1Again()
    with threadlog.checkpointer(sqlite_url) as saver:
        app = review_app(model, saver, SnapshotState)
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, CFG)
        request = app.get_state(CFG).values["messages"][-1]
        renamed = request.model_copy(
            update={"tool_calls": [{**request.tool_calls[0], "id": "call-1b"}]}
        )
        app.update_state(CFG, {"messages": [Edit(renamed)]})
    with threadlog.checkpointer(sqlite_url) as saver:
        app = review_app(model, saver, SnapshotState)
        with pytest.raises(threadlog.ToolPairingError, match="superseded"):
            app.update_state(
                CFG, {"messages": [ToolMessage("x", tool_call_id="call-1", id="late")]}
            )
        # A new user message instead of running the tool: the repair answers call-1b.
        app.invoke({"messages": [HumanMessage("never mind", id="u2")]}, CFG)
        stored = app.get_state(CFG).values["messages"]
    assert [c["id"] for c in original_of(stored[1]).tool_calls] == ["call-1"]
    repaired = [m for m in stored if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in repaired] == ["call-1b"]
    assert repaired[0].status == "error"
    assert [m.id for m in stored] == ["u1", "ai-1", repaired[0].id, "u2", "ai-t2"]
    (rekeyed,) = stored[4].tool_calls
    assert rekeyed["id"] not in ("call-1", "call-1b")
    assert stored[4].response_metadata["threadlog_call_ids_rekeyed"] == {rekeyed["id"]: "call-1"}
    threadlog.validate(stored, allow_pending_calls=True)


class FailsAfterTool(Recorder):
    """Raises once on the model call after a tool result: the endpoint went away."""

    failed = False

    def __call__(self, messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage) and not self.failed:
            self.failed = True
            raise RuntimeError("model endpoint went away")
        return super().__call__(messages)


def test_a_crash_after_the_edited_call_ran_resumes_with_its_result(backend: str) -> None:
    """The edit renamed the call; the tool ran, then the model failed. A new saver resumes
    the turn: the stored result pairs with the renamed call and the tool does not re-run."""
    runs: list[str] = []

    def weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    def app_for(model: Recorder, saver: Any) -> Any:
        return review_app(model, saver, tools=[weather])

    model = FailsAfterTool()
    with threadlog.checkpointer(backend) as saver:
        app = app_for(model, saver)
        app.invoke({"messages": [HumanMessage("hi", id="u1")]}, CFG)
        request = app.get_state(CFG).values["messages"][-1]
        call = {**request.tool_calls[0], "name": "weather", "args": {"city": "Oslo"}}
        renamed = request.model_copy(update={"tool_calls": [{**call, "id": "call-oslo"}]})
        app.update_state(CFG, {"messages": [Edit(renamed)]})
        with pytest.raises(RuntimeError, match="went away"):
            app.invoke(None, CFG)
    with threadlog.checkpointer(backend) as saver:
        app = app_for(model, saver)
        app.invoke(None, CFG)
        stored = app.get_state(CFG).values["messages"]
    assert runs == ["Oslo"]  # the tool ran once
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"
    ]
    assert stored[2].tool_call_id == "call-oslo" and stored[2].content == "sunny in Oslo"
    assert stored[3].content == "answer: sunny in Oslo"
    threadlog.validate(stored, allow_pending_calls=False)


# -- the rules, on the log itself ---------------------------------------------------

REQUEST = AIMessage(
    "",
    id="a1",
    tool_calls=[
        {"name": "f", "args": {"x": 1}, "id": "c1"},
        {"name": "f", "args": {"x": 2}, "id": "c2"},
    ],
)


def review_log() -> MessageLog:
    log = MessageLog()
    log.extend([HumanMessage("hi", id="u1"), REQUEST])
    return log


def with_args(*args: int, ids: Sequence[str] = ("c1", "c2")) -> AIMessage:
    calls = [{"name": "f", "args": {"x": a}, "id": i} for a, i in zip(args, ids, strict=True)]
    return REQUEST.model_copy(update={"tool_calls": calls})


def test_resending_the_request_with_new_args_says_how_to_edit_instead() -> None:
    log = review_log()
    with pytest.raises(threadlog.ConflictingIdError) as refused:
        log.extend([with_args(1, 3)])
    assert refused.value.message_id == "a1"
    assert "threadlog.Edit(AIMessage(id='a1'" in str(refused.value)
    assert log.get("a1") is REQUEST


def test_an_edit_of_an_unknown_id_or_a_user_message_is_a_clear_error() -> None:
    log = review_log()
    with pytest.raises(EditError, match="'nope', which is not in the log"):
        log.extend([Edit(REQUEST.model_copy(update={"id": "nope"}))])
    with pytest.raises(EditError, match="only an AIMessage can be edited"):
        Edit(HumanMessage("x", id="u1"))  # type: ignore[arg-type]
    with pytest.raises(EditError, match="user message 'u1'"):
        log.extend([{**Edit(REQUEST), "message": AIMessage("", id="u1")}])
    assert [m.id for m in log.messages] == ["u1", "a1"] and log.get("a1") is REQUEST


def test_replaying_an_edit_is_a_no_op_and_a_later_edit_wins() -> None:
    log = review_log()
    first = Edit(with_args(1, 3))
    log.extend([first])
    version = log.version
    log.extend([first, Edit(with_args(1, 3))])  # the same event; the same content
    assert log.version == version and len(edits_of(log.get("a1"))) == 1  # type: ignore[arg-type]
    log.extend([REQUEST, with_args(1, 3)])  # copies of either version: replays
    log.extend([Edit(with_args(1, 4))])
    now = log.get("a1")
    assert isinstance(now, AIMessage)
    assert [c["args"] for c in now.tool_calls] == [{"x": 1}, {"x": 4}]
    assert len(edits_of(now)) == 2
    assert [c["args"] for c in original_of(now).tool_calls] == [{"x": 1}, {"x": 2}]
    assert [m.id for m in log.messages] == ["u1", "a1"]  # in place, once


def test_a_partly_answered_request_keeps_its_answered_call() -> None:
    log = review_log()
    log.extend([ToolMessage("one", tool_call_id="c1", id="t1")])
    with pytest.raises(EditError, match=r"would change call 'c1'.*already has a result \('t1'\)"):
        log.extend([Edit(with_args(9, 2))])
    log.extend([Edit(with_args(1, 5, ids=("c1", "c3")))])  # the open call renamed: fine
    with pytest.raises(threadlog.ToolPairingError, match=r"'c2'.*superseded"):
        log.extend([ToolMessage("two", tool_call_id="c2", id="t2")])
    log.extend([ToolMessage("three", tool_call_id="c3", id="t3")])
    assert [m.id for m in log.messages] == ["u1", "a1", "t1", "t3"]
    with pytest.raises(EditError, match=r"not under review.*'c1'"):
        log.extend([Edit(with_args(1, 6, ids=("c1", "c3")))])


def test_a_log_rebuilt_from_its_messages_or_an_older_version_knows_the_edits() -> None:
    log = review_log()
    before = log.version
    log.extend([Edit(with_args(1, 3, ids=("c1", "c9")))])
    rebuilt = MessageLog(log.messages)  # a snapshot's read
    with pytest.raises(threadlog.ToolPairingError, match="superseded"):
        rebuilt.extend([ToolMessage("two", tool_call_id="c2", id="t2")])
    old = log.at(before)
    assert old.get("a1") == REQUEST and not edits_of(old.get("a1"))  # type: ignore[arg-type]
    old.extend([ToolMessage("two", tool_call_id="c2", id="t2")])  # c2 is open there
    assert threadlog.append_messages([HumanMessage("hi", id="u1"), REQUEST], Edit(with_args(1, 3)))[
        1
    ].tool_calls[1]["args"] == {"x": 3}


def test_an_edit_written_as_plain_data_reads_like_one_written_as_an_object() -> None:
    """What a JSON client (LangGraph Server) sends or reads back: the message as a dict,
    no id or time: the log derives a stable id, so replaying that write is a no-op."""
    log = review_log()
    raw = {"type": "threadlog.edit", "message": with_args(1, 3).model_dump()}
    log.extend([raw])
    version = log.version
    log.extend([dict(raw)])
    assert log.version == version
    (edit,) = edits_of(log.get("a1"))  # type: ignore[arg-type]
    assert edit["id"].startswith("tl-edit-") and edit["source"] == "edit"
    assert [c["args"] for c in log.get("a1").tool_calls] == [{"x": 1}, {"x": 3}]  # type: ignore[union-attr]


def test_a_reviewer_can_fix_a_malformed_call_under_its_id() -> None:
    """A call whose arguments did not parse (`invalid_tool_calls`) is open too: an edit may
    turn it into a valid call with the same id, which its result then answers."""
    bad = AIMessage(
        "",
        id="a2",
        invalid_tool_calls=[
            {
                "name": "f",
                "args": "{x: 1",
                "id": "c7",
                "error": "bad JSON",
                "type": "invalid_tool_call",
            }
        ],
    )
    log = review_log()
    log.extend([ToolMessage(n, tool_call_id=f"c{n}", id=f"t{n}") for n in "12"])
    log.extend([bad])
    fixed = bad.model_copy(
        update={
            "invalid_tool_calls": [],
            "tool_calls": [{"name": "f", "args": {"x": 1}, "id": "c7"}],
        }
    )
    log.extend([Edit(fixed), ToolMessage("ok", tool_call_id="c7", id="t7")])
    now = log.get("a2")
    assert isinstance(now, AIMessage) and not now.invalid_tool_calls
    assert [m.id for m in log.messages][-2:] == ["a2", "t7"] and not log.open_calls()
    assert original_of(now).invalid_tool_calls[0]["args"] == "{x: 1"  # type: ignore[attr-defined]
    threadlog.validate(log.messages, allow_pending_calls=False)


def test_a_request_changed_in_place_and_written_again_is_recorded_as_an_edit() -> None:
    """A node that sets `ai.tool_calls` on the log's own object and returns it (LangChain
    1.0 to 1.4's HITL edit): not a replay, not a conflict, but the edit it amounts to —
    live, in a dry run (which changes nothing), in a log taken at an older version, and
    when the stored write is replayed onto the stored original; all the same event."""
    request = with_args(1, 2)
    log = MessageLog()
    log.extend([HumanMessage("hi", id="u1"), request])
    request.tool_calls = [{**request.tool_calls[0], "args": {"x": 9}}, request.tool_calls[1]]

    log.extend_writes([[request]], dry_run=True)
    assert log.version == 2 and not edits_of(log.messages[1])
    older = log.at(2)
    log.extend([request, ToolMessage("r2", tool_call_id="c2", id="t2")])
    ai = log.get("a1")
    assert isinstance(ai, AIMessage) and ai is not request
    assert [c["args"] for c in ai.tool_calls] == [{"x": 9}, {"x": 2}]
    assert [c["args"] for c in original_of(ai).tool_calls] == [{"x": 1}, {"x": 2}]  # type: ignore[attr-defined]
    (edit,) = edits_of(ai)
    assert edit["source"] == "resent" and edit["by"] is None
    # Pairing follows the edit; the log at the version before it reads the original.
    assert [c.get("id") for _, c in log.open_calls()] == ["c1"]
    assert [c["args"] for c in log.messages_at(2)[1].tool_calls] == [{"x": 1}, {"x": 2}]  # type: ignore[attr-defined]

    # A log taken before the edit (another reader of the same history) gets the same
    # object again: the same event.
    older.extend([request])
    assert [e["id"] for e in edits_of(older.messages[1])] == [edit["id"]]
    # Read back: the stored original, then the stored write (which holds the change).
    stored = MessageLog([HumanMessage("hi", id="u1"), with_args(1, 2)])
    stored.extend_writes([[request.model_copy()]], stored=True)
    assert [e["id"] for e in edits_of(stored.messages[1])] == [edit["id"]]
    threadlog.validate(log.messages)


def test_a_changed_copy_is_still_refused_after_an_in_place_edit_was_taken() -> None:
    """Only the change the log took as an edit is recognised again: a different copy
    under the id is refused as before."""
    request = with_args(1, 2)
    log = MessageLog()
    log.extend([HumanMessage("hi", id="u1"), request])
    request.tool_calls = [{**request.tool_calls[0], "args": {"x": 9}}, request.tool_calls[1]]
    log.extend([request])
    with pytest.raises(threadlog.ConflictingIdError):
        log.extend([with_args(5, 2)])


def test_a_stored_in_place_change_after_the_results_reads_back_as_logged() -> None:
    """A request changed in place after its calls ran is nothing the log noticed live; if
    the stored write holds the change, reading the thread back keeps the request as first
    stored (the edit rules refuse changing answered calls) instead of failing."""
    answered = [ToolMessage("r1", tool_call_id="c1", id="t1"),
                ToolMessage("r2", tool_call_id="c2", id="t2")]
    stored = MessageLog([HumanMessage("hi", id="u1"), with_args(1, 2), *answered])
    stored.extend_writes([[with_args(9, 2)]], stored=True)
    ai = stored.get("a1")
    assert isinstance(ai, AIMessage) and [c["args"] for c in ai.tool_calls] == [{"x": 1}, {"x": 2}]
    assert not edits_of(ai) and len(stored) == 4
    with pytest.raises(EditError, match="not under review"):  # written live: refused
        stored.extend([Edit(with_args(9, 2))])
