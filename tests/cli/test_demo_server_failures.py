"""`threadlog demo` against servers that fail: each failure is one line on stderr naming
the profile to try and whether the thread can continue; usage a server does not report
is said to be missing, not zero. Real HTTP to the local test server."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import openai
import pytest

from tests.helpers.openai_server import OpenAIServer
from threadlog.cli import main
from threadlog.models.servers import explain_failure


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def demo(
    capsys: pytest.CaptureFixture[str], server: OpenAIServer, *argv: str
) -> tuple[int, str, str]:
    code = main(
        [
            "demo",
            "Umbrella in Beijing?",
            "--model",
            "openai:m",
            "--base-url",
            server.base_url,
            *argv,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, out: str, err: str) -> str:
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("threadlog demo: error: ") and "Traceback" not in out + err
    return err


def test_an_empty_stream_is_one_line_naming_the_profile_to_try(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # llama-cpp-python answers a streamed request with tools and tool_choice "auto" so.
    with OpenAIServer([{"__empty_stream__": True}], owned_by="me") as server:
        err = one_line(*demo(capsys, server, "--profile", "openai-compatible"))
    assert "HTTP 200 with an empty stream" in err
    assert "profile openai-compatible" in err and "--profile llama-cpp-python" in err
    assert re.search(r"continue it with --thread demo-\w+", err)


def test_a_server_error_is_one_line_and_the_thread_continues(
    capsys: pytest.CaptureFixture[str],
) -> None:
    loading = {"__status__": 503, "message": "model is loading"}
    with OpenAIServer([loading, loading]) as server:  # the demo retries once
        err = one_line(*demo(capsys, server, "--thread", "t1", "--profile", "llama-server"))
        assert "answered HTTP 503" in err and "model is loading" in err
        assert "continue it with --thread t1" in err
        # The same thread goes on once the server is back.
        code, out, err = demo(capsys, server, "--thread", "t1", "--profile", "llama-server")
    assert (code, err) == (0, "")
    assert "assistant  → get_weather" in out


def test_null_content_refused_by_the_server_names_the_profile_that_avoids_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIServer(string_content=True, owned_by="me") as server:
        err = one_line(*demo(capsys, server, "--profile", "openai-compatible"))
        assert "answered HTTP 500" in err and "--profile llama-cpp-python" in err
        # Detected without --profile, the same server completes the tool loop.
        code, out, err = demo(capsys, server)
    assert (code, err) == (0, "")
    assert "profile llama-cpp-python" in out.splitlines()[0]
    assert "Beijing" in out and "tool       ← [" in out


def test_usage_the_server_does_not_report_is_said_to_be_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIServer(usage=False) as server:
        code, out, err = demo(capsys, server)
    assert (code, err) == (0, "")
    assert re.search(r"^tokens\s+usage not reported by the server \(2 model calls\)$", out, re.M)
    assert "0 in" not in out


# A reply that asks for the same tool call forever.
_LOOPING = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Beijing"}'},
        }
    ],
}


def test_the_demo_caps_a_turn_with_a_small_default(capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer([_LOOPING] * 10) as server:
        code, out, err = demo(capsys, server)
    assert (code, err) == (0, "")
    assert len(server.requests) == 6
    assert "Stopped: this turn reached its limit of 6 model calls" in out


def test_the_tool_choice_and_max_model_calls_flags_reach_the_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIServer([_LOOPING] * 10) as server:
        code, out, _ = demo(
            capsys, server, "--profile", "openai", "--tool-choice", "none", "--max-model-calls", "3"
        )
    assert code == 0 and len(server.requests) == 3
    assert server.requests[0]["tool_choice"] == "none"
    assert all("tool_choice" not in r for r in server.requests[1:])
    assert "Stopped: this turn reached its limit of 3 model calls" in out


def test_a_timeout_is_one_line() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    line = explain_failure(
        openai.APITimeoutError(request=request),
        profile="ollama",
        endpoint="http://127.0.0.1:9/v1",
        thread_id="t9",
    )
    assert line is not None and "\n" not in line
    assert "did not answer in time" in line and "continue it with --thread t9" in line


def test_failures_it_does_not_know_are_left_to_the_caller() -> None:
    assert explain_failure(KeyError("x"), profile="ollama", endpoint="e") is None
