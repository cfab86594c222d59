"""The resumable sweep: every task of a job (of any kind, `electra.finetuning.tasks.base`), `runs` seeds each, each finished run saved and recorded at
once; then the summary over runs and the test predictions of the selected runs.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd

from electra.config.errors import ConfigError, RunWarning
from electra.config.finetune import FinetuneConfig, is_task_file
from electra.data.tokenizer import pad_token_id, tokenizer_identity
from electra.finetuning.card import unlike_runs, write_finetuned_card
from electra.finetuning.export import save_runs
from electra.finetuning.learner import device_and_autocast
from electra.finetuning.made_by import (MADE_BY, adopt_moved, check_test_folder, data_line, drop_stale, models_line,
                                        record, rules_line)
from electra.finetuning.loading import read_finetuned, run_mismatch, tokenizer_mismatch
from electra.finetuning.inputs import RunInputs, data_digests, data_named, recorded_tokenizer, run_inputs, what_changed
from electra.finetuning.results import JOB_RUNS, ResultsTable, plot_summary, select_runs, summarize, summary_markdown
from electra.finetuning.runs import RunJob, group_dir, runs_phrase, stacks, track_exports, train_jobs
from electra.finetuning.tasks.base import FinetuningTask, TaskData, TaskInfo, TestJob
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.encoding import unknown_share_warning
from electra.finetuning.tasks.files import make_task, read_task_file
from electra.finetuning.tasks.glue.demo import write_demo_glue
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.submission import SUBMISSION_FILES, SUBMISSION_ZIP, zip_submission
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.sources import TaskSource
from electra.finetuning.workers import do_the_rest, parallel_runs, remove_dead_model_copies, run_on_workers
from electra.objective.model import past_pretraining
from electra.pretrained.card import CARD
from electra.pretrained.export import model_files, model_fingerprint, model_source
from electra.runtime.errors import TrainingDiverged, TrainingStopped, stopped_by
from electra.runtime.files import FileDigests, atomic_write_text, hold_lock, path_inside, writable_dir, writable_files
from electra.runtime.processes import is_main_process, world
from electra.runtime.streams import LOG_NAME, also_in_log, log_to
from electra.training.device import resolve_device, resolve_precision

__all__ = ['resolve_data', 'data_description', 'job_tasks', 'check_outputs', 'run_sweep', 'write_summary',
           'write_test_predictions', 'raise_if_diverged']


def resolve_data(data: str, cache_dir: str | Path) -> TaskSource:
    """The source of GLUE's tasks named by the `data` key (`run_sweep`'s `source`): 'hub', a folder, or 'demo', which
    writes the project's sample tasks to `<cache_dir>/demo_glue` once."""
    writable_dir(cache_dir, 'cache_dir')  # the token cache and the demo tasks live there
    if data == 'demo':
        root = Path(cache_dir) / 'demo_glue'
        if not (root / 'diagnostic' / 'diagnostic.tsv').is_file() and is_main_process(): write_demo_glue(root)
        return open_source(str(root))
    return open_source(data)


def data_description(cfg: FinetuneConfig, source: TaskSource) -> str:
    "Where the job's tasks are read from: its GLUE tasks from `source` (the `data` key), its task files their own."
    glue, files = [t for t in cfg.tasks if not is_task_file(t)], [t for t in cfg.tasks if is_task_file(t)]
    return '; '.join(([f"{', '.join(glue)} from {source.description}"] if glue else []) +
                     ([f"the task file{'s' if len(files) > 1 else ''} {', '.join(files)}"] if files else []))


@contextlib.contextmanager
def _read_again():
    "Task files read once more (the summary, the test predictions): what reading them warns was said as the job began."
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RunWarning)
        yield


def job_tasks(cfg: FinetuneConfig, source: TaskSource) -> dict[str, FinetuningTask]:
    "Each task of the job by name: GLUE tasks read `source`, task files their own data (`tasks.files.make_task`)."
    tasks = [make_task(read_task_file(e)) if is_task_file(e) else ClassificationTask(TASKS[e], source) for e in cfg.tasks]
    return {t.name: t for t in tasks}


def _doubled(task: FinetuningTask, cfg: FinetuneConfig, task_cfg: FinetuneConfig) -> bool:
    "double_unordered applies to unordered-pair tasks, or to any pair task whose `task_overrides` switch it on."
    if not isinstance(task, ClassificationTask): return False
    return task_cfg.double_unordered and (task.info.symmetric or 'double_unordered' in cfg.task_overrides.get(task.name, {}))


# -- the sweep

def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _redo_line(name: str, runs: list[int], changed: tuple, unrecorded: tuple, out: Path) -> str:
    """Why finished runs of `name` are fine-tuned again, in one line: what changed since their rows were written, what
    their rows (of an earlier version) do not record, or that their checkpoints are gone."""
    one = len(runs) == 1
    why = []
    if unrecorded: why.append(f"{'its row does' if one else 'their rows do'} not record {' or '.join(unrecorded)} (a "
                              'results table of an earlier version)')
    if changed: why.append(f"since {'its row was' if one else 'their rows were'} written, {_and(list(changed))}")
    if not why: why.append(f"{'its checkpoint is' if one else 'their checkpoints are'} missing from {out}")
    again = 'it again, replacing its row and checkpoint' if one else 'them again, replacing their rows and checkpoints'
    return f"{name} {runs_phrase(runs)}: {'; '.join(why)}; fine-tuning {again}"


def _replaced(ckpt: Path, row: dict) -> str:
    """'' when the checkpoint `ckpt` is the run its results row records (`loading.run_mismatch`); else why not, for
    `_redo_line`: a file copied over it (a backup restored, files moved between groups) or damaged is trained again,
    never predicted from under the row's name."""
    try: why = run_mismatch(read_finetuned(ckpt, mmap=True), row)
    except ConfigError: return f'its checkpoint {ckpt} was damaged (it cannot be read as a fine-tuned run)'
    return f'its checkpoint {ckpt} was replaced: {why}' if why else ''


def _todo(cfg: FinetuneConfig, task: FinetuningTask, results: ResultsTable, out: Path, inputs: list[RunInputs],
          files: dict[str, list[Path]]) -> tuple[list[RunJob], list[str]]:
    """The runs of `task` to train (`inputs`: each run's), and a line for each group of finished runs among them that
    are done again for one reason: a row is reused only when the run's inputs are the ones it records
    (`inputs.what_changed`) and its checkpoint is there and is that run (`_replaced`)."""
    todo, again = [], {}
    for i, (seed, run) in enumerate(zip(cfg.seed_list, inputs)):
        ckpt, row = path_inside(out, f'{task.name}_{i}.pth', key='output_dir'), results.get(task.name, i)
        if row is not None:
            changed, unrecorded = what_changed(row, run, files, cfg.model)
            if not changed and not unrecorded and ckpt.is_file():
                if not (why := _replaced(ckpt, row)): continue
                changed.append(why)
            again.setdefault((tuple(changed), tuple(unrecorded)), []).append(i)
        todo.append(RunJob(task.name, i, seed, run.settings, run.model, ckpt))
    return todo, [_redo_line(task.name, runs, *why, out) for why, runs in again.items()]


def _plan(cfg: FinetuneConfig, tokenizer, tasks: dict[str, FinetuningTask], results: ResultsTable,
          model: tuple[str, dict], resolved: dict, say) -> Iterator[tuple[TaskData, list[RunJob]]]:
    """Task by task, its encoded data and its runs still to do (tasks with none are skipped); lazily, one task at a
    time (`model`: the model's fingerprint and files). Each task's data files are hashed once (`FileDigests`), its runs' inputs made from them."""
    out, digests, identity = group_dir(cfg), FileDigests(), tokenizer_identity(tokenizer)
    for name, task in ((n, t) for n, t in tasks.items() if not t.predicted_by):
        task_cfg = cfg.for_task(name)
        doubled = _doubled(task, cfg, task_cfg)
        files = task.data_files()
        content = data_digests(files, digests)
        inputs = [run_inputs(task_cfg, task, model, identity, content, seed, doubled, resolved) for seed in cfg.seed_list]
        todo, again = _todo(cfg, task, results, out, inputs, files)
        results.name_data(name, sorted(set(range(len(inputs))) - {j.run for j in todo}), data_named(cfg, task))
        if not todo:
            say(f'{name}: all {cfg.runs} runs finished before; skipped')
            continue
        for line in again: say(line)
        data = task.prepare(task_cfg, tokenizer, cfg.cache_dir, doubled)
        for split, (file, texts) in data.texts.items():  # training, dev and test: each is learned, scored or predicted
            if unknown := unknown_share_warning(name, texts, tokenizer, split, file): say(unknown)
        say(f'{name}: {task.count(data.train, "train")}{" (both segment orders)" if doubled else ""}, '
            f'{", ".join(task.count(e, s) for s, e in data.dev.items())}; {task_cfg.epochs} epoch{"s" * (task_cfg.epochs != 1)}, lr {task_cfg.lr:g}, '
            f'max_length {task_cfg.max_length}, '
            f'{len(todo)} of {cfg.runs} runs to do')
        yield data, todo


# the files of `<output_dir>/<group>/` besides the runs' (`<task>_<i>.pth`, `<task>_<i>/`), written in place
GROUP_FILES = ('results.csv', JOB_RUNS, 'summary.md', 'summary.png', CARD, LOG_NAME)


def check_outputs(cfg: FinetuneConfig) -> None:
    """The folders the job writes, checked before its first run rather than when a run's weights, the results table or
    the test predictions are first written (and made then, so a job refused before its first run leaves nothing):
    `<output_dir>/<group>/` (the runs, results.csv, summary.md and .png), with no folder where one of its files goes
    (nor a file where a run's transformers folder goes), and, with `predict`, `<test_output_dir>/<group>/` (no folder
    where its record, the zip or a GLUE task's test file goes), refused when it holds test files of another group
    folder (`made_by`; the records of this group's runs taken as its own, whatever folder they name, with or without
    `predict`: a group renamed or copied with its test folder). The token cache and the demo tasks (cache_dir) are
    checked by `resolve_data`; any other file in the way ends the job in one line (`errors.in_the_way`)."""
    group = group_dir(cfg)
    writable_dir(group, 'output_dir', create=False)
    runs = [f'{name}_{i}' for name in cfg.task_names for i in range(cfg.runs)]
    writable_files(group, [*GROUP_FILES, *(f'{run}.pth' for run in runs)], 'output_dir')
    for run in runs: writable_dir(group / run, 'output_dir', create=False)
    out, group = group_dir(cfg, 'test_output_dir'), group.resolve()
    if cfg.predict:
        writable_dir(out, 'test_output_dir', create=False)
        glue = [f'{stem}.tsv' for name in cfg.task_names if name in TASKS for _, stem in TASKS[name].test_files]
        writable_files(out, [MADE_BY, SUBMISSION_ZIP, *glue], 'test_output_dir')
        check_test_folder(out, group)
    elif (out / MADE_BY).is_file(): adopt_moved(out, group)  # its files are this group's to tidy (`_tidy_test_folder`)


def _check_lengths(cfg: FinetuneConfig, config, say: Callable[[str], None]) -> None:
    """Every task's `max_length` within the model's position embeddings (QA takes 512 by default), before any run; one
    line for the lengths past the one the model was pretrained at (`pretraining_max_length` in its config, where this
    library pretrained it), whose position rows were never trained."""
    positions, trained, past = config.max_position_embeddings, getattr(config, 'pretraining_max_length', None), {}
    for name in cfg.task_names:
        n = cfg.for_task(name).max_length
        if n > positions:
            raise ConfigError(f"max_length: {name} takes {n} tokens, but the model {cfg.model} has {positions} positions. "
                              f"Set task_overrides.{name}.max_length (or max_length in its task file) to at most {positions}.")
        if trained and n > trained: past.setdefault(n, []).append(name)
    for n, names in past.items():
        say(f"warning: max_length {n} ({', '.join(names)}) is {past_pretraining(config, n, f'the model {cfg.model}')}, "
            f"so longer inputs go through untrained position embeddings. Set max_length to at most {trained} to "
            "fine-tune as it was pretrained.")


def _check_token_types(cfg: FinetuneConfig, config, tasks: dict[str, FinetuningTask]) -> None:
    "A model of one token type (type_vocab_size 1) refused, before any run, for a task whose inputs hold type 1."
    if config.type_vocab_size > 1: return
    for name, task in tasks.items():
        if task.type_one:
            raise ConfigError(f"model: {cfg.model} has one token type (type_vocab_size 1 in its config), but {name} "
                              f"feeds two ({task.type_one}): fine-tune it on single-text tasks only, or give a model "
                              "with type_vocab_size 2 (as ELECTRA's and BERT's).")


def _train_in_turn(cfg: FinetuneConfig, plan, pretrained, tokenizer, results: ResultsTable, say) -> None:
    "The runs of every task in this process, a stack at a time (`stacks`), each finished run's row written at once."
    device, autocast = device_and_autocast(cfg.device, cfg.precision)
    pad_id, body = pad_token_id(tokenizer), pretrained.electra
    if world().size > 1: say(f'every run is trained by the {world().size} processes of this torchrun job together; '
                             f'batch_size is the global batch')
    now = []  # the runs in training
    try:
        for data, jobs in stacks(cfg, plan, body, device, autocast, say):
            now = jobs
            rows, now = train_jobs(cfg, data, jobs, body, device, autocast, pad_id, say), []
            for row in rows: _record(results, row)
    except KeyboardInterrupt as e:  # Ctrl-C, or a stop signal (`stop_on_signals`): in a run or between two
        during = f' during {now[0].task} {runs_phrase([j.run for j in now])}' if now else ''
        raise TrainingStopped(f"by {stopped_by(e)}{during}; the {len(results.df)} finished run(s) are kept in "
                              f"{results.path}. {do_the_rest()}") from None


def _record(results: ResultsTable, row) -> None:
    "A finished run's row into the table; a run that diverged (`runs.Diverged`) into its `diverged`, with no row."
    if isinstance(row, dict): results.add(row)
    else: results.add_diverged(row)


def _check_given(cfg: FinetuneConfig, pretrained) -> None:
    """The model given is `cfg.model`'s where it says where it was read from (`load_discriminator` keeps that): the
    rows record the fingerprint of `cfg.model`, so another model's runs would be stored, and later skipped, as its.
    A model built otherwise (in a notebook) says nothing, and is taken as `cfg.model`'s."""
    read_from = getattr(pretrained, 'electra_source', None)
    if read_from is not None and read_from != model_source(cfg.model):
        raise ConfigError(f"model: the model given to run_sweep was read from {read_from}, not from {cfg.model} (the "
                          f"config's model), whose fingerprint its results rows would record: set model to {read_from} "
                          f"in the config, or give the model read from {cfg.model}.")


def _check_tokenizer(cfg: FinetuneConfig, pretrained, tokenizer) -> None:
    """The tokenizer given is the model's own (`loading.tokenizer_mismatch`): its ids are what the model's embedding
    rows mean, and it is exported with the runs. Another (the same words in another order, another model's of the
    same size) trains on ids that mean other tokens to the model, at chance; refused before any run."""
    if why := tokenizer_mismatch(pretrained, tokenizer):
        given = f' ({tokenizer.name_or_path})' if getattr(tokenizer, 'name_or_path', '') else ''
        own = 'was saved with' if getattr(pretrained, 'electra_tokenizer_identity', None) else 'can read'
        raise ConfigError(f"tokenizer: the tokenizer given to run_sweep{given} is not the one {cfg.model} {own}: "
                          f"{why}. Give the tokenizer load_pretrained('{cfg.model}') returns with the model.")


def run_sweep(cfg: FinetuneConfig, pretrained, tokenizer, source: TaskSource,
              log: Callable[[str], None] = print) -> ResultsTable:
    """Fine-tune `cfg.runs` runs of every training task in `cfg.tasks` from `pretrained` (an `ElectraForPreTraining`).
    `pretrained` is `cfg.model`'s (the rows record its fingerprint): one read from another model is refused, and so is
    a `tokenizer` that is not the model's (`_check_tokenizer`; the rows record its identity too).
    Each finished run's weights go to `<output_dir>/<group>/<task>_<i>.pth` and its dev metrics to the results table
    `<output_dir>/<group>/results.csv` at once; runs already in the table from the same inputs (the model, tokenizer
    and data by content, the task file's settings, the settings that change a result: `inputs.py`) are skipped, the others done
    again with a line saying why. With `parallel_runs` above 1, that many worker processes take the runs from a
    shared queue (`electra.finetuning.workers`); the table is the same as one process's. A run whose loss became NaN or infinite stops with no row;
    the others go on (`raise_if_diverged` ends the job with it). The job's output goes to `<output_dir>/<group>/log.txt`
    too (`log_to`); from a notebook or a script whose streams are not the job's, the sweep's own lines
    (`also_in_log`). Then the runs `save_pretrained` names are written as transformers folders too
    (`electra.finetuning.export`). `source`: where GLUE's tasks are read, `resolve_data(cfg.data, cfg.cache_dir)`."""
    check_outputs(cfg)
    _check_given(cfg, pretrained)
    _check_tokenizer(cfg, pretrained, tokenizer)
    results = ResultsTable(group_dir(cfg) / 'results.csv')
    say = log if is_main_process() else (lambda *_: None)
    cfg.check_task_kinds()
    _check_lengths(cfg, pretrained.config, say)
    if log_to(writable_dir(group_dir(cfg), 'output_dir')) is None and is_main_process():  # (a notebook: its own lines)
        say = also_in_log(say, group_dir(cfg), 'run_sweep from Python')
    if is_main_process():
        hold_task_locks(cfg)  # before anything of the group is read or changed
        remove_dead_model_copies(group_dir(cfg), say)
    for line in cfg.command_line_over_task_files(): say(line)  # the typed value wins (`FinetuneConfig.for_task`)
    tasks = job_tasks(cfg, source)  # (a task file's data read and checked once)
    _check_token_types(cfg, pretrained.config, tasks)
    device = resolve_device(cfg.device)
    resolved = {'precision': resolve_precision(cfg.precision, device), 'device': device.type, 'processes': world().size}
    # a later job of other tasks summarises these over this job's runs (`_group_rows`)
    results.record_job([n for n, t in tasks.items() if not t.predicted_by], cfg.runs)
    files = model_files(cfg.model)  # (read once: the fingerprint is made of them)
    plan = _plan(cfg, tokenizer, tasks, results, (model_fingerprint(cfg.model, files), files), resolved, say)
    n = parallel_runs(cfg)
    if n > 1:
        try:
            for row in run_on_workers(cfg, list(plan), pretrained, tokenizer, n, say): _record(results, row)
        except KeyboardInterrupt as e:  # Ctrl-C, or a stop signal (`stop_on_signals`)
            raise TrainingStopped(f"by {stopped_by(e)}; the {len(results.df)} finished run(s) are kept in {results.path}. "
                                  f"{do_the_rest()}") from None
    else: _train_in_turn(cfg, plan, pretrained, tokenizer, results, say)
    save_runs(cfg, results, tokenizer, say)  # the picked runs as transformers folders (`save_pretrained`)
    if not cfg.predict and (group_dir(cfg, 'test_output_dir') / MADE_BY).is_file():  # a predicting job: after its files
        _tidy_test_folder(cfg, results, tasks, _test_data(tasks, source), [], say)
    return results


def hold_task_locks(cfg: FinetuneConfig) -> None:
    """Hold `<output_dir>/<group>/.<task>.lock` for each task of the job until the process ends (its summary, test files
    and transformers folders are written after the runs): one job at a time trains a task of a group, as two would
    replace each other's rows and write summaries of runs the table no longer holds. Another task of the group is
    another job's to take at the same time."""
    for name in cfg.task_names:
        hold_lock(group_dir(cfg) / f'.{name}.lock', f"{name} of group {cfg.group} is being fine-tuned by another job "
                                                     "(PID {pid} on {host}). Wait for it to end, or give this job "
                                                     "another --group; if that job is gone, delete the lock.")


def _tidy_test_folder(cfg: FinetuneConfig, results: ResultsTable, tasks: dict[str, FinetuningTask],
                      tests: dict[str, tuple[str, str]], written: list[Path], say: Callable[[str], None]) -> list[Path]:
    """The group's recorded test files not `written` by this job whose runs were replaced (or are gone) or whose test
    files changed since (`tests`: `_test_data`) removed, each said (`drop_stale`), by the job that replaced them
    whether it predicts or not, and the zip rewritten when it held one of them or the job wrote GLUE's files; then
    the lines on files of several models or data sources. The zip (if written)."""
    out = group_dir(cfg, 'test_output_dir')
    if not written and not (out / MADE_BY).is_file(): return []  # no test folder, or not one the job may tidy
    removed = drop_stale(out, results, {p.relative_to(out).as_posix() for p in written}, say,
                         {n: bool(t.info.test_files) for n, t in tasks.items()}, group_dir(cfg).resolve(), tests)
    zipped = []
    if any(name in SUBMISSION_FILES for name in [p.name for p in written] + removed):  # the zip holds GLUE's files
        if z := zip_submission(out): zipped.append(z)
    for line in (models_line(out), data_line(out), rules_line(out)):
        if line: say(line)
    return zipped


def _test_data(tasks: dict[str, FinetuningTask], source: TaskSource | None) -> dict[str, tuple[str, str]]:
    """What each task's test files would be predicted from now: its data (`data_source`) and the digest of its test
    files' bytes (as `data_digests` hashes a run's data), for the job's tasks and the GLUE tasks a local `source`
    holds (an earlier job's file in the folder is checked against the job's data: the hub is not asked)."""
    local = getattr(source, 'root', None) is not None  # a folder of GLUE files (the hub's or no source: not asked)
    glue = {n: ClassificationTask(info, source) for n, info in TASKS.items() if local and n not in tasks}
    digests, out = FileDigests(), {}
    for name, task in {**tasks, **glue}.items():
        if files := task.test_data_files():
            out[name] = (task.data_source(), data_digests({'test': files}, digests)['test'])
    return out


def _group_rows(cfg: FinetuneConfig, results: ResultsTable, tasks: dict[str, TaskInfo]) -> tuple[pd.DataFrame, str]:
    """The rows the summary and the card describe, the whole group as its results table holds it: this job's tasks
    over its `runs` (their rows past them named), the other tasks (of earlier jobs) over the runs of the last job that named each
    (`ResultsTable.job_runs`; all their rows where none is recorded: a table of an earlier version), and a note naming
    them, the rows left out, the task files left out (this job does not name them: their metrics are not known to it)
    and the tasks whose runs were not fine-tuned alike (`unlike_runs`)."""
    df, job_runs = results.df, results.job_runs
    mine = df['task'].isin(cfg.task_names)
    earlier = df[~mine & df['task'].isin(tasks)]
    covered = pd.Series([r < job_runs.get(n, math.inf) for n, r in zip(earlier['task'], earlier['run'])], earlier.index,
                        dtype=bool)
    others, past = earlier[covered], earlier[~covered]
    rows = pd.concat([df[mine & (df['run'] < cfg.runs)], others])
    beyond = df[mine & (df['run'] >= cfg.runs)]  # this job's tasks' runs of an earlier job of more runs
    left = sorted(set(df.loc[~mine, 'task']) - set(tasks))
    note = [*_left_out(f"this job's {cfg.runs} run(s)", beyond),
            *_earlier_notes([n for n in tasks if n in set(others['task'])], others, past, job_runs),
            *([f"Left out: {', '.join(left)}, task files of earlier jobs (rows in results.csv) that this job does not "
               "name; name them in tasks to summarise them."] if left else []),
            *(f"{n}'s runs were not fine-tuned alike: {'; '.join(unlike)}. Name the task in tasks to fine-tune its runs "
              "again alike." for n in tasks if (unlike := unlike_runs(rows[rows['task'] == n].sort_values('run'))))]
    return rows, ' '.join(note)


def _runs_of(name: str, rows: pd.DataFrame) -> str:
    "'RTE (runs 0, 1)': a task and its runs among `rows`."
    return f"{name} ({runs_phrase(sorted(map(int, rows.loc[rows['task'] == name, 'run'])))})"


def _left_out(outside: str, rows: pd.DataFrame) -> list[str]:
    "The line naming `rows`, left out of the summary as outside `outside`, kept in results.csv; none for no rows."
    if rows.empty: return []
    return [f"Left out as outside {outside} (kept in results.csv for a job that asks for them again): "
            f"{', '.join(_runs_of(n, rows) for n in dict.fromkeys(rows['task']))}."]


def _earlier_notes(names: list[str], others: pd.DataFrame, past: pd.DataFrame, job_runs: dict[str, int]) -> list[str]:
    """The lines on earlier jobs' tasks `names` (their summarised rows `others`): over the runs of their last job, or
    all their rows where none is recorded; and the rows `past` those runs, kept in results.csv."""
    covered = [_runs_of(n, others) for n in names if n in job_runs]
    whole = [n for n in names if n not in job_runs]
    return ([f"Tasks of earlier jobs of this group, each over the runs of the last job that named it: {', '.join(covered)}."]
            if covered else []) + _left_out('the runs of their last job', past) + (
        [f"Tasks of earlier jobs of this group, over all their rows of results.csv (no job of theirs recorded): "
         f"{', '.join(whole)}."] if whole else [])


def write_summary(cfg: FinetuneConfig, results: ResultsTable) -> str:
    """The per-task summary as markdown, saved with a plot of the spread over runs as `summary.md` and `summary.png`,
    and the group's model card, both of the whole group (`_group_rows`); with `tracking_artifacts` the card and this
    job's runs' transformers folders go to their tracked runs (`track_exports`)."""
    out = group_dir(cfg)
    tasks = {**TASKS, **_file_task_infos(cfg)}
    df, note = _group_rows(cfg, results, tasks)
    text = summary_markdown(summarize(df, tasks)) if not df.empty else 'no finished runs'
    if note: text += f'\n\n{note}'
    if results.diverged:
        text += '\n\nDiverged, no score (not summarised, never picked): ' + '; '.join(
            f'{d.task} run {d.run} (seed {d.seed}) at step {d.step}' for d in results.diverged) + '.'
    if is_main_process():
        atomic_write_text(f'# Dev results of {cfg.group} ({cfg.model})\n\n{text}\n', out / 'summary.md')
    card = write_finetuned_card(cfg, df, tasks, text)  # README.md of the group's models: scores, settings, how to load
    mine = df[df['task'].isin(cfg.task_names)]  # this job's runs: its config is theirs
    track_exports(cfg, mine.to_dict('records'), card)  # with tracking_artifacts: the card and folders to each run's trackers
    if not df.empty: plot_summary(df, out / 'summary.png', title=f'{cfg.group}: dev score per run (bar: median)', tasks=tasks)
    return text


def _file_task_infos(cfg: FinetuneConfig) -> dict[str, TaskInfo]:
    "The descriptions of the job's tasks from files, for their metrics (their training labels are read once more)."
    with _read_again(): return {name: make_task(spec).info for name, spec in cfg.file_tasks().items()}


def write_test_predictions(cfg: FinetuneConfig, results: ResultsTable, tokenizer, source: TaskSource,
                           log: Callable[[str], None] = print) -> list[Path]:
    """Predict the test sets with the selected run of each task (`select`), or the top `ensemble_k` runs together,
    each kind in its own format under `<test_output_dir>/<group>/`: GLUE the site's TSV files and
    `glue_submission.zip` (AX with MNLI's model), a task from files `id<TAB>prediction`, tagging the input's format,
    QA the official `predictions.json` (and `null_odds.json`). Each file written is recorded with what wrote it
    (`made_by`: refused in a test folder of another group folder); a test-only task's file the folder holds is
    predicted again with its task's runs (AX with MNLI's) though not in `tasks`; a recorded file of runs fine-tuned
    again since, or of a test file changed since, is removed (`_tidy_test_folder`)."""
    out, group = group_dir(cfg, 'test_output_dir'), group_dir(cfg).resolve()
    check_test_folder(out, group)
    say = log if is_main_process() else (lambda *_: None)
    with _read_again(): tasks = job_tasks(cfg, source)
    tasks, written = _with_test_only_tasks(tasks, source, out, say), []
    tests = _test_data(tasks, source)
    for name, task in ((n, t) for n, t in tasks.items() if not t.predicted_by):
        rows = results.task_rows(name)
        rows = rows[rows['run'] < cfg.runs]  # this job's runs, not later ones left by a larger sweep
        if rows.empty:
            say(f'{name}: no finished runs, no test predictions')
            continue
        picked, undefined = select_runs(rows, cfg.select, cfg.ensemble_k), int(rows['score'].isna().sum())
        if undefined:
            say(f"{name}: {undefined} of {len(rows)} runs have an undefined dev {task.score_metric}; "
                f"{'no test predictions' if picked.empty else 'they are not picked'}")
        if picked.empty: continue
        _check_read_with(cfg, name, picked, tokenizer)
        files = task.write_predictions(TestJob(cfg, picked, tokenizer, out, say), tasks)
        record(out, files, name, picked, group, tests,
               {'select': cfg.select, 'ensemble_k': cfg.ensemble_k, 'of_runs': len(rows)})
        written += files
    return written + _tidy_test_folder(cfg, results, tasks, tests, written, say)


def _check_read_with(cfg: FinetuneConfig, name: str, picked: pd.DataFrame, tokenizer) -> None:
    """The tokenizer given to predict is the one the picked runs of `name` read (the identity their rows record, a row
    of an earlier version none): another feeds them ids that mean other tokens, its predictions at chance."""
    identity = tokenizer_identity(tokenizer)
    for row in picked.to_dict('records'):
        if (recorded := recorded_tokenizer(row['settings'])) not in (None, identity):
            raise ConfigError(f"tokenizer: the tokenizer given to write_test_predictions is not the one {name} run "
                              f"{row['run']} was fine-tuned with (its identity {identity}, the run's {recorded}): give "
                              f"the tokenizer its sweep was given (of {cfg.model}: load_pretrained returns it).")


def _with_test_only_tasks(tasks: dict[str, FinetuningTask], source: TaskSource, out: Path,
                          say) -> dict[str, FinetuningTask]:
    """`tasks` and the test-only GLUE tasks (AX) whose file `out` holds, predicted by a task of `tasks` (MNLI): its
    runs may have changed, and the file is made from them, so it is written again with that task's."""
    extra = {name: ClassificationTask(info, source) for name, info in TASKS.items() if info.predicted_by in tasks
             and name not in tasks and any((out / f'{stem}.tsv').is_file() for _, stem in info.test_files)}
    for name, task in extra.items():
        files = ', '.join(f'{stem}.tsv' for _, stem in task.info.test_files)
        by = task.predicted_by
        say(f"{files}: predicted again with {by}'s runs: the folder holds it, and {name} is predicted by {by}'s model "
            f"({name} is not in tasks)")
    for name, info in TASKS.items():  # what a full GLUE submission holds that this one will not
        if info.predicted_by in tasks and name not in tasks and name not in extra:
            files = ', '.join(f'{stem}.tsv' for _, stem in info.test_files)
            say(f"{files}: not predicted: {name}, GLUE's diagnostic set, is predicted with {info.predicted_by}'s model "
                f"when {name} is in tasks (a full submission holds it): add {name} to --tasks")
    return {**tasks, **extra}


def raise_if_diverged(results: ResultsTable) -> None:
    """The job's end: `TrainingDiverged` (status 2) naming this job's runs whose loss became NaN or infinite, after the
    other runs were kept, summarised and predicted from; nothing when there were none."""
    if not results.diverged: return
    runs = '; '.join(f'{d.task} run {d.run} (seed {d.seed}) at step {d.step}' for d in results.diverged)
    them = 'it' if len(results.diverged) == 1 else 'them'
    raise TrainingDiverged(
        f"{len(results.diverged)} run(s) diverged, their loss NaN or infinite ({runs}): no score recorded, not in the "
        f"summary nor the test predictions; the {len(results.df)} finished run(s) are kept in {results.path}. Try a "
        f"lower learning rate, check the labels, or fp32 instead of fp16 or bf16, and run the same command again to try "
        f"{them} again.")
