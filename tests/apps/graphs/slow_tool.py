"""A weather agent whose tool takes its time for one city, served by the server tests.

`slow_weather(city)` first writes `tool-started-<city>` in the server's working folder, so
a test knows the run is inside the tool call; then 武汉 takes a minute (long enough to be
cancelled there), 西安 two seconds (long enough to queue a run behind it), every other
city no time at all. The model is the offline one (one call per city named).
"""

import asyncio
from pathlib import Path

from langchain_core.tools import StructuredTool

from threadlog import OfflineChatModel, create_agent

SECONDS = {"武汉": 60.0, "西安": 2.0}


def _started(city: str) -> None:
    Path(f"tool-started-{city}").write_text("started")


async def _aslow_weather(city: str) -> str:
    _started(city)
    await asyncio.sleep(SECONDS.get(city, 0.0))
    return f"{city}：晴，降水概率 0%"


slow_weather = StructuredTool.from_function(
    coroutine=_aslow_weather,
    name="slow_weather",
    description="Today's weather for one city.",
)

graph = create_agent(OfflineChatModel(), [slow_weather], name="slow")
