"""scripts/qwen_json_tools.jinja, the chat template scripts/local_model.sh gives llama.cpp's
server, rendered with jinja2 (no server): a tool call renders as the ```json fenced block
the model writes (so the parser llama.cpp derives from the template reads the model's
calls), a tool result as a <tool_response> user turn; and scripts/check_turn.py, which
decides whether a real model's turn used its tool."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2
import pytest

from scripts.check_turn import check
from threadlog.models.text_calls import call_in_text

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "scripts" / "qwen_json_tools.jinja"
RECORDED = REPO / "tests" / "fixtures" / "wire" / "recorded"


def render(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, trim: bool = True
) -> str:
    # The names llama.cpp's server passes a chat template; `trim` is how transformers
    # renders one (trim_blocks, lstrip_blocks): the template's own `-` marks decide every
    # space and newline, so both ways render the same.
    env = jinja2.Environment(trim_blocks=trim, lstrip_blocks=trim)
    template = env.from_string(TEMPLATE.read_text(encoding="utf-8"))
    return template.render(
        messages=messages,
        tools=tools,
        add_generation_prompt=True,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
    )


def recorded(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    return doc


def with_object_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as llama.cpp hands them to a template that takes object arguments."""
    out = json.loads(json.dumps(messages))
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


@pytest.mark.parametrize("arguments", ["string", "object"])
def test_a_tool_call_and_its_result_render_as_a_fenced_block_and_a_tool_response(
    arguments: str,
) -> None:
    body = recorded("llama-server-fenced-template.json")["second_request"]
    messages = body["messages"]
    if arguments == "object":
        messages = with_object_arguments(messages)
    prompt = render(messages, body["tools"])
    assert render(messages, body["tools"], trim=False) == prompt
    turns = prompt.split("<|im_start|>")
    assert turns[0] == ""
    assert turns[1].startswith("system\nYou are a weather assistant.")
    assert '"name": "get_weather"' in turns[1]  # the tool's schema is in the system turn
    assert turns[2] == "user\nWhat is the weather in Beijing?<|im_end|>\n"
    assert turns[3] == (
        'assistant\n```json\n{"name": "get_weather", "arguments": {"city": "Beijing"}}\n'
        "```<|im_end|>\n"
    )
    assert turns[4] == (
        "user\n<tool_response>\nlight rain, 70% chance of precipitation, 22°C\n"
        "</tool_response><|im_end|>\n"
    )
    assert turns[5] == "assistant\n"  # the generation prompt: the model answers next


def test_the_rendered_call_has_the_form_the_model_writes_by_itself() -> None:
    # What the model wrote under its own template (which parses <tool_call> tags only),
    # recorded: a ```json fenced block holding {"name", "arguments"}.
    written = recorded("llama-server-fenced-text.json")["reply"]["content"]
    body = recorded("llama-server-fenced-template.json")["second_request"]
    prompt = render(body["messages"], body["tools"])
    (rendered,) = re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", prompt, re.S)
    fence = re.compile(r"\A```json\n(.*)\n```\Z", re.S)
    for text in (written, rendered):
        block = fence.match(text)
        assert block is not None, text
        assert set(json.loads(block.group(1))) == {"name", "arguments"}
        found = call_in_text(text, ["get_weather"])
        assert found is not None and found.form == "a ```json fenced block"


def test_parallel_calls_render_one_fenced_block_each_and_results_share_one_user_turn() -> None:
    calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
        }
        for i, city in enumerate(["Beijing", "Shanghai"])
    ]
    messages = [
        {"role": "user", "content": "Beijing and Shanghai?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c0", "content": "light rain"},
        {"role": "tool", "tool_call_id": "c1", "content": "cloudy"},
    ]
    prompt = render(messages, [{"type": "function", "function": {"name": "get_weather"}}])
    assert (
        '<|im_start|>assistant\n```json\n{"name": "get_weather", "arguments": {"city": '
        '"Beijing"}}\n```\n```json\n{"name": "get_weather", "arguments": {"city": '
        '"Shanghai"}}\n```<|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nlight rain\n</tool_response>\n"
        "<tool_response>\ncloudy\n</tool_response><|im_end|>\n"
    ) in prompt


def test_without_tools_the_template_is_plain_chatml() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": [{"type": "text", "text": "Again."}]},
    ]
    assert render(messages, None) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nSay hi.<|im_end|>\n"
        "<|im_start|>assistant\nHi.<|im_end|>\n"
        "<|im_start|>user\nAgain.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def thread(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"thread_id": "t", "messages": list(messages)}


USER = {"role": "user", "content": "What is the weather in Beijing?"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "name": "get_weather", "args": {"city": "Beijing"}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "light rain, 70% chance, 22°C"}


def test_check_turn_passes_a_paired_call_whose_result_the_answer_uses() -> None:
    answer = {"role": "assistant", "content": "Take an umbrella: 22°C.", "tool_calls": []}
    lines = check(thread(USER, CALL, RESULT, answer))
    assert lines[0].startswith('paired: get_weather({"city": "Beijing"}) [c1] <- ')
    assert lines[-1] == "the answer uses the result: 22"


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ((USER, {"role": "assistant", "content": "22°C"}), "no tool call in the turn"),
        (
            (USER, CALL, {"role": "assistant", "content": "22"}),
            "call c1 (get_weather) has no result",
        ),
        (
            (USER, CALL, {**RESULT, "status": "error"}, {"role": "assistant", "content": "?"}),
            "call c1 failed",
        ),
        (
            (USER, CALL, RESULT, {"role": "assistant", "content": "Take an umbrella."}),
            "the answer repeats nothing of the tool's result",
        ),
        ((USER, CALL, RESULT), "does not end with an answer"),
    ],
)
def test_check_turn_fails_a_turn_that_did_not_answer_from_its_tool(
    messages: tuple[dict[str, Any], ...], says: str
) -> None:
    with pytest.raises(AssertionError, match=re.escape(says)):
        check(thread(*messages))
