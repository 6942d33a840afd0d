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

import dataclasses
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.postgres import Databases

# Python and pytest's assertion rewriter write no bytecode when PYTHONDONTWRITEBYTECODE is
# set (as in these containers), so every run compiled src/ and rewrote every test module
# again before the first test. The cache lives in __pycache__ folders git ignores.
sys.dont_write_bytecode = False


# Their tests assert that Shanghai's call finishes before Beijing's: the real gap.
REAL_WEATHER_LATENCY = {"test_demo_weather.py"}


@pytest.fixture(autouse=True)
def _quick_weather(request: pytest.FixtureRequest) -> Iterator[None]:
    """The demo's pretend weather service answers in a tenth of its latency, except in
    `REAL_WEATHER_LATENCY`'s modules: elsewhere the latencies only make parallel calls
    finish in some order, and no test reads them off a clock."""
    if request.node.path.name in REAL_WEATHER_LATENCY:
        yield
        return
    from threadlog.examples import weather

    real = weather._forecast

    def quick(city: str) -> weather.Forecast:
        found = real(city)
        return dataclasses.replace(found, latency_s=found.latency_s / 10)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(weather, "_forecast", quick)
        yield


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
    "test_kill_payments.py": ("*",),
    "test_multi_agent_kills.py": ("*",),
    "test_multi_agent_snapshot_views.py": ("*",),
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
    "test_recorded_calls.py": (
        "test_a_kill_between_the_reply_and_the_next_step_keeps_the_call_with_its_reply",
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
    # a fresh interpreter: what importing threadlog changes of LangGraph
    "test_no_global_patching.py": (
        "test_importing_threadlog_replaces_no_langgraph_attribute_and_plain_graphs_run_as_without",
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
    "test_kill_payments.py": ("*",),
    "test_multi_agent_kills.py": ("*",),
    "test_multi_agent_snapshot_views.py": ("*",),
    "test_multi_agent_reads.py": ("*",),  # ~4 s each: three turns, four reads
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
    "test_check_lock.py": ("*",),  # each waits out a lock timeout
    # each records an app's turns and replays them; the first imports LangChain's agents (~3 s)
    "test_replay_requests.py": ("*",),
    "test_replay_boundary.py": (  # ~4 s: two agents stored and replayed, LangChain's imported
        "test_stored_replies_are_served_to_any_graphs_chat_model_no_model_node_needed",
    ),
    "test_check_gate.py": (
        "test_check_and_all_checkpoints_exit_0_on_healthy_threads_of_the_apps_users_build",
        "test_check_exits_0_on_swarm_and_supervisor_threads_on_sqlite_and_postgres",
    ),
    "test_copy_of_a_paused_thread.py": ("*",),  # ~3-5 s each: resumes on two threads
    "test_cold_reads_decode_once.py": ("*",),  # swarm threads of 4-12 turns, read cold
    "test_finished_write_lost.py": ("*",),  # a slowed commit, waited out
    "test_idempotent_receipts.py": (  # waits out --older-than 1s, then resumes twice
        "test_prune_archive_keeps_the_receipts_and_a_resume_from_the_archive_serves_them",
    ),
    # the first deepagents import (~1.5 s) falls on it
    "test_foreign_delta_channels.py": (
        "test_a_deepagents_agent_with_a_subagent_reads_back_as_on_langgraphs_saver",
    ),
    # a deepagents agent run for 16 turns (~13 s)
    "test_deepagents_recorded_calls.py": ("*",),
    # the first Chromium start (~5 s cold) falls on it
    "test_inspect_html.py": ("test_notebook_stylesheets_do_not_right_align_the_inspector_tables",),
    # a supervisor app run for 5-12 turns on two savers (~5-10 s each)
    "test_resent_sends.py": ("*",),
    # a delta-channel app run for 8-30 turns on two savers, then read cold (~3-8 s each)
    "test_delta_snapshot_refs.py": ("*",),
    # docs/check-and-replay.md's examples run: agent turns, two demo turns, three replays
    "test_check_and_replay_examples.py": ("*",),
    # matplotlib's first import and one drawing (~3 s of CPU)
    "test_inspect.py": ("test_plot_draws_four_series_inline_and_to_a_file_without_a_display",),
}
# Also marked `slow`: over ~0.3 s of CPU on their own in one run of the inner loop (per-test
# `time.process_time()`, which load on the shared 2-core machine does not inflate). Out of
# the inner loop so that it stays under 90 s; the full suite and CI run them.
SLOW_FOR_THE_INNER_LOOP: dict[str, tuple[str, ...]] = {
    "test_inspect_context_recorded.py": ("*",),  # each records two turns, then reads them
    "test_cache_history_reads.py": (
        "test_get_state_history_steps_back_from_the_cache_and_reads_what_a_plain_saver_reads",
    ),
    "test_check.py": (
        "test_all_checkpoints_finds_what_an_older_checkpoint_still_holds",
        "test_bad_input_is_one_line_and_exit_2",
        "test_check_finds_exactly_the_poisoned_add_messages_threads_and_reads_only",
        "test_check_finds_exactly_the_poisoned_threadlog_threads_and_reads_only",
        "test_cli_exit_status_summary_and_json_lines",
        "test_repair_refuses_a_thread_a_run_holds",
        "test_repair_then_check_is_clean_and_nothing_stored_is_rewritten",
    ),
    "test_check_subgraphs.py": (
        "test_check_notes_the_open_calls_of_a_subgraph_whose_tool_step_crashed_naming_its_namespace",
    ),
    "test_checkpoint_conformance.py": (
        "test_conformance_has_no_failures",
    ),
    "test_checkpoint_guard.py": (
        "test_the_strategy_can_be_chosen_per_thread_and_per_run",
        "test_two_runs_started_together_take_whole_turns_or_the_second_is_refused",
        "test_update_state_does_not_land_inside_a_running_turn",
    ),
    "test_cli_demo.py": (
        "test_a_rejected_key_is_one_line",
        "test_a_thread_continues_and_json_prints_its_whole_history",
        "test_an_unreachable_endpoint_is_one_line_saying_what_to_set",
        "test_demo_prints_roles_paired_calls_usage_and_the_checkpoint",
        "test_openai_base_url_can_come_from_the_environment",
        "test_openai_model_streams_from_a_real_endpoint_over_http",
        "test_the_answer_streams_in_pieces",
    ),
    "test_cli_inspector.py": (
        "test_a_server_that_is_not_langgraph_is_one_line",
        "test_demo_json_without_a_question_prints_the_history_and_appends_nothing",
        "test_demo_on_a_locked_database_is_one_line_and_keeps_the_thread",
    ),
    "test_cli_prune.py": (
        "test_dry_run_prints_what_would_go_and_changes_nothing",
        "test_keep_latest_prunes_every_thread_and_the_archive_opens_like_a_database",
        "test_older_than_deletes_only_threads_idle_that_long",
        "test_prune_says_what_the_file_weighs_after_vacuum_and_vacuum_shrinks_it",
    ),
    "test_cold_read_windows.py": (
        "test_a_cold_read_by_windows_rebuilds_every_state_the_writer_saw",
        "test_the_cold_read_of_a_late_checkpoint_stops_at_its_snapshot",
    ),
    "test_compactions_storage.py": (
        "test_compactions_bytes_per_checkpoint_do_not_grow_with_the_events",
        "test_context_rebuilt_from_every_checkpoint_is_what_the_model_saw",
    ),
    "test_context_property.py": (
        "test_a_sample_of_trimmed_contexts_over_real_http",
        "test_every_model_call_of_a_growing_thread_is_accepted",
        "test_every_trimmed_500_turn_context_is_accepted",
    ),
    "test_demo_model_settings.py": (
        "test_a_real_call_or_a_plain_answer_gets_no_hint",
        "test_max_retries_is_how_often_a_failed_request_is_sent_again",
    ),
    "test_demo_readme.py": (
        "test_readme_snippet_runs",
    ),
    "test_demo_server_failures.py": (
        "test_a_server_error_is_one_line_and_the_thread_continues",
        "test_null_content_refused_by_the_server_names_the_profile_that_avoids_it",
        "test_the_demo_caps_a_turn_with_a_small_default",
        "test_the_tool_choice_and_max_model_calls_flags_reach_the_requests",
        "test_usage_the_server_does_not_report_is_said_to_be_missing",
    ),
    "test_inspect_threads.py": (
        "test_the_listing_rebuilds_the_newest_20_heads_unless_told_otherwise",
    ),
    "test_demo_weather.py": (
        "test_a_second_question_on_a_thread_sees_the_first",
        "test_create_agent_applies_its_context_policy_and_records_the_cut",
        "test_create_agent_records_the_cut_in_the_model_step_without_a_context_node",
        "test_every_city_the_offline_model_recognises_has_a_forecast",
        "test_get_weather_answers_in_the_language_the_city_was_named_in",
    ),
    "test_dropin_snapshots.py": (
        "test_on_a_plain_saver_every_load_walks_at_most_the_snapshot_cadence",
        "test_the_shipped_checkpointer_never_snapshots_by_count_warm_or_cold",
    ),
    "test_edit.py": (
        "test_a_fork_before_the_edit_does_not_see_it",
        "test_the_inspector_shows_the_original_as_superseded_in_text_and_json",
    ),
    "test_edit_call_ids.py": (
        "test_a_later_reply_reusing_a_dropped_call_id_is_rekeyed_and_can_be_edited",
        "test_a_users_own_node_reusing_a_dropped_call_id_gets_a_clear_error",
    ),
    "test_foreign_delta_channels.py": (
        "test_a_deepagents_thread_reads_back_with_the_same_ids_on_a_cold_saver",
        "test_an_apps_own_delta_reducers_read_back_as_on_langgraphs_saver",
        "test_langgraphs_delta_messages_channel_reads_back_as_on_langgraphs_saver",
    ),
    "test_history_walks.py": (
        "test_the_async_cold_sqlite_read_returns_what_the_savers_own_read_returns",
        "test_the_async_sqlite_walk_equals_the_savers_own_delta_history",
    ),
    "test_hooks.py": (
        "test_two_turns_at_once_take_whole_turns_when_langgraph_wraps_the_loops_enter",
    ),
    "test_idempotent_timeouts.py": (  # each waits out a timeout or a slow first attempt
        "test_a_marked_sync_call_past_its_timeout_runs_again_with_its_key_and_logs_its_one_charge",
        "test_a_marked_async_call_past_its_timeout_is_cancelled_and_run_again_with_its_key",
        "test_an_unmarked_call_past_its_timeout_is_not_run_again",
        "test_a_step_timeout_under_invoke_ends_after_the_marked_tool_whose_receipt_recovery_serves",
        "test_a_step_timeout_under_ainvoke_cancels_the_marked_tool_and_recovery_reruns_its_key",
    ),
    "test_import_layers.py": (
        "test_every_import_points_down_the_documented_layers",
        "test_the_checks_see_a_function_level_import_and_skip_type_checking_ones",
        "test_the_import_graph_has_no_cycles",
    ),
    "test_inspect.py": (
        "test_rows_are_plain_json_and_convert_to_dataframes",
    ),
    "test_langchain_middleware.py": (
        "test_a_middleware_that_rewrites_the_request_in_place_records_an_edit_event",
        "test_a_turn_that_failed_after_its_tool_ran_resumes_from_the_database",
        "test_context_policy_summarizer_is_the_append_only_alternative",
        "test_hitl_middleware_approve_resumes_from_the_database",
        "test_hitl_middleware_edit_and_reject_in_one_pause_over_two_turns",
        "test_hitl_middleware_edit_keeps_the_original_call_and_runs_the_edited_one",
        "test_per_call_review_a_new_message_instead_then_edit_and_reject_by_interrupt_id",
        "test_summarization_middleware_runs_ten_turns_its_removals_recorded_as_events",
        "test_two_turns_with_a_tool_call_each_keep_threadlogs_log_valid",
    ),
    "test_langchain_step_cap.py": (
        "test_model_call_limit_middleware_ends_the_run_with_every_call_answered",
    ),
    "test_log_properties.py": (
        "test_batching_invariance_including_the_error",
        "test_channel_steps_equal_a_replay_of_the_accepted_writes",
        "test_copies_of_a_channel_are_independent_forks",
        "test_every_write_keeps_the_invariants_or_fails_changing_nothing",
    ),
    "test_marker_checkpoint_wait.py": (
        "test_on_a_plain_saver_the_marker_polls_until_its_checkpoint_is_stored",
        "test_under_async_durability_a_tool_starts_after_its_checkpoint_with_no_polling",
    ),
    "test_model_node_http.py": (
        "test_token_budgets_work_offline_where_chatopenai_counting_fails",
    ),
    "test_multi_agent_crash.py": (
        "test_a_new_message_instead_of_the_approval_answers_the_paused_call",
    ),
    "test_multi_agent_handoff.py": (
        "test_a_handed_off_agent_pauses_for_review_and_resumes_after_a_failure",
    ),
    "test_multi_agent_ports.py": (
        "test_a_documented_multi_agent_form_runs_two_turns_on_threadlogs_log_and_checks_clean",
    ),
    "test_multi_agent_swarm.py": (
        "test_a_swarm_on_threadlogs_log_hands_off_both_ways_over_two_turns",
    ),
    "test_nested_subgraph_recovery.py": (
        "test_new_message_after_a_nested_subgraph_stopped_mid_step_keeps_its_stored_work",
    ),
    "test_notebooks.py": (
        "test_the_notebooks_extra_covers_every_import_of_the_notebooks",
    ),
    "test_outcome_unknown.py": (
        "test_a_call_past_the_tool_nodes_timeout_that_raises_is_answered_outcome_unknown",
        "test_a_call_run_by_langgraphs_prebuilt_tool_node_has_no_marker_and_reads_not_completed",
        "test_a_cancelled_run_answers_the_running_call_outcome_unknown_and_the_waiting_one_not_completed",
        "test_a_run_cancelled_inside_a_subgraph_answers_the_running_call_outcome_unknown",
        "test_a_step_timeout_answers_the_running_call_outcome_unknown_and_the_waiting_one_not_completed",
        "test_a_timed_out_result_is_stored_and_says_the_outcome_is_unknown",
        "test_with_a_plain_saver_the_model_node_answers_a_started_call_outcome_unknown",
    ),
    "test_own_writes.py": (
        "test_a_thread_begun_by_another_process_is_read_from_the_database",
    ),
    "test_recorded_calls.py": (
        "test_each_calls_record_stores_only_what_is_new",
        "test_inspect_calls_lists_each_model_call_with_the_exact_system_prompt_sent",
    ),
    "test_replay.py": (
        "test_the_demo_threads_replay_through_the_unchanged_graph_on_every_turn",
        "test_no_stored_tool_runs_again_in_any_mode",
        "test_cli_exit_0_when_every_turn_matches_and_1_at_a_divergence",
    ),
    "test_replay_boundary.py": (
        "test_a_call_no_stored_result_answers_is_a_divergence_inside_a_subgraph",
        "test_no_tool_function_runs_in_a_replay_at_any_depth_and_a_faithful_replay_matches",
    ),
    "test_resent_writes.py": (
        "test_a_swarm_stores_flat_bytes_per_turn_in_every_namespace",
        "test_every_checkpoint_of_a_swarm_reads_back_as_on_langgraphs_saver",
    ),
    "test_server_entry.py": (
        "test_a_partial_of_the_entry_point_fixes_the_url_and_the_savers_options",
    ),
    "test_sql_lives_in_backends.py": (
        "test_no_backend_dispatch_on_a_connection_class_or_module_name_outside_backends",
        "test_no_sql_at_all_outside_backends",
        "test_one_helper_unwraps_a_saver",
        "test_sql_naming_langgraphs_tables_is_in_at_most_three_files_all_in_backends",
    ),
    "test_stored_message_records.py": (
        "test_a_cold_get_state_of_a_swarm_thread_validates_no_stored_message",
    ),
    "test_store_items.py": (
        "test_inspect_store_lists_what_each_step_searched_put_and_got",
        "test_a_memory_read_every_turn_is_stored_once",
        "test_the_html_page_and_the_notebook_show_the_items_under_each_step",
        "test_an_async_app_with_an_injected_store_records_its_items",
    ),
    "test_handoff_subgraphs.py": ("*",),  # a swarm's and a supervisor's turns
    "test_summarizing_chatbot.py": (
        "test_the_summarizing_chatbot_runs_ten_turns_and_its_deletions_are_events",
    ),
    "test_thread_lifecycle.py": (
        "test_prune_keep_latest_frees_the_rows_and_values_it_drops",
        "test_rollback_of_a_middle_run_keeps_later_runs_reading_the_same_and_checksums_passing",
        "test_a_held_thread_is_refused_under_reject_and_waited_for_under_enqueue",
    ),
    "test_tool_node.py": (
        "test_a_timeout_per_tool_applies_only_to_that_tool",
    ),
    "test_tool_node_property.py": (
        "test_every_call_gets_exactly_one_result_in_call_order",
    ),
    "test_tool_result_round_trip.py": (
        "test_a_result_that_reads_back_as_other_types_is_kept_with_a_warning",
    ),
    "test_tool_started_marker.py": (
        "test_a_timed_out_sync_tool_is_still_running_and_its_result_says_so",
    ),
    "test_wire.py": (
        "test_a_model_node_serving_many_threads_keeps_its_wire_copies",
    ),
    "test_recover_results.py": (
        "test_new_message_after_a_stopped_step_logs_the_saved_result_async",
    ),
    "test_lock_pool.py": (
        "test_past_the_lock_file_bound_sqlite_runs_queue_and_all_complete",
    ),
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
    _check_table("SLOW_FOR_THE_INNER_LOOP", SLOW_FOR_THE_INNER_LOOP, items)
    for item in items:
        if _uses_postgres(item):
            item.add_marker(pytest.mark.postgres)
        if _listed(item, SUBPROCESS):
            item.add_marker(pytest.mark.subprocess)
        if _listed(item, SLOW) or _listed(item, SLOW_FOR_THE_INNER_LOOP):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures the durability scenarios gathered (kill points, races…)."""
    counts = sys.modules.get("tests.helpers.durability")
    if counts is not None and counts.COUNTS:
        line = ", ".join(f"{k}: {v}" for k, v in sorted(counts.COUNTS.items()))
        terminalreporter.write_line(f"durability counts — {line}")
