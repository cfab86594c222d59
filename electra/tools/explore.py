"""Exploring a trained ELECTRA with nearest-neighbour search (hnswlib, cosine similarity), for `notebooks/Explore.ipynb`
(its pictures: `electra.tools.token_view`, `electra.tools.pictures`):

- `TokenIndex`: the discriminator's word embeddings; `nearest_tokens('cow')` lists the tokens whose embeddings are
  closest to a word's.
- `ExampleIndex`: the final [CLS] vectors of a GLUE task's training examples under a fine-tuned (or pretrained)
  model, centred on their mean; `nearest_examples(text_a, text_b)` lists the training examples the model represents
  most like a given input, e.g. a misclassified dev example from `find_misclassified`, for error analysis.
- `recall_at_k` measures an index against exact cosine search (`exact_cosine_knn`, numpy).
- `model_outputs` and `predictions`: a fine-tuned classifier's outputs and predictions on examples, which
  `find_misclassified` and the notebook's confusion matrix read.

Indexes are deterministic: single-threaded insertion with a fixed `random_seed` and fixed `M`, `ef_construction`
and `ef` give the same graph and the same answers every time.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from electra.config.fields import SEED_END, field
from electra.config.paths import path
from electra.config.values import CheckedConfig, config_from_dict
from electra.data.tokenizer import pad_token_id
from electra.finetuning.learner import predict_outputs
from electra.config.errors import ConfigError
from electra.finetuning.loading import finetuned_model, load_pretrained, read_finetuned, tokenizer_mismatch
from electra.finetuning.runs import transformers_folder
from electra.finetuning.sweep import resolve_data
from electra.finetuning.tasks.base import TaskInfo
from electra.finetuning.tasks.encoding import encode, make_loader
from electra.finetuning.tasks.files import make_task, read_task_file
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.sources import Examples, TaskSource
from electra.pretrained.export import model_fingerprint

__all__ = ['CosineIndex', 'exact_cosine_knn', 'recall_at_k', 'electra_body', 'check_tokenizer', 'word_embeddings',
           'TokenIndex', 'cls_embeddings', 'ExampleIndex', 'model_outputs', 'predictions', 'find_misclassified', 'ExploreConfig',
           'explore_config', 'mistake_at', 'FinetunedRun', 'open_finetuned']


# -- approximate and exact cosine search

def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class CosineIndex:
    """An hnswlib HNSW graph over the rows of `vectors` [N, d] in cosine space. `query` returns, per query row, the
    row numbers of the k most similar vectors and their cosine similarities, most similar first."""

    def __init__(self, vectors: np.ndarray, M: int = 32, ef_construction: int = 200, ef: int = 128, seed: int = 0):
        import hnswlib
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) == 0: raise ValueError(f'need a non-empty [N, d] array, got shape {vectors.shape}')
        self.n, self.dim, self.ef = len(vectors), vectors.shape[1], ef
        self.index = hnswlib.Index(space='cosine', dim=self.dim)
        self.index.init_index(max_elements=self.n, M=M, ef_construction=ef_construction, random_seed=seed)
        self.index.add_items(vectors, np.arange(self.n), num_threads=1)  # one thread: the same graph every time
        self.index.set_ef(ef)

    def query(self, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        "Row numbers [Q, k] and cosine similarities [Q, k] of the `k` nearest rows to each query row."
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        k = min(k, self.n)
        self.index.set_ef(max(self.ef, k))
        labels, distances = self.index.knn_query(queries, k=k)
        return labels.astype(np.int64), 1.0 - distances


def exact_cosine_knn(data: np.ndarray, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    "Exact search: row numbers [Q, k] of the `k` rows of `data` most cosine-similar to each query, and the similarities."
    sims = _unit(np.atleast_2d(queries)) @ _unit(data).T                        # [Q, N]
    k = min(k, sims.shape[1])
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(sims, top, 1), axis=1, kind='stable')
    top = np.take_along_axis(top, order, 1)
    return top, np.take_along_axis(sims, top, 1)


def recall_at_k(index: CosineIndex, data: np.ndarray, queries: np.ndarray, k: int = 10, tie_tol: float = 1e-6) -> float:
    """Recall@k of `index` (built over the rows of `data`) against exact cosine search: the mean share of each query's
    exact `k` nearest rows that the index also returns among its `k`. A returned row whose exact similarity ties
    with the k-th nearest one (within `tie_tol`) is as right as the row exact search happened to list instead."""
    queries = np.atleast_2d(queries)
    found, _ = index.query(queries, k)
    exact, exact_sims = exact_cosine_knn(data, queries, k)
    found_sims = np.einsum('qd,qkd->qk', _unit(queries), _unit(data)[found])   # exact similarity of each returned row
    hits = [len(set(f) & set(e)) + int(np.sum([s >= kth - tie_tol for r, s in zip(f, fs) if r not in set(e)]))
            for f, e, fs, kth in zip(found.tolist(), exact.tolist(), found_sims, exact_sims[:, -1])]
    return float(np.mean(np.minimum(hits, exact.shape[1]) / exact.shape[1]))


# -- token embeddings

def electra_body(model) -> torch.nn.Module:
    """The `ElectraModel` of a discriminator: of an `ElectraForPreTraining`, a fine-tuned `ElectraClassifier`, a
    pretraining `ElectraGeneratorDiscriminator` (its discriminator), or an `ElectraModel` itself."""
    if hasattr(model, 'discriminator'): model = model.discriminator
    return model.electra if hasattr(model, 'electra') else model


def check_tokenizer(model, tokenizer) -> None:
    """`tokenizer` refused in one line where it is not the one `model` was trained with (`loading.tokenizer_mismatch`:
    a discriminator of `load_pretrained` keeps its own, a fine-tuned run of `open_finetuned` its identity): each
    helper would feed the model ids that mean other tokens to it, and show or score what it makes of them."""
    owner = model.discriminator if hasattr(model, 'discriminator') else model  # a pretraining model: its discriminator
    if why := tokenizer_mismatch(owner, tokenizer):
        source = getattr(owner, 'electra_source', None)
        own = f'{source} was saved with' if source else 'the model was trained with'
        raise ConfigError(f"tokenizer: the tokenizer given is not the one {own}: {why}. Give the tokenizer "
                          "load_pretrained returns with the model (of a fine-tuned run: open_finetuned's tokenizer).")


def word_embeddings(model, n_tokens: int) -> np.ndarray:
    "The first `n_tokens` rows of the discriminator's word-embedding matrix (rows past the tokenizer are padding)."
    return electra_body(model).embeddings.word_embeddings.weight[:n_tokens].detach().float().cpu().numpy()


class TokenIndex:
    """The discriminator's word embeddings in a `CosineIndex`. Special tokens and all-zero rows (the [PAD] row, which
    never trains) are left out. A word that is one token is looked up as that token; a word the tokenizer splits
    into pieces as the mean of its pieces' embeddings."""

    def __init__(self, embeddings: np.ndarray, tokenizer, seed: int = 0, **params):
        self.tokenizer, self.embeddings = tokenizer, np.asarray(embeddings, dtype=np.float32)
        special = set(tokenizer.all_special_ids)
        norms = np.linalg.norm(self.embeddings, axis=1)
        self.ids = np.array([i for i in range(len(self.embeddings)) if i not in special and norms[i] > 0], dtype=np.int64)
        self.vectors = self.embeddings[self.ids]
        self.index = CosineIndex(self.vectors, seed=seed, **params)

    @classmethod
    def from_model(cls, model, tokenizer, **kw) -> 'TokenIndex':
        check_tokenizer(model, tokenizer)
        return cls(word_embeddings(model, len(tokenizer)), tokenizer, **kw)

    def pieces(self, word: str) -> list[int]:
        """The token ids `word` is read as; refused when any is [UNK]: [UNK] is a special token, left out of the index,
        and a word read as it has no embedding of its own (its lookup would list [UNK]'s neighbours, or mix [UNK]'s
        row into the mean of its pieces), so every lookup (`vector`, `nearest_tokens`, `neighbours`, the token map)
        passes through here."""
        ids = self.tokenizer(word, add_special_tokens=False)['input_ids']
        if not ids: raise ValueError(f'{word!r} has no tokens')
        if self.tokenizer.unk_token_id is not None and self.tokenizer.unk_token_id in ids:
            raise ConfigError(f"words: {word!r} is unknown to the vocabulary (read as "
                              f"{' '.join(self.tokenizer.convert_ids_to_tokens(ids))}): it has no embedding of its own, "
                              "and the neighbours of [UNK]'s are not its. Give words the tokenizer reads without [UNK].")
        return ids

    def vector(self, word: str) -> np.ndarray:
        return self.embeddings[self.pieces(word)].mean(0)

    def nearest_tokens(self, word: str, k: int = 10) -> pd.DataFrame:
        "The `k` tokens nearest to `word` (its own pieces left out), most similar first: token, similarity."
        own = set(self.pieces(word))
        rows, sims = self.index.query(self.vector(word), k + len(own))
        picked = [(int(self.ids[r]), float(s)) for r, s in zip(rows[0], sims[0]) if int(self.ids[r]) not in own][:k]
        return pd.DataFrame({'token': self.tokenizer.convert_ids_to_tokens([i for i, _ in picked]),
                             'similarity': [s for _, s in picked]})

    def neighbours(self, words: list[str], k: int = 5) -> pd.DataFrame:
        "A table of the `k` nearest tokens of each word: one row per word."
        return pd.DataFrame([{'word': w, 'pieces': ' '.join(self.tokenizer.convert_ids_to_tokens(self.pieces(w))),
                              'nearest tokens': ', '.join(f'{t} ({s:.2f})' for t, s in self.nearest_tokens(w, k).itertuples(index=False))}
                             for w in words])


# -- example embeddings

def cls_embeddings(model, tokenizer, text_a: list[str], text_b: list[str] | None = None, max_length: int = 128,
                   batch_size: int = 128) -> np.ndarray:
    """The final hidden state of [CLS] [N, H] for each example, encoded as fine-tuning encodes it
    (`[CLS] A [SEP] B [SEP]`, BERT truncation to `max_length`); `tokenizer` the model's (`check_tokenizer`)."""
    check_tokenizer(model, tokenizer)
    return _cls_vectors(model, tokenizer, text_a, text_b, max_length, batch_size)


@torch.no_grad()
def _cls_vectors(model, tokenizer, text_a: list[str], text_b: list[str] | None, max_length: int,
                 batch_size: int) -> np.ndarray:
    "`cls_embeddings` of a model and tokenizer checked before (an `ExampleIndex`'s, at each query)."
    body = electra_body(model)
    device = next(body.parameters()).device
    ex = Examples(np.arange(len(text_a)), list(text_a), None if text_b is None else list(text_b), np.zeros(len(text_a)))
    enc = encode(ex, tokenizer, max_length)
    loader = make_loader(enc, batch_size, False, pad_token_id(tokenizer))
    was_training = body.training
    body.eval()
    outs = [body(input_ids=ids.to(device), attention_mask=mask.to(device), token_type_ids=types.to(device))
            .last_hidden_state[:, 0].float().cpu() for ids, mask, types, _ in loader]
    body.train(was_training)
    result = np.empty((len(ex), body.config.hidden_size), dtype=np.float32)
    result[np.concatenate(list(loader.batch_sampler))] = torch.cat(outs).numpy()
    return result


class ExampleIndex:
    """The [CLS] vectors of a task's examples (usually its training set) under `model`, in a `CosineIndex`.
    `label_names`: the task's label names by class id (`TaskInfo.label_names`: MRPC's not_equivalent and equivalent,
    not its codes 0 and 1; empty for a regression task such as STS-B).

    With `center` (the default) the examples' mean vector is subtracted from every vector, indexed and query alike:
    [CLS] vectors share a large common component (raw cosine similarities all lie near 1, more so after fine-tuning),
    and what tells examples apart is what is left. `vectors` holds what is indexed; `embed` returns queries alike."""

    def __init__(self, model, tokenizer, examples, max_length: int = 128, label_names: tuple[str, ...] = (),
                 batch_size: int = 128, center: bool = True, seed: int = 0, **params):
        self.model, self.tokenizer, self.examples = model, tokenizer, examples
        self.max_length, self.label_names, self.batch_size = max_length, tuple(label_names), batch_size
        raw = cls_embeddings(model, tokenizer, examples.text_a, examples.text_b, max_length, batch_size)
        self.mean = raw.mean(0) if center else np.zeros(raw.shape[1], dtype=np.float32)
        self.vectors = raw - self.mean
        self.index = CosineIndex(self.vectors, seed=seed, **params)

    def embed(self, text_a: list[str], text_b: list[str] | None = None) -> np.ndarray:
        "The [CLS] vectors of these examples, centred as the indexed ones are."
        return _cls_vectors(self.model, self.tokenizer, text_a, text_b, self.max_length, self.batch_size) - self.mean

    def _label(self, value) -> str | float:
        return self.label_names[int(value)] if self.label_names and int(value) >= 0 else float(value)

    def nearest_examples(self, text_a: str, text_b: str | None = None, k: int = 5) -> pd.DataFrame:
        "The `k` examples whose [CLS] vectors are nearest to the input's: similarity, index, text(s), label."
        if (text_b is None) != (self.examples.text_b is None):
            raise ValueError('give text_b exactly when the task has sentence pairs')
        rows, sims = self.index.query(self.embed([text_a], None if text_b is None else [text_b]), k)
        ex = self.examples
        out = {'similarity': sims[0], 'idx': ex.idx[rows[0]], 'text_a': [ex.text_a[r] for r in rows[0]]}
        if ex.text_b is not None: out['text_b'] = [ex.text_b[r] for r in rows[0]]
        out['label'] = [self._label(ex.label[r]) for r in rows[0]]
        return pd.DataFrame(out)


def model_outputs(classifier, tokenizer, examples, max_length: int = 128, batch_size: int = 128) -> np.ndarray:
    """A fine-tuned `ElectraClassifier`'s outputs for `examples`, in their order, encoded as fine-tuning encodes them:
    logits [N, classes], or scores [N] of a regression task (on the task's own scale)."""
    check_tokenizer(classifier, tokenizer)
    enc = encode(examples, tokenizer, max_length)
    return predict_outputs(classifier, make_loader(enc, batch_size, False, pad_token_id(tokenizer)))


def predictions(task, outputs: np.ndarray) -> np.ndarray:
    "The predicted class id of each example (the largest logit), or its score for a regression task."
    return outputs if task.is_regression else outputs.argmax(-1)


def find_misclassified(classifier, tokenizer, task, examples, max_length: int = 128, batch_size: int = 128,
                       tolerance: float = 1.0) -> pd.DataFrame:
    """The examples (e.g. a dev set) that a fine-tuned `ElectraClassifier` gets wrong, most confident mistakes first:
    index, text(s), label, prediction and the probability it gave its prediction. For a regression task (STS-B),
    the examples predicted more than `tolerance` off, largest error first."""
    out = model_outputs(classifier, tokenizer, examples, max_length, batch_size)
    df = pd.DataFrame({'idx': examples.idx, 'text_a': examples.text_a})
    if examples.text_b is not None: df['text_b'] = examples.text_b
    if task.is_regression:
        df['label'], df['prediction'] = np.asarray(examples.label, dtype=float), out
        df['error'] = (df['prediction'] - df['label']).abs()  # exact: the mistakes are picked by it
        return df[df['error'] > tolerance].sort_values('error', ascending=False, kind='stable')
    probs = torch.softmax(torch.from_numpy(out), -1).numpy()
    pred = predictions(task, out)
    df['label'] = [task.label_names[int(i)] for i in examples.label]  # by name: MRPC's equivalent, not its code 1
    df['prediction'] = [task.label_names[int(i)] for i in pred]
    df['p(prediction)'] = probs.max(-1)
    wrong = df[np.asarray(examples.label) != pred]
    return wrong.sort_values('p(prediction)', ascending=False, kind='stable')


# -- the Explore notebook's config

@dataclass
class ExploreConfig(CheckedConfig):
    model: path = field('', 'pretrained discriminator whose word embeddings to search (a pretrain.py .pth, a save_pretrained '
                           'directory or a hub name); empty: the one the fine-tuned run started from')
    finetuned: path = field('checkpoints/glue/demo/MRPC_0.pth',
                           "a fine-tuned run of finetune.py (<output_dir>/<group>/<task>_<i>.pth): its task's training "
                           "examples are indexed and its dev mistakes analysed")
    data: path = field('', "the data the run was fine-tuned on: 'hub', 'demo', a GLUE directory or its task file; "
                          "empty: what its .pth records (given: checked to be the same)")
    cache_dir: path = field('cache', 'where the demo GLUE data is written')
    generator: path = field('', "the generator whose replacements and candidates to show (a save_pretrained directory or a hub "
                               "name of a masked LM); empty: the one trained with the pretrained discriminator")
    text: str = field('the teacher reads three books in the classroom .', "a text to show the discriminator's view of")
    replace: str = field('books', 'a word of `text` to replace')
    replace_with: str = field('chalks', 'what to put in its place')
    generate: list[str] = field(['reads', 'classroom'], "words of `text` the generator fills in (masked, then sampled)",
                                min_items=1)
    threshold: float = field(0.5, 'a token is flagged as replaced above this probability', gt=0, lt=1)
    words: list[str] = field(['cow', 'ship', 'bread', 'teacher', 'yesterday', 'three'], 'words whose nearest tokens to list')
    k: int = field(10, 'neighbours per query', gt=0)
    mistake: int = field(0, 'which misclassified dev example to analyse, by confidence; one past the mistakes found is '
                            'refused when they are (`mistake_at`)', ge=0,
                         zero='the most confident mistake')
    seed: int = field(0, 'hnswlib random seed', ge=0, lt=SEED_END)


def mistake_at(mistakes: pd.DataFrame, which: int) -> pd.Series:
    """The `which`-th of the dev mistakes `find_misclassified` lists (most confident first): the config's `mistake`,
    checked here, where their count is first known (the config is read before the model runs); one past them is
    refused rather than replaced by the last, which would analyse another example than the one asked for."""
    if which >= len(mistakes):
        raise ConfigError(f"mistake: {which} is past the {len(mistakes)} dev mistakes (0 is the most confident, "
                          f"{len(mistakes) - 1} the least): give 0 to {len(mistakes) - 1}.")
    return mistakes.iloc[which]


def explore_config(overrides: dict | None = None) -> ExploreConfig:
    "The Explore notebook's config: `ExploreConfig` defaults, then `overrides`; every key and type checked."
    return config_from_dict(ExploreConfig, overrides or {}, source='overrides')


@dataclass
class FinetunedRun:
    """A fine-tuned run of `finetune.py`, as the Explore notebook analyses it: the classifier, its task, the
    `max_length` it was trained with, the model it started from and that model's tokenizer (the one the classifier
    reads, whatever other model the notebook's `model` searches), and the source of its examples (`data`)."""
    model: torch.nn.Module
    task: TaskInfo
    max_length: int
    started_from: str
    tokenizer: object
    source: TaskSource
    data: str

    def load(self, split: str) -> Examples:
        "The examples of one of its task's splits ('train', or a dev split), from the data it was fine-tuned on."
        return self.source.load(self.task, split)


def _glue_source(data: str, cache_dir: str | Path) -> tuple[TaskSource, str]:
    "The GLUE source named as the `data` key names one, and the folder it reads (resolved) or 'hub'."
    source = resolve_data(data, cache_dir)
    root = getattr(source, 'root', None)
    return source, 'hub' if root is None else str(Path(root).resolve())


def _run_source(path: Path, ckpt: dict, data: str, cache_dir: str | Path) -> tuple[TaskInfo, TaskSource, str]:
    """The task of a run and the source of its examples: what its checkpoint records it was fine-tuned on (a task
    file, a GLUE folder or 'hub'); `data`, when given, must name the same."""
    recorded = ckpt.get('data')
    if recorded is None and not data:
        raise ConfigError(f"{path} does not record the data it was fine-tuned on (a run of an earlier version): set "
                          "`data` to it ('hub', 'demo', a GLUE directory, or the run's task file).")
    if ckpt['task'] in TASKS:
        source, root = _glue_source(recorded or data, cache_dir)
        if data and recorded is not None and _glue_source(data, cache_dir)[1] != recorded:
            raise ConfigError(f"data: {data} ({_glue_source(data, cache_dir)[1]}) is not what {path} was fine-tuned on "
                              f"({recorded}); leave `data` empty to read the run's own.")
        return TASKS[ckpt['task']], source, root
    spec = read_task_file(recorded or data)
    if data and recorded is not None and str(spec.path) != recorded:
        raise ConfigError(f"data: {data} ({spec.path}) is not what {path} was fine-tuned on ({recorded}); leave "
                          "`data` empty to read the run's own.")
    task = make_task(spec)
    if task.name != ckpt['task']:
        raise ConfigError(f"data: {spec.path} describes task {task.name}, but {path} is a run of {ckpt['task']}.")
    return task.info, task.source, str(spec.path)


def open_finetuned(path: str | Path, data: str = '', cache_dir: str | Path = 'cache') -> FinetunedRun:
    """A fine-tuned classification or regression run of `finetune.py` (a GLUE task or a task file), with the tokenizer
    of the model it started from and the examples it was fine-tuned on (`data` empty: those its checkpoint records;
    given: checked to be the same; `cache_dir`: where 'demo' is written)."""
    path = Path(path)
    ckpt = read_finetuned(path)
    kind = ckpt.get('kind', 'classification')
    if kind != 'classification' or ckpt.get('multilabel'):
        raise ConfigError(f"{path}: a {'multi-label' if kind == 'classification' else kind} run: the Explore helpers "
                          "analyse classification and regression runs (GLUE tasks and task files of those kinds).")
    task, source, where = _run_source(path, ckpt, data, cache_dir)
    model, started_from = finetuned_model(ckpt), str(ckpt['pretrained'])
    return FinetunedRun(model, task, int(ckpt['hparams']['max_length']), started_from,
                        _run_tokenizer(path, ckpt, model), source, where)


def _run_tokenizer(path: Path, ckpt: dict, model):
    """The tokenizer of the model a run started from, which its classifier was trained to read: refused when that model
    is no longer the one the run records (by `model_fingerprint`; its tokenizer may be another), or when it is not the
    tokenizer the run records it read (`tokenizer_mismatch`: a model built in memory fine-tuned with another); for a
    run that records neither, when it has more tokens than the classifier has embedding rows."""
    started_from, recorded = str(ckpt['pretrained']), ckpt.get('pretrained_fingerprint')
    if recorded is not None and model_fingerprint(started_from) != recorded:
        raise ConfigError(f"{path}: {started_from} is not the model this run was fine-tuned from (its files changed "
                          "since), so its tokenizer may not be the one the classifier reads: put back that model, or "
                          "fine-tune again.")
    _, tokenizer = load_pretrained(started_from)
    if why := tokenizer_mismatch(model, tokenizer, "the run's tokenizer"):
        folder = transformers_folder(path)  # written with the tokenizer the run read (`save_pretrained`)
        own = (f"; its transformers folder {folder} holds the one it read, for the helpers of electra.tools.explore"
               if (folder / 'config.json').is_file() else '')
        raise ConfigError(f"{path}: the tokenizer of {started_from} is not the one this run was fine-tuned with: {why}. "
                          f"Fine-tune again from {started_from} with its own tokenizer (load_pretrained returns "
                          f"both){own}.")
    return tokenizer
