"""The serialization boundary: exactly which parts of a logged message reach a provider.

Contract (never send the whole message object):

* `to_wire(messages, profile)` returns fresh LangChain messages holding only role,
  content, tool calls (ids, names, args), `tool_call_id`, the result's `status`, and
  `name` only where the profile allows it and it matches the profile's pattern. Never
  sent: our ids, `response_metadata`, `usage_metadata`, `additional_kwargs` (except the
  developer marker), tool `artifact`s, audit metadata.
* Developer messages stay developer where the profile has the role (`native`) and become
  system text otherwise (`as-system`); where system text is a top-level request field,
  the leading system messages are folded into one.
* `to_wire` is a pure transform; whether the provider would accept the history is
  `threadlog.validate`'s question.
* `openai_payload(messages, profile)` is the JSON langchain-openai would send.
  `profile_for(model)` infers a model's profile; `infer_profile(base_url, models)` a
  server's, from its URL or its `/v1/models` answer.
* `rewrite_payload(body, profile)` applies a server profile's wire rules to a Chat
  Completions body where langchain-openai cannot: `""` for null content beside calls,
  call ids mapped to the profile's format (calls and results alike), tool results as user
  text where the server's template drops them, `"required"` as the single tool's name, no
  `stream_options` where no usage is reported, `max_tokens` where
  `max_completion_tokens` is ignored. `with_profile(model, profile)` returns a copy of a
  langchain-openai model whose every request body passes through it."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call

from threadlog._upstream import ls_provider, openai_message_json, with_request_payload_rewrite
from threadlog.log.edits import cache_key
from threadlog.log.messages import (
    DEVELOPER_KWARG,
    coerce_message,
    is_developer,
    is_stored_form,
    role_of,
)
from threadlog.providers.profiles import SERVER_PROFILES, Profile, get_profile

__all__ = [
    "infer_profile",
    "needs_rewrite",
    "openai_payload",
    "profile_for",
    "rewrite_payload",
    "to_wire",
    "with_profile",
]


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
                tool_call(name=c["name"], args=c["args"], id=c["id"]) for c in message.tool_calls
            ],
            invalid_tool_calls=[
                invalid_tool_call(name=c.get("name"), args=c.get("args"), id=c.get("id"))
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
    checked: bool = False,
) -> list[BaseMessage]:
    """The provider-bound copies of `messages` (module doc).

    `cache` (the caller's) maps (`cache_key`, profile) to a copy. `checked=True`: messages of
    the exact stored types with an id come from a log, and are not checked again."""
    prof = get_profile(profile)
    out: list[BaseMessage] = []
    for i, raw in enumerate(messages):
        mid = cache_key(raw) if isinstance(raw, BaseMessage) else None
        key = (mid, prof.name) if cache is not None and isinstance(mid, str) else None
        wire = cache.get(key) if key is not None and cache is not None else None
        if wire is None:
            stored = checked and is_stored_form(raw)
            wire = _one(raw if stored else coerce_message(raw, position=i), prof)
            if key is not None and cache is not None:
                cache[key] = wire
        out.append(wire)
    if prof.system == "top-level":
        lead = 0
        while lead < len(out) and isinstance(out[lead], SystemMessage):
            lead += 1
        if lead > 1:
            out[:lead] = [SystemMessage(content="\n\n".join(m.text for m in out[:lead]))]
    return out


def openai_payload(
    messages: Sequence[Any], profile: str | Profile = "openai-chat"
) -> list[dict[str, Any]]:
    """The OpenAI JSON for `messages` after `to_wire`, built by langchain-openai."""
    prof = get_profile(profile)
    responses_api = prof.name == "openai-responses"
    return openai_message_json(to_wire(messages, prof), responses_api=responses_api)


_PROVIDERS = {
    "anthropic": "anthropic",
    "google_genai": "gemini",
    "google_vertexai": "gemini",
    "google": "gemini",
}


def profile_for(model: Any) -> Profile:
    """The profile of a chat model (unwrapping `bind`/`bind_tools`): `openai-responses` for
    the Responses API, `openai-chat` for api.openai.com, `openai-compatible` for any other
    server; unknown models get `openai-chat`, the strictest about `name`."""
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
            return infer_profile(str(base))
    return get_profile("openai-chat")


def infer_profile(base_url: str, models: Any = None) -> Profile:
    """The server profile for an OpenAI-compatible `base_url`: by the `owned_by` of its
    `/v1/models` answer (`models`, the parsed JSON, when given), else by the URL
    (`Profile.base_url_hints`), else `openai-compatible`."""
    data = models.get("data") if isinstance(models, dict) else None
    owners = {m.get("owned_by") for m in data or [] if isinstance(m, dict)}
    for prof in SERVER_PROFILES:
        if owners & set(prof.owned_by):
            return prof
    for prof in SERVER_PROFILES:
        if any(hint in base_url for hint in prof.base_url_hints):
            return prof
    return get_profile("openai-compatible")


def needs_rewrite(profile: str | Profile) -> bool:
    """Whether `rewrite_payload` can change a body for `profile` (else it is skipped)."""
    p = get_profile(profile)
    return (
        p.tool_call_content != "null"
        or p.tool_results_as_text
        or p.named_for_required
        or not p.usage_in_stream
        or p.call_id_pattern is not None
        or p.max_tokens_field != "max_completion_tokens"
    )


def rewrite_payload(body: dict[str, Any], profile: str | Profile) -> dict[str, Any]:
    """A copy of `body` (Chat Completions) with `profile`'s wire rules applied."""
    prof = get_profile(profile)
    raw = body.get("messages")
    if not isinstance(raw, list):
        return body
    out = dict(body)
    messages = [dict(m) if isinstance(m, dict) else m for m in raw]
    if prof.call_id_pattern is not None:
        _map_call_ids(messages, prof.call_id_pattern)
    if prof.tool_call_content == "empty":
        for m in messages:
            if m.get("role") == "assistant" and m.get("tool_calls") and m.get("content") is None:
                m["content"] = ""
    if prof.tool_results_as_text:
        messages = _results_as_text(messages)
    out["messages"] = messages
    if prof.named_for_required and out.get("tool_choice") == "required":
        tools = out.get("tools") or []
        out["tool_choice"] = (
            {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
            if len(tools) == 1
            else "auto"
        )
    if not prof.usage_in_stream:
        out.pop("stream_options", None)
    if prof.max_tokens_field == "max_tokens" and "max_completion_tokens" in out:
        out["max_tokens"] = out.pop("max_completion_tokens")
    return out


def _map_call_ids(messages: list[dict[str, Any]], pattern: str) -> None:
    mapping: dict[str, str] = {}

    def stand_in(cid: str) -> str:
        if re.fullmatch(pattern, cid):
            return cid
        if cid not in mapping:
            digest = hashlib.blake2b(cid.encode(), digest_size=16).hexdigest()
            for candidate in (f"call_{digest[:24]}", digest[:9], digest[:24], digest):
                if re.fullmatch(pattern, candidate):
                    mapping[cid] = candidate
                    break
            else:
                raise ValueError(f"no stand-in call id matches the profile's {pattern!r}")
        return mapping[cid]

    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            m["tool_calls"] = [{**c, "id": stand_in(str(c.get("id")))} for c in m["tool_calls"]]
        elif m.get("role") == "tool":
            m["tool_call_id"] = stand_in(str(m.get("tool_call_id")))


def _results_as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """After each run of `tool` messages, one user message restating them."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if not run:
            return
        said = [
            (names.get(str(m.get("tool_call_id")), "tool"), _text(m.get("content"))) for m in run
        ]
        if len(said) == 1:
            text = f"The {said[0][0]} tool returned: {said[0][1]}\nUse it to answer my question."
        else:
            lines = "\n".join(f"- {name}: {result}" for name, result in said)
            text = f"The tools returned:\n{lines}\nUse them to answer my question."
        out.append({"role": "user", "content": text})
        run.clear()

    for m in messages:
        if m.get("role") == "tool":
            out.append(m)
            run.append(m)
            continue
        flush()
        for c in m.get("tool_calls") or []:
            names[str(c.get("id"))] = str((c.get("function") or {}).get("name", "tool"))
        out.append(m)
    flush()
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content)
    return json.dumps(content, ensure_ascii=False)


def with_profile(model: Any, profile: str | Profile) -> Any:
    """`model` with `profile`'s body rules on every request (a copy), else itself."""
    prof = get_profile(profile)
    if not needs_rewrite(prof) or ls_provider(model) != "openai":
        return model
    return with_request_payload_rewrite(model, prof.name, lambda body: rewrite_payload(body, prof))
