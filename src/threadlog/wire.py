"""The serialization boundary: exactly which parts of a logged message reach a provider.

Contract (the seeds' rule: never send the whole message object):

* `to_wire(messages, profile)` returns fresh LangChain messages holding only what the
  provider needs: role, content, tool calls (ids, names, args), `tool_call_id`, the
  result's `status`, and `name` only where the profile allows it *and* it matches the
  profile's pattern (an agent name with spaces never reaches OpenAI). Never sent: our
  ids, `response_metadata`, `usage_metadata`, `additional_kwargs` (except the developer
  marker), tool `artifact`s, audit metadata, any other bookkeeping.
* Developer messages stay developer where the profile has the role (`native`) and become
  system text otherwise (`as-system`). For profiles whose system text is a top-level
  request field, the leading system messages are folded into one.
* `to_wire` is a pure transform; whether the provider would *accept* the history is
  `threadlog.validate`'s question, asked by `ModelNode` before anything is sent.
* `openai_payload(messages, profile)` is the JSON `messages` list that langchain-openai
  would send for them (its own `_convert_message_to_dict` / Responses input builder; we
  do not rewrite OpenAI's format). `profile_for(model)` infers a model's profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from threadlog._upstream import ls_provider
from threadlog.messages import DEVELOPER_KWARG, coerce_message, is_developer, role_of
from threadlog.profiles import Profile, get_profile

__all__ = ["openai_payload", "profile_for", "to_wire"]


def _name(message: BaseMessage, profile: Profile) -> dict[str, Any]:
    return {"name": message.name} if profile.allows_name(message.name) else {}


def _one(message: BaseMessage, profile: Profile) -> BaseMessage:
    if isinstance(message, HumanMessage):
        return HumanMessage(content=message.content, **_name(message, profile))
    if isinstance(message, SystemMessage):
        developer = is_developer(message) and profile.developer == "native"
        return SystemMessage(
            content=message.content,
            additional_kwargs={DEVELOPER_KWARG: "developer"} if developer else {},
            **_name(message, profile),
        )
    if isinstance(message, AIMessage):
        return AIMessage(
            content=message.content,
            tool_calls=[
                {"name": c["name"], "args": c["args"], "id": c["id"], "type": "tool_call"}
                for c in message.tool_calls
            ],
            invalid_tool_calls=[
                {
                    "name": c.get("name"),
                    "args": c.get("args"),
                    "id": c.get("id"),
                    "error": None,
                    "type": "invalid_tool_call",
                }
                for c in message.invalid_tool_calls
            ],
            **_name(message, profile),
        )
    if isinstance(message, ToolMessage):
        # A tool result's `name` is the tool's name, not a speaker: kept for providers
        # that put results in user blocks (Gemini's functionResponse needs it).
        extra = {"name": message.name} if profile.tool_results == "user-block" else {}
        return ToolMessage(
            content=message.content,
            tool_call_id=message.tool_call_id,
            status=message.status,
            **extra,
        )
    role_of(message)  # raises a clear InvalidMessageError for other types
    raise AssertionError("unreachable")


def to_wire(
    messages: Sequence[Any],
    profile: str | Profile = "openai-chat",
    *,
    cache: dict[tuple[str, str], BaseMessage] | None = None,
) -> list[BaseMessage]:
    """The provider-bound copies of `messages` (see the module docstring).

    `cache` (optional, owned by the caller) maps (message id, profile) to its copy:
    a log message never changes under its id, so a node reuses last turn's copies
    instead of rebuilding the whole context every call.
    """
    prof = get_profile(profile)
    out: list[BaseMessage] = []
    for i, raw in enumerate(messages):
        mid = getattr(raw, "id", None)
        key = (mid, prof.name) if cache is not None and isinstance(mid, str) else None
        wire = cache.get(key) if key is not None and cache is not None else None
        if wire is None:
            wire = _one(coerce_message(raw, position=i), prof)
            if key is not None and cache is not None:
                cache[key] = wire
        out.append(wire)
    if prof.system == "top-level":
        lead = 0
        while lead < len(out) and isinstance(out[lead], SystemMessage):
            lead += 1
        if lead > 1:
            texts = [m.text if isinstance(m.content, list) else str(m.content)
                     for m in out[:lead]]
            out[:lead] = [SystemMessage(content="\n\n".join(texts))]
    return out


def openai_payload(
    messages: Sequence[Any], profile: str | Profile = "openai-chat"
) -> list[dict[str, Any]]:
    """The OpenAI JSON for `messages` after `to_wire`, built by langchain-openai itself.

    Chat Completions profiles give the `messages` list; `openai-responses` gives the
    Responses API `input` items.
    """
    from langchain_openai.chat_models.base import (
        _construct_responses_api_input,
        _convert_message_to_dict,
    )

    prof = get_profile(profile)
    wire = to_wire(messages, prof)
    if prof.name == "openai-responses":
        return list(_construct_responses_api_input(wire))
    return [_convert_message_to_dict(m) for m in wire]


_PROVIDERS = {
    "anthropic": "anthropic",
    "google_genai": "gemini",
    "google_vertexai": "gemini",
    "google": "gemini",
}


def profile_for(model: Any) -> Profile:
    """The profile of a chat model (unwrapping `bind`/`bind_tools`), by its provider.

    `ChatOpenAI` is `openai-responses` when it uses the Responses API, `openai-chat` for
    api.openai.com (or no base_url) and `openai-compatible` for any other server.
    Unknown models get `openai-chat`, the strictest about `name`.
    """
    while hasattr(model, "bound"):
        model = model.bound
    provider = ls_provider(model)  # any object can be passed; None then
    if provider in _PROVIDERS:
        return get_profile(_PROVIDERS[provider])
    if provider == "openai":
        if getattr(model, "use_responses_api", None):
            return get_profile("openai-responses")
        base = getattr(model, "openai_api_base", None)
        if base and "api.openai.com" not in str(base):
            return get_profile("openai-compatible")
    return get_profile("openai-chat")
