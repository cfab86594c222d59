"""electra/finetuning/tasks/metrics.py: the metrics of GLUE's tasks; and the GLUE score (tasks/glue/metrics.py)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from electra.finetuning.tasks.glue.metrics import glue_score
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.metrics import accuracy, f1, mcc, pearson, spearman, task_metrics


@pytest.mark.parametrize('seed', range(5))
def test_metrics_equal_sklearn_and_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    y, p = rng.integers(0, 2, n), rng.integers(0, 2, n)
    assert accuracy(y, p) == pytest.approx(100 * sklearn.metrics.accuracy_score(y, p))
    assert f1(y, p) == pytest.approx(100 * sklearn.metrics.f1_score(y, p))
    assert mcc(y, p) == pytest.approx(100 * sklearn.metrics.matthews_corrcoef(y, p))
    y3, p3 = rng.integers(0, 3, n), rng.integers(0, 3, n)
    assert mcc(y3, p3) == pytest.approx(100 * sklearn.metrics.matthews_corrcoef(y3, p3))
    a, b = rng.uniform(0, 5, n), rng.normal(size=n)
    b = a + b  # correlated
    assert pearson(a, b) == pytest.approx(100 * scipy.stats.pearsonr(a, b)[0])
    assert spearman(a, b) == pytest.approx(100 * scipy.stats.spearmanr(a, b)[0])
    ta, tb = np.round(a), np.round(b * 2) / 2  # many ties: average ranks
    assert spearman(ta, tb) == pytest.approx(100 * scipy.stats.spearmanr(ta, tb)[0])


def test_degenerate_inputs_score_as_the_official_scorers():
    "MCCScorer (sklearn) and F1Scorer give 0; RegressionScorer (scipy) gives NaN for a constant side: undefined."
    y = np.array([0, 1, 1, 0])
    assert mcc(y, np.ones(4)) == 0.0 == 100 * sklearn.metrics.matthews_corrcoef(y, np.ones(4))
    assert np.isnan(pearson([1, 2, 3], [2, 2, 2])) and np.isnan(spearman([1, 2, 3], [2, 2, 2]))
    assert f1([0, 0], [0, 0]) == 0.0


def test_task_metrics_mnli_reports_matched_and_mismatched():
    t = TASKS['MNLI']
    m = task_metrics(t, {'dev_matched': np.array([0, 1, 2, 2]), 'dev_mismatched': np.array([0, 0, 0, 0])},
                     {'dev_matched': np.array([0, 1, 2, 0]), 'dev_mismatched': np.array([0, 1, 2, 0])})
    assert m == {'accuracy': 75.0, 'accuracy_mm': 50.0}


def test_glue_score_is_the_mean_over_eight_tasks_without_wnli():
    scores = {'CoLA': 56.8, 'SST-2': 88.3, 'MRPC': 87.4, 'STS-B': 86.8, 'QQP': 88.3, 'MNLI': 78.9, 'QNLI': 87.9,
              'RTE': 68.5, 'WNLI': 10.0}
    assert glue_score(scores) == pytest.approx((56.8 + 88.3 + 87.4 + 86.8 + 88.3 + 78.9 + 87.9 + 68.5) / 8)
    assert round(glue_score(scores), 2) == 80.36  # the paper's ELECTRA-Small-OWT dev average
    assert glue_score({'CoLA': 50.0, 'WNLI': 90.0}) == 50.0


def test_each_task_reports_its_own_metric_by_hand():
    "Hand counts where the metrics differ: CoLA is scored by MCC, MRPC by F1 and accuracy, STS-B by correlations."
    from electra.finetuning.tasks.glue.tasks import task_named
    y, p = np.array([1, 1, 1, 1, 0, 0]), np.array([1, 1, 1, 0, 1, 0])   # TP 3, FN 1, FP 1, TN 1
    # MCC = (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (3 - 1) / sqrt(4 * 4 * 2 * 2) = 0.25; accuracy 4/6
    assert task_metrics(task_named('CoLA'), {'dev': p}, {'dev': y}) == {'mcc': pytest.approx(25.0)}
    mrpc = task_metrics(task_named('MRPC'), {'dev': p}, {'dev': y})
    assert mrpc == {'accuracy': pytest.approx(100 * 4 / 6), 'f1': pytest.approx(100 * 2 * 3 / (2 * 3 + 1 + 1))}
    a, b = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 1.0, 2.0, 9.0])  # monotone, not linear
    stsb = task_metrics(task_named('STS-B'), {'dev': b}, {'dev': a})
    assert stsb['spearman'] == pytest.approx(100.0) and stsb['pearson'] < 95
