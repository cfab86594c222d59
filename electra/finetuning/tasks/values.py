"""The domain of each kind of value a task's data files give, checked once per column before any training, whatever
the format (CSV, TSV, JSONL, parquet): the labels of each task kind (`label_column`) and the ids written beside the
test predictions (`id_column`). A value out of its domain stops the job with one line naming the file, the line (a
parquet file's row, counted from 1), the value and the fix; nothing is dropped silently.

- Regression: every label a finite number (a JSON number or a string that reads as one); NaN, infinities, text,
  true/false and empty or null cells are refused (a NaN label made the loss NaN and the run went on to a score).
- Classification: every label one class name. Empty or null cells, and the missing-value markers `nan` and `null`
  (as pandas writes and reads them), are refused rather than learned as a class; so are a list (one example with
  several labels is `kind: multilabel`), spaces around a name (' pos' and 'pos' would be two classes), a tab or line
  break (the predictions file has one `id<TAB>prediction` line per example) and a column that mixes numbers with
  names ('1', '2', 'x': a typo or a missing-value marker such as 'N/A', far more often than a class), naming the
  first value of the rarer kind. Numbers must be finite.
- Multi-label: each label as a class name, and no comma in one (the predictions file joins an example's labels
  with commas); an empty cell is an example without labels, a null one is refused (write [] or '').
- Class names (and tags) of a training file that differ only in case ('Positive', 'positive') or Unicode form (an
  accented letter as one character or as a letter and a combining accent) are said in one `warning:` line with their counts (`warn_case_twins`): almost always one class typed two ways, but a task may mean
  them apart, so they stay separate classes.
- Ids: present, not blank, no tab or line break (each would break the predictions file's lines), each once.
"""
from __future__ import annotations

import math
import numbers
import re
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

from electra.config.errors import ConfigError, RunWarning
from electra.config.file_names import how_names_differ, name_key

__all__ = ['place', 'holds_parquet', 'is_missing', 'label_column', 'id_column', 'warn_case_twins']

_BREAKS = re.compile(r'[\x00-\x1f\x7f-\x9f\u2028\u2029]')  # control characters: tabs and every kind of line break
_MARKERS = ('nan', 'null')  # missing-value markers, as pandas writes a missing value and reads it back


def holds_parquet(path: Path) -> bool:
    "Whether a file is parquet, by its first bytes (the format's magic number), whatever its name."
    try:
        with open(path, 'rb') as f: return f.read(4) == b'PAR1'
    except OSError: return False


def place(path: Path, line: int) -> str:
    "'<file>: line N', or for a parquet file (rows, no lines) '<file>: row N'."
    return places(path, [line])[0]


def places(path: Path, lines: list[int]) -> list[str]:
    "`place` of each of `lines` of one file (its content looked at once)."
    word = 'row' if holds_parquet(path) else 'line'
    return [f'{path}: {word} {line}' for line in lines]


def is_missing(value) -> bool:
    "Whether a cell holds no value: null (None), NaN, or an empty or blank string."
    if value is None: return True
    if isinstance(value, str): return not value.strip()
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _number(value) -> float | None:
    "The value as a finite float, or None: true/false, text and non-finite numbers are not numbers here."
    if isinstance(value, (bool, np.bool_)): return None
    if isinstance(value, str):
        try: x = float(value)
        except ValueError: return None
    elif isinstance(value, numbers.Real): x = float(value)
    else: return None
    return x if math.isfinite(x) else None


def _regression(values: list, path: Path, lines: list[int], column: str) -> np.ndarray:
    out = np.empty(len(values), dtype=np.float32)
    for i, (v, line) in enumerate(zip(values, lines)):
        if v is None or isinstance(v, str) and not v.strip():
            raise ConfigError(f"{place(path, line)}: no label in column '{column}' (empty or null); a regression label "
                              "is a finite number such as 2.5. Give the example its label, or remove it.")
        x = _number(v)
        if x is None:
            raise ConfigError(f"{place(path, line)}: label {_shown(v)} in column '{column}' is not a finite number; a "
                              "regression label is a number such as 2.5. Fix it, or remove the example.")
        out[i] = x
    return out


def _shown(value) -> str:
    "A value as the messages show it: a string quoted, a number as Python writes it ('nan', 'inf')."
    return repr(value) if isinstance(value, str) else repr(str(value))


def _class_name(value, where: str, column: str, multilabel: bool = False) -> str:
    "One class label as its name, checked (see the module docstring)."
    if value is None or isinstance(value, str) and not value.strip():
        raise ConfigError(f"{where}: no label in column '{column}' (empty or null). Give the example its class, or "
                          "remove it.")
    if isinstance(value, (list, tuple, dict, np.ndarray)):
        raise ConfigError(f"{where}: label {value!r} in column '{column}' is not one class label; for several labels "
                          "per example use kind: multilabel.")
    name = str(value)
    if name.strip().lower() in _MARKERS:
        raise ConfigError(f"{where}: label {name!r} in column '{column}' is a missing value, not a class. Give the "
                          "example its class, or remove it.")
    try: finite = math.isfinite(float(name))
    except ValueError: finite = True  # a name
    if not finite:
        raise ConfigError(f"{where}: label {name!r} in column '{column}' is not a finite number. Fix it, or remove "
                          "the example.")
    if _BREAKS.search(name) or (multilabel and ',' in name):
        what = 'a comma (the predictions file joins an example\'s labels with commas)' if ',' in name else \
            'a tab or a line break (the predictions file has one id<TAB>prediction line per example)'
        raise ConfigError(f"{where}: label {name!r} in column '{column}' holds {what}. Rename the class.")
    if name != name.strip():
        raise ConfigError(f"{where}: label {name!r} in column '{column}' has spaces around it, so it would be another "
                          f"class than {name.strip()!r}. Remove them (a CSV field starts right after the comma).")
    return name


def _one_kind(names: list[str], places: list[str], column: str) -> None:
    "Class names are all numbers or all names: the first of the rarer kind is refused, with one of the other kind."
    numeric = [_number(n) is not None for n in names]
    k = sum(numeric)
    if k in (0, len(names)): return
    odd = numeric.index(2 * k < len(names))
    other = numeric.index(not numeric[odd])
    kind, others = ('a number', 'names') if numeric[odd] else ('a name', 'numbers')
    raise ConfigError(f"{places[odd]}: label {names[odd]!r} in column '{column}' is {kind} among {others} (such as "
                      f"{names[other]!r}, {places[other].rsplit(': ', 1)[-1]}): a class column holds numbers or names, "
                      "not both. Fix the label (a missing-value marker such as 'N/A'?) or remove the example.")


def _one_type(values: list, places: list[str], column: str) -> None:
    """The labels of a typed file (JSONL, parquet) written all as strings or all not: 1 and "1" would be one class
    name, but a file that writes a class both ways is mixing sources (CSV and TSV fields are all strings)."""
    text = [isinstance(v, str) for v in values]
    if all(text) or not any(text): return
    odd = text.index(2 * sum(text) < len(text))
    other = text.index(not text[odd])
    kind = lambda v: 'a string' if isinstance(v, str) else 'not a string'
    raise ConfigError(f"{places[odd]}: label {values[odd]!r} in column '{column}' is {kind(values[odd])} and "
                      f"{values[other]!r} ({places[other].rsplit(': ', 1)[-1]}) is {kind(values[other])}: the file "
                      "writes its labels in two types. Write every label the same way (all numbers, or all strings).")


def _split(value, sep: str, where: str, column: str) -> list:
    "One example's labels in a multi-label task: a JSON list, or a `sep`-separated string ('' none)."
    if isinstance(value, (list, tuple, np.ndarray)): return list(value)
    if value is None or not isinstance(value, str):
        raise ConfigError(f"{where}: label {_shown(value)} in column '{column}' is not a list of labels; write [] or '' "
                          f"for an example without labels, else the labels ('a{sep}b' in CSV and TSV, a list in JSONL).")
    return [v.strip() for v in value.split(sep) if v.strip()]


def label_column(kind: str, values: list, path: Path, lines: list[int], column: str, separator: str = ','):
    """A label column checked for its task `kind`: regression a float32 array; classification each example's class
    name; multilabel each example's list of class names. `lines`: each value's line (parquet: row)."""
    if kind == 'regression': return _regression(values, path, lines, column)
    where_each = places(path, lines)
    if kind == 'classification':
        names = [_class_name(v, where, column) for v, where in zip(values, where_each)]
        _one_kind(names, where_each, column)
        _one_type(values, where_each, column)
        return names
    raw = [_split(value, separator, where, column) for value, where in zip(values, where_each)]
    each = [[_class_name(v, where, column, multilabel=True) for v in labels] for labels, where in zip(raw, where_each)]
    flat = [(v, n, where) for labels, names, where in zip(raw, each, where_each) for v, n in zip(labels, names)]
    if flat:
        _one_kind([n for _, n, _ in flat], [w for _, _, w in flat], column)
        _one_type([v for v, _, _ in flat], [w for _, _, w in flat], column)
    return each


def id_column(values: list, path: Path, lines: list[int], column: str) -> list[str]:
    """Test ids, checked: each present, not blank, without a tab or line break (the predictions file is one
    `id<TAB>prediction` line per example), and each once (two rows for one id)."""
    ids, first = [], {}
    for v, line, where in zip(values, lines, places(path, lines)):
        if is_missing(v):
            raise ConfigError(f"{where}: no id in column '{column}' (empty, null or NaN); the predictions file names each "
                              "test example by it. Give every example an id.")
        name = str(v)
        if _BREAKS.search(name):
            raise ConfigError(f"{where}: id {name!r} in column '{column}' holds a tab or a line break, which would break "
                              "the predictions file (one id<TAB>prediction line per example). Remove it from the id.")
        if first.setdefault(name, line) != line:
            raise ConfigError(f"{where}: id {name!r} is also on {place(path, first[name]).rsplit(': ', 1)[-1]}; the "
                              f"predictions file would hold two rows for it. Make the ids in column '{column}' unique.")
        ids.append(name)
    return ids


def warn_case_twins(where: str, values: list[str], what: str = 'labels', unit: str = 'row') -> None:
    """One `RunWarning` naming the class names of `values` that differ only in case, each with its count of `unit`s
    (a hand-edited spreadsheet's 'Positive' beside 'positive'), before any run: they become separate classes."""
    counts = Counter(values)
    groups: dict[str, list[str]] = {}
    for name in sorted(counts): groups.setdefault(name_key(name), []).append(name)
    twins = [names for names in groups.values() if len(names) > 1]
    if not twins: return
    hows = {how_names_differ(a, b)[0] for names in twins for a, b in zip(names, names[1:])}
    def shown(n): return f"{n!r} ({counts[n]} {unit}{'' if counts[n] == 1 else 's'})"
    said = ', '.join(', '.join(map(shown, names[:-1])) + f' and {shown(names[-1])}' for names in twins)
    how = hows.pop() if len(hows) == 1 else 'only in case or Unicode form (NFC, NFD)'
    warnings.warn(f"{where}: the {what} {said} differ {how}, so they are separate classes; write each class one way if "
                  "they are one.", RunWarning, stacklevel=3)
