"""Which metric fits which task: one table (`FITS`) for every task kind. A task file's `metrics` are checked against
it when the file is read (the kind: `check_metrics` without a count) and again when its training labels are read
(how many classes, labels or entity types), before any run; the fixed metrics of the GLUE tasks and of QA are rows of
it too (tests/finetuning/tasks/test_metric_table.py checks both).

A score the data leave undefined is NaN: shown as 'undefined' (`metric_text`), left out of means, never picked as a
best or median run. That is Pearson and Spearman with a constant side (the official RegressionScorer calls scipy,
which gives NaN: google-research/electra, finetune/classification/classification_metrics.py), and the F1 averages
where no label is true nor predicted (scikit-learn's `zero_division=np.nan`: such a label is left out of the mean).
Where the official code defines the value it is kept: MCC 0 when one class alone is predicted or true (MCCScorer:
sklearn's `matthews_corrcoef`), the positive class's F1 0 without a true positive (F1Scorer), seqeval's 0s for
tagging (EntityLevelF1Scorer) and the SQuAD scripts' for QA.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from electra.config.base import ConfigError, did_you_mean, key_place

__all__ = ['MetricFit', 'FITS', 'METRIC_NAMES', 'fitting', 'metric_names', 'check_metrics', 'metric_text']


@dataclass(frozen=True)
class MetricFit:
    "A metric as one task kind reports it: what it scores there, and the classes (labels, entity types) it needs."
    metric: str
    kind: str                 # classification, regression, multilabel, tagging, qa
    scores: str
    least: int = 0            # the fewest classes (labels, entity types) it is defined for
    most: int | None = None   # the most; None: any number


_QA = 'SQuAD 2.0: '
FITS = (
    MetricFit('accuracy', 'classification', 'the share of examples whose class is right'),
    MetricFit('f1', 'classification', 'the F1 of the positive class: the second of the two sorted labels, as GLUE '
                                      'MRPC and QQP take label 1', 2, 2),
    MetricFit('f1_macro', 'classification', 'the mean over the classes of each class F1'),
    MetricFit('f1_micro', 'classification', 'the F1 of every class decision pooled (equal to accuracy, one class each)'),
    MetricFit('f1_weighted', 'classification', 'each class F1 weighted by its dev examples'),
    MetricFit('mcc', 'classification', "Matthews' correlation, the multi-class form beyond two classes"),
    MetricFit('pearson', 'regression', "Pearson's correlation of the predictions with the labels"),
    MetricFit('spearman', 'regression', "Spearman's rank correlation of the predictions with the labels"),
    MetricFit('f1_micro', 'multilabel', 'the F1 of every (example, label) decision pooled'),
    MetricFit('f1_macro', 'multilabel', 'the mean over the labels of each label F1'),
    MetricFit('f1_weighted', 'multilabel', 'each label F1 weighted by its true dev examples'),
    MetricFit('subset_accuracy', 'multilabel', 'the share of examples with every label right'),
    MetricFit('f1', 'tagging', 'the entity F1, micro over all entities, by seqeval', 1),
    MetricFit('precision', 'tagging', 'the entity precision, micro, by seqeval', 1),
    MetricFit('recall', 'tagging', 'the entity recall, micro, by seqeval', 1),
    MetricFit('accuracy', 'tagging', 'the share of words tagged right'),
    MetricFit('f1', 'qa', 'the token F1 of the answer against the best gold answer, by the official scripts'),
    MetricFit('exact', 'qa', 'the share of answers equal to a gold answer once normalised'),
    MetricFit('no_answer_f1', 'qa', _QA + 'the F1 of answering no question'),
    MetricFit('best_f1', 'qa', _QA + 'the F1 at the null threshold best on dev itself'),
    MetricFit('best_exact', 'qa', _QA + 'the exact match at the null threshold best on dev itself'),
    MetricFit('HasAns_exact', 'qa', _QA + 'exact match over the answerable questions'),
    MetricFit('HasAns_f1', 'qa', _QA + 'F1 over the answerable questions'),
    MetricFit('NoAns_exact', 'qa', _QA + 'exact match over the unanswerable questions'),
    MetricFit('NoAns_f1', 'qa', _QA + 'F1 over the unanswerable questions'),
)
METRIC_NAMES = tuple(dict.fromkeys(f.metric for f in FITS))  # every metric, in the table's order
_COUNTED = {'classification': ('class', 'classes'), 'multilabel': ('label', 'labels'),
            'tagging': ('entity type', 'entity types')}  # what a kind's count counts


def _fits(fit: MetricFit, count: int | None) -> bool:
    return count is None or (fit.least <= count and (fit.most is None or count <= fit.most))


def fitting(kind: str, count: int | None = None) -> list[str]:
    "The metrics of a `kind` of task with `count` classes (labels, entity types; None: not yet known), in table order."
    return [f.metric for f in FITS if f.kind == kind and _fits(f, count)]


def _choices(kind: str, count: int | None) -> str:
    "'a, b or c': the metrics that fit; with the count not yet known, those that need one say which."
    own = [f for f in FITS if f.kind == kind and _fits(f, count)]
    names = [f.metric + (f' ({_needs(f)})' if count is None and (f.least or f.most) else '') for f in own]
    return ' or '.join(filter(None, [', '.join(names[:-1]), names[-1]])) if names else 'none'


def _needs(fit: MetricFit) -> str:
    "'two classes', 'one entity type or more': the counts a metric fits, in words."
    one, many = _COUNTED.get(fit.kind, ('class', 'classes'))

    def say(n: int) -> str: return f"{ {1: 'one', 2: 'two'}.get(n, n)} {one if n == 1 else many}"
    if fit.most == fit.least: return say(fit.least)
    return f"{say(fit.least)} or more" if fit.most is None else f"{say(fit.least)} to {say(fit.most)}"


def metric_names(value, path: str | Path) -> tuple[str, ...]:
    "The `metrics` value of the task file `path` as names: one name, or a list of distinct names."
    names = [value] if isinstance(value, str) else value  # `metrics: f1` is one name, not f and 1
    if not isinstance(names, list) or not all(isinstance(m, str) for m in names):
        raise ConfigError(f"{key_place(path, 'metrics')}: metrics: expected a metric name or a list of them, got {value!r}.")
    twice = next((m for i, m in enumerate(names) if m in names[:i]), None)
    if twice is not None: raise ConfigError(f"{key_place(path, 'metrics')}: metrics: {twice} is named twice; name each once.")
    return tuple(names)


def check_metrics(metrics: Sequence[str], kind: str, path: str | Path, count: int | None = None,
                  labels: Sequence[str] = ()) -> None:
    """Refuse, in one line naming the task file `path` and the line of its `metrics`, the first of `metrics` that is
    no metric of a `kind` task or does not fit its `count` of classes (labels, entity types: `labels`, shown); the
    line names the metrics that fit."""
    bad = next((m for m in metrics if m not in fitting(kind, count)), None)
    if bad is not None: raise ConfigError(_misfit(bad, kind, f"{key_place(path, 'metrics')}: metrics", count, labels))


def _misfit(m: str, kind: str, where: str, count: int | None, labels: Sequence[str]) -> str:
    "Why the metric `m` does not fit a `kind` task of `count` classes, and which do."
    own = {f.metric: f for f in FITS if f.kind == kind}
    fit, use = own.get(m), _choices(kind, count)
    if fit is not None:
        shown = ', '.join(labels[:6]) + (', ...' if len(labels) > 6 else '')
        has = f"{count} ({shown})" if labels else str(count)
        return f"{where}: {m} scores {_needs(fit)} ({fit.scores}); this {kind} task has {has}: use {use}."
    kinds = sorted({f.kind for f in FITS if f.metric == m})
    if kinds: return f"{where}: {m} scores {' and '.join(kinds)} tasks; this is a {kind} task: use {use}."
    return f"{where}: {m!r} is not a metric.{did_you_mean(m, list(own))} A {kind} task takes {use}."


def metric_text(value: float) -> str:
    "A score as the logs, the summary and the tables show it: two decimals, or 'undefined' for NaN."
    return 'undefined' if value is None or math.isnan(float(value)) else f'{float(value):.2f}'
