"""Tasks from files: a researcher's own sentence or sentence-pair task, classification or regression, described by
a small YAML file and trained, swept, summarised and predicted as a GLUE task is.

    name: my_sentiment                # default: the YAML file's stem
    kind: classification              # or regression, or multilabel (any number of labels per example)
    train: data/train.csv             # CSV, TSV, JSONL or parquet (by content); paths relative to this YAML file
    dev: data/dev.csv
    test: data/test.csv               # optional; labels not needed
    text: sentence                    # one column, or two for a pair: [question, passage]
    label: label
    id: id                            # optional: the column written beside each test prediction (default: the row)
    metrics: [accuracy, f1]           # the first is the score; default accuracy (classification), pearson (regression),
                                      # f1_micro (multilabel); which fit which kind: tasks/metrics.py
    unordered_pair: false             # true: train on both segment orders (as MRPC and STS-B)
    target_scale: 1.0                 # regression: targets are learned divided by this (STS-B: 5)
    label_separator: ','              # multilabel in CSV/TSV: 'sports,politics' (JSONL: a list; '' no label)

Class labels are those of the training file (sorted; numerically when they are all numbers); a dev or test label
never seen in training stops the job naming the file and line. Every label and test id is checked for its kind's
domain first (`tasks/values.py`: a regression label a finite number, a class label neither empty, null, `nan` nor a
name among numbers, an id without a tab or line break, ...), in every format alike; a test file's label column
may be empty throughout (it is not read). TSV files are read as the GLUE files are (tab, no
quoting), so a GLUE task given as files reads exactly the same examples. A CSV or TSV file's first line names its
columns; a row with more or fewer fields than that header (a comma outside quotes, a tab in a TSV text), a column
named twice, or an id twice in the test file stops the job naming the file and line.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from electra.config.errors import ConfigError
from electra.config.fields import field
from electra.config.file_names import name_key, safe_name
from electra.config.finetune import TASK_KEYS, FinetuneConfig, TaskCatalogue, register_task_catalogue
from electra.config.paths import expand_path
from electra.config.text_files import compressed, load_json, read_text, split_lines
from electra.config.values import CheckedConfig, config_from_dict
from electra.config.yaml_reader import key_place, load_yaml, yaml_key_lines
from electra.finetuning.tasks.base import TaskInfo
from electra.finetuning.tasks.glue.tasks import TASKS, task_named
from electra.finetuning.tasks.metrics import check_metrics, metric_names
from electra.finetuning.tasks.sources import Examples, TaskSource, read_delimited, read_utf8
from electra.finetuning.tasks.values import holds_parquet, id_column, is_missing, label_column, place, warn_case_twins
from electra.runtime.files import atomic_write_text
from electra.runtime.processes import is_main_process

__all__ = ['FileTaskSpec', 'FileOptions', 'FileKind', 'register_file_kind', 'read_task_file', 'task_hparams', 'task_settings',
           'make_task', 'FileSource',
           'file_task', 'write_file_predictions', 'data_file']

# the kinds of sentence (or sentence-pair) task files this module reads itself (`read_task_file`), each with its
# default metrics; the kinds of other modules (tagging, QA) are in FILE_KIND_REGISTRY only
SENTENCE_KIND_METRICS = {'classification': ('accuracy',), 'regression': ('pearson', 'spearman'), 'multilabel': ('f1_micro',)}
KEYS = ('name', 'kind', 'train', 'dev', 'test', 'text', 'label', 'id', 'metrics', 'unordered_pair', 'target_scale',
        'label_separator')


@dataclass
class FileOptions(CheckedConfig):
    "A classification, regression or multilabel task file's own settings, each with its domain, checked as job keys are."
    unordered_pair: bool = field(False, 'train on both segment orders (as MRPC and STS-B)')
    target_scale: float = field(1.0, 'regression: targets are learned divided by this (STS-B: 5)', gt=0)
    label_separator: str = field(',', 'multilabel in CSV/TSV: between the labels of one example')


@dataclass(frozen=True)
class FileKind:
    "How a task file of some `kind` is read (`read_spec(path, raw)`: its checked spec) and made a task (`make(spec)`)."
    read_spec: Callable[[Path, dict], Any] | None  # None: the classification kinds' reader, `read_task_file` itself
    make: Callable[[Any], Any]


# every kind of task file, by name: filled by the modules of the task kinds, above this one
FILE_KIND_REGISTRY: dict[str, FileKind] = {}


def register_file_kind(kinds: tuple[str, ...], kind: FileKind) -> None:
    "Task files of these `kind`s are read and made into tasks as `kind` says (a task kind's module calls this)."
    for name in kinds: FILE_KIND_REGISTRY[name] = kind


@dataclass(frozen=True)
class FileTaskSpec:
    "A task from files, as its YAML file describes it (paths resolved)."
    path: Path
    name: str
    kind: str
    files: dict[str, Path]            # split -> file
    text: tuple[str, ...]
    label: str
    id: str
    metrics: tuple[str, ...]
    unordered_pair: bool
    target_scale: float
    label_separator: str              # multilabel: between the labels of one example in CSV, TSV
    hparams: dict                     # the task's own hyperparameters (keys of TASK_KEYS): `FinetuneConfig.for_task`
    defaults: ClassVar[dict] = {}     # its kind's hyperparameters where nobody sets them (none for these kinds)


def _fail(path, msg: str):
    raise ConfigError(f"{path}: {msg}")


def _check_values(path: Path, raw: dict) -> None:
    unknown = sorted(set(raw) - set(KEYS))
    if unknown: _fail(path, f"unknown key(s) {', '.join(unknown)}; a task file has {', '.join(KEYS)}.")
    for key in ('train', 'dev', 'text', 'label'):
        if not raw.get(key): _fail(path, f"'{key}' is missing: a task file names train and dev files, text and label columns.")
    _check_types(path, raw)


def _check_common(path: Path, raw: dict) -> None:
    """What every kind's reader takes as read, checked before any of them looks at it: keys are names, `kind` is one of
    the kinds, the files are file names (each kind then checks its own keys)."""
    odd = next((k for k in raw if not isinstance(k, str)), None)
    if odd is not None: _fail(path, f"key {odd!r} is not a name: a task file's keys are names such as {', '.join(KEYS)}.")
    kind = raw.get('kind', 'classification')
    if not isinstance(kind, str) or kind not in FILE_KIND_REGISTRY:
        _fail(path, f"kind must be one of {', '.join(FILE_KIND_REGISTRY)}, got {kind!r}.")
    for key in ('train', 'dev', 'test'):
        if raw.get(key) is not None and not isinstance(raw[key], str): _fail(path, f"{key}: {raw[key]!r} is not a file name.")


def _check_types(path: Path, raw: dict) -> None:
    "Each value of the kind its key takes: column names are strings (the settings: `FileOptions`)."
    for key in ('label', 'id'):
        if key in raw and not isinstance(raw[key], str): _fail(path, f"{key}: expected a column name, got {raw[key]!r}.")
    text = [raw['text']] if isinstance(raw['text'], str) else raw['text']
    if not isinstance(text, list) or not all(isinstance(t, str) for t in text):
        _fail(path, f"text: expected a column name or a list of two, got {raw['text']!r}.")


def task_hparams(path: Path, raw: dict) -> dict:
    """The hyperparameters a task file sets for its task (any per-task key of the job: epochs, max_length, ...),
    checked; removed from `raw`. Which of them a run takes is `FinetuneConfig.for_task`'s rule."""
    own = {k: raw.pop(k) for k in list(raw) if k in TASK_KEYS}
    task_settings(FinetuneConfig, path, own)
    return own


def task_settings(cls, path: Path, values: dict):
    """The `cls` (a config dataclass) of the `values` a task file gives for its keys: each converted to its type and
    checked against its declared domain, as the job's keys are, a bad one named with the file and its line."""
    try: return config_from_dict(cls, values, source=str(path), lines=yaml_key_lines(path))
    except ConfigError as e: raise ConfigError(str(e) if str(e).startswith(str(path)) else f'{path}: {e}') from None


def data_file(path: Path, raw: dict, split: str) -> Path:
    """The data file a task file names for `split`, as written there (`~`, `$VAR` expanded as in a config) and relative
    to the task file; every kind's reader takes its files from here."""
    return (path.parent / expand_path(str(raw[split]), f"{key_place(path, split)}: {split}")).resolve()


def read_task_file(path: str | Path):
    """The task a YAML file describes, checked: keys, kind, metrics, columns or fields named, files present. A
    `FileTaskSpec`, or for `kind` tagging, squad or mrqa the spec of `tasks/tagging/task.py` or `tasks/qa/task.py`."""
    path = Path(path)
    if path.is_dir(): _fail(path, 'tasks: it is a folder, not a task file: give the YAML file in it.')
    if not path.is_file():
        _fail(path, "no such task file (tasks: GLUE names or task YAML files). The demo's task files are written by "
                    "`python -m electra.finetuning.tasks.demo cache/demo_tasks`.")
    source = read_text(path)
    raw = load_yaml(source, str(path)) or {}  # (text that is not YAML: one line naming the place)
    if not isinstance(raw, dict): _fail(path, 'expected a mapping of key: value.')
    _check_common(path, raw)
    raw['name'] = _task_name(path, raw)  # what every kind's spec takes as its name
    other = FILE_KIND_REGISTRY.get(raw.get('kind'))
    if other is not None and other.read_spec is not None: return other.read_spec(path, raw)
    hparams = task_hparams(path, raw)
    _check_values(path, raw)
    kind = raw.get('kind', 'classification')
    metrics = metric_names(raw['metrics'], path) if raw.get('metrics') else SENTENCE_KIND_METRICS[kind]
    check_metrics(metrics, kind, path)  # the number of classes is checked once they are read
    text = (raw['text'],) if isinstance(raw['text'], str) else tuple(raw['text'])
    if not 1 <= len(text) <= 2: _fail(path, f"text: one column, or two for a pair; got {len(text)}.")
    files = {s: data_file(path, raw, s) for s in ('train', 'dev', 'test') if raw.get(s)}
    for split, f in files.items():
        if f.is_dir(): _fail(path, f"{split}: {f} is a folder, not a data file: give the file in it.")
        if not f.is_file(): _fail(path, f"{split}: {f} not found.")
        if packed := compressed(f): _fail(path, f"{split}: {f.name} {packed}.")
    options = task_settings(FileOptions, path, {k: raw[k] for k in ('unordered_pair', 'target_scale', 'label_separator')
                                                if k in raw})
    if options.unordered_pair and len(text) != 2: _fail(path, 'unordered_pair needs a pair of text columns.')
    return FileTaskSpec(path.resolve(), raw['name'], kind, files, text, str(raw['label']),
                        str(raw.get('id') or ''), metrics, options.unordered_pair, options.target_scale,
                        options.label_separator, hparams)


def _task_name(path: Path, raw: dict) -> str:
    """A task file's `name` (its file name's stem when it gives none; a number as written), checked as a file name
    (`safe_name`), for the task's checkpoints, token caches and test files are named by it."""
    name = raw.get('name')
    if name is None: return _not_glue(safe_name(path.stem, "name (none given, so the file's)", str(path)), path,
                                      "name {!r} (none given, so the file's)")
    if isinstance(name, float):  # (`1.50` read as 1.5: what was written is lost)
        _fail(key_place(path, 'name'), f"name: {name!r} is a number to YAML (a fraction such as 1.50 is read as 1.5): "
                                       "quote it to keep the characters written.")
    if isinstance(name, int) and not isinstance(name, bool): name = str(name)
    # no line: a name from a merged anchor
    return _not_glue(safe_name(name, 'name', key_place(path, 'name')), key_place(path, 'name'), 'name {!r}')


# what GLUE's tasks name files by, in lower case: each task (its runs <task>_<i>.pth) and each test file (MNLI's
# MNLI-m.tsv and MNLI-mm.tsv): a task file's name is none of them, in any case (one file on macOS and Windows)
_GLUE_NAMES = {name_key(n): (task, n) for task, t in TASKS.items() for n in (task, *(stem for _, stem in t.test_files))}


def _not_glue(name: str, where, shown: str) -> str:
    "`name`, unless GLUE's files are named by it or by it in another case (`shown`: how the message names it)."
    glue = _GLUE_NAMES.get(name_key(name))
    if glue is None: return name
    task, stem = glue
    if name == task: _fail(where, f"{shown.format(name)} is a GLUE task's; choose another.")
    what = f"task {task}" if stem == task else f"test file {stem}.tsv (of {task})"
    if name == stem: _fail(where, f"{shown.format(name)} is GLUE's {what}: their files would be one; choose another.")
    _fail(where, f"{shown.format(name)} differs only in case from GLUE's {what}: their files would be one on a "
                 "case-insensitive file system (macOS, Windows); choose another.")


def make_task(spec):
    "The `FinetuningTask` of a task file's spec, by its kind."
    return FILE_KIND_REGISTRY[spec.kind].make(spec)


def data_format(path: Path) -> str:
    """'parquet', 'jsonl', 'tsv' or 'csv': what a data file holds, by its first bytes, whatever its name says: parquet
    by its magic number, JSON lines by a first line that opens a JSON object (no header line names a column `{...`);
    text else, tab-separated when named .tsv, or when named neither .csv nor .tsv and its first line holds a tab,
    comma-separated otherwise."""
    if holds_parquet(path): return 'parquet'
    with open(path, 'rb') as f: head = f.read(1 << 16).removeprefix(b'\xef\xbb\xbf').lstrip()
    if head.startswith(b'{'): return 'jsonl'
    if path.suffix in ('.csv', '.tsv'): return path.suffix[1:]
    return 'tsv' if b'\t' in head.split(b'\n', 1)[0] else 'csv'


def _rows(path: Path) -> tuple[list[dict], list[int]]:
    "The records of a data file and the line (row, for parquet) each came from."
    kind = data_format(path)
    if kind == 'parquet':
        import pyarrow.parquet as pq
        # Python values, a null as None (pandas would make it NaN, and a null label would read as the label 'nan')
        try: records = pq.read_table(path).to_pylist()
        except Exception as e:  # pyarrow raises many kinds for a file that is not parquet
            _fail(path, f"cannot read it as parquet ({type(e).__name__}: {e}).")
        return records, list(range(1, len(records) + 1))
    if kind == 'jsonl': return _jsonl(path)
    # TSV as the GLUE files are read (no quoting: quotes are text); CSV with standard quoting
    tsv = kind == 'tsv'
    return _table(path, read_delimited(path, '\t', csv.QUOTE_NONE) if tsv else read_delimited(path, ',', csv.QUOTE_MINIMAL),
                  tsv)


def _jsonl(path: Path) -> tuple[list[dict], list[int]]:
    rows, lines = [], []
    for n, line in enumerate(split_lines(read_utf8(path)), 1):
        if not line.strip(): continue
        rows.append(load_json(line, place(path, n)))
        if not isinstance(rows[-1], dict): _fail(path, f"line {n}: a record must be a JSON object of column: value.")
        lines.append(n)
    return rows, lines


_SEPARATORS = {'\t': 'tab', ',': 'comma', ';': "';'", '|': "'|'"}


def _table(path: Path, records: list[tuple[int, list[str]]], tsv: bool) -> tuple[list[dict], list[int]]:
    """The rows of a CSV or TSV file by the names of its header line. A row with more or fewer fields than the header
    would shift its values into the wrong columns (the text becoming the label): it stops the job, naming the line."""
    if not records: _fail(path, 'empty file: expected a header line naming the columns, then one line per example.')
    (at, header), body = records[0], records[1:]
    read_as = 'tab' if tsv else 'comma'
    seps = [name for c, name in _SEPARATORS.items() if name != read_as and len(header) == 1 and c in header[0]]
    if seps:
        _fail(path, f"the header is one column, {header[0]!r}: the file looks {seps[0]}-separated, but "
                    f"{f'a {path.suffix} file' if path.suffix else 'it'} is read {read_as}-separated. Name a "
                    "tab-separated file .tsv; write a .csv file with commas.")
    twice = next((c for i, c in enumerate(header) if c in header[:i]), None)
    if twice is not None: _fail(path, f"line {at}: the header names column {twice!r} twice; rename one.")
    hint = ("TSV fields cannot hold a tab (they are read without quoting, as the GLUE files are)" if read_as == 'tab'
            else 'A field holding a comma must be quoted ("a, b"), and every row has one value per column')
    for n, row in body:
        if len(row) != len(header):
            _fail(path, f"line {n} has {len(row)} fields, the header has {len(header)} ({', '.join(header)}). {hint}.")
    return [dict(zip(header, row)) for _, row in body], [n for n, _ in body]


def _column(path: Path, rows: list[dict], lines: list[int], col: str, nulls: bool = False) -> list:
    """One column's values; a row without it (or, unless `nulls`, with a null there) stops the job naming the file,
    the line and the columns there are. Labels and ids take nulls: their checks (`tasks/values.py`) name them."""
    for row, line in zip(rows, lines):
        if col not in row or (row[col] is None and not nulls):
            _fail(place(path, line), f"no value in column '{col}' (columns: {', '.join(map(str, row))}). Fix the file "
                                     "or the task file's column names.")
    return [row[col] for row in rows]


def _label_table(path: Path, column: str, values: list) -> tuple[str, ...]:
    "The training file's classes, sorted (as numbers when they all are: then one number written two ways is refused)."
    names = sorted({str(v) for v in values})
    warn_case_twins(f"{path}: column '{column}'", [str(v) for v in values])
    try: numbers = sorted(names, key=float)
    except ValueError: return tuple(names)
    for a, b in zip(numbers, numbers[1:]):
        if float(a) == float(b):
            _fail(path, f"column '{column}': the labels {a!r} and {b!r} are one number written two ways, so they would be "
                        "two classes. Write each class one way.")
    return tuple(numbers)


def file_task(spec: FileTaskSpec) -> tuple[TaskInfo, 'FileSource']:
    "The task (in the shape of a GLUE task: the sweep trains it as one) and the source of its examples."
    source = FileSource(spec)
    raw = source.labels('train') if spec.kind != 'regression' else []
    if spec.kind == 'multilabel': raw = [v for names in raw for v in names]
    labels = _label_table(spec.files['train'], spec.label, raw) if raw else ()
    if spec.kind != 'regression' and len(labels) < 2:
        _fail(spec.files['train'], f"column '{spec.label}' holds {len(labels)} class(es); classification needs two or more.")
    if spec.kind != 'regression':
        check_metrics(spec.metrics, spec.kind, spec.path, len(labels), labels)
    task = TaskInfo(spec.name, '', labels, spec.metrics, spec.metrics[0], (spec.text[0], spec.text[1] if len(spec.text) > 1 else None),
                    symmetric=spec.unordered_pair, test_files=(('test', spec.name),) if 'test' in spec.files else (),
                    target_scale=spec.target_scale if spec.kind == 'regression' else None,
                    multilabel=spec.kind == 'multilabel')
    return task, source


class FileSource(TaskSource):
    "The examples of a task from files."

    def __init__(self, spec: FileTaskSpec):
        self.spec, self.description, self._cache, self._checked = spec, f'task files of {spec.path}', {}, {}

    def has(self, task: TaskInfo, split: str) -> bool: return split in self.spec.files

    def files(self, task: TaskInfo, split: str) -> list[Path]: return [self.spec.files[split]]

    def _read(self, split: str) -> tuple[list[dict], list[int]]:
        if split not in self._cache:
            path = self.spec.files[split]
            rows, lines = _rows(path)
            if not rows: _fail(path, f"no examples{' below the header line' if data_format(path) in ('csv', 'tsv') else ''}.")
            self._cache[split] = rows, lines
        return self._cache[split]

    def labels(self, split: str):
        "A split's labels checked for the task's kind (`values.label_column`): floats, class names or lists of them."
        if split not in self._checked:
            rows, lines = self._read(split)
            path, col = self.spec.files[split], self.spec.label
            self._checked[split] = label_column(self.spec.kind, _column(path, rows, lines, col, nulls=True), path, lines,
                                                col, self.spec.label_separator)
        return self._checked[split]

    def ids(self, split: str) -> list[str]:
        """Each example's id: the `id` column, checked (`values.id_column`: present, no tab or line break, each once),
        or its row number in the file."""
        rows, lines = self._read(split)
        if not self.spec.id: return [str(i) for i in range(len(rows))]
        path = self.spec.files[split]
        return id_column(_column(path, rows, lines, self.spec.id, nulls=True), path, lines, self.spec.id)

    def _labelled(self, split: str) -> bool:
        "Whether a split has labels: the training and dev files must; a test file's label column may be empty throughout."
        rows, _ = self._read(split)
        if split != 'test': return True
        return self.spec.label in rows[0] and not all(is_missing(r.get(self.spec.label)) for r in rows)

    def load(self, task: TaskInfo, split: str) -> Examples:
        "A split's examples; a test file's ids are checked too (the predictions file is keyed by them)."
        if split == 'test': self.ids(split)
        path, (rows, lines) = self.spec.files[split], self._read(split)
        texts = [[str(v) for v in _column(path, rows, lines, col)] for col in self.spec.text]
        shape = (len(rows), len(task.labels)) if task.multilabel else (len(rows),)
        label = self._labels(task, split, lines) if self._labelled(split) else \
            np.full(shape, -1, dtype=np.float32 if task.is_regression or task.multilabel else np.int64)
        return Examples(np.arange(len(rows), dtype=np.int64), texts[0], texts[1] if len(texts) > 1 else None, label)

    def _labels(self, task: TaskInfo, split: str, lines: list[int]) -> np.ndarray:
        path, raw = self.spec.files[split], self.labels(split)
        if task.is_regression: return raw
        ids = {name: i for i, name in enumerate(task.labels)}
        each = raw if task.multilabel else [[v] for v in raw]
        for names, line in zip(each, lines):
            for v in names:
                if v not in ids:
                    _fail(place(path, line), f"label {v!r} never occurs in the training file "
                                             f"({', '.join(task.labels)}); fix the label or add training examples of it.")
        if not task.multilabel: return np.array([ids[v[0]] for v in each], dtype=np.int64)
        hot = np.zeros((len(each), len(task.labels)), dtype=np.float32)  # [n, labels]
        for i, names in enumerate(each): hot[i, [ids[v] for v in names]] = 1.0
        return hot


def write_file_predictions(path: str | Path, task: TaskInfo, ids: list[str], idx: np.ndarray, preds: np.ndarray) -> Path:
    "`id<TAB>prediction` for each test example (`idx` its row), the label string or the regression value."
    if task.multilabel: values = [','.join(task.labels[k] for k in np.flatnonzero(row)) for row in preds]
    elif task.is_regression: values = [f'{float(v):.6g}' for v in preds]
    else: values = [task.labels[int(i)] for i in preds]
    lines = ['id\tprediction'] + [f'{ids[int(i)]}\t{v}' for i, v in zip(idx, values)]
    if is_main_process(): atomic_write_text('\n'.join(lines) + '\n', Path(path))
    return Path(path)


register_task_catalogue(TaskCatalogue(named=task_named, read_file=read_task_file))
