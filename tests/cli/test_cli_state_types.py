"""Reading a database whose state holds the app's own types: `--allow-type module:Class`
and `THREADLOG_ALLOW_TYPES` rebuild them; without them each such value reads as a named
placeholder (`threadlog.UndecodedValue`) and the rest of the thread reads."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import pytest

import threadlog
from threadlog.cli import main
from threadlog.cli.types import allowing
from threadlog.inspect import thread

APP = "tl_cli_profile_app"  # the app's own module, written to a folder of its own
APP_SOURCE = textwrap.dedent(
    """
    from typing import TypedDict
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, StateGraph
    from pydantic import BaseModel
    import threadlog

    class Profile(BaseModel):
        name: str

    class State(TypedDict):
        messages: threadlog.Messages
        profile: Profile | None

    def remember(state):
        return {"messages": [AIMessage("noted", id="ai-1")], "profile": Profile(name="Ada")}

    def build(saver):
        builder = StateGraph(State)
        builder.add_node("remember", remember)
        builder.add_edge(START, "remember")
        return threadlog.allow_state_types(builder.compile(checkpointer=saver))
    """
)


class LooseState(TypedDict):
    """How a reader who has not the app's classes types the state: `profile` is anything."""

    messages: threadlog.Messages
    profile: Any


@pytest.fixture
def app_db(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / f"{APP}.py").write_text(APP_SOURCE)
    monkeypatch.setattr(sys, "path", [str(folder), *sys.path])
    monkeypatch.delitem(sys.modules, APP, raising=False)
    module = __import__(APP)
    with threadlog.checkpointer(backend) as saver:
        graph = module.build(saver)
        graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
    # The reader runs from the app's folder, with nothing of the app on its path or loaded.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(folder)])
    monkeypatch.delitem(sys.modules, APP)
    monkeypatch.chdir(folder)
    monkeypatch.delenv("THREADLOG_ALLOW_TYPES", raising=False)
    return backend.removeprefix("sqlite:///")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_without_a_flag_the_thread_reads_and_the_value_is_a_named_placeholder(
    app_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["threads"], ["inspect", "--thread", "t1"], ["export", "--thread", "t1"]):
        code, out, err = cli(capsys, *command, "--db", app_db)
        assert code == 0, err
        assert "noted" in out or "hi" in out
    t = thread(app_db, "t1", schema=LooseState)
    profile = t.records[-1].values["profile"]
    assert profile == threadlog.UndecodedValue(f"{APP}.Profile")
    assert [m.content for m in t.records[-1].messages] == ["hi", "noted"]
    first, last = t.records[0], t.records[-1]
    assert f"<not decoded: {APP}.Profile>" in str(t.diff(first.checkpoint_id, last.checkpoint_id))


def test_allow_type_rebuilds_the_apps_class(
    app_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flag = ["--allow-type", f"{APP}:Profile"]
    code, _, err = cli(capsys, "inspect", "--db", app_db, "--thread", "t1", *flag)
    assert code == 0, err
    with allowing(argparse.Namespace(allow_type=[f"{APP}:Profile"])):
        profile = thread(app_db, "t1", schema=LooseState).records[-1].values["profile"]
    assert type(profile).__module__ == APP and profile.name == "Ada"


def test_the_environment_variable_rebuilds_it_too(
    app_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOG_ALLOW_TYPES", f"os:PathLike, {APP}:Profile")
    code, _, err = cli(capsys, "export", "--db", app_db, "--thread", "t1")
    assert code == 0, err
    with allowing(argparse.Namespace(allow_type=[])):
        profile = thread(app_db, "t1", schema=LooseState).records[-1].values["profile"]
    assert profile.name == "Ada"


def test_a_bad_type_name_is_one_line_naming_the_flag_or_the_variable(
    app_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cli(capsys, "threads", "--db", app_db, "--allow-type", "Profile")
    assert code == 2 and "--allow-type" in err and "module:Class" in err, err
    code, _, err = cli(capsys, "threads", "--db", app_db, "--allow-type", "no_such_mod_tl:X")
    assert code == 2 and "--allow-type no_such_mod_tl:X: cannot import" in err, err
    code, _, err = cli(capsys, "threads", "--db", app_db, "--allow-type", f"{APP}:Nope")
    assert code == 2 and "has no class 'Nope'" in err, err
    monkeypatch.setenv("THREADLOG_ALLOW_TYPES", "a.b.C")
    code, _, err = cli(capsys, "threads", "--db", app_db)
    assert code == 2 and "THREADLOG_ALLOW_TYPES" in err, err
    assert "allowed_types" not in err and "not imported" not in err


MESSAGE_APP = "tl_cli_message_app"
MESSAGE_SOURCE = textwrap.dedent(
    """
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, StateGraph
    import threadlog

    class TicketMessage(AIMessage):
        '''An app's own message class: a reply carrying a ticket.'''

    def reply(state):
        call = {"name": "open_ticket", "args": {}, "id": "call-t1"}
        return {"messages": [TicketMessage("filed", id="ai-t1", tool_calls=[call])]}

    def build(saver):
        builder = StateGraph(threadlog.MessagesState)
        builder.add_node("reply", reply)
        builder.add_edge(START, "reply")
        return builder.compile(checkpointer=saver)
    """
)


def test_a_message_of_the_apps_own_class_reads_as_a_named_placeholder_message(
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = tmp_path / "msgapp"
    folder.mkdir()
    (folder / f"{MESSAGE_APP}.py").write_text(MESSAGE_SOURCE)
    monkeypatch.setattr(sys, "path", [str(folder), *sys.path])
    module = __import__(MESSAGE_APP)
    with threadlog.checkpointer(sqlite_url, allowed_types=[module.TicketMessage]) as saver:
        module.build(saver).invoke(
            {"messages": [("user", "file it")]}, {"configurable": {"thread_id": "t1"}}
        )
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(folder)])
    monkeypatch.delitem(sys.modules, MESSAGE_APP)
    monkeypatch.chdir(folder)
    monkeypatch.delenv("THREADLOG_ALLOW_TYPES", raising=False)
    db = sqlite_url.removeprefix("sqlite:///")

    caplog.clear()
    code, out, err = cli(capsys, "inspect", "--db", db, "--thread", "t1")
    assert code == 0, err
    assert f"<not decoded: {MESSAGE_APP}.TicketMessage>" in out
    # LangGraph's own "blocked" warning advises a Python argument: not in a reader's output.
    assert not [r for r in caplog.records if "Blocked deserial" in r.getMessage()]
    shown = thread(db, "t1").head.messages[-1]
    assert shown.type == "ai" and shown.id == "ai-t1"
    assert shown.additional_kwargs == {"threadlog_undecoded": f"{MESSAGE_APP}.TicketMessage"}
    assert [c["id"] for c in shown.tool_calls] == ["call-t1"]  # the log still pairs

    code, out, err = cli(
        capsys, "export", "--db", db, "--thread", "t1", "--allow-type", f"{MESSAGE_APP}:Ticket"
        "Message"
    )
    assert code == 0, err
    assert '"content": "filed"' in out and "not decoded" not in out


def _profile_at_head(app_db: str) -> Any:
    with allowing(argparse.Namespace(allow_type=[f"{APP}:Profile"])):
        return thread(app_db, "t1", schema=LooseState).records[-1].values["profile"]


def test_prune_rebuilds_the_apps_class_by_flag_or_variable_and_keeps_it(
    app_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cli(capsys, "prune", "--db", app_db, "--keep-latest", "--dry-run")
    assert code == 2 and "--allow-type" in err and err.count("\n") == 1, err
    flag = ["--allow-type", f"{APP}:Profile"]
    code, out, err = cli(capsys, "prune", "--db", app_db, "--keep-latest", "--dry-run", *flag)
    assert code == 0 and "would prune 1 thread(s)" in out, err
    monkeypatch.setenv("THREADLOG_ALLOW_TYPES", f"{APP}:Profile")
    code, out, err = cli(capsys, "prune", "--db", app_db, "--keep-latest")
    assert code == 0 and "pruned 1 thread(s)" in out, err
    profile = _profile_at_head(app_db)
    assert type(profile).__module__ == APP and profile.name == "Ada"


@pytest.mark.parametrize("command", ["check", "replay", "prune"])
def test_every_command_that_reads_stored_values_takes_allow_type(
    app_db: str, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    rest = {
        "check": [],
        "replay": ["--thread", "t1", "--graph", "m:g"],
        "prune": ["--keep-latest"],
    }[command]
    code, _, err = cli(capsys, command, "--db", app_db, "--allow-type", "nomodule_tl:X", *rest)
    assert code == 2 and "--allow-type nomodule_tl:X: cannot import" in err, err


def test_check_reads_the_apps_class_with_the_flag(
    app_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "check", "--db", app_db, "--allow-type", f"{APP}:Profile")
    assert code == 0 and "1 clean, 0 with problems" in out, (out, err)
