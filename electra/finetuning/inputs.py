"""What produced a fine-tuning run's result, recorded in its row of the results table and compared when a sweep runs
again: the model, the tokenizer and the task's data by content, the task file's settings, and the run's values of the
keys that change a result (`RESULT_KEYS`, its seed). A finished run is reused only when all of them are the same;
otherwise the sweep trains it again and says in one line what changed (`sweep._todo`)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from electra.config.errors import ConfigError
from electra.config.finetune import RESULT_KEYS, FinetuneConfig
from electra.finetuning.tasks.base import FinetuningTask
from electra.runtime.files import FileDigests

__all__ = ['RunInputs', 'as_read_back', 'data_digests', 'data_named', 'run_inputs', 'recorded_inputs',
           'recorded_tokenizer', 'what_changed']


@dataclass(frozen=True)
class RunInputs:
    """What a run's result depends on. Its row holds `model` in the column `model_fingerprint` and the rest as JSON in
    `settings`, values as JSON reads them back."""
    model: str   # `model_fingerprint`: the model's files by content
    model_files: dict  # `model_files`: each of them by its digest, to say which changed
    tokenizer: str  # `tokenizer_identity` of the tokenizer it read: what the ids of its inputs mean
    data: dict   # split -> digest of its files' bytes (`data_digests`)
    task: dict   # the task file's settings (`FinetuningTask.settings`); {} for a GLUE task
    run: dict    # the run's seed and its values of RESULT_KEYS
    unread: tuple = ()  # keys of `run` the task does not read (stsb_scale but for STS-B): recorded, never compared

    @property
    def settings(self) -> str:
        "The row's `settings` column."
        return json.dumps({'tokenizer': self.tokenizer, 'model_files': self.model_files, 'data': self.data,
                           'task': self.task, 'run': self.run}, sort_keys=True)


def data_digests(files: dict[str, list[Path]], digests: FileDigests) -> dict[str, str]:
    "Each split's files (`FinetuningTask.data_files`) by their bytes, whatever their names or where they lie."
    out = {}
    for split, paths in files.items():
        h = hashlib.sha256()
        for f in paths:
            try: h.update(digests(f))
            except OSError as e:  # a folder, no permission: before the reader would have said it, the hash meets it
                raise ConfigError(f"{f}: cannot read the task's {split} file ({e.strerror}). Point the task at a "
                                  "readable file.") from None
        out[split] = h.hexdigest()[:16]
    return out


def data_named(cfg: FinetuneConfig, task: FinetuningTask) -> str:
    """What a run's row names as its data (the column `data`, which the group's card describes: `finetuning.card`): a
    task file's path, or for a GLUE task the job's `data` ('hub', 'demo', a folder). Its bytes are in `settings`."""
    return task.spec.path.as_posix() if task.spec is not None else cfg.data


def as_read_back(values):
    "`values` as a row's JSON gives them back (tuples as lists), so that a run's values compare equal to its row's."
    return json.loads(json.dumps(values, default=str))


def run_inputs(task_cfg: FinetuneConfig, task: FinetuningTask, model: tuple[str, dict], tokenizer: str,
               data: dict[str, str], seed: int, doubled: bool, resolved: dict[str, str]) -> RunInputs:
    """The inputs of one run (`model`: its fingerprint and files, `tokenizer`: the `tokenizer_identity` of the one it
    reads): `resolved` the `precision` as
    it resolves on this device ('auto' is not a number format), the `device`'s type (cpu, cuda: not which GPU) and the
    torchrun job's `processes` (with dropout on, each draws its rows' masks), `double_unordered` as it applies to the
    task (`doubled`); `stsb_scale` recorded for every task, compared for those it scales (`TaskInfo.reads_stsb_scale`)."""
    run = {k: getattr(task_cfg, k) for k in RESULT_KEYS} | {'seed': seed, 'double_unordered': doubled, **resolved}
    unread = () if task.info.reads_stsb_scale else ('stsb_scale',)
    return RunInputs(*model, tokenizer, data, as_read_back(task.settings()), as_read_back(run), unread)


def recorded_inputs(settings) -> dict | None:
    "A row's `settings` as `RunInputs.settings` wrote it; None for a row of an earlier version (a hash of them)."
    try: values = json.loads(settings)
    except (TypeError, ValueError): return None
    return values if isinstance(values, dict) and {'data', 'task', 'run'} <= set(values) else None


def recorded_tokenizer(settings) -> str | None:
    "The `tokenizer_identity` a row's (or a run's checkpoint's) `settings` record; None in one of an earlier version."
    return (recorded_inputs(settings) or {}).get('tokenizer')


def _files_phrase(files: list[Path]) -> str:
    return str(files[0]) if len(files) == 1 else f'{files[0]} and {len(files) - 1} more'


def _model_change(old: dict | None, files: dict[str, str], model: str) -> str:
    """Which of the model's files (`files`, now) differ from those a row records (`old`: its inputs, None or without
    them in a row of an earlier version, which records the fingerprint alone): a config.json edited is not other
    weights."""
    was = (old or {}).get('model_files')
    if was is None: return f'{model} holds other files than its row records'
    if not was and not files: return f'{model}: its files in the hub cache are of another commit'
    if '' in was or '' in files: return f'{model} holds other bytes'  # a file (a .pth), or a file now a folder
    differ = [n for n in files if n in was and files[n] != was[n]]
    parts = [f"its {', '.join(differ)} {'differs' if len(differ) == 1 else 'differ'}"] if differ else []
    added, removed = [n for n in files if n not in was], [n for n in was if n not in files]
    parts += [f"{', '.join(names)} {what}" for names, what in ((added, 'added'), (removed, 'removed')) if names]
    return f"{model}: {'; '.join(parts)}" if parts else f'{model} holds other files than its row records'


def what_changed(row: dict, new: RunInputs, files: dict[str, list[Path]], model: str) -> tuple[list[str], list[str]]:
    """What differs between the inputs a finished run's `row` records and `new` (`files`: the task's data files by
    split, `model`: where the model is now), in words; and what the row does not record (a table of an earlier
    version). Both empty: the row is this run's."""
    old, unrecorded, changed = recorded_inputs(row['settings']), [], []
    made_from = row.get('model_fingerprint')
    if pd.isna(made_from): unrecorded.append('the model')
    elif made_from != new.model: changed.append(f'the model changed ({_model_change(old, new.model_files, model)})')
    if old is None: return changed, unrecorded + ['the data and settings']
    if 'tokenizer' not in old: unrecorded.append('the tokenizer')
    elif old['tokenizer'] != new.tokenizer:
        changed.append('the tokenizer changed (other tokens, ids or normalisation: its identity was '
                       f"{old['tokenizer']}, now {new.tokenizer})")
    for split, digest in new.data.items():
        if old['data'].get(split) != digest: changed.append(f'the {split} file changed ({_files_phrase(files[split])})')
    unrecorded += [k for k in new.run if k not in old['run']]  # a key recorded since the row was written
    recorded = {k: v for k, v in new.run.items() if k in old['run'] and k not in new.unread}
    old_run = {k: v for k, v in old['run'].items() if k not in new.unread}
    for where, was, now in (("the task file's ", old['task'], new.task), ('', old_run, recorded)):
        for key in [*now, *(k for k in was if k not in now)]:
            if was.get(key) != now.get(key):
                changed.append(f'{where}{key} changed (was {was.get(key)!r}, now {now.get(key)!r})')
    return changed, unrecorded
