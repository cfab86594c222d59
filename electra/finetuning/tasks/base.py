"""What the sweep needs of a task, whatever its kind: one class per kind (`ClassificationTask` for GLUE and the
tasks from files, `TaggingTask`, `QATask`) answers how the task reads and encodes its splits, which model and loss
it trains, how its loaders batch, how its dev sets are scored and how its predictions are written. The sweep, the
results table, the summary, the run selection and the resume are the same for every kind.

A task's description (`TaskInfo`: name, metrics, score metric, dev splits, test files) is the part the results table
and the summary read; a checkpoint names its kind and its head's settings, so `load_finetuned` rebuilds any kind.
"""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from electra.config.errors import RunWarning
from electra.config.finetune import FinetuneConfig
from electra.runtime.files import path_inside

__all__ = ['TaskInfo', 'TaskData', 'FinetuningTask', 'TestJob', 'training_subset']


@dataclass(frozen=True)
class TaskInfo:
    """One task of any kind (GLUE, a task from files, token tagging, QA): names, label strings (by class id),
    metrics, splits and, for GLUE, file layouts."""
    name: str                                  # its name; a GLUE task's is also its directory in the download layout
    hf_config: str                             # config name in nyu-mll/glue
    labels: tuple[str, ...]                    # GLUE label strings by class id; () for regression (STS-B)
    metrics: tuple[str, ...]                   # reported on each dev split (MNLI: matched, then mismatched as <metric>_mm)
    score_metric: str                          # the paper's metric, used for selection and the GLUE score
    hf_text: tuple[str, str | None]            # hub columns of segments A and B
    tsv: dict = field(default_factory=dict)    # GLUE's: split -> where it lives in the download layout (`TsvLayout`)
    symmetric: bool = False                    # segments are unordered: `double_unordered` applies by default
    dev_splits: tuple[str, ...] = ('dev',)
    test_files: tuple[tuple[str, str], ...] = ()  # (test split, submission file stem)
    predicted_by: str = ''                     # test-only task predicted with another task's model (AX)
    target_scale: float | None = None          # regression: targets learned divided by this (None: `stsb_scale`)
    multilabel: bool = False                   # any number of `labels` per example (a task from files)
    names: tuple[str, ...] = ()                # what a person reads of each class id, where `labels` are codes (GLUE's)

    @property
    def is_regression(self) -> bool: return not self.labels

    @property
    def reads_stsb_scale(self) -> bool:
        "Whether the job's `stsb_scale` scales its targets: a regression task without a `target_scale` of its own."
        return self.is_regression and self.target_scale is None

    @property
    def label_names(self) -> tuple[str, ...]:
        "The name of each class id, as a fine-tuned model's `id2label` gives it: `names`, else the labels themselves."
        return self.names or self.labels

    @property
    def n_outputs(self) -> int: return len(self.labels) or 1

    @property
    def splits(self) -> tuple[str, ...]:
        return (() if self.predicted_by else ('train',) + self.dev_splits) + tuple(s for s, _ in self.test_files)


@dataclass
class TaskData:
    """A task's encoded training set and dev splits (the encodings are the task kind's own), and the text of each split
    it reads (training, dev, the test files it predicts) as read, by split: its file and its texts, which the sweep
    checks for [UNK]s (`encoding.unknown_share_warning`)."""
    task: 'FinetuningTask'
    train: Any
    dev: dict[str, Any]
    texts: dict[str, tuple[str, Sequence[str]]] = field(default_factory=dict)


@dataclass
class TestJob:
    "What `FinetuningTask.write_predictions` is given: the job's config, the picked runs, where files go, a logger."
    cfg: FinetuneConfig
    picked: Any                     # the rows of the results table chosen by `select_runs`
    tokenizer: Any
    out: Path                       # <test_output_dir>/<group>
    say: Callable[[str], None]

    def file(self, *names: str) -> Path:
        "`<out>/<names>`, where a test file goes: checked to be inside `out` (a task's name is part of it)."
        return path_inside(self.out, *names, key='test_output_dir')

    def runs_text(self, score_metric: str) -> str:
        "The picked runs for the log: 'run 3 (seed 3, dev f1 76.35), ...' (a run of an undefined score is never picked)."
        return ', '.join(f"run {int(r['run'])} (seed {int(r['seed'])}, dev {score_metric} {r['score']:.2f})"
                         for r in self.picked.to_dict('records'))


class FinetuningTask:
    """One task of a job, as the sweep drives it. A subclass sets `kind` and `n_inp` (the model's inputs at the
    front of each training batch; the rest are the loss's targets) and implements the methods below."""
    kind = ''
    n_inp = 3
    pad_target = 0  # a token-level target's value at the positions that even out stacked runs' batches (tagging: ignored)
    spec = None     # a task file's checked spec (its `files` by split, its settings); None for a GLUE task
    type_one: str | None = None  # where its inputs hold token type 1, which needs a model of two token types

    def __init__(self, info: TaskInfo): self.info = info

    # the description, as the results table and the summary read it
    name = property(lambda self: self.info.name)
    metrics = property(lambda self: self.info.metrics)
    score_metric = property(lambda self: self.info.score_metric)
    dev_splits = property(lambda self: self.info.dev_splits)
    predicted_by = property(lambda self: self.info.predicted_by)

    def settings(self) -> dict:
        """The task file's settings as read (not its path or formatting; its data files count by their bytes,
        `data_files`; its hyperparameters as the run's): part of what a finished run's row is matched on. {} for GLUE."""
        if self.spec is None: return {}
        return {k: v for k, v in dataclasses.asdict(self.spec).items() if k not in ('path', 'files', 'hparams')}

    def data_source(self) -> str:
        "What a run reads its examples from, recorded in its checkpoint (the Explore notebook reads them back): the task file."
        return str(self.spec.path)

    def data_files(self) -> dict[str, list[Path]]:
        "The files a run reads, by split (training and dev): what its result depends on, by their bytes."
        return {split: [self.spec.files[split]] for split in ('train', *self.dev_splits)}

    def test_data_files(self) -> list[Path]:
        "The test files its predictions are made from (a written test file depends on their bytes); [] if not there."
        return [self.spec.files[split] for split, _ in self.info.test_files]

    def prepare(self, task_cfg: FinetuneConfig, tokenizer, cache_dir: str | Path, doubled: bool) -> TaskData:
        "The encoded training set and dev splits."
        raise NotImplementedError

    def count(self, enc, split: str) -> str:
        "What an encoded split holds, for the log: '400 training examples', '150 dev'."
        return f'{len(enc)} training examples' if split == 'train' else f'{len(enc)} {split}'

    def new_model(self, body: nn.Module, task_cfg: FinetuneConfig) -> nn.Module:
        "A new model on `body` (an HF ElectraModel), its head named `classifier` for the layer-wise rates."
        raise NotImplementedError

    def head(self, model: nn.Module) -> dict:
        "The head's settings, saved in the checkpoint so that `load_finetuned` rebuilds the model."
        raise NotImplementedError

    def saved_state(self, model: nn.Module) -> dict:
        "The weights a trained run is saved with (`load_finetuned` reads them back): by default the model's own."
        return model.state_dict()

    def loss_func(self, model: nn.Module, task_cfg: FinetuneConfig):
        "The loss: called as loss(outputs, *targets[, weight]); has `local_sum`, `local_count`."
        raise NotImplementedError

    def loader(self, enc, task_cfg: FinetuneConfig, pad_id: int, train: bool, seed: int = 0,
               shard: tuple[int, int] | None = None, pin: bool = False) -> torch.utils.data.DataLoader:
        "Training (shuffled, weights under torchrun) or evaluation batches of an encoded split."
        raise NotImplementedError

    def evaluate(self, model: nn.Module, data: TaskData, dev_dls: dict, autocast) -> dict[str, float]:
        "The dev metrics (the keys of `dev_metric_names(self)`, more allowed) of `model` now."
        raise NotImplementedError

    def write_predictions(self, job: TestJob, tasks: dict[str, 'FinetuningTask']) -> list[Path]:
        "The prediction files of this task's picked runs (`tasks`: the job's, for tasks predicted with this one's model)."
        raise NotImplementedError


def training_subset(n: int, max_train_samples: int, task: str, what: str = 'examples') -> np.ndarray | None:
    """The indices (sorted) of the fixed random subset of `n` training items (`what`: examples, questions, sentences)
    that `max_train_samples` keeps, the same for every run, re-run and task kind (seed 0); None where it keeps them
    all. One that asks for more than there are is said: its runs record the value asked, not the `n` used."""
    if not max_train_samples: return None
    if max_train_samples > n:
        warnings.warn(f"{task}: max_train_samples {max_train_samples} is more than its {n} training {what}: all {n} are "
                      f"used, as with max_train_samples 0; its runs record {max_train_samples}, so another value above "
                      f"{n} trains them again.", RunWarning, stacklevel=3)
    if max_train_samples >= n: return None
    return np.sort(np.random.default_rng(0).choice(n, max_train_samples, replace=False))
