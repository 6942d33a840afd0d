"""`OfflineChatModel`: a deterministic LangChain chat model for the demo and the tests.

Contract:

* It is a real `BaseChatModel` (invoke, stream, batch, async, callbacks, `bind_tools`,
  `with_structured_output`), not a test double; the same input always gives the same
  output, ids included, and nothing touches the network.
* With a bound tool that takes a `city` argument, a user question that names cities
  (English or Chinese, e.g. "北京今天适合带伞吗？", "Beijing and Shanghai") gets one tool
  call per city, all in one `AIMessage` (parallel calls), in the order they were named.
  The `city` argument is the name as the user wrote it.
* Once the turn's tool results are in the history, it answers from them (in Chinese when
  the question is Chinese), naming failed calls as failures.
* A request whose system text asks to *summarize* gets a short extractive summary of the
  user lines of the transcript; anything else gets a deterministic plain answer.
* Every reply reports approximate `usage_metadata` (`count_tokens_approximately`), and
  `stream` yields text in small chunks and each tool call as its own chunk.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.utils.utils import secret_from_env
from pydantic import ConfigDict, Field, SecretStr

__all__ = ["CITIES", "OfflineChatModel", "find_cities"]

# Canonical English name -> Chinese name. Small on purpose: the demo's world.
CITIES: dict[str, str] = {
    "Beijing": "北京",
    "Shanghai": "上海",
    "Guangzhou": "广州",
    "Shenzhen": "深圳",
    "Hangzhou": "杭州",
    "Chengdu": "成都",
    "Nanjing": "南京",
    "Wuhan": "武汉",
    "Xi'an": "西安",
    "Chongqing": "重庆",
    "Tianjin": "天津",
    "Suzhou": "苏州",
    "Hong Kong": "香港",
    "Tokyo": "东京",
    "Seoul": "首尔",
    "Singapore": "新加坡",
    "London": "伦敦",
    "Paris": "巴黎",
    "Berlin": "柏林",
    "New York": "纽约",
    "San Francisco": "旧金山",
    "Sydney": "悉尼",
}

_CJK = re.compile(r"[\u4e00-\u9fff]")
_UMBRELLA = re.compile(r"伞|雨|umbrella|rain", re.IGNORECASE)
_SUMMARIZE = re.compile(r"summar|摘要|总结", re.IGNORECASE)
_SUMMARY_HEAD = "Earlier the user asked about: "


def find_cities(text: str) -> list[tuple[str, str]]:
    """Cities named in `text` as (English name, name as written), in order, once each."""
    hits: list[tuple[int, str, str]] = []
    for english, chinese in CITIES.items():
        found: list[tuple[int, str]] = []
        i = text.find(chinese)
        if i >= 0:
            found.append((i, chinese))
        m = re.search(rf"(?<![A-Za-z]){re.escape(english)}(?![A-Za-z])", text, re.IGNORECASE)
        if m:
            found.append((m.start(), m.group(0)))
        if found:
            pos, written = min(found)
            hits.append((pos, english, written))
    return [(english, written) for _, english, written in sorted(hits)]


def _city_tool(tools: Sequence[dict[str, Any]]) -> str | None:
    for tool in tools:
        fn = tool.get("function", tool)
        props = (fn.get("parameters") or {}).get("properties") or {}
        if "city" in props:
            return str(fn.get("name"))
    return None


def _seed(messages: Sequence[BaseMessage]) -> str:
    blob = json.dumps(
        [[m.type, m.id, m.content] for m in messages], ensure_ascii=False, default=repr
    )
    return hashlib.blake2b(blob.encode("utf-8"), digest_size=12).hexdigest()


class OfflineChatModel(BaseChatModel):
    """A deterministic, offline chat model (module doc): with a `city` tool bound,
    `invoke("Beijing and Shanghai: umbrella today?").tool_calls` holds two calls."""

    model: str = Field(default="offline-weather", alias="model_name")
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    stop: list[str] | None = Field(default=None, alias="stop_sequences")
    max_retries: int = 0
    api_key: SecretStr | None = Field(
        default_factory=secret_from_env("THREADLOG_OFFLINE_API_KEY", default=None)
    )
    """Unused (nothing is sent anywhere); accepted like any provider's key."""
    streaming: bool = False
    chunk_chars: int = 8
    """Size of the text pieces `stream` yields."""

    model_config = ConfigDict(populate_by_name=True)

    @property
    def _llm_type(self) -> str:
        return "offline-chat"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop or self.stop, **kwargs)
        params["ls_provider"] = "offline"
        return params

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: Literal["function_calling", "json_mode", "json_schema"] = "function_calling",
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | Any]:
        # Every method maps to tool calling here; there is no JSON mode offline.
        return super().with_structured_output(schema, include_raw=include_raw, **kwargs)

    def _reply(self, messages: list[BaseMessage], tools: Sequence[dict[str, Any]]) -> AIMessage:
        seed = _seed(messages)
        last_user = max(
            (i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1
        )
        question = messages[last_user].text if last_user >= 0 else ""
        after = messages[last_user + 1 :]
        results = [m for m in after if isinstance(m, ToolMessage)]
        tool_name = _city_tool(tools)
        calls: list[ToolCall] = []
        if results:
            text = self._answer(question, after)
        elif tool_name and (cities := find_cities(question)):
            calls = [
                ToolCall(
                    name=tool_name,
                    args={"city": written},
                    id=f"call_{seed[:12]}_{i}",
                    type="tool_call",
                )
                for i, (_, written) in enumerate(cities)
            ]
            text = ""
        else:
            text = self._plain(messages, question, tools)
        ai = AIMessage(
            content=text,
            tool_calls=calls,
            id=f"offline-{seed}",
            response_metadata={
                "model_name": self.model,
                "model_provider": "offline",
                "finish_reason": "tool_calls" if calls else "stop",
            },
        )
        inp, out = count_tokens_approximately(messages), count_tokens_approximately([ai])
        ai.usage_metadata = UsageMetadata(
            input_tokens=inp, output_tokens=out, total_tokens=inp + out
        )
        return ai

    @staticmethod
    def _answer(question: str, turn: Sequence[BaseMessage]) -> str:
        chinese = bool(_CJK.search(question))
        args: dict[str, str] = {}
        for m in turn:
            if isinstance(m, AIMessage):
                for call in m.tool_calls:
                    args[call["id"] or ""] = str(call["args"].get("city", call["name"]))
        parts: list[str] = []
        umbrella: list[str] = []
        for m in turn:
            if not isinstance(m, ToolMessage):
                continue
            what = args.get(m.tool_call_id, m.tool_call_id)
            body = " ".join(m.text.split())
            colon = "：" if chinese else ": "
            if m.status == "error":
                failed = f"查询失败（{body}）" if chinese else f"the lookup failed ({body})"
                parts.append(f"{what}{colon}{failed}")
                continue
            parts.append(f"{what}{colon}{body}")
            if re.search(r"雨|rain|shower", body, re.IGNORECASE):
                umbrella.append(what)
        sep = "；" if chinese else "; "
        text = sep.join(parts)
        if _UMBRELLA.search(question):
            if chinese:
                text += "。" + (f"{'、'.join(umbrella)}建议带伞。" if umbrella else "不用带伞。")
            else:
                text += ". " + (
                    f"Take an umbrella in {', '.join(umbrella)}."
                    if umbrella
                    else "No umbrella needed."
                )
        elif text:
            text += "。" if chinese else "."
        return text

    @staticmethod
    def _plain(messages: Sequence[BaseMessage], question: str, tools: Sequence[Any]) -> str:
        system = " ".join(m.text for m in messages if isinstance(m, SystemMessage))
        if _SUMMARIZE.search(system):  # earlier summary items plus the transcript's user lines
            items: list[str] = []
            for ln in question.splitlines():
                if ln.startswith(_SUMMARY_HEAD):
                    items += [x.strip() for x in ln[len(_SUMMARY_HEAD) :].split(";")]
                elif ln.lower().startswith(("user:", "human:")):
                    items.append(ln.split(":", 1)[1].strip())
            shown = "; ".join([x for x in items if x][-8:])
            return _SUMMARY_HEAD + (shown or " ".join(question.split())[:200])
        if tools:
            if _CJK.search(question):
                return "我可以查询城市天气，请告诉我城市名，例如北京或上海。"
            return "I can look up the weather; name a city, e.g. Beijing or Shanghai."
        return f"(offline) {' '.join(question.split())}" if question else "(offline)"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        ai = self._reply(messages, kwargs.get("tools") or ())
        return ChatResult(generations=[ChatGeneration(message=ai)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        ai = self._reply(messages, kwargs.get("tools") or ())
        text, step = str(ai.content), max(1, self.chunk_chars)
        parts = [
            AIMessageChunk(content=text[i : i + step], id=ai.id) for i in range(0, len(text), step)
        ]
        for index, call in enumerate(ai.tool_calls):
            args = json.dumps(call["args"], ensure_ascii=False)
            part = tool_call_chunk(name=call["name"], args=args, id=call["id"], index=index)
            parts.append(AIMessageChunk(content="", id=ai.id, tool_call_chunks=[part]))
        for message in parts:
            chunk = ChatGenerationChunk(message=message)
            if run_manager:
                run_manager.on_llm_new_token(str(message.content), chunk=chunk)
            yield chunk
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                id=ai.id,
                usage_metadata=ai.usage_metadata,
                response_metadata=ai.response_metadata,
                chunk_position="last",
            )
        )
