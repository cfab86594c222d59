"""What report.py cannot read from a run of the sweep: the cases judged by eye, and the test that holds each case."""

T = 'tests/'
CFG_BASE, CFG_PRE, CFG_FT = T + 'config/test_base.py::', T + 'config/test_pretrain.py::', T + 'config/test_finetune.py::'
FILES, RESULTS = T + 'finetuning/tasks/test_files.py::', T + 'finetuning/test_results.py::'
CLASSIFIER, NOTEBOOKS = T + 'finetuning/test_classifier.py::', T + 'tools/test_notebooks.py::'

# the verdict read by eye, by case id (both runs) or (id, 'before' | 'now'); WORDS says why, after the line seen
VERDICT = {
    # the right ending, though not the sweep's pattern: argparse's usage error naming the choices, a checker that
    # fails with status 1 naming the fix (counted as unclear before they were read by eye)
    **{(i, 'now'): 'refused' for i in ('V12', 'N02', 'N03', 'N05')},
}
WORDS = {
    ('V12', 'now'): "argparse's usage error, naming the choices",
    ('N02', 'now'): "right: argparse's usage error, naming the choices",
    ('N03', 'now'): 'right: the checker fails, naming the fix',
    ('N05', 'now'): 'right: the checker fails, naming what is missing and how to get it back',
}

# the test that holds a case wrong or unclear before the fixes (fails before its fix, passes after); the cases already
# right are held by the sweep only. report.py refuses a name that is not a test function of that file.
TESTS = {
    'P28': CFG_PRE + 'test_run_name_must_be_a_plain_name', 'P29': CFG_PRE + 'test_run_name_must_be_a_plain_name',
    'P33': T + 'data/test_batches.py::test_more_eval_examples_than_a_tenth_of_the_corpus_are_cut_and_said',
    **{i: CFG_BASE + 'test_a_config_file_not_in_utf8_is_named_with_the_line' for i in ('P42', 'P43', 'P44')},
    'P48': CFG_BASE + 'test_a_key_that_is_not_a_name_is_refused',
    'P73': T + 'pretraining/test_init_from.py::test_a_local_folder_that_does_not_load_is_named',
    'F11': T + 'pretrained/test_export.py::test_model_directories_that_cannot_work_are_refused',
    'P90': T + 'test_pretrain.py::test_overwrite_trains_a_new_tokenizer_for_new_settings',
    'F24': T + 'finetuning/tasks/glue/test_sources.py::test_long_fields_blank_lines_and_bad_bytes',
    'F61': CFG_FT + 'test_a_per_task_key_on_the_command_line_replaces_the_presets_task_overrides_and_says_so',
    'F70': RESULTS + 'test_a_damaged_results_table_is_named_with_the_fix',
    'F71': RESULTS + 'test_a_damaged_results_table_is_named_with_the_fix',
    'F75': CLASSIFIER + 'test_a_damaged_finetuned_run_is_named_with_the_fix',
    'F76': CLASSIFIER + 'test_a_damaged_finetuned_run_is_named_with_the_fix',
    'F77': T + 'finetuning/test_sweep.py::test_an_output_folder_that_cannot_be_made_stops_the_sweep_before_any_run',
    'F80': T + 'finetuning/tasks/glue/test_encoding.py::test_a_damaged_cache_file_is_encoded_again',
    'T03': FILES + 'test_a_task_yaml_not_in_utf8_is_named_with_its_line',
    'T04': FILES + 'test_a_task_yaml_not_in_utf8_is_named_with_its_line',
    **{i: FILES + 'test_a_flag_or_scale_of_the_wrong_kind_is_refused_naming_the_key' for i in ('T16', 'T17', 'T24')},
    'T20': FILES + 'test_a_file_name_that_is_not_a_string_is_refused', 'T23': FILES + 'test_one_metric_name_is_one_metric',
    **{i: FILES + 'test_a_file_that_is_not_utf8_is_named_with_its_line' for i in ('T32', 'T33', 'T34')},
    'T42': FILES + 'test_a_quote_left_open_in_a_csv_is_refused_naming_its_line',
    'T44': FILES + 'test_labels_that_are_one_number_written_two_ways_are_refused',
    'T45': FILES + 'test_a_quote_in_a_tsv_text_is_text',
    'T47': FILES + 'test_a_jsonl_record_that_is_not_an_object_is_named',
    'T49': FILES + 'test_a_parquet_file_that_is_not_parquet_is_named',
    'T89': T + 'finetuning/tasks/qa/test_features.py::test_question_is_cut_and_no_room_is_an_error',
    'C22': T + 'experiments/test_compare.py::test_a_missing_or_unreadable_local_file_fails_before_anything_is_launched',
    'V11': T + 'convert/test_tf.py::test_refuses_hparams_of_another_model',
    'V12': T + 'convert/test_main.py::test_no_subcommand_names_the_choices',
    'V17': T + 'convert/test_tf.py::test_an_output_folder_it_cannot_make_is_refused_before_the_checkpoint_is_read',
    'N03': NOTEBOOKS + 'test_check_fails_on_an_edited_script_from_the_command_line',
    'N04': NOTEBOOKS + 'test_a_notebook_that_is_not_json_is_one_line',
    'N05': NOTEBOOKS + 'test_check_with_a_notebook_missing_says_how_to_get_it_back',
    'E08': T + 'finetuning/tasks/qa/test_hub.py::test_the_command_line_ends_a_bad_source_with_one_line_and_status_2',
}

# the counts paragraph of docs/robustness.md (the page's first part, the cases 1-11, is written by hand)
COUNTS = """**Counts.** {total} cases tried: 40 for the eleven cases named when this work began (all fixed,
each held by a test written first), and {tried} in the sweep below, run on the tree before the fixes
(`python benchmarks/robustness_sweep/sweep.py`; each case a real command on a tiny setup, kills and full disks real).
Of the sweep's cases, {wrong} gave a **wrong** result with status 0 and {unclear} were
**unclear** ({tracebacks} tracebacks, {others} other endings); {right} were already right.
The {bad} wrong or unclear cases were run again on this tree ({rerun} of them; the "now" column of a case marked
*not re-run* is what it was): {fixed} are right now, {left} still wrong or unclear{left_ids}.
The cases already right were not run again."""
