"""What wrote each test file of a group's test folder, `<test_output_dir>/<group>/made_by.json`: the group folder
whose results table it came from (`<output_dir>/<group>`), the task whose runs predicted it (AX: MNLI's), those runs
(index, seed, what they were made from: a digest of their rows' settings and model, and when each finished: a run
fine-tuned again finishes anew), the model they were fine-tuned from, and what it was predicted from: the task's data
(`FinetuningTask.data_source`) and its test files by content (`test`, hashed as the rows hash their data).

Two sweeps that share a group name and `test_output_dir` but not `output_dir` would gather their files into one
`glue_submission.zip`: a job refuses a test folder of another group folder before its first run
(`check_test_folder`). A file of runs fine-tuned again since it was written (by a job that did not predict) is
removed by the job that replaced them (`drop_stale`), as is a file whose test set has changed since; files of runs
of several models, GLUE files of several data sources, and files whose runs were picked by several rules (select,
ensemble_k, of how many runs) are said in one line each (`models_line`, `data_line`, `rules_line`), so that the zip
holds what the results table says, of one test set per task."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import pandas as pd

from electra.config.errors import ConfigError
from electra.config.text_files import load_json, read_text
from electra.finetuning.results import ResultsTable
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.runtime.files import atomic_write_text, locked
from electra.runtime.processes import is_main_process

__all__ = ['MADE_BY', 'read_made_by', 'adopt_moved', 'check_test_folder', 'record', 'drop_stale', 'models_line',
           'data_line', 'rules_line']

MADE_BY = 'made_by.json'
_KEYS = {'task', 'by', 'group', 'model', 'runs'}
_TASK_OF_FILE = {f'{stem}.tsv': name for name, t in TASKS.items() for _, stem in t.test_files}  # GLUE's files


def read_made_by(folder: Path) -> dict[str, dict]:
    "Each recorded test file of `folder` (its path inside it) and what wrote it; {} for a folder without the record."
    path = Path(folder) / MADE_BY
    if not path.is_file(): return {}
    entries = load_json(read_text(path), str(path))
    if not isinstance(entries, dict) or not all(isinstance(e, dict) and _KEYS <= set(e) for e in entries.values()):
        raise ConfigError(f"{path}: not the record of finetune.py's test files (each file's group folder, task, runs "
                          "and model). Move it away with the test files beside it, or choose another "
                          "--test_output_dir.")
    return entries


def _names(files: list[str]) -> str:
    return ', '.join(files) if len(files) <= 3 else f"{', '.join(files[:3])} and {len(files) - 3} more"


def adopt_moved(folder: Path, group: Path) -> None:
    """The records of `folder` naming another group folder whose runs are all rows of `group`'s results table (the
    same seed, inputs and finish time; a run is told apart by these, not by where its folder lies) rewritten to name
    `group`: a group renamed or copied with its test folder (`mv`, `cp -a` of both) is the group of its rows."""
    entries = read_made_by(folder)
    if all(e['group'] == str(group) for e in entries.values()): return
    results = ResultsTable(Path(group) / 'results.csv')  # the group's own rows, as on disk
    def moved(e: dict) -> bool: return e['group'] != str(group) and bool(e['runs']) and not _stale(e, results)
    if any(moved(e) for e in entries.values()):
        _update(folder, lambda old: {n: {**e, 'group': str(group)} if moved(e) else e for n, e in old.items()})


def check_test_folder(folder: Path, group: Path) -> None:
    """A one-line ConfigError when `folder` holds test files of another group folder than `group` (this job's
    `<output_dir>/<group>`, resolved), after the records of a group moved or copied with its
    test folder are taken as this one's (`adopt_moved`): this job's files would be zipped with theirs."""
    adopt_moved(folder, group)
    others: dict[str, list[str]] = {}
    for name, e in read_made_by(folder).items():
        if e['group'] != str(group): others.setdefault(e['group'], []).append(name)
    if others:
        other, files = next(iter(others.items()))
        raise ConfigError(f"{folder} holds {_names(files)} of the group folder {other}, not this job's {group}: one "
                          "glue_submission.zip would mix the two groups' predictions. Set --test_output_dir (or "
                          f"--group) to another folder, or move those files and {MADE_BY} away.")


def _inputs(row: dict) -> str:
    "A digest of what a run was made from (its row's settings and model): one trained again in the same second differs."
    return hashlib.sha256(f"{row['settings']}|{row['model_fingerprint']}".encode()).hexdigest()[:16]


def _runs(rows: pd.DataFrame) -> list[dict]:
    return [{'run': int(r['run']), 'seed': int(r['seed']), 'inputs': _inputs(r), 'finished_at': str(r['finished_at'])}
            for r in rows.sort_values('run').to_dict('records')]


def _update(folder: Path, change: Callable[[dict], dict]) -> None:
    "The record as `change` makes it, rewritten under a lock (main process): two jobs on one folder take turns."
    if not is_main_process(): return
    path = Path(folder) / MADE_BY
    with locked(path):
        atomic_write_text(json.dumps(change(read_made_by(folder)), indent=1, sort_keys=True) + '\n', path)


def record(folder: Path, written: list[Path], by: str, picked: pd.DataFrame, group: Path,
           tests: dict[str, tuple[str, str]], picked_by: dict) -> None:
    """The files `written` by the picked runs `picked` of task `by` (rows of the results table of `group`), recorded
    with what each was predicted from (`tests`: each task's data and test files' digest, where it has test files) and
    the rule that picked the runs (`picked_by`: select, ensemble_k, and of how many runs)."""
    models = sorted(set(picked['model_fingerprint'].astype(str)))
    def entry(task: str) -> dict:
        data = dict(zip(('data', 'test'), tests[task])) if task in tests else {}
        return {'task': task, 'by': by, 'group': str(group), 'model': ', '.join(models), 'runs': _runs(picked),
                'picked_by': picked_by, **data}
    entries = {p.relative_to(folder).as_posix(): entry(_TASK_OF_FILE.get(p.name, by)) for p in written}
    _update(folder, lambda old: {**old, **entries})


def _stale(entry: dict, results) -> bool:
    "Whether a file's runs are no longer those of the results table: a run fine-tuned again, or gone."
    for r in entry['runs']:
        row = results.get(entry['by'], r['run'])
        if row is None or [int(row['seed']), _inputs(row), str(row['finished_at'])] != \
                [r['seed'], r.get('inputs'), r['finished_at']]: return True
    return False


def _why_stale(entry: dict, results, tests: dict[str, tuple[str, str]]) -> str:
    """Why a file no longer is what the group would predict: its runs replaced, or its task's test files (as the job
    reads them, `tests`) other than those it was predicted from; '' when neither (or a record of before `test`)."""
    if _stale(entry, results):
        return f"it was predicted by {entry['by']} " + ', '.join(f"run {r['run']} (seed {r['seed']})"
                                                                  for r in entry['runs']) + ", fine-tuned again since"
    now = tests.get(entry['task'])
    if now and entry.get('test') and now[1] != entry['test']:
        return f"it was predicted from another {entry['task']} test file (of {entry['data']}) than the one there now"
    return ''


def _to_write_it(task: str, tested: dict[str, bool]) -> str:
    "What writes a removed file of `task` again, by the job's tasks (`tested`: whether each names a test file)."
    if task not in tested: return f"predict {task} again (put it in tasks) to write it"
    if not tested[task]: return f"{task}'s task file names no test file now: give it `test:` to write it"
    return f"predict {task} again to write it"


def drop_stale(folder: Path, results, now: set[str], say: Callable[[str], None], tested: dict[str, bool],
               group: Path, tests: dict[str, tuple[str, str]]) -> list[str]:
    """The recorded files of `folder` of the group folder `group` (`results` is its table; another group's files are
    not this job's to judge) not written by this job (`now`: their paths inside it) whose runs were fine-tuned again
    since, or are gone from `results`, or whose task's test files (`tests`, as this job reads them) have changed since,
    removed, each said in a line with what writes it again (the job's tasks, `tested`: whether each names a test
    file); their paths inside `folder`."""
    entries = read_made_by(folder)
    why = {n: _why_stale(e, results, tests) for n, e in entries.items() if n not in now and e['group'] == str(group)}
    stale = {n: entries[n] for n, reason in why.items() if reason}
    for name, e in sorted(stale.items()):
        if is_main_process(): (Path(folder) / name).unlink(missing_ok=True)
        zipped = ' and its zip' if name in _TASK_OF_FILE else ''
        say(f"{name} removed from {folder}{zipped}: {why[name]}; " + _to_write_it(e['task'], tested))
    if stale: _update(folder, lambda old: {n: e for n, e in old.items() if n not in stale})
    return sorted(stale)


def models_line(folder: Path) -> str:
    "'' when the recorded files of `folder` come from one model's runs; else a warning naming each model's files."
    by_model: dict[str, list[str]] = {}
    for name, e in sorted(read_made_by(folder).items()): by_model.setdefault(e['model'], []).append(name)
    if len(by_model) < 2: return ''
    parts = '; '.join(f"{_names(files)} from runs of the model {model}" for model, files in by_model.items())
    return (f"warning: the test files of {folder} come from runs of {len(by_model)} models ({parts}; by fingerprint): "
            "the results table holds rows of each. Fine-tune the other tasks again from this job's model (put them "
            "in tasks) for a submission of one model.")


def _rule(picked_by: dict | None) -> str:
    "How a file's runs were picked, in words: 'the median of 3 runs', 'an ensemble of the top 2 of 2 runs'."
    if not picked_by: return 'a rule not recorded (an earlier version)'
    k, n = picked_by['ensemble_k'], picked_by['of_runs']
    return f"an ensemble of the top {k} of {n} runs" if k > 1 else f"the {picked_by['select']} of {n} runs"


def rules_line(folder: Path) -> str:
    """'' when the recorded files of `folder` were picked by one rule (select, ensemble_k, of how many runs); else a
    warning naming each rule's files: a submission whose tasks were picked otherwise compares to no one number."""
    by_rule: dict[str, list[str]] = {}
    for name, e in sorted(read_made_by(folder).items()): by_rule.setdefault(_rule(e.get('picked_by')), []).append(name)
    if len(by_rule) < 2: return ''
    parts = '; '.join(f"{_names(files)}: {rule}" for rule, files in by_rule.items())
    return (f"warning: the test files of {folder} were picked by {len(by_rule)} rules ({parts}): predict every task in "
            "one job for a submission of one rule.")


def data_line(folder: Path) -> str:
    """'' when the recorded GLUE files of `folder` (its zip's) were predicted from one data source; else a warning
    naming each source's files: the site scores each file on its own test set, which another data's is not."""
    by_data: dict[str, list[str]] = {}
    for name, e in sorted(read_made_by(folder).items()):
        if name in _TASK_OF_FILE and 'data' in e: by_data.setdefault(e['data'], []).append(name)
    if len(by_data) < 2: return ''
    parts = '; '.join(f"{_names(files)} from {data}" for data, files in by_data.items())
    return (f"warning: the GLUE files of {folder} (its glue_submission.zip) were predicted from {len(by_data)} data "
            f"sources ({parts}): each is scored on its own data's test set. Predict the other tasks again from this "
            "job's data (put them in tasks) for a submission of one data set.")
