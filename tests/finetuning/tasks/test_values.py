"""electra/finetuning/tasks/values.py: every label and id a task's data files give is checked for its kind's domain
before any training, in CSV, TSV, JSONL and parquet alike, naming the file, the line (parquet: the row) and the fix."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from electra.config.errors import ConfigError
from electra.finetuning import sweep
from electra.finetuning.tasks.files import file_task, read_task_file
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')

SENTENCES = ['good film', 'bad film', 'fine plot', 'poor plot', 'great film', 'awful plot']


def write_rows(path: Path, rows: list[dict]) -> Path:
    "`rows` in the format of `path`'s suffix; None is a missing value (empty in CSV and TSV, null in JSONL and parquet)."
    df = pd.DataFrame(rows)
    if path.suffix == '.csv': df.to_csv(path, index=False)
    elif path.suffix == '.tsv': df.to_csv(path, sep='\t', index=False)
    elif path.suffix == '.jsonl': path.write_text(''.join(json.dumps(r) + '\n' for r in rows), encoding='utf-8')
    else: pq.write_table(pa.Table.from_pylist(rows), path)  # NaN kept apart from null (pandas writes it as null)
    return path


def task_file(tmp_path: Path, kind: str, train: list, dev: list | None = None, ext: str = 'csv', test: list | None = None,
              extra: str = '') -> Path:
    "A task file over train (and dev, test) rows of `(sentence, label[, id])`, in the format `ext`."
    def rows(pairs): return [{'sentence': p[0], 'label': p[1], **({'id': p[2]} if len(p) > 2 else {})} for p in pairs]
    write_rows(tmp_path / f'train.{ext}', rows(train))
    write_rows(tmp_path / f'dev.{ext}', rows(dev or train))
    if test is not None: write_rows(tmp_path / f'test.{ext}', rows(test))
    spec = (f'kind: {kind}\ntrain: train.{ext}\ndev: dev.{ext}\ntext: sentence\nlabel: label\n'
            + (f'test: test.{ext}\nid: id\n' if test is not None else '') + extra)
    path = tmp_path / 'task.yaml'
    path.write_text(spec, encoding='utf-8')
    return path


def test_a_regression_label_nan_is_refused_before_any_run(tmp_path, tiny):
    "It trained to a NaN loss and ended with status 0 and a results row."
    train = [(s, float(k)) for k, s in enumerate(SENTENCES)]
    train[2] = ('fine plot', 'nan')
    spec = task_file(tmp_path, 'regression', train, [(s, 1.0) for s in SENTENCES])
    cfg = job(tmp_path, 'demo', tasks=[str(spec)])
    with pytest.raises(ConfigError, match=r"train.csv: line 4: label 'nan' in column 'label' is not a finite number"):
        sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    assert not list(tmp_path.rglob('*.pth')) and not list(tmp_path.rglob('results.csv'))


FORMATS = ('csv', 'tsv', 'jsonl', 'parquet')
NAN, INF = float('nan'), float('inf')
# (kind, the good labels, the bad one as written in CSV and TSV, in JSONL, in parquet, what the message says); the bad
# label is the third example's: line 4 of a CSV or TSV file (after the header), line 3 of JSONL, row 3 of parquet. A
# parquet column has one type: its good labels are written as strings where the bad one is a string or null.
REG, CLS, NUM = [0.5, 1.0, 2.0, 3.5], ['pos', 'neg', 'pos', 'neg'], ['1', '2', '1', '2']
NOT_FINITE, NO_LABEL = "in column 'label' is not a finite number", r"no label in column 'label' \(empty or null\)"
MISSING = "in column 'label' is a missing value, not a class"
BAD = {
    'regression nan': ('regression', REG, 'nan', NAN, NAN, f"label 'nan' {NOT_FINITE}"),
    'regression inf': ('regression', REG, 'inf', INF, INF, f"label 'inf' {NOT_FINITE}"),
    'regression -inf': ('regression', REG, '-inf', -INF, -INF, f"label '-inf' {NOT_FINITE}"),
    'regression empty': ('regression', REG, '', '', '', NO_LABEL),
    'regression null': ('regression', REG, '', None, None, NO_LABEL),
    'regression text': ('regression', REG, 'high', 'high', 'high', f"label 'high' {NOT_FINITE}"),
    'regression true': ('regression', REG, 'true', True, 'true', f"label '(true|True)' {NOT_FINITE}"),
    'class nan': ('classification', [1.0, 2.0, 1.0, 2.0], 'nan', NAN, NAN, f"label 'nan' {MISSING}"),  # ints with a gap
    'class null': ('classification', CLS, 'null', None, None, f"label 'null' {MISSING}|{NO_LABEL}"),
    'class empty': ('classification', CLS, '', '', '', NO_LABEL),
    'class mixed': ('classification', NUM, 'x', 'x', 'x',
                    r"label 'x' in column 'label' is a name among numbers \(such as '1', (line [12]|row 1)\)"),
    'class number in names': ('classification', CLS, '0', 0, '0', "label '0' in column 'label' is a number among names"),
    'class inf': ('classification', NUM, 'inf', INF, 'inf', f"label 'inf' {NOT_FINITE}"),
    'class spaces': ('classification', CLS, ' pos', ' pos', ' pos',
                     "label ' pos' in column 'label' has spaces around it, so it would be another class than 'pos'"),
}


def _bad_rows(kind: str, good: list, bad, ext: str) -> list[tuple]:
    labels = list(good)
    if ext == 'jsonl' and kind == 'classification' and labels[0] == '1': labels = [int(v) for v in labels]  # numbers
    if ext == 'parquet' and (isinstance(bad, str) or bad is None): labels = [str(v) for v in labels]
    labels.insert(2, bad)
    return [(SENTENCES[k % len(SENTENCES)], v) for k, v in enumerate(labels)]


@pytest.mark.parametrize('ext', FORMATS)
@pytest.mark.parametrize('case', list(BAD))
def test_a_label_out_of_its_kind_s_domain_is_refused_naming_file_and_line(tmp_path, case, ext):
    kind, good, text, jsonl, parquet, match = BAD[case]
    bad = {'csv': text, 'tsv': text, 'jsonl': jsonl, 'parquet': parquet}[ext]
    at = {'csv': 'line 4', 'tsv': 'line 4', 'jsonl': 'line 3', 'parquet': 'row 3'}[ext]
    spec = task_file(tmp_path, kind, _bad_rows(kind, good, bad, ext), ext=ext)
    with pytest.raises(ConfigError, match=rf"^{tmp_path / f'train.{ext}'}: {at}: ({match})"):
        task, source = file_task(read_task_file(spec))
        source.load(task, 'train')


@pytest.mark.parametrize('kind, bad, match', [
    ('classification', ['pos', 'neg'], r"label \['pos', 'neg'\] in column 'label' is not one class label; for several "
                                       r"labels per example use kind: multilabel"),
    ('multilabel', None, r"label 'None' in column 'label' is not a list of labels; write \[\] or '' for an example "
                         r"without labels"),
    ('multilabel', ['pos', None], r"no label in column 'label' \(empty or null\)"),
    ('multilabel', ['pos', 'nan'], r"label 'nan' in column 'label' is a missing value, not a class"),
    ('multilabel', ['pos', 'a,b'], r"label 'a,b' in column 'label' holds a comma \(the predictions file joins an "
                                   r"example's labels with commas\)"),
    ('classification', 'pos\tneg', r"label 'pos\\tneg' in column 'label' holds a tab or a line break \(the predictions "
                                   r"file has one id<TAB>prediction line per example\)"),
])
def test_json_labels_of_the_wrong_shape_are_refused_naming_the_line(tmp_path, kind, bad, match):
    good = [['pos'], ['neg'], ['pos', 'neg']] if kind == 'multilabel' else ['pos', 'neg', 'pos']
    train = [(s, v) for s, v in zip(SENTENCES, good[:2] + [bad] + good[2:])]
    spec = task_file(tmp_path, kind, train, ext='jsonl')
    with pytest.raises(ConfigError, match=rf"^{tmp_path / 'train.jsonl'}: line 3: {match}"):
        task, source = file_task(read_task_file(spec))
        source.load(task, 'train')


@pytest.mark.parametrize('kind, good, bad', [('classification', [1, 0, 1], '1'), ('multilabel', [[1], [0], [0, 1]], ['1'])])
def test_json_labels_written_in_two_types_are_refused_naming_both_lines(tmp_path, kind, good, bad):
    "1 and \"1\" in one JSONL label column (the sweep's L06) were one class without a word: two sources mixed."
    train = [(s, v) for s, v in zip(SENTENCES, good[:2] + [bad] + good[2:])]
    spec = task_file(tmp_path, kind, train, ext='jsonl')
    with pytest.raises(ConfigError, match=rf"^{tmp_path / 'train.jsonl'}: line 3: label '1' in column 'label' is a "
                                          r"string and 1 \(line 1\) is not a string: the file writes its labels in two types"):
        task, source = file_task(read_task_file(spec))
        source.load(task, 'train')


@pytest.mark.parametrize('ext', ['csv', 'jsonl', 'parquet'])
@pytest.mark.parametrize('bad, match', [
    ('t-2\tx', r"id 't-2\\tx' in column 'id' holds a tab or a line break, which would break the predictions file"),
    ('t-2\nx', r"id 't-2\\nx' in column 'id' holds a tab or a line break"),
    ('t-2\u2028x', r"id 't-2\\u2028x' in column 'id' holds a tab or a line break"),
    ('', r"no id in column 'id' \(empty, null or NaN\)"),
    (None, r"no id in column 'id' \(empty, null or NaN\)"),
    ('t-0', r"id 't-0' is also on (line [12]|row 1); the predictions file would hold two rows for it"),
], ids=['tab', 'newline', 'line separator', 'empty', 'null', 'twice'])
def test_a_test_id_that_would_break_the_predictions_file_is_refused_before_any_run(tmp_path, tiny, ext, bad, match):
    train = [(s, 'pos' if k % 2 else 'neg') for k, s in enumerate(SENTENCES)]
    test = [(s, 'pos', f't-{k}') for k, s in enumerate(SENTENCES[:4])]
    test[2] = (test[2][0], 'pos', bad)
    spec = task_file(tmp_path, 'classification', train, ext=ext, test=test)
    cfg = job(tmp_path, 'demo', tasks=[str(spec)])
    at = {'csv': 'line 4', 'jsonl': 'line 3', 'parquet': 'row 3'}[ext]
    with pytest.raises(ConfigError, match=rf"^{tmp_path / f'test.{ext}'}: {at}: {match}"):
        sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    assert not list(tmp_path.rglob('*.pth'))


def test_a_test_file_whose_label_column_is_empty_is_read_as_unlabelled(tmp_path):
    "Its labels are never read (only predicted); a label column left empty throughout is a test file without labels."
    train = [(s, 'pos' if k % 2 else 'neg') for k, s in enumerate(SENTENCES)]
    spec = task_file(tmp_path, 'classification', train, test=[(s, None, f't-{k}') for k, s in enumerate(SENTENCES)])
    task, source = file_task(read_task_file(spec))
    assert source.load(task, 'test').label.tolist() == [-1] * len(SENTENCES)
    assert source.ids('test') == [f't-{k}' for k in range(len(SENTENCES))]


def _glue_rte(tmp_path: Path, dev_label: str) -> tuple:
    from electra.finetuning.tasks.glue.sources import open_source
    from electra.finetuning.tasks.glue.tasks import TASKS
    head = 'index\tsentence1\tsentence2\tlabel\n'
    (tmp_path / 'RTE').mkdir()
    (tmp_path / 'RTE' / 'train.tsv').write_text(head + '0\tgood film\tfine\tentailment\n1\tbad\tfine\tnot_entailment\n')
    (tmp_path / 'RTE' / 'dev.tsv').write_text(head + '0\tgood film\tfine\tentailment\n1\tbad\tfine\t' + dev_label + '\n')
    return open_source(str(tmp_path)), TASKS['RTE']


def _tagging(tmp_path: Path, dev_tag: str):
    from electra.finetuning.tasks.tagging.data import read_tagging_files
    (tmp_path / 'train.txt').write_text('good B-X\nfilm I-X\n\nbad O\n')
    (tmp_path / 'dev.txt').write_text(f'good B-X\nfilm {dev_tag}\n')
    return read_tagging_files(tmp_path / 'train.txt', dev=tmp_path / 'dev.txt')


@pytest.mark.parametrize('kind, match', [
    ('classification', r"dev.csv: line 3: label 'meh' never occurs in the training file \(neg, pos\)"),
    ('multilabel', r"dev.jsonl: line 2: label 'meh' never occurs in the training file \(neg, pos\)"),
    ('regression', None),  # any finite number is in a regression task's domain
    ('tagging', r"dev.txt:2: tag 'B-Y' never occurs in the training file"),
    ('glue', r"RTE/dev.tsv line 3: unknown label 'maybe' for RTE"),
])
def test_a_dev_label_never_seen_in_training_is_refused_for_every_kind(tmp_path, kind, match):
    if kind == 'tagging':
        with pytest.raises(ConfigError, match=match): _tagging(tmp_path, 'B-Y')
        assert _tagging(tmp_path, 'I-X').labels == ['B-X', 'I-X', 'O']
        return
    if kind == 'glue':
        source, task = _glue_rte(tmp_path, 'maybe')
        with pytest.raises(ConfigError, match=match): source.load(task, 'dev')
        return
    train = [(s, ['pos'] if k % 2 else ['neg']) for k, s in enumerate(SENTENCES)]
    if kind != 'multilabel': train = [(s, v[0]) for s, v in train]
    if kind == 'regression': train = [(s, float(k)) for k, (s, _) in enumerate(train)]
    dev = [train[0], (SENTENCES[1], 7.5 if kind == 'regression' else ['meh'] if kind == 'multilabel' else 'meh')]
    spec = task_file(tmp_path, kind, train, dev, ext='jsonl' if kind == 'multilabel' else 'csv')
    task, source = file_task(read_task_file(spec))
    if match is None:
        assert source.load(task, 'dev').label.tolist() == [0.0, 7.5]
        return
    with pytest.raises(ConfigError, match=match): source.load(task, 'dev')
