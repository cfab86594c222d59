"""GLUE metrics, in percent as the official code reports them, and the paper's GLUE score.

Written with numpy alone (the tests check them against scikit-learn and scipy). Degenerate inputs that leave a
correlation undefined (a constant prediction, as a barely trained model gives) score 0, as scikit-learn's MCC does.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from electra.finetuning.tasks.glue.tasks import TaskInfo

__all__ = ['accuracy', 'f1', 'mcc', 'pearson', 'spearman', 'subset_accuracy', 'micro_f1', 'macro_f1', 'task_metrics', 'dev_metric_names', 'predictions',
           'glue_score', 'GLUE_SCORE_TASKS']

# The paper's GLUE score: the mean over the eight tasks other than WNLI of Spearman for STS-B, MCC for CoLA and
# accuracy for the rest (MNLI: matched), each task's `score_metric`.
GLUE_SCORE_TASKS = ('CoLA', 'SST-2', 'MRPC', 'STS-B', 'QQP', 'MNLI', 'QNLI', 'RTE')


def accuracy(y_true, y_pred) -> float:
    return 100.0 * float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def f1(y_true, y_pred, positive: int = 1) -> float:
    "F1 of the positive class (MRPC, QQP)."
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


def micro_f1(y_true, y_pred) -> float:
    "Multi-label [n, labels]: F1 of the (example, label) decisions pooled over all labels."
    t, p = np.asarray(y_true) == 1, np.asarray(y_pred) == 1
    tp = float(np.sum(t & p))
    return 0.0 if tp == 0 else 100.0 * 2 * tp / (float(t.sum()) + float(p.sum()))


def macro_f1(y_true, y_pred) -> float:
    "Multi-label [n, labels]: the mean over labels of each label's F1 (0 for a label never true nor predicted)."
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return float(np.mean([f1(t[:, k], p[:, k]) for k in range(t.shape[1])]))


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt((dx @ dx) * (dy @ dy))
    return 0.0 if denom == 0 else 100.0 * float(np.clip(dx @ dy / denom, -1.0, 1.0))


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
    return pearson(_ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64)))


_METRICS = {'accuracy': accuracy, 'f1': f1, 'mcc': mcc, 'pearson': pearson, 'spearman': spearman,
            'subset_accuracy': subset_accuracy, 'micro_f1': micro_f1, 'macro_f1': macro_f1}


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
