"""GLUE metrics against scikit-learn/scipy, the GLUE score, layer-wise learning rates by hand, run selection."""
from __future__ import annotations

import collections

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import sklearn.metrics

from electra.finetuning.results import select_runs, summarize, summary_markdown
from electra.finetuning.tasks.glue.metrics import accuracy, f1, glue_score, mcc, pearson, spearman, task_metrics
from electra.finetuning.tasks.glue.tasks import TASKS


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


def test_degenerate_inputs_score_zero_like_sklearn():
    y = np.array([0, 1, 1, 0])
    assert mcc(y, np.ones(4)) == 0.0 == 100 * sklearn.metrics.matthews_corrcoef(y, np.ones(4))
    assert pearson([1, 2, 3], [2, 2, 2]) == 0.0 and spearman([1, 2, 3], [2, 2, 2]) == 0.0
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


def official_layer_lrs(learning_rate, layer_decay, n_layers):
    "A line-by-line port of `_get_layer_lrs` (google-research/electra, model/optimization.py)."
    key_to_depths = collections.OrderedDict({'/embeddings/': 0, '/embeddings_project/': 0, 'task_specific/': n_layers + 2})
    for layer in range(n_layers):
        key_to_depths['encoder/layer_' + str(layer) + '/'] = layer + 1
    return {key: learning_rate * (layer_decay ** (n_layers + 2 - depth)) for key, depth in key_to_depths.items()}


@pytest.mark.parametrize('n_layers, lr, d', [(12, 3e-4, 0.8), (12, 1e-4, 0.8), (24, 5e-5, 0.9)])
def test_layer_lrs_official_mode_matches_the_official_code(n_layers, lr, d):
    from electra.finetuning.classifier import layer_lrs
    got = layer_lrs(lr, d, n_layers, 'official')
    ref = official_layer_lrs(lr, d, n_layers)
    assert len(got) == n_layers + 2
    assert got[0] == pytest.approx(ref['/embeddings/']) == pytest.approx(ref['/embeddings_project/'])
    for i in range(n_layers): assert got[1 + i] == pytest.approx(ref[f'encoder/layer_{i}/'])
    assert got[-1] == pytest.approx(ref['task_specific/']) == pytest.approx(lr)
    # by hand: the top layer gets d^2 (the official `_get_layer_lrs`), layer 0 gets d^(L + 1), the embeddings d^(L + 2)
    assert got[n_layers] == pytest.approx(lr * d * d)
    assert got[1] == pytest.approx(lr * d ** (n_layers + 1)) and got[0] == pytest.approx(lr * d ** (n_layers + 2))


def test_layer_lrs_by_hand_for_12_and_24_layers():
    from electra.finetuning.classifier import layer_lrs
    off12, int12 = layer_lrs(3e-4, 0.8, 12, 'official'), layer_lrs(3e-4, 0.8, 12, 'intended')
    assert off12[-1] == pytest.approx(3e-4) and int12[-1] == pytest.approx(3e-4)
    assert off12[12] == pytest.approx(1.92e-4) and int12[12] == pytest.approx(2.4e-4)   # top layer: 3e-4 * .8^2 / * .8
    assert off12[11] == pytest.approx(1.536e-4) and int12[11] == pytest.approx(1.92e-4)
    assert off12[1] == pytest.approx(3e-4 * 0.8 ** 13) and int12[1] == pytest.approx(3e-4 * 0.8 ** 12)
    assert off12[0] == pytest.approx(1.3194139533312e-05) and int12[0] == pytest.approx(1.649267441664e-05)  # .8^14, .8^13
    off24, int24 = layer_lrs(5e-5, 0.9, 24, 'official'), layer_lrs(5e-5, 0.9, 24, 'intended')
    assert off24[24] == pytest.approx(4.05e-5) and int24[24] == pytest.approx(4.5e-5)
    assert off24[1] == pytest.approx(5e-5 * 0.9 ** 25) and int24[1] == pytest.approx(5e-5 * 0.9 ** 24)
    assert off24[0] == pytest.approx(5e-5 * 0.9 ** 26) and int24[0] == pytest.approx(5e-5 * 0.9 ** 25)
    assert np.allclose(off24[:-1] / int24[:-1], 0.9)  # official = intended * d below the head
    with pytest.raises(ValueError): layer_lrs(1e-4, 0.8, 12, 'paper')


def results(scores: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{'task': t, 'run': i, 'seed': 100 + i, 'score': s, 'checkpoint': f'{t}_{i}.pth'}
                         for t, ss in scores.items() for i, s in enumerate(ss)])


def test_select_best_median_and_top_k():
    df = results({'RTE': [60.0, 70.0, 65.0, 55.0, 68.0, 62.0]})
    assert select_runs(df, 'best')['run'].tolist() == [1]
    # sorted 55 60 62 65 68 70: the upper of the two middle runs (65, run 2) is submitted
    assert select_runs(df, 'median')['run'].tolist() == [2]
    assert select_runs(df.iloc[:5], 'median')['run'].tolist() == [2]  # 55 60 65 68 70 -> 65
    assert select_runs(df, 'best', k=3)['run'].tolist() == [1, 4, 2]
    tie = results({'RTE': [70.0, 70.0, float('nan')]})
    assert select_runs(tie, 'best')['run'].tolist() == [0] and select_runs(tie, 'best', k=3)['run'].tolist()[-1] == 2


def test_summary_table_and_glue_row():
    df = results({'CoLA': [50.0, 54.0, 58.0], 'STS-B': [80.0, 86.0], 'WNLI': [56.3, 56.3]})
    for m in ('mcc', 'accuracy', 'f1', 'pearson', 'spearman', 'accuracy_mm'): df[m] = np.nan
    df['pearson'] = np.where(df['task'] == 'STS-B', 81.0, np.nan)
    s = summarize(df).set_index('task')
    assert s.loc['CoLA', 'mean'] == pytest.approx(54.0) and s.loc['CoLA', 'median'] == 54.0
    assert s.loc['CoLA', 'std'] == pytest.approx(np.std([50, 54, 58], ddof=1)) and s.loc['CoLA', 'best'] == 58.0
    assert s.loc['STS-B', 'metric'] == 'spearman' and s.loc['STS-B', 'other metrics (mean)'] == 'pearson 81.00'
    md = summary_markdown(summarize(df))
    assert md.splitlines()[0].startswith('| task | metric | runs | mean | median | std | best')
    glue = md.splitlines()[-1]
    assert glue.startswith('| GLUE score (2 of 8 tasks) | | | 68.50 | 68.50 | | 72.00 |')  # WNLI left out


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
