"""electra/tools/pictures.py: the maps and the dev outcome, their drawn points and numbers read back from the figures
and held against numpy's SVD and counts made here."""
from __future__ import annotations

import re

import numpy as np
import pytest
import transformers

from electra.finetuning.tasks.glue.tasks import TASKS
from electra.tools.explore import TokenIndex
from electra.tools.pictures import example_map, outcome_figure, project_2d, token_map


def svd_projection(x: np.ndarray) -> np.ndarray:
    "The first two principal components' scores, by numpy's SVD of the centred data."
    c = x - x.mean(0)
    _, _, vt = np.linalg.svd(c, full_matrices=False)
    return c @ vt[:2].T


def same_up_to_sign(a: np.ndarray, b: np.ndarray) -> bool:
    "PCA fixes each axis's sign by a convention of its own: equal column by column, up to the sign."
    return all(np.allclose(a[:, j], s * b[:, j], atol=1e-6) for j, s in enumerate(np.sign((a * b).sum(0))))


def drawn(fig) -> dict[str, np.ndarray]:
    "Each labelled scatter of the figure's first axes: label -> its points [n, 2]."
    return {c.get_label(): np.asarray(c.get_offsets()) for c in fig.axes[0].collections}


def test_projection_is_the_first_two_principal_components():
    x = np.random.default_rng(0).standard_normal((50, 6)) * [5, 3, 1, 1, 1, 1]
    points, pca = project_2d(x)
    assert same_up_to_sign(points, svd_projection(x))
    assert np.array_equal(points, project_2d(x)[0])                                   # the same every time


def test_example_map_draws_the_projection_by_label_with_mistakes_and_the_examined_one():
    rng = np.random.default_rng(1)
    train, dev = rng.standard_normal((30, 8)), rng.standard_normal((10, 8))
    train_labels, dev_labels = rng.integers(0, 2, 30), rng.integers(0, 2, 10)
    wrong = np.zeros(10, bool)
    wrong[[2, 5]] = True
    m, fig = example_map(train, train_labels, dev, dev_labels, wrong, ('no', 'yes'), examined=5)
    ref = svd_projection(np.vstack([train, dev]))
    assert same_up_to_sign(m.points, ref)
    got, names = drawn(fig), np.array(['no', 'yes'])
    for label in ('no', 'yes'):
        assert np.allclose(got[f'train: {label}'], m.points[:30][names[train_labels] == label])
        assert np.allclose(got[f'dev: {label}'], m.points[30:][names[dev_labels] == label])
    assert np.allclose(got['dev mistakes'], m.points[[32, 35]]) and np.allclose(got['the examined example'], m.points[[35]])
    assert m.examined == 35 and m.labels[30:] == list(names[dev_labels])


def test_token_map_places_each_word_at_the_mean_of_its_pieces():
    words = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'cow', 'ship', 'bread', 'sail', '##s', 'eat', 'bake']
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(words)})
    emb = np.random.default_rng(2).standard_normal((len(words), 8)).astype(np.float32)
    index = TokenIndex(emb, tok)
    m, fig = token_map(index, ['cow', 'sails'], k=2)
    rows = emb[5:]                                             # the indexed tokens: all but the special ones
    c = rows - rows.mean(0)
    _, _, vt = np.linalg.svd(c.astype(np.float64), full_matrices=False)
    assert same_up_to_sign(m.points, c @ vt[:2].T)
    sails = (emb[8] + emb[9]) / 2                              # 'sails' -> sail ##s
    assert same_up_to_sign(m.word_points, (np.stack([emb[5], sails]) - rows.mean(0)) @ vt[:2].T)
    got = drawn(fig)
    assert np.allclose(got['all tokens'], m.points) and np.allclose(got['word: sails'], m.word_points[[1]])
    near = [i - 5 for i in tok.convert_tokens_to_ids(list(index.nearest_tokens('cow', 2)['token']))]
    assert m.neighbours['cow'] == near and np.allclose(got['nearest to cow'], m.points[near])
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {'cow', 'sails'} <= labels and set(tok.convert_ids_to_tokens([i + 5 for i in near])) <= labels


def test_confusion_matrix_counts_and_label_names():
    task = TASKS['MNLI']
    rng = np.random.default_rng(3)
    gold, pred = rng.integers(0, 3, 60), rng.integers(0, 3, 60)
    fig = outcome_figure(task, gold, pred)
    ax = fig.axes[0]
    counts = np.zeros((3, 3), int)
    np.add.at(counts, (gold, pred), 1)
    shown = np.array([int(t.get_text()) for t in ax.texts]).reshape(3, 3)
    assert np.array_equal(shown, counts)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(task.labels) == [t.get_text() for t in ax.get_xticklabels()]
    # a label never predicted still has its column
    assert np.array_equal(np.array([int(t.get_text()) for t in outcome_figure(task, gold, np.zeros(60, int)).axes[0].texts])
                          .reshape(3, 3)[:, 0], np.bincount(gold, minlength=3))


def test_regression_outcome_is_predictions_against_gold_with_the_diagonal():
    gold, pred = np.array([0.0, 1.5, 4.0, 5.0]), np.array([0.5, 1.0, 4.5, 3.0])
    ax = outcome_figure(TASKS['STS-B'], gold, pred).axes[0]
    assert np.allclose(drawn(ax.figure)['dev examples'], np.c_[gold, pred])
    [line] = ax.lines
    assert np.allclose(line.get_xdata(), [0, 5]) and np.allclose(line.get_ydata(), [0, 5])


@pytest.mark.parametrize('shape', [(1, 4), (3, 1)])
def test_projection_of_too_few_points_or_dimensions_is_refused(shape):
    with pytest.raises(ValueError, match=re.escape(f'at least 2 vectors of at least 2 numbers each, got an array of shape {shape}')):
        project_2d(np.ones(shape))


def test_the_confusion_matrix_of_a_task_of_coded_labels_names_its_classes():
    """R9-4: MRPC's matrix was labelled '0', '1' (its labels as the data codes them) though the task has names, and the
    docstring promises "the task's label names": a reader could not tell whether row 1 is "equivalent". The names are
    GLUE's as the hub's nyu-mll/glue gives them (class 0 of MRPC: not_equivalent)."""
    gold, pred = np.array([0, 0, 1, 1, 1]), np.array([0, 1, 1, 1, 0])
    ax = outcome_figure(TASKS['MRPC'], gold, pred).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ['not_equivalent', 'equivalent']
    assert [t.get_text() for t in ax.get_xticklabels()] == ['not_equivalent', 'equivalent']
    assert np.array([int(t.get_text()) for t in ax.texts]).reshape(2, 2).tolist() == [[1, 1], [1, 2]]


def test_the_mistakes_and_the_nearest_examples_of_a_task_of_coded_labels_name_their_classes():
    """R9-4: `find_misclassified`'s label and prediction columns and `ExampleIndex`'s labels (the notebook passed
    `task.labels`) read '0'/'1' for MRPC; the notebook's example map legend too. All take `task.label_names` now."""
    import json
    import torch
    from electra.finetuning.classifier import ElectraClassifier
    from electra.finetuning.tasks.sources import Examples
    from electra.tools.explore import find_misclassified
    from tests.support.notebook_runs import REPO
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a', 'b', 'c']
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    body = transformers.ElectraModel(transformers.ElectraConfig(vocab_size=8, embedding_size=8, hidden_size=8,
                                     num_hidden_layers=1, num_attention_heads=1, intermediate_size=8))
    clf = ElectraClassifier(body, 2).eval()
    ex = Examples(np.arange(4), ['a', 'b', 'c', 'a b'], ['b', 'c', 'a', 'c'], np.array([0, 1, 0, 1]))
    wrong = find_misclassified(clf, tok, TASKS['MRPC'], ex, 8)
    assert len(wrong) and set(wrong['label']) | set(wrong['prediction']) <= {'not_equivalent', 'equivalent'}
    assert all(TASKS['MRPC'].names[l] == n for l, n in zip(ex.label[wrong.index], wrong['label']))
    code = ''.join(''.join(c['source']) for c in json.loads((REPO / 'notebooks' / 'Explore.ipynb').read_text())['cells'])
    assert 'task.labels' not in code and code.count('task.label_names') == 2  # the example index and the map
