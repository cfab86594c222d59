"""electra/finetuning/tasks/glue/submission.py: the GLUE-site test files and zip."""
from __future__ import annotations

import csv
import zipfile

import numpy as np
import pytest

from electra.finetuning.tasks.glue.submission import SUBMISSION_FILES, write_predictions, zip_submission
from electra.finetuning.tasks.glue.tasks import TASKS

# the label strings the GLUE site expects, by HF datasets id (the GLUE site's submission format)
EXPECTED = {'CoLA': ['0', '1'], 'SST-2': ['0', '1'], 'MRPC': ['0', '1'], 'QQP': ['0', '1'], 'WNLI': ['0', '1'],
            'MNLI': ['entailment', 'neutral', 'contradiction'], 'AX': ['entailment', 'neutral', 'contradiction'],
            'QNLI': ['entailment', 'not_entailment'], 'RTE': ['entailment', 'not_entailment']}


def parse(path):
    with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.reader(f, delimiter='\t'))
    return rows[0], rows[1:]


def test_all_eleven_files():
    assert SUBMISSION_FILES == ['CoLA.tsv', 'SST-2.tsv', 'MRPC.tsv', 'STS-B.tsv', 'QQP.tsv', 'MNLI-m.tsv', 'MNLI-mm.tsv',
                                'QNLI.tsv', 'RTE.tsv', 'WNLI.tsv', 'AX.tsv']


@pytest.mark.parametrize('name', [n for n in TASKS if n != 'STS-B'])
def test_classification_files_parse_back(tmp_path, name):
    task, rng = TASKS[name], np.random.default_rng(len(name))
    idx = rng.permutation(50) + 1000  # the test set's own indices, in test-set order
    ids = rng.integers(0, task.n_outputs, 50)
    for split, stem in task.test_files:
        path = write_predictions(tmp_path / f'{stem}.tsv', task, idx, ids)
        header, rows = parse(path)
        assert header == ['index', 'prediction']
        assert len(rows) == 50 and all(len(r) == 2 for r in rows)
        assert [int(r[0]) for r in rows] == idx.tolist()
        assert [r[1] for r in rows] == [EXPECTED[name][i] for i in ids]


def test_sts_b_scores_are_clamped_floats(tmp_path):
    out = np.array([-0.7, 0.0, 2.25, 4.9996, 5.8])
    header, rows = parse(write_predictions(tmp_path / 'STS-B.tsv', TASKS['STS-B'], np.arange(5), out))
    values = [float(r[1]) for r in rows]
    assert header == ['index', 'prediction'] and values == [0.0, 0.0, 2.25, 5.0, 5.0]
    assert all(0.0 <= v <= 5.0 for v in values)


def test_row_count_mismatch_is_refused(tmp_path):
    with pytest.raises(ValueError, match='3 test examples but 2 predictions'):
        write_predictions(tmp_path / 'RTE.tsv', TASKS['RTE'], np.arange(3), np.zeros(2))


def test_zip_holds_the_files_at_its_root(tmp_path):
    for name in ('CoLA', 'MNLI', 'AX'):
        for split, stem in TASKS[name].test_files:
            write_predictions(tmp_path / f'{stem}.tsv', TASKS[name], np.arange(3), np.array([0, 1, 1]))
    (tmp_path / 'notes.txt').write_text('not part of a submission')
    path = zip_submission(tmp_path)
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ['AX.tsv', 'CoLA.tsv', 'MNLI-m.tsv', 'MNLI-mm.tsv']
        assert z.read('MNLI-m.tsv').decode() == (tmp_path / 'MNLI-m.tsv').read_text()


def test_a_folder_without_glue_files_gets_no_zip_and_loses_the_one_of_the_files_it_no_longer_holds(tmp_path):
    """An empty zip is a submission the GLUE site rejects: none is written for a folder of task files' predictions
    only, and the zip of a folder whose last GLUE file was removed goes with it."""
    (tmp_path / 'reviews.tsv').write_text('id\tprediction\nr0\tpositive\n')
    assert zip_submission(tmp_path) is None and sorted(p.name for p in tmp_path.iterdir()) == ['reviews.tsv']
    write_predictions(tmp_path / 'RTE.tsv', TASKS['RTE'], np.arange(2), np.array([0, 1]))
    with zipfile.ZipFile(zip_submission(tmp_path)) as z: assert z.namelist() == ['RTE.tsv']
    (tmp_path / 'RTE.tsv').unlink()
    assert zip_submission(tmp_path) is None and sorted(p.name for p in tmp_path.iterdir()) == ['reviews.tsv']
