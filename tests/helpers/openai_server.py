"""A local, strict OpenAI-compatible Chat Completions server for the tests.

Contract:

* `OpenAIServer()` serves `POST /v1/chat/completions` on 127.0.0.1 (a free port) from a
  stdlib `http.server` thread; use it as a context manager; `base_url` goes to
  `ChatOpenAI(base_url=..., api_key="test")`.
* Every request body is recorded, in order, in `requests` (parsed JSON), whether it was
  accepted or not; `errors` holds the 400 bodies sent back.
* It enforces the Chat Completions rules on tool pairing, answering 400 with OpenAI's own
  error text: a `tool` message that answers no open call of the preceding assistant
  message (orphan) or a call already answered (duplicate) — "Invalid parameter: messages
  with role 'tool' must be a response to a preceeding message with 'tool_calls'." — and an
  assistant `tool_calls` message not followed by a result for each call (dangling).
  It also refuses message fields OpenAI does not define (so bookkeeping that leaks onto
  the wire fails loudly) and a `name` that does not match OpenAI's pattern.
* Accepted requests are answered deterministically by `threadlog.OfflineChatModel` with
  the request's tools bound (parallel `get_weather` calls for named cities, answers from
  results), or by the next entry of `scripted` (an assistant message dict) when given.
  `"stream": true` is answered as server-sent events, with a usage chunk when
  `stream_options.include_usage` is set.
* Server quirks, to test the server profiles against: a scripted entry
  `{"__status__": 500, "message": ...}` is answered with that HTTP error, and
  `{"__empty_stream__": True}` with HTTP 200 and a stream of no chunks;
  `string_content=True` answers HTTP 500 (llama-cpp-python's own text) to an assistant
  message whose `content` is null; `usage=False` never reports usage; `owned_by` is what
  `GET /v1/models` names as the owner.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_openai.chat_models.base import _convert_dict_to_message

from threadlog.models.offline import OfflineChatModel

_ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)
_DANGLING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
)
_NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"
_FIELDS: dict[str, set[str]] = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}
_CALL_FIELDS = {"id", "type", "function"}


class RequestError(Exception):
    def __init__(self, message: str, param: str | None, code: str | None = None) -> None:
        super().__init__(message)
        self.body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        }


def check_messages(messages: Any) -> None:
    """Raise `RequestError` (OpenAI's 400 body) for what Chat Completions refuses."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty array", "messages")
    open_ids: list[str] = []  # calls of the latest assistant message still unanswered
    open_at = -1
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _FIELDS:
            raise RequestError(
                f"Invalid value: '{role}'. Supported values are: "
                "'system', 'assistant', 'user', 'tool', and 'developer'.",
                f"messages[{i}].role",
                "invalid_value",
            )
        extra = sorted(set(m) - _FIELDS[role])
        if extra:
            raise RequestError(
                f"Additional properties are not allowed ('{extra[0]}' was unexpected) - "
                f"'messages.{i}'",
                f"messages[{i}]",
            )
        if "name" in m and not re.match(_NAME_PATTERN, str(m["name"])):
            raise RequestError(
                f"Invalid 'messages[{i}].name': string does not match pattern. Expected a "
                f"string that matches the pattern '{_NAME_PATTERN}'.",
                f"messages[{i}].name",
                "invalid_value",
            )
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid not in open_ids:
                raise RequestError(_ORPHAN, f"messages.[{i}].role")
            open_ids.remove(cid)
            continue
        if open_ids:
            raise RequestError(_DANGLING + ", ".join(open_ids), f"messages.[{open_at}].role")
        if role == "assistant" and m.get("tool_calls"):
            for call in m["tool_calls"]:
                bad = sorted(set(call) - _CALL_FIELDS)
                if bad:
                    raise RequestError(
                        f"Additional properties are not allowed ('{bad[0]}' was "
                        f"unexpected) - 'messages.{i}.tool_calls'",
                        f"messages[{i}]",
                    )
            open_ids = [c["id"] for c in m["tool_calls"]]
            open_at = i
    if open_ids:
        raise RequestError(_DANGLING + ", ".join(open_ids), f"messages.[{open_at}].role")


def _completion(body: dict[str, Any], reply: dict[str, Any], n: int) -> dict[str, Any]:
    digest = hashlib.blake2b(json.dumps(body, sort_keys=True).encode(), digest_size=8)
    prompt = sum(len(json.dumps(m, ensure_ascii=False)) for m in body["messages"]) // 4
    completion = len(json.dumps(reply, ensure_ascii=False)) // 4
    return {
        "id": f"chatcmpl-{n}-{digest.hexdigest()}",
        "object": "chat.completion",
        "created": 1_700_000_000 + n,
        "model": body.get("model", "local"),
        "choices": [
            {
                "index": 0,
                "message": reply,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _offline_reply(body: dict[str, Any]) -> dict[str, Any]:
    messages: list[BaseMessage] = [_convert_dict_to_message(m) for m in body["messages"]]
    model = OfflineChatModel()
    runnable = model.bind_tools(body["tools"]) if body.get("tools") else model
    ai = runnable.invoke(messages)
    assert isinstance(ai, AIMessage)
    reply: dict[str, Any] = {"role": "assistant", "content": ai.text or None}
    if ai.tool_calls:
        reply["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c["args"], ensure_ascii=False),
                },
            }
            for c in ai.tool_calls
        ]
    return reply


def _sse(done: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    base = {k: done[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    msg = done["choices"][0]["message"]
    yield base | {
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        ]
    }
    text = msg.get("content") or ""
    for i in range(0, len(text), 8):
        yield base | {
            "choices": [{"index": 0, "delta": {"content": text[i : i + 8]}, "finish_reason": None}]
        }
    for k, call in enumerate(msg.get("tool_calls") or []):
        yield base | {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": k, **call}]}, "finish_reason": None}
            ]
        }
    yield base | {
        "choices": [{"index": 0, "delta": {}, "finish_reason": done["choices"][0]["finish_reason"]}]
    }
    if include_usage:
        yield base | {"choices": [], "usage": done["usage"]}


class OpenAIServer:
    """See the module docstring."""

    def __init__(
        self,
        scripted: list[dict[str, Any]] | None = None,
        *,
        string_content: bool = False,
        usage: bool = True,
        owned_by: str = "openai",
    ) -> None:
        self.string_content = string_content
        self.usage = usage
        self.owned_by = owned_by
        self.requests: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.scripted = list(scripted or [])
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                data = json.dumps(
                    {
                        "object": "list",
                        "data": [{"id": "local", "object": "model", "owned_by": server.owned_by}],
                    }
                ).encode()
                self.send_response(200 if self.path.rstrip("/").endswith("/models") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, payload, stream = server.handle(self.path, raw)
                if stream is None:
                    data = json.dumps(payload, ensure_ascii=False).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in stream:
                    line = f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
                    self.wfile.write(line.encode())
                self.wfile.write(b"data: [DONE]\n\n")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll interval keeps shutdown (test teardown) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def handle(
        self, path: str, raw: bytes
    ) -> tuple[int, dict[str, Any], Iterator[dict[str, Any]] | None]:
        body = json.loads(raw or b"{}")
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}, None
        try:
            check_messages(body.get("messages"))
        except RequestError as exc:
            with self._lock:
                self.errors.append(exc.body)
            return 400, exc.body, None
        if self.string_content and any(
            m.get("role") == "assistant" and m.get("content") is None for m in body["messages"]
        ):
            # What llama-cpp-python's server (pydantic: content is a str) answers.
            error = {
                "error": {
                    "message": "1 validation error: content Input should be a valid string",
                    "type": "internal_server_error",
                }
            }
            with self._lock:
                self.errors.append(error)
            return 500, error, None
        with self._lock:
            scripted = self.scripted.pop(0) if self.scripted else None
        if scripted is not None and "__status__" in scripted:
            error = {"error": {"message": scripted.get("message", ""), "type": "server_error"}}
            return int(scripted["__status__"]), error, None
        if scripted is not None and scripted.get("__empty_stream__"):
            return 200, {}, iter(())
        reply = scripted if scripted is not None else _offline_reply(body)
        done = _completion(body, reply, n)
        if not self.usage:
            done.pop("usage")
        if body.get("stream"):
            include = self.usage and bool((body.get("stream_options") or {}).get("include_usage"))
            return 200, done, _sse(done, include)
        return 200, done, None

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
