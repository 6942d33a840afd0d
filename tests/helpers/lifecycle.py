"""The agent the thread-lifecycle tests prune, copy and roll back (tests/cli/test_cli_prune.py,
tests/storage/test_lifecycle_kills.py): `create_agent` with the offline model, one weather
tool and a context policy, so stored threads carry calls, results and compaction events."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool

import threadlog

QUESTIONS = ["Beijing?", "Shanghai and Chengdu?", "Paris?"]


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"{city}: sunny"


def lifecycle_agent(saver: Any) -> Any:
    return threadlog.create_agent(
        threadlog.OfflineChatModel(),
        [get_weather],
        checkpointer=saver,
        context=threadlog.ContextPolicy(max_turns=2),
    )
