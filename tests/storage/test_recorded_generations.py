"""A model call that makes several generations (`n>1`) is recorded whole: the first is the
reply `invoke` returns and the thread stores (`reply`), the others are recorded with their
content (`other_replies`), shown by `inspect --calls` and its JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph

import threadlog
from threadlog.cli import main


class TwoCandidates(BaseChatModel):
    """Answers with two generations, as a provider asked for `n=2` does."""

    @property
    def _llm_type(self) -> str:
        return "two-candidates"

    def _generate(self, messages: Sequence[BaseMessage], *a: Any, **k: Any) -> ChatResult:
        return ChatResult(generations=[
            ChatGeneration(message=AIMessage("first candidate")),
            ChatGeneration(message=AIMessage("second candidate \u202e")),
        ])


def _graph(saver: Any) -> Any:
    model = TwoCandidates()

    def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage("Be brief."), *state["messages"]])]}

    b = StateGraph(MessagesState)
    b.add_node("respond", respond)
    b.add_edge(START, "respond")
    b.add_edge("respond", END)
    return b.compile(checkpointer=saver)


def test_every_generation_of_a_call_is_recorded_the_first_as_its_stored_reply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'n2.sqlite'}"
    with threadlog.checkpointer(url) as saver:
        out = _graph(saver).invoke(
            {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}}
        )
    stored = out["messages"][-1]
    assert stored.content == "first candidate"  # what invoke returned and the thread stored
    capsys.readouterr()
    assert main(["inspect", "--db", url, "--thread", "t", "--calls", "--json"]) == 0
    raw = capsys.readouterr().out
    assert "\u202e" not in raw  # escaped in JSON as everywhere
    (call,) = json.loads(raw)
    assert call["reply_id"] == stored.id and call["reply"]["content"] == "first candidate"
    assert [(o["role"], o["content"]) for o in call["other_replies"]] == [
        ("assistant", "second candidate \u202e")
    ]
    assert main(["inspect", "--db", url, "--thread", "t", "--calls"]) == 0
    text = capsys.readouterr().out
    assert "→ generation 2: assistant: second candidate \\u202e" in text
