"""The weather agent against a REAL OpenAI-compatible server, when one is given.

Set `THREADLOG_TEST_OPENAI_BASE_URL` (e.g. `http://127.0.0.1:8391/v1`; `scripts/
local_model.sh` starts one and sets it), optionally `THREADLOG_TEST_OPENAI_MODEL` and
`THREADLOG_TEST_PROFILE` (default: detected from the server's `/v1/models`). Without a
server these tests are reported as skipped with that reason: a real model server is not
part of the offline suite. With one, nothing is mocked: `ChatOpenAI` over HTTP, the
server's own model, the SQLite checkpointer, two turns on one thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

import threadlog
from threadlog import create_agent, validate
from threadlog.examples.weather import SYSTEM_PROMPT, get_weather
from threadlog.models.servers import detect_profile

BASE_URL = os.environ.get("THREADLOG_TEST_OPENAI_BASE_URL")

pytestmark = pytest.mark.skipif(
    not BASE_URL,
    reason="no real model server: set THREADLOG_TEST_OPENAI_BASE_URL "
    "(scripts/local_model.sh starts one)",
)


def paired_calls(messages: list[Any]) -> list[tuple[AIMessage, ToolMessage]]:
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    return [
        (m, results[c["id"]])
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"] in results
    ]


def test_two_turns_with_a_real_server_keep_a_valid_paired_log(tmp_path: Path) -> None:
    assert BASE_URL is not None
    profile = os.environ.get("THREADLOG_TEST_PROFILE") or detect_profile(BASE_URL).name
    model = ChatOpenAI(
        model=os.environ.get("THREADLOG_TEST_OPENAI_MODEL", "local"),
        base_url=BASE_URL,
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),  # type: ignore[arg-type]
        max_retries=0,
        timeout=600,
        max_tokens=256,  # a small model may ramble; the test needs the loop, not prose
        temperature=0,
    )
    db = f"sqlite:///{tmp_path / 'real.db'}"
    with threadlog.checkpointer(db) as saver:
        app = create_agent(
            model,
            [get_weather],
            system_prompt=SYSTEM_PROMPT,
            checkpointer=saver,
            profile=profile,
            max_model_calls=4,
        )
        config: Any = {"configurable": {"thread_id": "real"}}
        first = app.invoke(
            {"messages": [HumanMessage("What is the weather in Beijing?")]}, config
        )["messages"]
        pairs = paired_calls(first)
        assert pairs, f"no paired tool call in turn 1 (profile {profile}): {first!r}"
        assert isinstance(first[-1], AIMessage) and not first[-1].tool_calls
        second = app.invoke({"messages": [HumanMessage("And in Shanghai?")]}, config)[
            "messages"
        ]
    validate(second, profile, allow_pending_calls=False)
    assert second[: len(first)] == first  # the thread continued; nothing rewritten
    assert isinstance(second[-1], AIMessage) and not second[-1].tool_calls
    ids = [c["id"] for m in second if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids))
