"""electra/finetuning/results.py: run selection and the summary table."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from electra.config.errors import ConfigError
from electra.finetuning.results import ResultsTable, select_runs, summarize, summary_markdown


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
    tie = results({'RTE': [70.0, 70.0, float('nan')]})  # an undefined score is never picked, even to fill the top k
    assert select_runs(tie, 'best')['run'].tolist() == [0] and select_runs(tie, 'best', k=3)['run'].tolist() == [0, 1]


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


def a_table(path) -> str:
    "A results table of two RTE runs, as finetune.py writes it."
    table = ResultsTable(path)
    for run in (0, 1):
        table.add({'task': 'RTE', 'run': run, 'seed': run, 'score': 60.0 + run, 'accuracy': 60.0 + run, 'train_loss': 0.5,
                   'steps': 10, 'seconds': 1.0, 'settings': 'abc', 'checkpoint': f'RTE_{run}.pth', 'finished_at': 'now'})
    return path.read_text()


@pytest.mark.parametrize('damage, match', [
    (lambda text: b'\x8c\x00\xff' * 100,
     r'results.csv: not a results table of finetune.py \(not UTF-8 text\)\. Move it away'),
    (lambda text: b'', r'results.csv: not a results table of finetune.py \(an empty file\)\. Move it away'),
    (lambda text: text[:len(text) - 40].encode(), r'results.csv: line 3 is incomplete \(a damaged file\)\. Delete that line'),
], ids=['binary', 'empty', 'truncated'])
def test_a_damaged_results_table_is_named_with_the_fix(tmp_path, damage, match):
    "Before: a UnicodeDecodeError, an EmptyDataError, or a row of NaNs that later broke the sort with a ValueError."
    path = tmp_path / 'results.csv'
    path.write_bytes(damage(a_table(path)))
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=match):
        ResultsTable(path)
    assert path.read_bytes() == before  # left as it was, for the user to look at


def test_a_table_without_checkpoints_still_loads(tmp_path):
    "Tables written by other tools may lack the checkpoint of a row: only what a resume matches on must be there."
    path = tmp_path / 'results.csv'
    a_table(path)
    df = pd.read_csv(path)
    df['checkpoint'] = np.nan
    df.to_csv(path, index=False)
    assert ResultsTable(path).get('RTE', 1)['score'] == 61.0


def add_rows(path, task: str, n: int) -> None:
    "A job's writer: `n` runs of `task` finished one after another, each row added to the table at `path`."
    table = ResultsTable(path)  # read once, at the start, as a sweep reads it
    for run in range(n):
        table.add({'task': task, 'run': run, 'seed': run, 'score': float(run), 'settings': '{}', 'checkpoint': f'{task}_{run}.pth'})


def test_two_jobs_writing_one_table_at_once_keep_every_row(tmp_path):
    """Two processes (two commands on one group) add rows to one results table at once, each having read it when it
    started: every row of both is in the table at the end, and the file is a whole table whenever it is read."""
    import multiprocessing
    path, n = tmp_path / 'results.csv', 12
    a_table(path)  # rows of an earlier job, kept too
    ctx = multiprocessing.get_context('fork')
    jobs = [ctx.Process(target=add_rows, args=(path, task, n)) for task in ('MRPC', 'CoLA')]
    for p in jobs: p.start()
    reads = 0
    while any(p.is_alive() for p in jobs):
        assert set(ResultsTable(path).df['task']) <= {'RTE', 'MRPC', 'CoLA'}  # parses whole: never a partial file
        reads += 1
        time.sleep(0.01)
    for p in jobs: p.join()
    assert [p.exitcode for p in jobs] == [0, 0] and reads > 1
    df = ResultsTable(path).df
    assert df[['task', 'run']].values.tolist() == [['CoLA', r] for r in range(n)] + [['MRPC', r] for r in range(n)] + \
        [['RTE', 0], ['RTE', 1]]


def test_a_std_over_one_run_is_undefined_in_the_summary():
    """A sample std (ddof 1) over one run is undefined (0/0), as the comparison's table.csv leaves it: the summary's
    cell is '–', not 0.00; over two runs it is the hand value |a - b| / sqrt(2). An undefined run does not count."""
    df = results({'MNLI': [60.0], 'RTE': [50.0, 54.0], 'CoLA': [40.0, float('nan')]})
    for m in ('mcc', 'accuracy', 'f1', 'pearson', 'spearman', 'accuracy_mm'): df[m] = np.nan
    s = summarize(df).set_index('task')
    assert np.isnan(s.loc['MNLI', 'std']) and np.isnan(s.loc['CoLA', 'std'])
    assert s.loc['RTE', 'std'] == pytest.approx(4 / 2 ** 0.5)
    md = summary_markdown(summarize(df)).splitlines()
    assert '| MNLI | accuracy | 1 | 60.00 | 60.00 | – | 60.00 | 60.00 |' in '\n'.join(md)
    assert '| CoLA | mcc | 2 (1 undefined) | 40.00 | 40.00 | – | 40.00 | 40.00 |' in '\n'.join(md)
    assert '| RTE | accuracy | 2 | 52.00 | 52.00 | 2.83 | 54.00 | 50.00 |' in '\n'.join(md)


@pytest.mark.parametrize('text, match', [
    ('{"RTE": 2', r'job_runs.json: not JSON \(.* at line 1, .*\)\. Fix the file\. Or delete it: a job then summarises '
                  r'an earlier task over all its rows\.$'),
    ('{"RTE": 0}', r"job_runs.json: not finetune.py's record of each task's runs \(an object of task names and whole "
                   r"numbers > 0\)\. Delete it: a job then summarises an earlier task over all its rows\."),
    ('["RTE", 2]', r"job_runs.json: not finetune.py's record"),
    ('{"RTE": true}', r"job_runs.json: not finetune.py's record"),
], ids=['cut', 'zero', 'list', 'bool'])
def test_a_damaged_record_of_each_task_s_runs_is_named_with_the_fix(tmp_path, text, match):
    "The record beside the table of each task's last job's runs (`JOB_RUNS`), damaged: refused in one line."
    a_table(tmp_path / 'results.csv')
    (tmp_path / 'job_runs.json').write_text(text)
    with pytest.raises(ConfigError, match=match):
        ResultsTable(tmp_path / 'results.csv')


def test_each_task_s_last_job_is_recorded_beside_the_table_and_kept_by_other_jobs(tmp_path):
    "A job's tasks and runs replace those tasks' record; another task's stays; a table read again reads it."
    table = ResultsTable(tmp_path / 'results.csv')
    table.record_job(['RTE', 'MRPC'], 3)
    other = ResultsTable(tmp_path / 'results.csv')  # a second job on the group, reading before the first's next write
    table.record_job(['RTE'], 1)
    other.record_job(['CoLA'], 2)  # read again under the lock: RTE's 1 kept, not its own stale 3
    assert ResultsTable(tmp_path / 'results.csv').job_runs == {'CoLA': 2, 'MRPC': 3, 'RTE': 1}


@pytest.mark.parametrize('name', ['results.csv', 'job_runs.json'])
def test_a_folder_where_the_group_keeps_its_table_or_record_is_refused_in_one_line(tmp_path, name):
    "Before: read as no table (no record), then an IsADirectoryError from the rename of the first write."
    (tmp_path / name).mkdir()
    with pytest.raises(ConfigError, match=rf"^output_dir: cannot write to '{tmp_path / name}' \(it is a folder, not a "
                                          r"file\)\. Move that folder away, or choose another directory with "
                                          r"--output_dir\.$"):
        ResultsTable(tmp_path / 'results.csv')
