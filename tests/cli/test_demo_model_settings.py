"""`threadlog demo`'s model settings (--max-tokens, --timeout, --max-retries) and the hint
line for a tool call the server returned as text, over HTTP to tests/helpers/openai_server.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.openai_server import OpenAIServer
from threadlog.cli import build_parser, main
from threadlog.cli.demo import chat_model
from threadlog.models.text_calls import call_in_text

RECORDED = Path(__file__).resolve().parents[1] / "fixtures/wire/recorded"


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def demo(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["demo", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def parse(*argv: str) -> Any:
    return build_parser().parse_args(["demo", *argv])


def test_the_model_settings_default_to_512_tokens_60_s_and_one_retry() -> None:
    args = parse("--model", "openai:m")
    assert (args.max_tokens, args.timeout, args.max_retries) == (512, 60.0, 1)
    help_text = build_parser()._subparsers._group_actions[0].choices["demo"].format_help()  # type: ignore[union-attr]
    for shown in (
        "--max-tokens N",
        "(default: 512)",
        "--timeout S",
        "(default: 60)",
        "--max-retries K",
        "(default: 1)",
    ):
        assert shown in help_text


def test_the_model_settings_reach_chat_openai() -> None:
    args = parse("--max-tokens", "64", "--timeout", "7.5", "--max-retries", "0")
    model: Any = chat_model(
        "openai:m",
        "http://127.0.0.1:9/v1",
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        max_retries=args.max_retries,
    )
    assert (model.max_tokens, model.request_timeout, model.max_retries) == (64, 7.5, 0)


def test_max_tokens_is_sent_in_every_request(capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer() as server:
        code, _, err = demo(
            capsys,
            "Paris?",
            "--model",
            "openai:m",
            "--base-url",
            server.base_url,
            "--max-tokens",
            "77",
        )
    assert (code, err) == (0, "")
    assert [r["max_completion_tokens"] for r in server.requests] == [77, 77]


@pytest.mark.parametrize(("retries", "requests"), [("0", 1), ("1", 2)])
def test_max_retries_is_how_often_a_failed_request_is_sent_again(
    capsys: pytest.CaptureFixture[str], retries: str, requests: int
) -> None:
    failing = [{"__status__": 500, "message": "boom"}] * 3
    with OpenAIServer(failing) as server:
        code, _, err = demo(
            capsys,
            "Paris?",
            "--model",
            "openai:m",
            "--base-url",
            server.base_url,
            "--max-retries",
            retries,
        )
    assert code == 1 and "HTTP 500" in err
    assert len(server.requests) == requests


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--max-tokens", "0", "must be at least 1"),
        ("--timeout", "0", "must be more than 0"),
        ("--max-retries", "-1", "must be at least 0"),
        ("--timeout", "soon", "not a number: 'soon'"),
    ],
)
def test_a_bad_model_setting_is_one_usage_error(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse(flag, value)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {says}" in err


def recorded_text_call() -> dict[str, Any]:
    doc = json.loads((RECORDED / "llama-server-fenced-text.json").read_text(encoding="utf-8"))
    reply: dict[str, Any] = doc["reply"]
    return {"role": "assistant", "content": reply["content"]}


def test_a_call_written_as_text_gets_one_hint_line_naming_the_chat_template(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIServer([recorded_text_call()], owned_by="llamacpp") as server:
        code, out, err = demo(
            capsys,
            "What is the weather in Beijing?",
            "--model",
            "openai:m",
            "--base-url",
            server.base_url,
        )
    assert code == 0  # the exit status does not change
    assert len(server.requests) == 1  # the text ended the turn: no tool ran
    assert "get_weather(" not in out and '"name": "get_weather"' in out
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("threadlog demo: hint: ")
    assert "call to get_weather written as text (a ```json fenced block)" in lines[0]
    assert "chat template" in lines[0] and "docs/profiles.md" in lines[0]


def test_a_real_call_or_a_plain_answer_gets_no_hint(capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer() as server:  # the offline model calls get_weather, then answers
        code, out, err = demo(
            capsys, "Paris?", "--model", "openai:m", "--base-url", server.base_url
        )
    assert (code, err) == (0, "") and "get_weather(" in out
    with OpenAIServer([{"role": "assistant", "content": "Take an umbrella."}]) as server:
        code, _, err = demo(capsys, "Paris?", "--model", "openai:m", "--base-url", server.base_url)
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("text", "form"),
    [
        (
            '```json\n{"name": "get_weather", "arguments": {"city": "北京"}}\n```',
            "a ```json fenced block",
        ),
        (
            'Sure.\n```\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```',
            "a ``` fenced block",
        ),
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
            "<tool_call> tags",
        ),
        ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}', "bare JSON"),
        ('[{"name": "get_weather", "arguments": {"city": "Paris"}}]', "bare JSON"),
    ],
)
def test_call_in_text_finds_each_written_form(text: str, form: str) -> None:
    found = call_in_text(text, ["get_weather"])
    assert found is not None and found.name == "get_weather" and found.form == form
    assert set(found.arguments) == {"city"}


@pytest.mark.parametrize(
    "text",
    [
        "Call get_weather for Paris, then answer.",
        '```json\n{"name": "search", "arguments": {"q": "Paris"}}\n```',  # not a bound tool
        '```json\n{"name": "get_weather"}\n```',  # no arguments
        '```json\n{"name": "get_weather", "arguments": {"city": \n```',  # cut off
        "",
    ],
)
def test_call_in_text_is_none_for_anything_but_a_call_to_a_bound_tool(text: str) -> None:
    assert call_in_text(text, ["get_weather"]) is None
