"""electra/finetuning/tasks/metrics.py: the one table of which metric fits which task kind and label count, used by
every kind; a metric that does not fit is refused before training, naming the task file and line; each metric
equals scikit-learn, scipy or seqeval; an undefined metric is carried as undefined, never as 0, and never picked."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import sklearn.metrics

from electra.config.errors import ConfigError
from electra.finetuning import sweep
from electra.finetuning.results import METRIC_COLUMNS, ResultsTable, select_runs, summarize, summary_markdown
from electra.finetuning.tasks.files import file_task, make_task, read_task_file
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.metrics import (FITS, METRIC_NAMES, _METRICS, f1, f1_macro, f1_micro, f1_weighted,
                                              fitting, mcc, pearson, spearman, task_metrics)
from electra.finetuning.tasks.tagging.metrics import tagging_metrics
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')


def _task_file(tmp_path: Path, labels: list[str], extra: str) -> Path:
    "A classification task file over a train and dev CSV whose examples take the `labels` in turn."
    rows = 'sentence,label\n' + ''.join(f'example {i},{labels[i % len(labels)]}\n' for i in range(2 * len(labels)))
    (tmp_path / 'train.csv').write_text(rows)
    (tmp_path / 'dev.csv').write_text(rows)
    path = tmp_path / 'task.yaml'
    path.write_text(f'train: train.csv\ndev: dev.csv\ntext: sentence\nlabel: label\n{extra}')
    return path


def test_binary_f1_on_three_classes_is_refused_naming_the_line_and_the_fitting_averages(tmp_path):
    "metrics: [f1] on a three-class task scored one class as if the task were binary (dev f1 0.00, status 0)."
    spec = read_task_file(_task_file(tmp_path, ['a', 'b', 'c'], 'kind: classification\nmetrics: [f1]\n'))
    with pytest.raises(ConfigError, match=r"task\.yaml: line 6: metrics: f1 .*two classes.* this classification task "
                                          r"has 3 \(a, b, c\).* use .*f1_macro.*f1_micro"):
        file_task(spec)


def test_a_misfit_metric_of_a_later_task_is_refused_before_any_run(tmp_path, tiny):
    "Every task is made (its training labels read, its metrics checked against them) before the first run trains."
    (tmp_path / 'a').mkdir(), (tmp_path / 'b').mkdir()
    good = _task_file(tmp_path / 'a', ['no', 'yes'], 'name: good\nmetrics: [f1]\n')
    bad = _task_file(tmp_path / 'b', ['x', 'y', 'z'], 'name: bad\nmetrics: [accuracy, f1]\n')
    cfg = job(tmp_path, 'demo', tasks=[str(good), str(bad)])
    with pytest.raises(ConfigError, match=r"b/task\.yaml: line 6: metrics: f1 scores two classes"):
        sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)  # task files only: no GLUE source
    assert not list((tmp_path / 'ckpt').rglob('*.pth')) and not list((tmp_path / 'ckpt').rglob('results.csv'))


# -- every metric against every kind and count, through the task files

def _write_case(root: Path, kind: str, count: int | None) -> str:
    "The data files of a task of `kind` with `count` classes (labels, entity types), and its task file's lines."
    if kind == 'tagging':  # CoNLL; 0 entity types: part-of-speech tags, a plain scheme found by `auto`
        tags = [['B-PER', 'I-PER', 'O', 'B-LOC'], ['O', 'B-LOC', 'O', 'O']] if count else [['NN', 'VB', 'DT', 'NN']] * 2
        text = '\n\n'.join('\n'.join(f'w{i} {t}' for i, t in enumerate(s)) for s in tags) + '\n'
        for split in ('train', 'dev'): (root / f'{split}.txt').write_text(text)
        return 'kind: tagging\ntrain: train.txt\ndev: dev.txt\n'
    if kind == 'regression': labels = ['0.5', '1.5', '3.0', '4.25']
    elif kind == 'multilabel': labels = ['"l0,l1"', 'l1', '"l2,l0"', '""']
    else: labels = [f'c{k}' for k in range(count)]
    rows = 'sentence,label\n' + ''.join(f'example {i},{labels[i % len(labels)]}\n' for i in range(8))
    for split in ('train', 'dev'): (root / f'{split}.csv').write_text(rows)
    return f'kind: {kind}\ntrain: train.csv\ndev: dev.csv\ntext: sentence\nlabel: label\n'


# written by hand from what each metric means (not read from the table under test)
FIT = {('classification', 2): {'accuracy', 'f1', 'f1_macro', 'f1_micro', 'f1_weighted', 'mcc'},
       ('classification', 3): {'accuracy', 'f1_macro', 'f1_micro', 'f1_weighted', 'mcc'},
       ('regression', None): {'pearson', 'spearman'},
       ('multilabel', 3): {'f1_micro', 'f1_macro', 'f1_weighted', 'subset_accuracy'},
       ('tagging', 2): {'f1', 'precision', 'recall', 'accuracy'},
       ('tagging', 0): {'accuracy'}}
NOT_METRICS = ('micro_f1', 'auc', 'F1')  # an old name, one of no kind, one in the wrong case


@pytest.mark.parametrize('kind, count', list(FIT))
def test_every_metric_is_accepted_or_refused_as_its_kind_and_count_allow(tmp_path, kind, count):
    head = _write_case(tmp_path, kind, count)
    for name in (*METRIC_NAMES, *NOT_METRICS):
        path = tmp_path / 'task.yaml'
        path.write_text(f'metrics: [{name}]\n{head}')
        if name in FIT[kind, count]:
            assert make_task(read_task_file(path)).info.metrics == (name,)
            continue
        with pytest.raises(ConfigError) as e:
            make_task(read_task_file(path))
        msg = str(e.value)
        assert msg.startswith(f'{path}: line 1: metrics: ') and name in msg and '\n' not in msg, msg
        offered = msg.split(f'{kind} task')[-1]  # the choices, after the task's kind (and count)
        plain = {m for m in METRIC_NAMES if re.search(rf'(?<!\w){m}(?!\w)(?! \()', offered)}
        needing = {m for m in METRIC_NAMES if re.search(rf'(?<!\w){m} \((two|one) \w+', offered)}  # count not yet read
        assert plain <= FIT[kind, count] <= plain | needing, msg
        if name in fitting(kind): assert f'has {count}' in msg, msg  # a metric of the kind refused for the count


def test_the_old_multilabel_names_and_misspellings_point_to_the_table_name(tmp_path):
    path = tmp_path / 'task.yaml'
    path.write_text('metrics: [micro_f1]\n' + _write_case(tmp_path, 'multilabel', 3))
    with pytest.raises(ConfigError, match=r"line 1: metrics: 'micro_f1' is not a metric\. Did you mean 'f1_micro'\?"):
        read_task_file(path)
    for value, match in (('{f1: 1}', r'expected a metric name or a list'), ('[f1_micro, f1_micro]', 'named twice')):
        path.write_text(_write_case(tmp_path, 'multilabel', 3) + f'metrics: {value}\n')
        with pytest.raises(ConfigError, match=rf"task\.yaml: line 6: metrics: .*{match}"): read_task_file(path)


def test_a_results_table_with_the_old_multilabel_columns_keeps_their_values(tmp_path):
    path = tmp_path / 'results.csv'
    table = ResultsTable(path)
    table.add({'task': 'topics', 'run': 0, 'seed': 0, 'score': 61.5, 'f1_micro': 61.5, 'f1_macro': 40.25, 'settings': 'k'})
    path.write_text(path.read_text().replace('f1_macro', 'macro_f1').replace('f1_micro', 'micro_f1'))
    row = ResultsTable(path).get('topics', 0)
    assert (row['f1_micro'], row['f1_macro']) == (61.5, 40.25)


def test_a_tagging_file_with_no_entities_refuses_entity_metrics_it_names_and_defaults_to_accuracy(tmp_path):
    "Found plain by `auto`, a tagging task replaced the metrics its file named by accuracy without a word."
    head = _write_case(tmp_path, 'tagging', 0)
    (tmp_path / 'task.yaml').write_text(head)
    assert make_task(read_task_file(tmp_path / 'task.yaml')).info.metrics == ('accuracy',)
    (tmp_path / 'task.yaml').write_text(head + 'metrics: [accuracy, f1]\n')
    with pytest.raises(ConfigError, match=r"line 4: metrics: f1 scores one entity type or more .*this tagging task has 0"):
        make_task(read_task_file(tmp_path / 'task.yaml'))


# -- the values, against scikit-learn, scipy and seqeval

def test_each_classification_metric_equals_scikit_learn_on_its_task(tmp_path):
    rng = np.random.default_rng(0)
    for labels in (['no', 'yes'], ['c0', 'c1', 'c2'], ['a', 'b', 'c', 'd', 'e']):
        (tmp_path / str(len(labels))).mkdir()
        fits = sorted(FIT['classification', min(len(labels), 3)])
        task, _ = file_task(read_task_file(_task_file(tmp_path / str(len(labels)), labels, f'metrics: {fits}\n')))
        y, p = rng.integers(0, len(labels), 50), rng.integers(0, len(labels) - 1, 50)  # the last class never predicted
        got = task_metrics(task, {'dev': p}, {'dev': y})
        sy, sp = np.array(labels)[y], np.array(labels)[p]  # as strings: the positive class is named, not an index
        want = {'accuracy': sklearn.metrics.accuracy_score(sy, sp), 'mcc': sklearn.metrics.matthews_corrcoef(sy, sp),
                **{f'f1_{a}': sklearn.metrics.f1_score(sy, sp, average=a) for a in ('macro', 'micro', 'weighted')}}
        if len(labels) == 2: want['f1'] = sklearn.metrics.f1_score(sy, sp, pos_label='yes')  # the second sorted label
        assert got == pytest.approx({k: 100 * v for k, v in want.items()}, abs=1e-9)


def test_each_multilabel_metric_equals_scikit_learn_labels_never_seen_left_out():
    rng = np.random.default_rng(1)
    for _ in range(10):
        t, p = rng.integers(0, 2, (30, 4)), rng.integers(0, 2, (30, 4))
        t[:, 3] = p[:, 3] = 0  # a label never true nor predicted: no F1, left out of the averages (not a 0)
        for fn, avg in ((f1_micro, 'micro'), (f1_macro, 'macro'), (f1_weighted, 'weighted')):
            assert fn(t, p) == pytest.approx(100 * sklearn.metrics.f1_score(t, p, average=avg, zero_division=np.nan),
                                             abs=1e-9)
        assert _METRICS['subset_accuracy'](t, p) == pytest.approx(100 * sklearn.metrics.accuracy_score(t, p))


def test_regression_and_tagging_metrics_equal_scipy_and_seqeval():
    from seqeval.metrics import f1_score, precision_score, recall_score
    rng = np.random.default_rng(2)
    a = rng.uniform(0, 5, 40)
    b = np.round(a + rng.normal(size=40))  # ties
    got = task_metrics(TASKS['STS-B'], {'dev': b}, {'dev': a})
    assert got == pytest.approx({'pearson': 100 * scipy.stats.pearsonr(a, b)[0],
                                 'spearman': 100 * scipy.stats.spearmanr(a, b)[0]})
    gold = [['B-PER', 'I-PER', 'O', 'B-LOC'], ['O', 'B-LOC', 'I-LOC', 'O']]
    pred = [['B-PER', 'O', 'O', 'B-LOC'], ['O', 'B-LOC', 'I-LOC', 'B-PER']]
    got = tagging_metrics(gold, pred, 'IOB2')
    assert {k: got[k] for k in ('f1', 'precision', 'recall', 'accuracy')} == pytest.approx(
        {'f1': 100 * f1_score(gold, pred), 'precision': 100 * precision_score(gold, pred),
         'recall': 100 * recall_score(gold, pred), 'accuracy': 100 * 6 / 8})


# -- undefined metrics

def test_undefined_metrics_are_nan_as_the_references_give_them_and_official_zeros_stay():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # scipy warns of a constant input, sklearn of a zero division
        for x, y in (([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]), ([0.1] * 7, np.arange(7.0))):  # a constant prediction, labels
            assert np.isnan(pearson(x, y)) and np.isnan(scipy.stats.pearsonr(x, y)[0])
            assert np.isnan(spearman(x, y)) and np.isnan(scipy.stats.spearmanr(x, y)[0])
        none = np.zeros((5, 3), dtype=int)  # a multi-label dev set without any label, and no label predicted
        for fn, avg in ((f1_micro, 'micro'), (f1_macro, 'macro'), (f1_weighted, 'weighted')):
            assert np.isnan(fn(none, none))
            assert np.isnan(sklearn.metrics.f1_score(none, none, average=avg, zero_division=np.nan))
        y = np.array([0, 1, 1, 0])  # where the official scorers define the value, it is theirs: 0
        assert mcc(y, np.ones(4)) == 0.0 == sklearn.metrics.matthews_corrcoef(y, np.ones(4))  # MCCScorer
        assert f1([0, 0], [0, 0]) == 0.0  # F1Scorer: no true positive, f1 0


def _rows(scores: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{'task': t, 'run': i, 'seed': i, 'score': s, 'spearman': s, 'pearson': s}
                         for t, ss in scores.items() for i, s in enumerate(ss)])


def test_an_undefined_score_is_never_picked_nor_averaged_and_shows_as_undefined():
    nan = float('nan')
    rows = _rows({'STS-B': [nan, 60.0, nan, 70.0, 65.0]})
    assert select_runs(rows, 'best')['run'].tolist() == [3]
    assert select_runs(rows, 'median')['run'].tolist() == [4]  # the middle of 70, 65, 60: undefined runs not counted
    assert select_runs(rows, 'best', k=4)['run'].tolist() == [3, 4, 1]
    assert select_runs(_rows({'STS-B': [nan, nan]}), 'best').empty
    s = summarize(rows).set_index('task').loc['STS-B']
    assert (s['runs'], s['undefined'], s['mean'], s['worst']) == (5, 2, 65.0, 60.0)
    md = summary_markdown(summarize(_rows({'STS-B': [nan, nan], 'CoLA': [50.0]})))
    # the std over fewer than two defined scores has no value to be undefined: '–', as over one run (R7b-3)
    assert '| STS-B | spearman | 2 (2 undefined) | undefined | undefined | – | undefined | undefined | ' \
           'pearson undefined |' in md
    assert md.splitlines()[-1].startswith('| GLUE score (2 of 8 tasks) | | | undefined | undefined |')  # not CoLA/2


def test_a_task_whose_every_run_is_undefined_gets_no_test_predictions_and_says_so(tmp_path, glue_dir):
    cfg = job(tmp_path, glue_dir, tasks=['STS-B'], runs=2)
    table = ResultsTable(tmp_path / 'results.csv')
    for run in (0, 1):
        table.add({'task': 'STS-B', 'run': run, 'seed': run, 'score': float('nan'), 'settings': 'k', 'checkpoint': 'none'})
    said = []
    assert sweep.write_test_predictions(cfg, table, None, open_source(str(glue_dir)), log=said.append) == []
    assert said == ['STS-B: 2 of 2 runs have an undefined dev spearman; no test predictions']


# -- the table is every kind's

def test_every_kinds_own_metrics_are_rows_of_the_table():
    for t in TASKS.values():  # GLUE's metrics, with their label counts (MRPC and QQP: F1 of label 1 of two)
        kind = 'regression' if t.is_regression else 'classification'
        assert set(t.metrics) <= set(fitting(kind, None if t.is_regression else len(t.labels))), t.name
    implemented = {f.metric for f in FITS if f.kind in ('classification', 'regression', 'multilabel')}
    assert implemented == set(_METRICS)
    assert set(fitting('tagging')) <= set(tagging_metrics([['B-PER']], [['B-PER']], 'IOB2'))
    from electra.finetuning.tasks.qa.metrics import qa_metrics
    v2 = qa_metrics('squad', {'q': ['x'], 'r': []}, {'q': 'x', 'r': ''}, {'q': 0.0, 'r': 0.0})
    assert {k for k in v2 if not k.endswith(('total', '_thresh'))} | {'no_answer_f1'} == set(fitting('qa'))
    assert set(METRIC_NAMES) <= set(METRIC_COLUMNS)


def test_the_readme_table_has_every_row_of_the_table():
    readme = (Path(__file__).resolve().parents[3] / 'README.md').read_text(encoding='utf-8')
    rows = set(re.findall(r'^\| `(\w+)` \| (\w+) \|', readme, re.M))
    assert rows == {(f.metric, f.kind) for f in FITS}
