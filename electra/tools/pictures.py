"""Pictures of a fine-tuned model for `notebooks/Explore.ipynb`, each a matplotlib Figure made from data it also returns:

- `example_map`: the [CLS] vectors of a task's training and dev examples projected to two dimensions by PCA (scikit-
  learn, `svd_solver='full'`: deterministic), coloured by label, the dev mistakes marked, one example highlighted;
- `token_map`: the discriminator's word embeddings projected the same way, the looked-up words and their nearest
  tokens labelled;
- `outcome_figure`: the dev confusion matrix with the task's label names (scikit-learn's `ConfusionMatrixDisplay`),
  or for a regression task the predictions against the gold scores with the diagonal.

Every point set is a scatter whose `label` says what it holds (e.g. 'train: equivalent', 'dev mistakes'), so a test
reads the drawn points back by name.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ['project_2d', 'ExampleMap', 'example_map', 'TokenMap', 'token_map', 'outcome_figure']


def project_2d(vectors: np.ndarray):
    "PCA of `vectors` [N, d] to [N, 2] (full SVD: the same points every time) and the fitted PCA."
    from sklearn.decomposition import PCA
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2 or min(vectors.shape) < 2:
        raise ValueError(f'a map needs at least 2 vectors of at least 2 numbers each, got an array of shape {vectors.shape}')
    pca = PCA(n_components=2, svd_solver='full')
    return pca.fit_transform(vectors), pca


def _axes_labels(ax, pca) -> None:
    r = pca.explained_variance_ratio_
    ax.set_xlabel(f'PC 1 ({r[0]:.0%} of the variance)'), ax.set_ylabel(f'PC 2 ({r[1]:.0%})')


@dataclass
class ExampleMap:
    "Training then dev examples in one PCA: `points` [N_train + N_dev, 2] in that order."
    points: np.ndarray
    labels: list[str]           # each example's gold label (names; a regression task's scores rounded to whole)
    is_dev: np.ndarray          # [N] bool
    wrong: np.ndarray           # [N] bool: a dev example the model predicts wrong
    examined: int | None        # row of `points` of the example the notebook examines
    variance: tuple[float, float]  # the share of the variance each axis holds


def example_map(train_vectors: np.ndarray, train_labels, dev_vectors: np.ndarray, dev_labels, dev_wrong,
                label_names: tuple[str, ...] = (), examined: int | None = None):
    """The map of [CLS] vectors: PCA fitted on the training and dev vectors together (rows in that order). `examined`:
    the dev row to highlight; `label_names`: the class names by id (`TaskInfo.label_names`), empty for a regression
    task (its scores rounded to whole). Returns (ExampleMap, Figure)."""
    from matplotlib.figure import Figure
    points, pca = project_2d(np.vstack([train_vectors, dev_vectors]))
    name = (lambda v: label_names[int(v)]) if label_names else (lambda v: f'{float(v):.0f}')
    labels = [name(v) for v in (*train_labels, *dev_labels)]
    is_dev = np.r_[np.zeros(len(train_vectors), bool), np.ones(len(dev_vectors), bool)]
    wrong = np.r_[np.zeros(len(train_vectors), bool), np.asarray(dev_wrong, bool)]
    row = None if examined is None else len(train_vectors) + int(examined)
    m = ExampleMap(points, labels, is_dev, wrong, row, tuple(pca.explained_variance_ratio_))
    fig = Figure(figsize=(7.5, 6))
    ax = fig.subplots()
    for i, label in enumerate(sorted(set(labels))):
        of = np.array([x == label for x in labels])
        for split, dev, marker, size in (('train', False, '.', 14), ('dev', True, 'o', 26)):
            sel = of & (is_dev == dev)
            if sel.any():
                ax.scatter(*points[sel].T, s=size, marker=marker, color=f'C{i}', alpha=0.5 if dev else 0.35,
                           label=f'{split}: {label}')
    if wrong.any():
        ax.scatter(*points[wrong].T, s=60, marker='x', color='black', linewidths=1, label='dev mistakes')
    if row is not None:
        ax.scatter(*points[row], s=260, facecolors='none', edgecolors='red', linewidths=2, label='the examined example')
    _axes_labels(ax, pca)
    ax.set_title('[CLS] vectors of the training and dev examples (PCA)', fontsize=10)
    ax.legend(fontsize=8, loc='best'), ax.grid(alpha=0.3)
    fig.tight_layout()
    return m, fig


@dataclass
class TokenMap:
    "Every indexed token and the looked-up words in one PCA of the word embeddings."
    points: np.ndarray          # [N tokens, 2], the rows of `TokenIndex.vectors`
    words: list[str]            # the looked-up words
    word_points: np.ndarray     # [W, 2]: each word's vector (the mean of its pieces) projected
    neighbours: dict[str, list[int]]  # word -> rows of `points` of its nearest tokens


def token_map(index, words: list[str], k: int = 5):
    """The map of a `TokenIndex` (electra.tools.explore): PCA of its token vectors, each word of `words` at its own
    vector's projection with its `k` nearest tokens beside it, all labelled. Returns (TokenMap, Figure)."""
    from matplotlib.figure import Figure
    points, pca = project_2d(index.vectors)
    word_points = pca.transform(np.stack([index.vector(w) for w in words]).astype(np.float64))
    row_of = {int(t): r for r, t in enumerate(index.ids)}
    near = {w: [row_of[t] for t in index.tokenizer.convert_tokens_to_ids(list(index.nearest_tokens(w, k)['token']))]
            for w in words}
    fig = Figure(figsize=(7.5, 6))
    ax = fig.subplots()
    ax.scatter(*points.T, s=3, color='lightgray', label='all tokens')
    for i, w in enumerate(words):
        rows = near[w]
        ax.scatter(*points[rows].T, s=16, color=f'C{i}', label=f'nearest to {w}')
        for r in rows: ax.annotate(index.tokenizer.convert_ids_to_tokens(int(index.ids[r])), points[r], fontsize=7,
                                   color=f'C{i}', xytext=(2, 2), textcoords='offset points')
        ax.scatter(*word_points[i], s=70, marker='*', color=f'C{i}', edgecolors='black', label=f'word: {w}')
        ax.annotate(w, word_points[i], fontsize=10, weight='bold', xytext=(3, -10), textcoords='offset points')
    _axes_labels(ax, pca)
    ax.set_title('word embeddings of the discriminator (PCA), the looked-up words and their nearest tokens', fontsize=10)
    ax.legend(fontsize=7, ncol=2, loc='best'), ax.grid(alpha=0.3)
    fig.tight_layout()
    return TokenMap(points, list(words), word_points, near), fig


def outcome_figure(task, gold, predicted):
    """The dev set's outcome: for a classification `task` (a `TaskInfo`) the confusion matrix of `gold` against
    `predicted` class ids, rows the gold labels by name (`label_names`: MRPC's not_equivalent and equivalent, not the
    data's codes 0 and 1); for a regression task the predictions against the gold
    scores with the diagonal (a perfect model's line). Returns the Figure."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(6, 5))
    ax = fig.subplots()
    if task.is_regression:
        gold, predicted = np.asarray(gold, float), np.asarray(predicted, float)
        ax.scatter(gold, predicted, s=12, alpha=0.6, label='dev examples')
        lo, hi = min(gold.min(), predicted.min()), max(gold.max(), predicted.max())
        ax.plot([lo, hi], [lo, hi], color='black', linewidth=1, label='prediction = gold')
        ax.set_xlabel('gold score'), ax.set_ylabel('predicted score'), ax.legend(fontsize=8), ax.grid(alpha=0.3)
        ax.set_title(f'{task.name} dev: predictions against gold', fontsize=10)
    else:
        from sklearn.metrics import ConfusionMatrixDisplay
        ConfusionMatrixDisplay.from_predictions(np.asarray(gold, int), np.asarray(predicted, int),
                                                labels=list(range(len(task.labels))), display_labels=list(task.label_names),
                                                ax=ax, colorbar=False, cmap='Blues')
        ax.set_title(f'{task.name} dev: confusion matrix', fontsize=10)
    fig.tight_layout()
    return fig
