"""electra/finetuning/results.py: run selection and the summary table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from electra.finetuning.results import select_runs, summarize, summary_markdown


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
