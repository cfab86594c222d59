"""A task's examples and where they come from, whatever the task: `Examples` (one split: indices, texts, labels),
`TaskSource` (what GLUE's readers in `glue/sources.py` and the task files of `files.py` answer), the UTF-8, TSV and CSV
readers both use, and the changes the official code makes to a training set (`drop_empty`, `double_unordered`).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from electra.config.errors import ConfigError
from electra.config.text_files import compressed
from electra.finetuning.tasks.base import TaskInfo

__all__ = ['Examples', 'TaskSource', 'read_utf8', 'read_delimited', 'drop_empty', 'double_unordered']

# csv stops a field longer than 131072 characters with `_csv.Error`; a long text is fine (the tokenizer truncates it to
# max_length). 2**31 - 1: the largest limit every platform takes (a C long; sys.maxsize overflows it on Windows).
csv.field_size_limit(2**31 - 1)


@dataclass
class Examples:
    "One split of one task: example indices, texts and labels (class ids, STS-B scores, or -1 in test splits)."
    idx: np.ndarray
    text_a: list[str]
    text_b: list[str] | None
    label: np.ndarray

    def __len__(self) -> int: return len(self.idx)

    def take(self, keep: np.ndarray) -> 'Examples':
        keep = np.asarray(keep)
        pick = np.flatnonzero(keep) if keep.dtype == bool else keep
        return Examples(self.idx[pick], [self.text_a[i] for i in pick],
                        None if self.text_b is None else [self.text_b[i] for i in pick], self.label[pick])


def read_utf8(path: Path) -> str:
    """A text file's contents without a byte-order mark (MRPC's files start with one); a file that is not UTF-8 stops
    the job naming the line."""
    raw = path.read_bytes()
    try: text = raw.decode('utf-8')
    except UnicodeDecodeError as e:
        if packed := compressed(path, raw[:16]): raise ConfigError(f"{path} {packed}.") from None
        line = raw.count(b'\n', 0, e.start) + 1
        raise ConfigError(f"{path}: line {line} is not UTF-8 text (byte {raw[e.start]:#04x}); save the file as "
                          "UTF-8.") from None
    return text.removeprefix('\ufeff')


def read_delimited(path: Path, delimiter: str = '\t', quoting: int = csv.QUOTE_NONE) -> list[tuple[int, list[str]]]:
    """The records of a TSV (GLUE's: no quoting) or CSV file, each with the line it starts on (a quoted field may hold
    line breaks), blank lines skipped."""
    out, line = [], 1
    # CSV strictly: a quote left open would otherwise swallow every line after it into one field
    reader = csv.reader(io.StringIO(read_utf8(path), newline=''), delimiter=delimiter, quoting=quoting,
                        strict=quoting != csv.QUOTE_NONE)
    try:
        for row in reader:
            if row: out.append((line, row))
            line = reader.line_num + 1
    except csv.Error as e:
        hint = 'Fix the line.' if quoting == csv.QUOTE_NONE else ('A quote opened in a field must close it: quote the '
                                                               'whole field, and write a quote inside it twice ("").')
        raise ConfigError(f"{path}: line {line}: not valid CSV ({e}). {hint}") from None
    if quoting == csv.QUOTE_NONE:
        for k, (at, fields) in enumerate(out[:2]): _refuse_quoted(path, at, fields, 1 + k)
    return out


def _refuse_quoted(path: Path, line: int, fields: list[str], least: int) -> None:
    """A TSV file whose first line (or first two: a header may be written bare) has every field of `least` or more in
    double quotes (R's `write.table`, Python's `csv.QUOTE_ALL`): read without quoting, the quotes would be part of
    every column name and value ('"pos"' a class). A quoted text among unquoted fields, or a line of one quoted text,
    is text, as in the GLUE files (SST-2's sentences hold quotes)."""
    if len(fields) < least or not all(len(f) >= 2 and f[0] == f[-1] == '"' for f in fields): return
    raise ConfigError(f"{path}: line {line}: every field is in double quotes ({', '.join(fields)}); a TSV file is read "
                      "without quoting, as the GLUE files are, so the quotes would be part of the names and values. "
                      "Write it without quotes (R: write.table(..., quote=FALSE); Python: csv.writer(..., "
                      "quoting=csv.QUOTE_NONE)), or as a comma-separated .csv file, whose quotes are read.")


class TaskSource:
    "Where a task's data comes from (GLUE's download, the hub, task files); `load(task, split)` returns `Examples`."
    description = ''

    def has(self, task: TaskInfo, split: str) -> bool:
        "Whether the split is there to load (the hub has every split)."
        return True

    def load(self, task: TaskInfo, split: str) -> Examples: raise NotImplementedError

    def files(self, task: TaskInfo, split: str) -> list[Path]:
        "The files the split is read from, whose bytes are what a run's result depends on (`FinetuningTask.data_files`)."
        raise NotImplementedError


def drop_empty(ex: Examples) -> Examples:
    """Training rows with an empty segment removed (QQP has a few; the replication drops them, and the official
    code silently turns them into single-segment inputs)."""
    keep = np.array([bool(a.strip()) and (ex.text_b is None or bool(b.strip()))
                     for a, b in zip(ex.text_a, ex.text_b or ex.text_a)], dtype=bool)
    return ex if keep.all() else ex.take(keep)


def double_unordered(ex: Examples) -> Examples:
    """The training set followed by a copy with segments A and B swapped (official `double_unordered`, for tasks
    where segment order carries no meaning: MRPC, STS-B); copies get indices after the originals."""
    if ex.text_b is None: raise ValueError('double_unordered needs a sentence-pair task')
    offset = int(ex.idx.max()) + 1 if len(ex) else 0
    return Examples(np.concatenate([ex.idx, ex.idx + offset]), ex.text_a + ex.text_b, ex.text_b + ex.text_a,
                    np.concatenate([ex.label, ex.label]))
