"""The GLUE task table: each task's splits, TSV column layout (as the official
finetune/classification/classification_tasks.py reads them), label strings, metric and whether it is a regression, a
pair task or predicted with another task's model (AX with MNLI). Labels are kept as the HF `datasets` ids (MNLI:
0 entailment, 1 neutral, 2 contradiction; QNLI/RTE: 0 entailment, 1 not_entailment); `TaskInfo.labels` maps them
back to the strings the GLUE site expects.
"""
from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from electra.config.errors import ConfigError, UnknownTask
from electra.finetuning.tasks.base import TaskInfo

__all__ = ['GlueDataError', 'TsvLayout', 'TASKS', 'ALL_TASKS', 'task_named']


class GlueDataError(ConfigError):
    "A GLUE data file or dataset that cannot be used; the message names the file and the fix."


@dataclass(frozen=True)
class TsvLayout:
    "Where one split lives in the GLUE download layout and which columns hold what (names, or positions when headerless)."
    path: str
    text_a: str | int
    text_b: str | int | None = None
    label: str | int | None = None   # None for test files
    index: str | None = None         # the example's own index column (test files); None: the row number
    header: bool = True
    n_columns: int = 0               # expected columns of a headerless file


_BIN = ('0', '1')
_NLI3 = ('entailment', 'neutral', 'contradiction')
_NLI2 = ('entailment', 'not_entailment')
# the names of the binary tasks' classes 0 and 1, as the hub's nyu-mll/glue names them (its `label` ClassLabel), for
# a fine-tuned model's id2label; the GLUE site's files keep the codes '0' and '1'
_NAMES = {'CoLA': ('unacceptable', 'acceptable'), 'SST-2': ('negative', 'positive'),
          'MRPC': ('not_equivalent', 'equivalent'), 'QQP': ('not_duplicate', 'duplicate'),
          'WNLI': ('not_entailment', 'entailment')}


def _pair(name, a, b, label, test_index='index'):
    "Layouts of a pair task whose train/dev files and test file share column names."
    return {'train': TsvLayout(f'{name}/train.tsv', a, b, label), 'dev': TsvLayout(f'{name}/dev.tsv', a, b, label),
            'test': TsvLayout(f'{name}/test.tsv', a, b, None, test_index)}


_MNLI_A, _MNLI_B = 'sentence1', 'sentence2'
TASKS: dict[str, TaskInfo] = {t.name: t for t in [
    TaskInfo('CoLA', 'cola', _BIN, ('mcc',), 'mcc', ('sentence', None), {
        # train/dev: no header; columns source, label, original label, sentence
        'train': TsvLayout('CoLA/train.tsv', 3, None, 1, header=False, n_columns=4),
        'dev': TsvLayout('CoLA/dev.tsv', 3, None, 1, header=False, n_columns=4),
        'test': TsvLayout('CoLA/test.tsv', 'sentence', None, None, 'index')}, test_files=(('test', 'CoLA'),)),
    TaskInfo('SST-2', 'sst2', _BIN, ('accuracy',), 'accuracy', ('sentence', None), {
        'train': TsvLayout('SST-2/train.tsv', 'sentence', None, 'label'),
        'dev': TsvLayout('SST-2/dev.tsv', 'sentence', None, 'label'),
        'test': TsvLayout('SST-2/test.tsv', 'sentence', None, None, 'index')}, test_files=(('test', 'SST-2'),)),
    TaskInfo('MRPC', 'mrpc', _BIN, ('accuracy', 'f1'), 'accuracy', ('sentence1', 'sentence2'),
             _pair('MRPC', '#1 String', '#2 String', 'Quality'), symmetric=True, test_files=(('test', 'MRPC'),)),
    TaskInfo('STS-B', 'stsb', (), ('pearson', 'spearman'), 'spearman', ('sentence1', 'sentence2'),
             _pair('STS-B', 'sentence1', 'sentence2', 'score'), symmetric=True, test_files=(('test', 'STS-B'),)),
    TaskInfo('QQP', 'qqp', _BIN, ('accuracy', 'f1'), 'accuracy', ('question1', 'question2'),
             _pair('QQP', 'question1', 'question2', 'is_duplicate', test_index='id'), test_files=(('test', 'QQP'),)),
    TaskInfo('MNLI', 'mnli', _NLI3, ('accuracy',), 'accuracy', ('premise', 'hypothesis'), {
        'train': TsvLayout('MNLI/train.tsv', _MNLI_A, _MNLI_B, 'gold_label'),
        'dev_matched': TsvLayout('MNLI/dev_matched.tsv', _MNLI_A, _MNLI_B, 'gold_label'),
        'dev_mismatched': TsvLayout('MNLI/dev_mismatched.tsv', _MNLI_A, _MNLI_B, 'gold_label'),
        'test_matched': TsvLayout('MNLI/test_matched.tsv', _MNLI_A, _MNLI_B, None, 'index'),
        'test_mismatched': TsvLayout('MNLI/test_mismatched.tsv', _MNLI_A, _MNLI_B, None, 'index')},
             dev_splits=('dev_matched', 'dev_mismatched'),
             test_files=(('test_matched', 'MNLI-m'), ('test_mismatched', 'MNLI-mm'))),
    TaskInfo('QNLI', 'qnli', _NLI2, ('accuracy',), 'accuracy', ('question', 'sentence'),
             _pair('QNLI', 'question', 'sentence', 'label'), test_files=(('test', 'QNLI'),)),
    TaskInfo('RTE', 'rte', _NLI2, ('accuracy',), 'accuracy', ('sentence1', 'sentence2'),
             _pair('RTE', 'sentence1', 'sentence2', 'label'), test_files=(('test', 'RTE'),)),
    TaskInfo('WNLI', 'wnli', _BIN, ('accuracy',), 'accuracy', ('sentence1', 'sentence2'),
             _pair('WNLI', 'sentence1', 'sentence2', 'label'), test_files=(('test', 'WNLI'),)),
    TaskInfo('AX', 'ax', _NLI3, (), 'accuracy', ('premise', 'hypothesis'), {
        'test': TsvLayout('diagnostic/diagnostic.tsv', 'sentence1', 'sentence2', None, 'index')},
             test_files=(('test', 'AX'),), predicted_by='MNLI'),
]}
TASKS = {name: dataclasses.replace(t, names=_NAMES.get(name, ())) for name, t in TASKS.items()}
ALL_TASKS = list(TASKS)


def task_named(name: str, key: str = 'tasks', files: Mapping[str, Path] | None = None) -> TaskInfo:
    """The GLUE task called `name`, or a `ConfigError` suggesting the closest name. `files`: None where `key` takes a
    task file by its path (`tasks`: a YAML file of that stem suggested); else the job's task files by their names,
    which `key` may name (`task_overrides`): the refusal lists them beside the GLUE tasks and suggests from them too,
    a file's stem or its name in another case pointing to the file."""
    if name in TASKS: return TASKS[name]
    glue = ', '.join(ALL_TASKS)
    if files is None:
        beside = next((f'{name}{s}' for s in ('.yaml', '.yml') if Path(f'{name}{s}').is_file()), None)
        hint = f" Did you mean '{beside}' (a task file)?" if beside else _closest(name, {})
        raise ConfigError(f"{key}: unknown GLUE task '{name}'.{hint} Tasks are {glue}, or a task file (YAML) by its "
                          "path.")
    hint = _closest(name, files)
    if not files: raise ConfigError(f"{key}: unknown GLUE task '{name}'.{hint} Tasks are {glue}.")
    listed = ', '.join(f'{n} ({p})' for n, p in files.items())
    raise UnknownTask(f"{key}: unknown task '{name}'.{hint} This job's task files are {listed}; GLUE tasks are {glue}.",
                      key, name, list(files))


def _closest(name: str, files: Mapping[str, Path]) -> str:
    """" Did you mean 'x'?" for the task `name` most likely means: a GLUE name or hub config in another case or
    spelling (`rte`, `sts_b`), a task file's name in another case or its stem, else the closest of all by spelling, in
    any case; a task file with its path."""
    def fold(s: str) -> str: return s.casefold().replace('-', '').replace('_', '')
    exact = ({fold(n): n for n in files} | {fold(Path(p).stem): n for n, p in files.items()} |
             {fold(n): n for n in TASKS} | {t.hf_config: n for n, t in TASKS.items()})  # a GLUE name first
    close = exact.get(fold(name))
    if close is None:
        names = {n.casefold(): n for n in [*files, *ALL_TASKS]}
        near = difflib.get_close_matches(name.casefold(), list(names), n=1)
        close = names[near[0]] if near else None
    if close is None: return ''
    return f" Did you mean '{close}'{f' (the task file {files[close]})' if close in files else ''}?"
