"""The metrics of every task kind, and which fits which: one table (`FITS`) for every task kind. A task file's `metrics` are checked against
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

The metrics of classification, regression and multi-label tasks (GLUE's and those from files) are here, in percent as
the official code reports them (`_METRICS`, `task_metrics`), written with numpy alone (the tests check them against
scikit-learn and scipy); tagging's and QA's are in their packages.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from electra.config.errors import ConfigError, did_you_mean
from electra.config.yaml_reader import key_place
from electra.finetuning.tasks.base import TaskInfo

__all__ = ['MetricFit', 'FITS', 'METRIC_NAMES', 'fitting', 'metric_names', 'check_metrics', 'metric_text', 'scores_text',
           'accuracy', 'f1',
           'mcc', 'pearson', 'spearman', 'subset_accuracy', 'f1_micro', 'f1_macro', 'f1_weighted', 'task_metrics',
           'dev_metric_names', 'predictions']


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


def scores_text(scores: Mapping[str, float], names: Iterable[str] | None = None) -> str:
    "'f1 83.33, NoAns_f1 undefined': the named scores (all, in order, without `names`) as every line shows them."
    return ', '.join(f'{m} {metric_text(scores[m])}' for m in (scores if names is None else names))


def accuracy(y_true, y_pred) -> float:
    return 100.0 * float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def f1(y_true, y_pred, positive: int = 1) -> float:
    "F1 of the positive class (MRPC, QQP); 0 without a true positive, as the official F1Scorer."
    t, p = np.asarray(y_true) == positive, np.asarray(y_pred) == positive
    tp = float(np.sum(t & p))
    return 0.0 if tp == 0 else 100.0 * 2 * tp / (float(t.sum()) + float(p.sum()))


def mcc(y_true, y_pred) -> float:
    "Matthews correlation coefficient (CoLA), the multi-class form from the confusion matrix."
    t, p = np.asarray(y_true), np.asarray(y_pred)
    classes = np.union1d(t, p)
    cm = (t[:, None] == classes[None, :]).astype(np.float64).T @ (p[:, None] == classes[None, :]).astype(np.float64)
    n, correct = cm.sum(), np.trace(cm)
    true_k, pred_k = cm.sum(axis=1), cm.sum(axis=0)
    cov = correct * n - true_k @ pred_k
    denom = np.sqrt((n * n - pred_k @ pred_k) * (n * n - true_k @ true_k))
    return 0.0 if denom == 0 else 100.0 * float(cov / denom)


def subset_accuracy(y_true, y_pred) -> float:
    "Multi-label [n, labels]: the share of examples with every label right."
    return 100.0 * float(np.mean(np.all(np.asarray(y_true) == np.asarray(y_pred), axis=-1)))


def _decisions(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    """Each example's decision per label as booleans [n, labels]: multi-label 0/1 rows as they are; class ids one-hot
    over the classes true or predicted (the classes scikit-learn averages over when given no `labels`)."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    if t.ndim == 2: return t == 1, p == 1
    classes = np.union1d(t, p)
    return t[:, None] == classes[None, :], p[:, None] == classes[None, :]


def _label_f1s(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    "Each label's F1 in percent (NaN for a label never true nor predicted) and its count of true examples."
    t, p = _decisions(y_true, y_pred)
    tp, n = (t & p).sum(0).astype(np.float64), (t.sum(0) + p.sum(0)).astype(np.float64)
    return np.divide(200.0 * tp, n, out=np.full(len(n), np.nan), where=n > 0), t.sum(0)


def f1_micro(y_true, y_pred) -> float:
    "F1 of every (example, label) decision pooled: with one class per example, the accuracy; NaN with none at all."
    t, p = _decisions(y_true, y_pred)
    n = float(t.sum() + p.sum())
    return float('nan') if n == 0 else 100.0 * 2 * float((t & p).sum()) / n


def f1_macro(y_true, y_pred) -> float:
    "The mean of each label's F1 over the labels true or predicted (NaN when none is)."
    f1s, _ = _label_f1s(y_true, y_pred)
    return float(np.mean(f1s[~np.isnan(f1s)])) if not np.isnan(f1s).all() else float('nan')


def f1_weighted(y_true, y_pred) -> float:
    "Each label's F1 weighted by its true examples (NaN when no label is true)."
    f1s, support = _label_f1s(y_true, y_pred)
    if support.sum() == 0: return float('nan')
    return float(np.sum(np.nan_to_num(f1s) * support) / support.sum())  # a label never true weighs 0


def pearson(x, y) -> float:
    "Pearson's correlation; NaN (undefined) when either side is constant, as scipy's `pearsonr` (the official scorer)."
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    # equal values, not a zero spread: the mean of equal floats can miss them by an ulp, and the noise would correlate
    if len(x) < 2 or (x == x[0]).all() or (y == y[0]).all(): return float('nan')
    dx, dy = x - x.mean(), y - y.mean()
    return 100.0 * float(np.clip(dx @ dy / np.sqrt((dx @ dx) * (dy @ dy)), -1.0, 1.0))


def _ranks(x: np.ndarray) -> np.ndarray:
    "1-based ranks, ties sharing their average rank."
    order = np.argsort(x, kind='stable')
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    avg = (starts + ends + 1) / 2.0  # mean of the 1-based positions starts+1 .. ends
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def spearman(x, y) -> float:
    "Spearman's rank correlation (ties share their mean rank); NaN when either side is constant."
    return pearson(_ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64)))


_METRICS = {'accuracy': accuracy, 'f1': f1, 'mcc': mcc, 'pearson': pearson, 'spearman': spearman,
            'subset_accuracy': subset_accuracy, 'f1_micro': f1_micro, 'f1_macro': f1_macro, 'f1_weighted': f1_weighted}


def predictions(task: TaskInfo, outputs: np.ndarray) -> np.ndarray:
    "Class ids (argmax of the logits), the regression outputs (STS-B), or multi-label 0/1 [n, labels] (logit > 0)."
    outputs = np.asarray(outputs)
    if task.multilabel: return (outputs > 0).astype(np.int64)
    return outputs.reshape(-1) if task.is_regression else outputs.argmax(-1)


def dev_metric_names(task: TaskInfo) -> list[str]:
    "Result columns of a task: its metrics on the first dev split, then `<metric>_mm` for MNLI's mismatched dev."
    return [m + ('' if k == 0 else '_mm') for k in range(len(task.dev_splits)) for m in task.metrics]


def task_metrics(task: TaskInfo, preds_by_split: Mapping[str, np.ndarray],
                 labels_by_split: Mapping[str, np.ndarray]) -> dict[str, float]:
    "Every dev metric of `task` from predictions (see `predictions`) and labels per dev split; named as `dev_metric_names`."
    out = {}
    for k, split in enumerate(task.dev_splits):
        for m in task.metrics:
            out[m + ('' if k == 0 else '_mm')] = _METRICS[m](labels_by_split[split], preds_by_split[split])
    return out
