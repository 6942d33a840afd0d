"""Shared fixtures: a real Postgres for the session, and a `backend` URL per test.

* `postgres_url` (session): `THREADLOG_TEST_POSTGRES_URL` when set, else a throwaway
  server from the `pgserver` package (it ships its own binaries) in a temporary dir,
  stopped and deleted at the end. When the tests run as root, pgserver runs the server
  as a system user it creates (`pgserver`) and makes the temp dir traversable.
* `backend` (function, parametrized `sqlite` / `postgres`): a checkpointer URL for
  `threadlog.checkpointer(url)` pointing at fresh storage — a new SQLite file, or a
  new Postgres database — so tests never see each other's threads.
* `sqlite_url`, `pg_backend`: the two halves on their own.
* `pg_databases` (session): where those new Postgres databases come from — made up to
  eight ahead in a thread, as `fresh_database` would, while the tests before run.

Markers (registered in pyproject.toml, `--strict-markers`), applied here at collection so
the test files need no decorators (see tests/README.md):

* `postgres`: the test uses `postgres_url` / `pg_backend`, or one of its parameters is
  `"postgres"` (the `backend` fixture's, the conformance suite's `scheme`).
* `subprocess`: the test starts OS processes — `SUBPROCESS` below.
* `slow`: the test takes over ~2 s on its own — `SLOW` below.
"""

from __future__ import annotations

import os
import queue
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    env = os.environ.get("THREADLOG_TEST_POSTGRES_URL")
    if env:
        yield env
        return
    import pgserver

    # Not under pytest's basetemp: another pytest session resets that tree to mode
    # 0700, which locks out the server's own user when the tests run as root. Short,
    # too: the server's unix socket path must fit in ~100 characters.
    pgdata = tempfile.mkdtemp(prefix="threadlog-pg-")
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        _no_fsync(server.get_uri())
        yield server.get_uri()
    finally:
        server.cleanup()


def _no_fsync(url: str) -> None:
    """A throwaway server need not survive an OS crash: no fsync, no waiting for the WAL.
    Every test gets its own database (`CREATE DATABASE` copies a template each time) and
    nothing here crashes the server itself (the kill tests kill clients), so what a test
    reads is the same; the Postgres tests just stop waiting on the disk."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")


def with_database(url: str, dbname: str) -> str:
    """`url` pointing at database `dbname` instead (query, e.g. a socket host, kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


def fresh_database(postgres_url: str) -> str:
    import psycopg

    name = "tl_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(postgres_url, name)


class Databases:
    """New, empty databases on the server at `url`, made `ahead` at a time in a thread.

    `CREATE DATABASE` copies a template (~0.25 s, the server's work): made ahead, it runs
    while the previous tests do and a test's setup only takes a name. Each database is
    still used by exactly one test. The ones left at the end are dropped."""

    def __init__(self, url: str, ahead: int = 8) -> None:
        self.url = url
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, name="pg-databases", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self._stop.is_set():
                    name = "tl_" + uuid.uuid4().hex[:12]
                    conn.execute(f'CREATE DATABASE "{name}"')
                    self._offer(name)
        except BaseException as exc:  # handed to the test that takes the next one
            self._offer(exc)

    def _offer(self, item: str | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def take(self) -> str:
        item = self._ready.get(timeout=120)
        if isinstance(item, BaseException):
            raise RuntimeError(f"could not create a test database on {self.url}") from item
        return with_database(self.url, item)

    def close(self) -> None:
        import psycopg

        self._stop.set()
        self._thread.join(timeout=30)
        left = []
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if isinstance(item, str):
                left.append(item)
        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in left:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


@pytest.fixture(scope="session")
def pg_databases(postgres_url: str) -> Iterator[Databases]:
    databases = Databases(postgres_url)
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'checkpoints.sqlite'}"


@pytest.fixture
def pg_backend(pg_databases: Databases) -> str:
    return pg_databases.take()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'checkpoints.sqlite'}"
    databases: Databases = request.getfixturevalue("pg_databases")
    return databases.take()


# Module basename -> test function names; "*" is the whole module. A name that is not a
# test of that module, or a module that does not exist, stops the run (so a rename cannot
# silently drop a test into the fast loop).
SUBPROCESS: dict[str, tuple[str, ...]] = {
    # `langgraph dev` (a module-scoped server)
    "test_langgraph_dev.py": ("*",),
    "test_inspect_server.py": ("*",),
    "test_check_server.py": ("*",),
    "test_server_checkpointer.py": ("*",),
    "test_server_lifecycle.py": ("*",),
    "test_server_postgres.py": ("*",),
    # the kill harness's workers, forked and SIGKILLed
    "test_kill_harness.py": ("*",),
    "test_lifecycle_kills.py": ("*",),
    "test_deep_subgraph_recovery.py": (
        "test_new_input_after_a_kill_three_subgraph_levels_down_keeps_everything_stored",
    ),
    "test_subgraph_by_send.py": (
        "test_a_subgraph_killed_in_its_send_tool_branch_is_listed_stopped_and_recovers",
    ),
    "test_export_stopped_step.py": (
        "test_export_of_a_killed_head_has_every_message_the_worker_stored",
    ),
    # tests/durability_worker.py and other forked or spawned workers
    "test_durability.py": (
        "test_worker_killed_mid_turn_resumes_without_loss_or_repeat",
        "test_concurrent_workers_give_one_linear_history",
    ),
    "test_recover_results.py": (
        "test_new_message_after_a_worker_killed_mid_step_logs_the_saved_result",
    ),
    "test_outcome_unknown.py": (
        "test_a_worker_killed_while_a_tool_runs_answers_that_call_outcome_unknown",
        "test_a_worker_killed_while_a_subgraphs_tool_runs_answers_that_call_outcome_unknown",
        "test_under_async_durability_a_kill_in_a_tool_before_its_checkpoint_is_stored_reads_outcome_unknown",
    ),
    "test_multi_agent_crash.py": (
        "test_a_kill_inside_the_agent_resumes_with_each_booking_run_once_over_two_turns",
    ),
    "test_shared_thread.py": ("*",),
    "test_workers_benchmark.py": ("*",),
    "test_own_writes.py": ("test_warm_turns_see_what_another_process_wrote",),
    "test_checkpoint_guard.py": (
        "test_exclusive_refuses_a_second_holder_in_another_process",
        "test_exclusive_lock_dies_with_a_killed_holder",
    ),
    "test_history_cache.py": ("test_a_second_process_reads_exactly_the_history_the_first_wrote",),
    # a Python subprocess: the CLI, the installed wheel in a fresh venv
    "test_cli_demo.py": ("test_the_installed_command_runs_the_demo_offline",),
    "test_cli_inspector.py": (
        "test_version_and_help_load_no_langgraph",
        "test_inspecting_a_database_thread_loads_no_tool_node_or_prebuilt_agent",
    ),
    "test_inspect_cli.py": ("test_runs_as_a_command",),
    "test_inspect_whole_app.py": ("test_threadlog_inspect_is_an_attribute_of_a_plain_import",),
    # Jupyter kernels
    "test_notebooks.py": (
        "test_weather_demo_notebook_walks_its_checkpoints",
        "test_branches_notebook_shows_the_failure_and_the_resume",
        "test_fork_notebook_draws_the_fork_tree",
        "test_long_conversation_notebook_compares_context_and_log",
        "test_debug_notebook_finds_the_failed_thread_and_what_the_model_saw",
    ),
    # headless Chromium
    "test_inspect_html.py": (
        "test_notebook_stylesheets_do_not_right_align_the_inspector_tables",
        "test_the_page_of_a_forked_thread_screenshots_with_content",
    ),
    # langgraph-api imported in a fresh interpreter (it reads its config at import)
    "test_upstream.py": (
        "test_the_server_adapter_forwards_delta_history_reads_to_the_saver_it_wraps",
    ),
    # LangGraph's own suites, each in a pytest subprocess
    "test_upstream_suites.py": ("test_langgraph_suite_fails_only_where_documented",),
}
# Over ~2 s on their own in one full run (`--durations=0`) on the 2-core dev machine;
# a module-scoped server or suite run counts against the module's tests.
SLOW: dict[str, tuple[str, ...]] = {
    "test_upstream_suites.py": ("test_langgraph_suite_fails_only_where_documented",),  # ~40 s
    "test_langgraph_dev.py": ("*",),
    "test_inspect_server.py": ("*",),
    "test_check_server.py": ("*",),
    "test_server_checkpointer.py": ("*",),
    "test_server_lifecycle.py": ("*",),
    "test_server_postgres.py": ("*",),
    "test_workers_benchmark.py": ("*",),
    "test_notebooks.py": SUBPROCESS["test_notebooks.py"],
    "test_cli_demo.py": ("test_the_installed_command_runs_the_demo_offline",),
    "test_kill_harness.py": (
        "test_random_kills_lose_duplicate_and_repeat_nothing_and_threads_stay_readable",
        "test_a_torn_postgres_session_mid_turn_loses_and_repeats_nothing",
        "test_under_async_durability_a_kill_loses_only_its_turns_unstored_steps",
        "test_every_write_of_a_turn_is_a_kill_point",
    ),
    "test_own_writes.py": ("test_warm_turns_see_what_another_process_wrote",),
    "test_dropin_snapshots.py": (
        "test_every_state_on_a_plain_saver_reads_what_a_never_snapshotting_log_reads",
    ),
    "test_log_properties.py": ("test_messages_read_back_through_the_checkpoint_serializer_replay",),
    "test_checkpoint_guard.py": ("test_a_finished_run_leaves_nothing_of_itself_in_the_guard",),
    "test_lock_pool.py": (
        "test_64_concurrent_async_runs_on_postgres_lose_duplicate_and_fail_nothing",
    ),
    "test_check.py": ("test_a_repaired_plain_thread_takes_its_next_turn_in_langgraph",),  # ~2.3 s
    # the first deepagents import (~1.5 s) falls on it
    "test_foreign_delta_channels.py": (
        "test_a_deepagents_agent_with_a_subagent_reads_back_as_on_langgraphs_saver",
    ),
    # the first Chromium start (~5 s cold) falls on it
    "test_inspect_html.py": ("test_notebook_stylesheets_do_not_right_align_the_inspector_tables",),
}
POSTGRES_FIXTURES = {"postgres_url", "pg_databases", "pg_backend"}


def _uses_postgres(item: pytest.Item) -> bool:
    if POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in callspec.params.values()


def _check_table(name: str, table: dict[str, tuple[str, ...]], items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    modules = {item.path.name: getattr(item, "module", None) for item in items}
    for basename, tests in table.items():
        if not any(here.rglob(basename)):
            raise pytest.UsageError(f"tests/conftest.py {name}: no test module {basename}")
        module = modules.get(basename)
        for test in tests:
            if module is not None and test != "*" and not callable(getattr(module, test, None)):
                raise pytest.UsageError(f"tests/conftest.py {name}: {basename} has no {test}")


def _listed(item: pytest.Item, table: dict[str, tuple[str, ...]]) -> bool:
    tests = table.get(item.path.name, ())
    return "*" in tests or getattr(item, "originalname", item.name) in tests


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _check_table("SUBPROCESS", SUBPROCESS, items)
    _check_table("SLOW", SLOW, items)
    for item in items:
        if _uses_postgres(item):
            item.add_marker(pytest.mark.postgres)
        if _listed(item, SUBPROCESS):
            item.add_marker(pytest.mark.subprocess)
        if _listed(item, SLOW):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures the durability scenarios gathered (kill points, races…)."""
    counts = sys.modules.get("tests.helpers.durability")
    if counts is not None and counts.COUNTS:
        line = ", ".join(f"{k}: {v}" for k, v in sorted(counts.COUNTS.items()))
        terminalreporter.write_line(f"durability counts — {line}")
