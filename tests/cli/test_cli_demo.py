"""`threadlog demo`: the transcript, threads, JSON, real endpoints, errors, the installed wheel."""

from __future__ import annotations

import io
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import threadlog
from tests.helpers.demo import REPO, clean_env, install_wheel
from tests.helpers.openai_server import OpenAIServer
from threadlog.cli import build_parser, main

CALL_LINE = re.compile(r"^assistant\s+→ get_weather\(city=\"(.+?)\"\)\s+\[(\S+)\]$", re.M)
RESULT_LINE = re.compile(r"^tool\s+← \[(\S+)\] (.+?)  \d+ ms$", re.M)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["demo", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def latest_checkpoint_id(url: str, thread: str) -> str:
    with threadlog.checkpointer(url) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert found is not None
        return str(found.config["configurable"]["checkpoint_id"])


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def test_help_explains_the_command_and_every_option() -> None:
    top = build_parser().format_help()
    assert "demo" in top and "inspect" in top
    demo_parser = build_parser()._subparsers._group_actions[0].choices["demo"]  # type: ignore[union-attr]
    text = demo_parser.format_help()
    for option in ("--thread", "--db", "--json", "--model", "--base-url", "OPENAI_API_KEY"):
        assert option in text
    assert "postgresql://" in text and "examples:" in text


def test_demo_prints_roles_paired_calls_usage_and_the_checkpoint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "北京和上海今天要带伞吗？", "--thread", "t1")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1] == "user       北京和上海今天要带伞吗？"
    calls = CALL_LINE.findall(out)
    results = RESULT_LINE.findall(out)
    assert [city for city, _ in calls] == ["北京", "上海"]
    # Each result shows the id of its call, in call order.
    assert [cid for cid, _ in results] == [cid for _, cid in calls]
    assert results[0][1] == "小雨，降水概率 70%，气温 22°C"
    assert re.search(r"^assistant\s+北京：.*北京建议带伞。$", out, re.M)
    assert re.search(r"^tokens\s+\d+ in · \d+ out · \d+ total \(2 model calls\)$", out, re.M)
    # The default database is a file in the current directory; the id printed is its latest.
    assert (tmp_path / "threadlog-demo.db").exists()
    checkpoint = re.search(r"^checkpoint\s+(\S+)$", out, re.M)
    assert checkpoint is not None
    assert checkpoint.group(1) == latest_checkpoint_id("sqlite:///threadlog-demo.db", "t1")
    assert "--thread t1" in lines[-1]


def test_the_answer_streams_in_pieces(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []

    class Recording(io.StringIO):
        def write(self, s: str) -> int:
            writes.append(s)
            return super().write(s)

    monkeypatch.setattr(sys, "stdout", Recording())
    assert main(["demo"]) == 0
    answer = "北京：小雨，降水概率 70%，气温 22°C。北京建议带伞。"
    pieces = writes[
        writes.index("assistant  ") + 1 : writes.index("\n", writes.index("assistant  "))
    ]
    assert "".join(pieces) == answer and len(pieces) > 1


def test_a_thread_continues_and_json_prints_its_whole_history(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = run(capsys, "北京今天适合带伞吗？", "--thread", "t", "--db", "x.db")
    assert first[0] == 0, first
    code, out, _ = run(capsys, "那上海呢？", "--thread", "t", "--db", "x.db")
    assert code == 0 and "(continuing: 4 earlier messages on this thread)" in out
    code, out, err = run(capsys, "Tokyo?", "--thread", "t", "--db", "x.db", "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)  # nothing but JSON on stdout
    assert doc["thread_id"] == "t" and doc["db"] == "sqlite:///x.db"
    assert doc["checkpoint_id"] == latest_checkpoint_id("sqlite:///x.db", "t")
    messages = doc["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"] * 3
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "北京今天适合带伞吗？",
        "那上海呢？",
        "Tokyo?",
    ]
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            assert m["tool_call_id"] == messages[i - 1]["tool_calls"][0]["id"]
    assert all(
        m["usage_metadata"]["total_tokens"] > 0 for m in messages if m["role"] == "assistant"
    )


def test_openai_model_streams_from_a_real_endpoint_over_http(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with OpenAIServer() as server:
        code, out, err = run(
            capsys,
            "Beijing and Shanghai: umbrella today?",
            "--model",
            "openai:local-model",
            "--base-url",
            server.base_url,
        )
    assert (code, err, server.errors) == (0, "", [])
    assert len(server.requests) == 2 and all(r["stream"] for r in server.requests)
    assert server.requests[0]["model"] == "local-model"
    calls = CALL_LINE.findall(out)
    assert [cid for cid, _ in RESULT_LINE.findall(out)] == [cid for _, cid in calls]
    assert "Take an umbrella in Beijing." in out
    assert re.search(r"^tokens\s+[1-9]\d* in", out, re.M)  # usage reported by the server


def test_openai_base_url_can_come_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with OpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code, out, _ = run(capsys, "Paris?", "--model", "openai:m")
    assert code == 0 and len(server.requests) == 2
    assert "Paris: cloudy, 30% chance of precipitation, 17°C." in out


def one_line_error(code: int, out: str, err: str, status: int = 2) -> str:
    """Bad input is exit 2 (`cli/errors.py`); a server or database that fails, 1."""
    assert code == status
    assert err.count("\n") == 1 and err.startswith("threadlog demo: error: ")
    assert "Traceback" not in out + err
    return err


def test_a_missing_api_key_is_one_line_saying_what_to_set(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = one_line_error(*run(capsys, "--model", "openai:gpt-4o-mini"))
    assert "set OPENAI_API_KEY" in err


def test_an_unreachable_endpoint_is_one_line_saying_what_to_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    err = one_line_error(*run(capsys, "--model", "openai:m", "--base-url", url), status=1)
    assert f"cannot reach the model endpoint {url}" in err
    assert "--base-url" in err and "OPENAI_BASE_URL" in err


def test_a_rejected_key_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "bad")

    with OpenAIServer() as server:
        monkeypatch.setattr(
            server,
            "handle",
            lambda path, raw: (401, {"error": {"message": "bad key", "type": "auth"}}, None),
        )
        err = one_line_error(
            *run(capsys, "--model", "openai:m", "--base-url", server.base_url), status=1
        )
    assert "rejected the API key" in err and "OPENAI_API_KEY" in err


@pytest.mark.parametrize("spec", ["gpt-4o", "anthropic:claude", "openai:"])
def test_an_unknown_model_spec_is_one_line(capsys: pytest.CaptureFixture[str], spec: str) -> None:
    err = one_line_error(*run(capsys, "--model", spec))
    assert "openai:MODEL" in err


def test_an_unusable_database_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(*run(capsys, "--db", "mysql://localhost/x"))
    assert "mysql://localhost/x" in err


def test_postgres_database_keeps_the_thread(
    capsys: pytest.CaptureFixture[str], pg_backend: str
) -> None:
    assert run(capsys, "北京今天适合带伞吗？", "--thread", "p", "--db", pg_backend)[0] == 0
    code, out, _ = run(capsys, "Paris?", "--thread", "p", "--db", pg_backend, "--json")
    assert code == 0
    assert [m["role"] for m in json.loads(out)["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ] * 2


def test_the_installed_command_runs_the_demo_offline(tmp_path: Path) -> None:
    """The README's first command, minus the network: a non-editable install of the wheel."""
    bin_dir = install_wheel(REPO, tmp_path / "install")
    work = tmp_path / "fresh"
    work.mkdir()
    env = clean_env()

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import threadlog; print(threadlog.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(tmp_path / "install" / "venv"))  # not the checkout

    done = subprocess.run(
        [str(bin_dir / "threadlog"), "demo"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    calls = CALL_LINE.findall(done.stdout)
    assert [city for city, _ in calls] == ["北京"]
    assert RESULT_LINE.findall(done.stdout)[0][0] == calls[0][1]
    assert "北京建议带伞" in done.stdout
    assert (work / "threadlog-demo.db").exists()

    thread = re.search(r"--thread (\S+)", done.stdout)
    assert thread is not None
    again = subprocess.run(
        [str(bin_dir / "threadlog"), "demo", "Tokyo?", "--thread", thread.group(1), "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert len(json.loads(again.stdout)["messages"]) == 8
