"""Provider profiles (message *structure* rules) and server profiles (the *wire* rules of one
OpenAI-compatible server), as data; each server row says where its rules come from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["PROFILES", "SERVER_PROFILES", "Profile", "get_profile"]


@dataclass(frozen=True)
class Profile:
    """What one provider API accepts, as data."""

    name: str
    description: str
    system: Literal["messages", "top-level"]
    """Where system text goes: in the message list, or a separate request field."""
    developer: Literal["native", "as-system"]
    """`native`: sent with role developer; `as-system`: folded into system text."""
    system_anywhere: bool
    """Whether system/developer messages may appear after the first conversation message."""
    tool_results: Literal["tool-role", "user-block"]
    """`tool-role`: one `tool` message per result; `user-block`: blocks inside a user turn."""
    name_pattern: str | None
    """Regex a `name` must match to be sent; None: `name` is never sent."""
    first_turn_user: bool
    """Whether the first non-system message must be a user message."""

    # Wire rules of one server (defaults: what OpenAI itself does).
    tool_call_content: Literal["null", "empty"] = "null"
    """`content` of an assistant message with only tool calls: JSON null, or "" (rewritten)."""
    tool_results_as_text: bool = False
    """Also restate tool results as one user message (the template drops `tool` messages)."""
    tool_choice: str | None = None
    """The `tool_choice` sent on a turn's first model call with tools bound; None: not sent."""
    named_for_required: bool = False
    """No `"required"`: a single tool is sent by name, else `"auto"`."""
    stream_tool_calls: bool = True
    """Whether a streamed request with tools works; False: sent without streaming."""
    usage_in_stream: bool = True
    """Whether the server reports token usage in streams (`stream_options`)."""
    parallel_calls: bool = True
    """Whether one assistant message may carry several calls."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    """The name the server reads the output-token limit under."""
    call_id_pattern: str | None = None
    """Regex every call id sent must match (others mapped per request); None: any."""
    reuses_call_ids: bool = False
    """The server reuses call ids across a thread (documents it: `ModelNode` re-keys)."""
    base_url_hints: tuple[str, ...] = ()
    """Substrings of a base URL that identify the server (`infer_profile`)."""
    owned_by: tuple[str, ...] = ()
    """`owned_by` values of the server's `/v1/models` answer that identify it."""
    source: str = ""
    """Where the rules come from: a recorded session here, or the server's own docs."""

    def allows_name(self, name: str | None) -> bool:
        return bool(name and self.name_pattern and re.fullmatch(self.name_pattern, name))


# The message structure of OpenAI's Chat Completions as most servers speak it: no `name`,
# developer text folded into system text (support varies).
_CHAT: dict[str, Any] = {
    "system": "messages",
    "developer": "as-system",
    "system_anywhere": True,
    "tool_results": "tool-role",
    "name_pattern": None,
    "first_turn_user": False,
}
# System text apart, tool results as blocks of a user turn, a user turn first.
_BLOCKS: dict[str, Any] = {
    "system": "top-level",
    "developer": "as-system",
    "system_anywhere": False,
    "tool_results": "user-block",
    "name_pattern": None,
    "first_turn_user": True,
}


def _profile(name: str, description: str, base: dict[str, Any], **rules: Any) -> Profile:
    return Profile(name=name, description=description, **{**base, **rules})


def _server(name: str, description: str, **rules: Any) -> Profile:
    return _profile(name, description, _CHAT, **rules)


SERVER_PROFILES: tuple[Profile, ...] = (
    _server(
        "openai",
        "OpenAI's own Chat Completions endpoint",
        developer="native",
        name_pattern=r"[a-zA-Z0-9_-]{1,64}",
        base_url_hints=("api.openai.com",),
        owned_by=("openai", "system", "openai-internal"),
        source="OpenAI API reference",
    ),
    _server(
        "llama-cpp-python",
        "llama-cpp-python's server (`python -m llama_cpp.server`, chat_format "
        "chatml-function-calling)",
        tool_call_content="empty",
        tool_results_as_text=True,
        tool_choice="required",
        named_for_required=True,
        stream_tool_calls=False,
        usage_in_stream=False,
        parallel_calls=False,
        max_tokens_field="max_tokens",
        owned_by=("me",),
        source="recorded here: llama-cpp-python 0.3.36 answers HTTP 500 to content null, "
        "ignores tools without tool_choice, asserts on 'required', sends an empty stream "
        "for tool_choice 'auto' with stream, repeats a streamed call's name in every chunk "
        "(langchain joins them: get_weatherget_weather…), leaves tool messages out of its prompt, "
        "HTML-escapes prompt text, sends no usage in streams, ignores max_completion_tokens",
    ),
    _server(
        "llama-server",
        "llama.cpp's llama-server (--jinja), also embedded by xllamacpp",
        base_url_hints=(":8080",),
        owned_by=("llamacpp",),
        source="recorded here: llama.cpp server build 11549 (xllamacpp 2026.10.11549) "
        "accepts content null and tool_choice auto/required (HTTP 200) and reports usage in "
        "streams; tools reach the model only if the chat template renders them (--jinja); "
        "'required' still lets the model write text first, so SmolLM2-135M never called",
    ),
    _server(
        "ollama",
        "Ollama's OpenAI-compatible endpoint (/v1)",
        base_url_hints=(":11434",),
        owned_by=("library", "ollama"),
        source="Ollama's OpenAI compatibility docs (not run here)",
    ),
    _server(
        "vllm",
        "vLLM's OpenAI-compatible server (tools need --enable-auto-tool-choice and a "
        "--tool-call-parser)",
        owned_by=("vllm",),
        source="vLLM tool-calling docs (not run here); Mistral models there need 9-"
        "character alphanumeric call ids: use a profile with call_id_pattern",
    ),
    _server(
        "lmstudio",
        "LM Studio's local server",
        base_url_hints=(":1234",),
        owned_by=("organization_owner",),
        source="LM Studio OpenAI compatibility docs (not run here)",
    ),
    _server(
        "deepseek",
        "DeepSeek API (api.deepseek.com)",
        base_url_hints=("api.deepseek.com",),
        owned_by=("deepseek",),
        source="DeepSeek API docs (not run here); reasoning_content is never sent back",
    ),
    _server(
        "qwen",
        "Qwen on Alibaba Cloud DashScope (compatible-mode)",
        tool_call_content="empty",
        parallel_calls=False,
        base_url_hints=("dashscope",),
        source="DashScope compatible-mode docs (not run here): examples send content '' "
        "with tool calls; parallel calls only with parallel_tool_calls=true",
    ),
)


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        _profile(
            "openai-chat",
            "OpenAI Chat Completions",
            _CHAT,
            developer="native",
            name_pattern=r"[a-zA-Z0-9_-]{1,64}",
        ),
        _profile(
            "openai-responses",
            "OpenAI Responses API (instructions + input items)",
            _CHAT,
            system="top-level",
            developer="native",
        ),
        _profile("anthropic", "Anthropic Messages API", _BLOCKS),
        _profile("gemini", "Google Gemini generateContent", _BLOCKS),
        _profile(
            "openai-compatible",
            "OpenAI-compatible servers: the common subset (a server profile below fits a "
            "known server)",
            _CHAT,
        ),
        *SERVER_PROFILES,
    )
}


def get_profile(profile: str | Profile) -> Profile:
    if isinstance(profile, Profile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise ValueError(
            f"unknown provider profile {profile!r}; known: {', '.join(PROFILES)}"
        ) from None
