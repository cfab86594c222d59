"""The metrics of classification, regression and multi-label tasks (GLUE's and those from files), in percent as the
official code reports them, and the paper's GLUE score. Which fits which task: `electra.finetuning.tasks.metrics`.

Written with numpy alone (the tests check them against scikit-learn and scipy). A correlation with a constant side
(a constant prediction, as a barely trained model gives) is NaN, undefined, as the official scorer's scipy gives it;
so are the F1 averages with no label true nor predicted (scikit-learn's `zero_division=np.nan`). MCC and the
positive class's F1 score 0 there, as the official MCCScorer (scikit-learn) and F1Scorer do.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from electra.finetuning.tasks.base import TaskInfo

__all__ = ['accuracy', 'f1', 'mcc', 'pearson', 'spearman', 'subset_accuracy', 'f1_micro', 'f1_macro', 'f1_weighted',
           'task_metrics', 'dev_metric_names', 'predictions', 'glue_score', 'GLUE_SCORE_TASKS']

# The paper's GLUE score: the mean over the eight tasks other than WNLI of Spearman for STS-B, MCC for CoLA and
# accuracy for the rest (MNLI: matched), each task's `score_metric`.
GLUE_SCORE_TASKS = ('CoLA', 'SST-2', 'MRPC', 'STS-B', 'QQP', 'MNLI', 'QNLI', 'RTE')


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


def glue_score(scores: Mapping[str, float]) -> float:
    "The paper's GLUE score from each task's `score_metric`: the mean over the tasks of `GLUE_SCORE_TASKS` present."
    vals = [scores[t] for t in GLUE_SCORE_TASKS if t in scores]
    return float(np.mean(vals)) if vals else float('nan')
