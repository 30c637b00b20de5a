"""The tests the fast loop (``python -m pytest -m "not slow" -n 2``) leaves to the full suite, each with why.

``tests/conftest.py`` marks each one ``slow`` at collection (every parametrized case of it). Chosen by measure: each
took 1 s or more (its slowest case, setup and teardown included) in a fast-loop run under ``-n 2`` on this 2-core
machine at load average 7-10 (2026-12-01); the seconds are that run's. Tests marked ``@pytest.mark.slow`` in their
own file are not repeated here. ``tests/unit/test_slow_list.py`` checks that every entry names a test that exists.
"""

from __future__ import annotations

#: test id (``FILE::FUNCTION``, without parameters) -> why it is slow (and its seconds in that run)
SLOW: dict[str, str] = {
    # starts crashpoint (or Python) in a subprocess, most with a run of real worker processes
    "tests/integration/test_resume_exact.py::test_an_interrupted_pytest_session_is_stored_incomplete":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (51 s)",
    "tests/integration/test_pack_world.py::test_a_pack_with_its_own_tools_runs_with_real_kills_from_any_folder":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (40 s)",
    "tests/integration/test_resume_kill.py::test_resume_in_process_runs_only_what_is_missing":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (38 s)",
    "tests/integration/test_resume_exact.py::test_a_subset_does_not_stamp_the_full_run_complete":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (30 s)",
    "tests/integration/test_resume_exact.py::test_a_golden_run_that_fails_on_resume_is_a_stored_failing_result":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (28 s)",
    "tests/integration/test_cli_summary.py::test_default_output_has_a_row_per_case_not_per_run":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (27 s)",
    "tests/integration/test_repro_shell.py::test_a_pasted_reproduce_line_reproduces_the_failure":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (25 s)",
    "tests/integration/test_replay.py::test_an_incident_of_an_adapter_run_reruns_that_adapter":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (25 s)",
    "tests/integration/test_resume_exact.py::test_a_run_with_a_live_writer_is_refused_and_a_dead_writers_run_is_taken_over":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (24 s)",
    "tests/integration/test_replay.py::test_an_incident_case_fails_on_the_buggy_engine_and_passes_on_the_reference":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (23 s)",
    "tests/integration/test_replay.py::test_an_incident_of_a_case_with_faults_keeps_them_and_still_fails":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (23 s)",
    "tests/integration/test_report_truth.py::test_incident_suggests_a_command_that_reproduces":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (23 s)",
    "tests/integration/test_replay.py::test_a_trace_of_an_adapter_run_replays_on_that_adapter":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (22 s)",
    "tests/integration/test_resume_exact.py::test_an_edited_case_starts_a_new_run":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (21 s)",
    "tests/integration/test_cli.py::test_a_crash_point_never_reached_is_an_error_not_a_pass":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (18 s)",
    "tests/unit/test_store.py::test_a_sweep_killed_half_way_leaves_its_finished_results":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (16 s)",
    "tests/unit/test_input_bounds.py::test_pytest_worker_timeout_that_overflows_time_t_is_a_usage_error":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (15 s)",
    "tests/integration/test_cli.py::test_run_golden_only_writes_the_json_document":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (12 s)",
    "tests/integration/test_exit_codes.py::test_0_when_every_run_passed":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (11 s)",
    "tests/integration/test_process_hygiene.py::test_a_terminated_or_killed_sweep_leaves_no_run_folder_and_no_process":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (10 s)",
    "tests/integration/test_cli.py::test_run_one_crash_point_kills_and_resumes":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (10 s)",
    "tests/integration/test_adapter_call_timeout.py::test_ctrl_c_stops_a_command_whose_adapter_hangs":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (10 s)",
    "tests/integration/test_adapter_call_timeout.py::test_ctrl_c_stops_a_command_whose_runs_are_on_threads_and_whose_worker_hangs":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (2 x 12 s, earned2)",
    "tests/integration/test_process_hygiene.py::test_a_timed_out_run_leaves_no_run_folder_and_no_process":
        "waits for a worker to time out (2 x 2 s worker timeout, 5 s, earned2)",
    "tests/unit/test_weekly.py::test_weekly_command_in_every_format":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (10 s)",
    "tests/integration/test_conformance.py::test_cli_run_takes_any_adapter":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (9 s)",
    "tests/integration/test_resume_kill.py::test_resume_with_nothing_to_resume_starts_a_new_run":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (9 s)",
    "tests/integration/test_report_truth.py::test_stored_adapter_column_names_the_real_adapter_not_the_guard":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (9 s)",
    "tests/integration/test_replay.py::test_a_different_engine_shows_the_first_divergent_decision":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (7 s)",
    "tests/integration/test_output_paths.py::test_report_and_incident_refuse_an_unwritable_out":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (6 s)",
    "tests/integration/test_replay.py::test_the_golden_trace_replays_with_no_divergence":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (6 s)",
    "tests/integration/test_exit_codes.py::test_1_when_a_run_did_not_pass":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (6 s)",
    "tests/integration/test_pack_world.py::test_an_engine_that_loses_keys_fails_on_the_pack_tools":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (5 s)",
    "tests/integration/test_executors.py::test_an_unreachable_dask_scheduler_is_exit_2_naming_it":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (5 s)",
    "tests/integration/test_executors.py::test_run_with_forced_progress_draws_the_bar_on_stderr_only":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (4 s)",
    "tests/unit/test_yaml_hazards.py::test_hazard_is_refused_with_its_message":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (4 s)",
    "tests/unit/test_input_bounds.py::test_builtin_packs_stay_within_the_bounds":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (4 s)",
    "tests/unit/test_input_bounds.py::test_worker_timeout_that_overflows_time_t_is_a_usage_error":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (3 s)",
    "tests/integration/test_recovery.py::test_a_killed_worker_leaves_no_lease_behind":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (3 s)",
    "tests/unit/test_reports.py::test_an_incomplete_run_says_so":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (3 s)",
    "tests/integration/test_cli.py::test_bad_case_exits_2_names_file_line_field_and_writes_nothing":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (3 s)",
    "tests/integration/test_executors.py::test_no_progress_prints_no_dots_and_no_bar":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (3 s)",
    "tests/unit/test_reports.py::test_report_command":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (3 s)",
    "tests/integration/test_cli.py::test_validate_builtin_pack_by_path_and_name":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (2 s)",
    "tests/integration/test_ads_audit.py::test_account_is_identical_in_another_process":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (2 s)",
    "tests/integration/test_hostile_engine_strings.py::test_trace_replay_and_incident_of_a_hostile_run":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (2 s)",
    "tests/unit/test_startup_and_readme.py::test_start_up_imports_nothing_heavy":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (2 s)",
    "tests/unit/test_layout.py::test_the_worker_imports_no_heavy_library":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (2 s)",
    "tests/unit/test_reports.py::test_report_on_a_missing_store_exits_2_on_a_foreign_one_3":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (1 s)",
    "tests/integration/test_ads_audit.py::test_pack_validates_by_name_and_path":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (1 s)",
    "tests/integration/test_executors.py::test_pool_processes_exit_when_their_caller_is_killed":
        "starts crashpoint (or Python) in a subprocess, most with a run of real worker processes (1 s)",
    # a whole pytest session (pytester) runs crash items with real kills
    "tests/integration/test_pytest_plugin.py::test_chaos_seed_last_draws_exactly_the_previous_schedules":
        "a whole pytest session (pytester) runs crash items with real kills (70 s)",
    "tests/integration/test_xdist.py::test_chaos_under_xdist_records_every_result_once":
        "a whole pytest session (pytester) runs crash items with real kills (64 s)",
    "tests/integration/test_pytest_plugin.py::test_a_malformed_case_is_a_collection_error_not_a_skip":
        "a whole pytest session (pytester) runs crash items with real kills (35 s)",
    "tests/integration/test_one_verdict.py::test_pytest_applies_the_vacuity_check_the_cli_applies":
        "a whole pytest session (pytester) runs crash items with real kills (34 s)",
    "tests/integration/test_pytest_results.py::test_a_foreign_results_db_stops_the_session_with_a_message":
        "a whole pytest session (pytester) runs crash items with real kills (26 s)",
    "tests/integration/test_pytest_plugin.py::test_chaos_option_clash_with_another_plugin_does_not_break_pytest":
        "a whole pytest session (pytester) runs crash items with real kills (25 s)",
    "tests/integration/test_pytest_plugin.py::test_another_plugins_chaos_option_that_takes_a_value_is_not_read_and_the_summary_says_so":
        "a whole pytest session (pytester) runs crash items with real kills (12 s at load 10, 2026-12-02)",
    "tests/integration/test_pytest_plugin.py::test_a_skipped_target_sweep_is_counted_in_the_summary":
        "a whole pytest session (pytester) runs crash items with real kills (5 s at load 10, 2026-12-02)",
    "tests/integration/test_pytest_plugin.py::test_a_failure_shows_the_oracle_trace_lines_and_a_repro_command":
        "a whole pytest session (pytester) runs crash items with real kills (25 s)",
    "tests/integration/test_pytest_plugin.py::test_a_failing_schedule_is_shrunk_written_and_given_a_one_line_repro":
        "a whole pytest session (pytester) runs crash items with real kills (24 s)",
    "tests/integration/test_pytest_results.py::test_junitxml_and_the_results_store":
        "a whole pytest session (pytester) runs crash items with real kills (20 s)",
    "tests/integration/test_pytest_plugin.py::test_chaos_makes_one_item_per_crash_point_with_readable_ids":
        "a whole pytest session (pytester) runs crash items with real kills (20 s)",
    "tests/integration/test_pytest_plugin.py::test_plain_run_is_one_golden_item_per_case":
        "a whole pytest session (pytester) runs crash items with real kills (13 s)",
    "tests/integration/test_pytest_plugin.py::test_a_bad_chaos_seed_is_a_usage_error":
        "a whole pytest session (pytester) runs crash items with real kills (12 s)",
    "tests/integration/test_kills.py::test_a_pytest_item_whose_crash_log_was_rewritten_fails":
        "a whole pytest session (pytester) runs crash items with real kills (7 s)",
    "tests/integration/test_pack_world.py::test_pytest_chaos_runs_a_pack_with_its_own_tools":
        "a whole pytest session (pytester) runs crash items with real kills (6 s)",
    # took 1 s or more in the measuring run (parsing, rendering or stores of many rows)
    "tests/unit/test_reports.py::test_junit_of_a_real_run_is_valid_and_carries_oracle_and_repro":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (38 s)",
    "tests/integration/test_ads_audit.py::test_golden_run_ends_as_expected":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (24 s)",
    "tests/integration/test_crash_modes.py::test_inprocess_finds_what_the_real_kill_finds_on_broken_engines":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (20 s)",
    "tests/integration/test_replay.py::test_a_trace_of_a_killed_run_replays_too":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (16 s)",
    "tests/integration/test_report_truth.py::test_weekly_keys_carry_the_engine":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (15 s)",
    "tests/unit/test_case_model.py::test_load_of_dump_is_the_same_case":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (15 s)",
    "tests/quality/test_late_answer.py::test_a_tool_that_answers_after_its_timeout_catches_a_new_key_after_a_timeout":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (13 s)",
    "tests/unit/test_coverage.py::test_matrix_counts_runs_per_step_and_fault_kind":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (13 s)",
    "tests/integration/test_crash_modes.py::test_state_kept_in_the_process_fools_the_simulated_crash_not_the_real_kill":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (12 s)",
    "tests/integration/test_replay.py::test_save_traces_writes_one_file_per_run_named_after_the_crash_point":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (11 s)",
    "tests/unit/test_weekly.py::test_weeks_and_runs":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (9 s)",
    "tests/unit/test_store.py::test_two_processes_writing_at_once_lose_nothing":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (9 s)",
    "tests/unit/test_coverage.py::test_unused_faults_are_reported_as_vacuity":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (9 s)",
    "tests/unit/test_loader_hostile.py::test_file_size_limit":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (8 s)",
    "tests/unit/test_store.py::test_two_processes_creating_a_new_store_at_once":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (7 s)",
    "tests/unit/test_coverage.py::test_matrix_shows_where_a_broken_engine_fails":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (6 s)",
    "tests/integration/test_recovery.py::test_two_recovering_workers_never_run_the_same_step":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (6 s)",
    "tests/integration/test_recovery.py::test_without_leases_two_workers_repeat_steps":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (5 s)",
    "tests/integration/test_hostile_engine_strings.py::test_a_5_mb_stop_reason_is_cut_with_a_marker":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (5 s)",
    "tests/unit/test_loader_hostile.py::test_nesting_limit_block_and_flow":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (4 s)",
    "tests/unit/test_store.py::test_a_run_killed_half_way_keeps_its_rows_and_is_incomplete":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (4 s)",
    "tests/quality/test_late_answer.py::test_the_older_tool_faults_apply_the_effect_once_on_that_engine":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (4 s)",
    "tests/unit/test_reports.py::test_html_escapes_every_hostile_string":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (3 s)",
    "tests/unit/test_reports.py::test_html_and_markdown_count_unsupported_runs":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (3 s)",
    "tests/integration/test_replay.py::test_a_call_with_no_recorded_answer_is_a_divergence":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (3 s)",
    "tests/unit/test_oracles.py::test_unmutated_golden_runs_pass_every_oracle":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (2 s)",
    "tests/unit/test_store.py::test_rows_of_any_shape_render":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (2 s)",
    "tests/unit/test_loader.py::test_new_fault_event_errors":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (2 s)",
    "tests/integration/test_worker_isolation.py::test_reference_workers_ignore_a_crashpoint_folder_in_the_working_directory":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (2 s)",
    "tests/integration/test_forkserver_wait.py::test_a_wait_ended_by_an_exception_kills_the_worker_and_the_zygote_stays_in_step":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/unit/test_charts.py::test_legend_hides_no_bar":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/unit/test_fault_kinds.py::test_the_builtin_packs_load_with_the_registry":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/integration/test_ads_audit.py::test_account_is_large_and_identical_for_the_same_seed":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/unit/test_rules.py::test_every_finding_carries_the_id_of_the_rule_that_made_it":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/unit/test_loader.py::test_load_target_builtin_pack_and_single_file":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/unit/test_loader_hostile.py::test_non_json_value_in_a_list_and_in_a_workflow":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/integration/test_report_truth.py::test_html_and_markdown_show_crash_points_covered_as_a_percentage":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    "tests/integration/test_report_truth.py::test_twelve_failures_of_one_bug_are_one_group_everywhere":
        "took 1 s or more in the measuring run (parsing, rendering or stores of many rows) (1 s)",
    # hypothesis draws hostile inputs and runs each through the CLI
    "tests/integration/test_hostile_fuzz.py::test_generated_command_lines":
        "hypothesis draws hostile inputs and runs each through the CLI (109 s)",
    "tests/integration/test_hostile_fuzz.py::test_generated_trace_files":
        "hypothesis draws hostile inputs and runs each through the CLI (63 s)",
    "tests/integration/test_hostile_fuzz.py::test_generated_store_files":
        "hypothesis draws hostile inputs and runs each through the CLI (56 s)",
    # a sweep of real worker processes killed at crash points
    "tests/integration/test_recovery.py::test_sampled_sweep_covers_each_crash_point_once_however_many_runs_kill_there":
        "a sweep of real worker processes killed at crash points (24 s)",
    "tests/integration/test_recovery.py::test_crash_during_recovery_sweep_kills_twice_and_passes":
        "a sweep of real worker processes killed at crash points (22 s)",
    "tests/integration/test_ads_audit.py::test_escalation_oracle_catches_an_engine_that_ignores_the_verdict":
        "a sweep of real worker processes killed at crash points (15 s)",
    "tests/quality/test_generate.py::test_same_seed_draws_the_same_schedules":
        "a sweep of real worker processes killed at crash points (11 s)",
    "tests/integration/test_kills.py::test_a_worker_that_never_calls_the_probe_is_not_a_pass":
        "a sweep of real worker processes killed at crash points (9 s)",
    "tests/integration/test_adapter_call_timeout.py::test_a_hanging_status_call_is_unknown_after_the_call_timeout":
        "a sweep of real worker processes killed at crash points (9 s)",
    "tests/integration/test_executors.py::test_process_pool_and_threads_give_the_same_verdicts_with_progress_in_the_caller":
        "a sweep of real worker processes killed at crash points (9 s)",
    "tests/integration/test_kills.py::test_every_kill_is_recorded_with_the_dead_pid_its_signal_and_the_new_pid":
        "a sweep of real worker processes killed at crash points (8 s)",
    "tests/integration/test_process_hygiene.py::test_a_hung_worker_is_unknown_not_passed":
        "a sweep of real worker processes killed at crash points (7 s)",
    "tests/integration/test_process_hygiene.py::test_a_worker_that_kills_its_zygote_is_an_error_and_leaves_nothing":
        "a sweep of real worker processes killed at crash points (7 s)",
    "tests/integration/test_process_hygiene.py::test_a_child_left_in_the_workers_group_is_killed_and_reported":
        "a sweep of real worker processes killed at crash points (7 s)",
    "tests/integration/test_process_hygiene.py::test_a_daemon_started_by_harness_side_engine_code_dies_with_the_run":
        "a sweep of real worker processes killed at crash points (7 s)",
    "tests/integration/test_process_hygiene.py::test_a_daemon_child_in_a_new_session_is_killed_and_reported":
        "a sweep of real worker processes killed at crash points (6 s)",
    "tests/unit/test_layout.py::test_every_third_party_module_a_command_imports_at_module_level_is_a_dependency":
        "a sweep of real worker processes killed at crash points (6 s)",
    "tests/integration/test_process_hygiene.py::test_a_hung_worker_is_killed_with_its_whole_group":
        "a sweep of real worker processes killed at crash points (6 s)",
    "tests/integration/test_kills.py::test_an_engine_that_truncates_the_crash_log_is_an_error":
        "a sweep of real worker processes killed at crash points (5 s)",
    "tests/integration/test_process_hygiene.py::test_a_worker_that_exits_without_being_killed_is_an_error":
        "a sweep of real worker processes killed at crash points (5 s)",
    "tests/integration/test_process_hygiene.py::test_a_worker_that_writes_garbage_to_its_store_is_an_error":
        "a sweep of real worker processes killed at crash points (4 s)",
    "tests/integration/test_kills.py::test_a_simulated_crash_is_recorded_as_simulated":
        "a sweep of real worker processes killed at crash points (4 s)",
    "tests/integration/test_process_hygiene.py::test_a_worker_that_does_nothing_is_an_error_not_a_pass":
        "a sweep of real worker processes killed at crash points (4 s)",
    "tests/integration/test_process_hygiene.py::test_a_worker_daemon_with_an_empty_environment_dies_with_the_run":
        "a sweep of real worker processes killed at crash points (3 s)",
    "tests/unit/test_hostile_reports.py::test_html_carries_no_control_characters":
        "a sweep of real worker processes killed at crash points (3 s)",
    "tests/integration/test_kills.py::test_a_kill_that_lands_on_a_supervisors_child_is_an_error":
        "a sweep of real worker processes killed at crash points (3 s)",
    "tests/integration/test_process_hygiene.py::test_sys_exit_in_adapter_code_is_an_error_verdict":
        "a sweep of real worker processes killed at crash points (3 s)",
    "tests/unit/test_reports.py::test_html_is_self_contained_and_shows_timelines":
        "a sweep of real worker processes killed at crash points (2 s)",
    "tests/unit/test_rules.py::test_a_rule_that_raises_never_crashes_a_sweep":
        "a sweep of real worker processes killed at crash points (2 s)",
    "tests/integration/test_kills.py::test_a_probe_that_records_a_kill_without_dying_is_an_error":
        "a sweep of real worker processes killed at crash points (2 s)",
    "tests/quality/test_generate.py::test_a_start_redelivered_after_a_deploy_renaming_its_step_is_a_duplicate":
        "a sweep of real worker processes killed at crash points (2 s)",
    "tests/unit/test_engine.py::test_a_skipped_task_says_why_in_the_trace":
        "a sweep of real worker processes killed at crash points (2 s)",
    "tests/integration/test_pack_world.py::test_the_pack_tools_get_the_ledger_faults_keys_and_crash_points":
        "a sweep of real worker processes killed at crash points (1 s)",
    # a certification: every level's sweep with real kills
    "tests/integration/test_conformance.py::test_broken_engine_fails_its_claim_with_a_repro":
        "a certification: every level's sweep with real kills (25 s)",
    "tests/integration/test_conformance.py::test_adapter_that_raises_is_an_error_and_unsupported_is_not_a_pass":
        "a certification: every level's sweep with real kills (18 s)",
    "tests/integration/test_kills.py::test_certify_on_a_worker_that_never_calls_the_probe_reaches_no_level":
        "a certification: every level's sweep with real kills (18 s)",
    "tests/integration/test_conformance.py::test_hanging_adapter_is_unknown_and_leaves_nothing_running":
        "a certification: every level's sweep with real kills (11 s)",
    "tests/integration/test_kills.py::test_a_narrowed_certificate_says_so":
        "a certification: every level's sweep with real kills (4 s)",
    # a real engine (DBOS, Temporal or LangGraph) in worker processes
    "tests/integration/test_worker_isolation.py::test_an_adapter_without_fork_workers_ignores_a_crashpoint_folder_too":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (13 s)",
    "tests/adapters/test_dbos_warm.py::test_a_seeded_database_is_what_dbos_migrates_and_only_it_is_unsynced":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (12 s)",
    "tests/adapters/test_target_langgraph.py::test_a_mode_the_installed_langgraph_lacks_is_unsupported":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (11 s)",
    "tests/adapters/test_target_temporal.py::test_golden_run_of_the_teams_workflows":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (9 s)",
    "tests/adapters/test_target_dbos.py::test_golden_run_of_the_teams_workflows":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (4 s)",
    "tests/adapters/test_target_langgraph.py::test_golden_run_of_the_teams_graph":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (4 s)",
    "tests/adapters/test_target_langgraph.py::test_two_processes_opening_a_new_run_at_once_both_get_the_saver":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (17 s at load 9.6, 2026-12-01)",
    "tests/adapters/test_target_langgraph.py::test_a_targets_zygote_is_one_of_the_zygotes_ctrl_c_kills":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (2 s at load 21, 2026-12-01)",
    "tests/adapters/test_target_langgraph.py::test_zygotes_do_not_pile_up_in_a_long_process":
        "a real engine (DBOS, Temporal or LangGraph) in worker processes (28 s at load 7-9, 2026-12-01)",
    # a team's code on a real engine in worker processes
    "tests/adapters/test_target_temporal.py::test_a_server_crash_while_the_refund_waits_keeps_its_history":
        "a team's code on a real engine in worker processes (11 s)",
    "tests/quality/test_target_variants.py::test_the_named_rule_catches_the_variant_every_time":
        "a team's code on a real engine in worker processes (8 s)",
    "tests/adapters/test_target_temporal.py::test_a_verified_kill_inside_an_activity_is_retried_by_temporal_in_a_new_process":
        "a team's code on a real engine in worker processes (8 s)",
    "tests/adapters/test_target_langgraph.py::test_async_durability_loses_the_refund_step_every_time":
        "a team's code on a real engine in worker processes (7 s)",
    "tests/adapters/test_target_langgraph.py::test_a_sweep_in_a_relative_workdir_marks_and_reaps_by_the_resolved_folder":
        "a team's code on a real engine in worker processes (8 s at load 9.6, 2026-12-01)",
    "tests/quality/test_target_variants.py::test_two_live_processes_on_one_thread_are_caught_every_time":
        "a team's code on a real engine in worker processes (7 s)",
    "tests/quality/test_target_variants.py::test_the_invoke_error_of_either_process_of_a_duplicate_is_kept":
        "a team's code on a real engine in worker processes (8-21 s at load 7-10, 2026-12-01)",
    "tests/quality/test_target_variants.py::test_the_correct_graph_passes_the_golden_runs_that_catch_variants":
        "a team's code on a real engine in worker processes (2 s)",
    "tests/integration/test_executors.py::test_everything_a_run_needs_and_returns_pickles":
        "a team's code on a real engine in worker processes (2 s)",
    "tests/adapters/test_target_temporal.py::test_an_async_durability_is_unsupported_on_temporal":
        "a team's code on a real engine in worker processes (1 s)",
    "tests/integration/test_repro_shell.py::test_every_repro_line_survives_a_shell_with_hostile_names":
        "a team's code on a real engine in worker processes (1 s)",
    # a race of released dbos pinned by repetition
    "tests/adapters/test_dbos_versions.py::test_the_installed_dbos_shows_its_pinned_races":
        "a race of the installed dbos pinned by repetition: runs of real DBOS workers until one is caught, up to "
        "tries_for(rate) of them (one or two runs of about 5 s each at the rates measured; minutes if it is never caught)",
    # a headless Chromium renders the report
    "tests/integration/test_html_browser.py::test_the_report_opens_with_its_summary_and_a_failure_timeline":
        "a headless Chromium renders the report (24 s)",
    "tests/integration/test_html_browser.py::test_a_script_in_a_case_name_is_shown_as_text_and_never_runs":
        "a headless Chromium renders the report (6 s)",
    # a pack case run by the plugin with real kills
    "tests/data/desk_pack/cases/assign_refused_closes_ticket.yaml::assign_refused_closes_ticket":
        "a pack case run by the plugin with real kills (2 s)",
    # not finished when the measuring run was stopped; slow in earlier runs
    "tests/integration/test_resume_kill.py::test_resume_runs_a_missing_pair_whose_kill_also_starts_a_together_run":
        "a sweep of real worker processes killed at crash points, resumed from the store (unmeasured: still running at 1,200 s)",
    "tests/integration/test_resume_kill.py::test_resume_never_mixes_crash_modes":
        "a sweep of real worker processes killed at crash points, resumed from the store (7 s in an earlier run)",
    "tests/integration/test_target_one_verdict.py::test_the_cli_and_pytest_chaos_give_one_run_the_same_verdict":
        "a LangGraph target swept by the CLI and by a pytest session in a subprocess (unmeasured: still running at 1,200 s)",
}
