"""Talking to a real OpenAI-compatible server: which profile it needs, and what a failure
means in one line.

* `detect_profile(base_url)` asks the server's `/v1/models` and picks the server profile
  by its `owned_by` (`wire.infer_profile`); a server that does not answer, by its URL.
* `explain_failure(exc, profile=..., endpoint=..., thread_id=...)` turns what a model call
  raised (HTTP 4xx/5xx, a timeout, a refused connection, an empty stream) into one line:
  what happened, the profile to try, whether the thread can continue. None otherwise."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from threadlog.providers.profiles import Profile, get_profile
from threadlog.providers.wire import infer_profile

__all__ = ["EMPTY_STREAM", "detect_profile", "explain_failure"]

EMPTY_STREAM = "No generations found in stream."
"""What langchain-core raises when a stream ends without a single chunk."""


def detect_profile(base_url: str, *, api_key: str | None = None) -> Profile:
    """The server profile for `base_url`, from its `/v1/models` answer or its URL."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/models",
        headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
    )
    models: Any = None
    try:
        with urllib.request.urlopen(request, timeout=10.0) as response:
            models = json.loads(response.read().decode("utf-8", "replace"))
    except (OSError, ValueError):  # unreachable, not JSON, HTTP error: no answer
        pass
    return infer_profile(base_url, models)


def explain_failure(
    exc: BaseException,
    *,
    profile: Profile | str,
    endpoint: str,
    thread_id: str | None = None,
    suggest: Profile | str | None = None,
) -> str | None:
    """One line for a failed model call (module doc), or None. `suggest`, the profile the server
    looks like, is named when it differs from `profile`."""
    import openai

    prof = get_profile(profile)
    other = get_profile(suggest) if suggest is not None else None
    try_other = (
        f"; this server looks like {other.name}: try --profile {other.name}"
        if other is not None and other.name != prof.name
        else ""
    )
    going_on = (
        f"; the thread keeps every finished step: continue it with --thread {thread_id}"
        if thread_id
        else "; nothing was written for the failed call"
    )
    where = f"{endpoint} (profile {prof.name})"
    if isinstance(exc, openai.APITimeoutError):
        return f"{where} did not answer in time{try_other}{going_on}"
    if isinstance(exc, openai.APIConnectionError):
        return (
            f"cannot reach the model endpoint {endpoint} ({_one_line(exc)}); set --base-url "
            "or OPENAI_BASE_URL to a running OpenAI-compatible server"
        )
    if isinstance(exc, openai.APIStatusError):
        body = _one_line(exc)
        hint = try_other
        if not hint and exc.status_code >= 500 and prof.tool_call_content == "null":
            # The usual cause on local servers: content null beside tool calls.
            hint = (
                "; if the server rejects null content beside tool calls, try "
                "--profile llama-cpp-python"
            )
        return f"{where} answered HTTP {exc.status_code}: {body}{hint}{going_on}"
    if isinstance(exc, ValueError) and EMPTY_STREAM in str(exc):
        hint = try_other or (
            "; servers that cannot stream tool calls do this (llama-cpp-python with "
            "tool_choice 'auto'): try --profile llama-cpp-python, or --tool-choice none"
        )
        return (
            f"{where} answered HTTP 200 with an empty stream (no tokens, no error){hint}{going_on}"
        )
    return None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."
