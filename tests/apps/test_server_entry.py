"""`threadlog.server`: the URL it opens, and the saver it yields (no server process)."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import pytest

from threadlog import InvalidMessageError
from threadlog.checkpoint.guard import GuardedSaver
from threadlog.examples.weather import build_graph
from threadlog.server import DEFAULT_FILE, ENV_VAR, checkpointer, checkpointer_url


def test_without_the_variable_the_url_is_a_sqlite_file_under_the_working_folder(
    tmp_path: Path,
) -> None:
    url = checkpointer_url({}, cwd=tmp_path)
    assert url == f"sqlite:///{(tmp_path / DEFAULT_FILE).resolve()}"
    assert url.startswith("sqlite:////")  # absolute, whatever the server's cwd later is
    assert (tmp_path / ".threadlog").is_dir()


def test_the_variable_names_postgres_or_sqlite_as_given(tmp_path: Path) -> None:
    pg = "postgresql://app:pw@db.internal:5432/threads"
    assert checkpointer_url({ENV_VAR: pg}, cwd=tmp_path) == pg
    assert checkpointer_url({ENV_VAR: " sqlite:///x.db "}, cwd=tmp_path) == "sqlite:///x.db"
    assert not (tmp_path / ".threadlog").exists()  # nothing made for a URL it was given


def test_a_bad_url_in_the_variable_is_one_error_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"^{ENV_VAR}: unsupported checkpointer URL 'mysql"):
        checkpointer_url({ENV_VAR: "mysql://x"}, cwd=tmp_path)


def test_memory_is_refused_because_the_server_opens_one_saver_per_worker_thread() -> None:
    with pytest.raises(ValueError, match=rf"{ENV_VAR}='memory://'.*once per worker thread"):
        checkpointer_url({ENV_VAR: "memory://"})


def test_the_entry_point_yields_threadlogs_guarded_saver_that_never_refuses_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's run queue decides (docs/server.md): the guard waits, never rejects."""
    monkeypatch.setenv(ENV_VAR, f"sqlite:///{tmp_path / 'app.sqlite'}")

    async def open_it() -> tuple[str, str]:
        async with checkpointer() as saver:
            assert isinstance(saver, GuardedSaver)
            return type(saver).__name__, saver.multitask_strategy

    assert asyncio.run(open_it()) == ("GuardedSaver", "enqueue")
    assert (tmp_path / "app.sqlite").exists()


def test_a_partial_of_the_entry_point_fixes_the_url_and_the_savers_options(
    tmp_path: Path,
) -> None:
    """The one-line file of docs/server.md: `functools.partial(checkpointer, ...)`."""
    entry = functools.partial(
        checkpointer, url=f"sqlite:///{tmp_path / 'own.sqlite'}", max_input_chars=20
    )

    async def ask(question: str) -> list[str]:
        async with entry() as saver:
            graph = build_graph(checkpointer=saver)
            config = {"configurable": {"thread_id": "t"}}
            state = await graph.ainvoke({"messages": [("user", question)]}, config)
            return [m.type for m in state["messages"]]

    assert asyncio.run(ask("北京今天适合带伞吗？")) == ["human", "ai", "tool", "ai"]
    with pytest.raises(InvalidMessageError, match="max_input_chars"):
        asyncio.run(ask("北京今天适合带伞吗？" * 5))
    assert (tmp_path / "own.sqlite").exists()
    with pytest.raises(ValueError, match=r"^url='memory://'"):
        asyncio.run(functools.partial(checkpointer, url="memory://")().__aenter__())
