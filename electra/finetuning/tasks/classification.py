"""Sentence and sentence-pair classification and regression, the kind of every GLUE task and of the tasks from files
(classification, regression, multi-label): the official GLUE head on [CLS], `ClassifierLoss`, the test files of
the selected runs or of an ensemble of them (AX with MNLI's model).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from torch import nn

from electra.config.errors import ConfigError, RunWarning
from electra.config.finetune import FinetuneConfig
from electra.data.tokenizer import pad_token_id
from electra.finetuning.classifier import ClassifierLoss, ElectraClassifier
from electra.finetuning.learner import device_and_autocast, predict_outputs
from electra.finetuning.loading import load_run
from electra.finetuning.tasks.base import FinetuningTask, TaskData, TaskInfo, TestJob, training_subset
from electra.finetuning.tasks.encoding import encode_cached, make_loader
from electra.finetuning.tasks.files import SENTENCE_KIND_METRICS, FileKind, file_task, register_file_kind, write_file_predictions
from electra.finetuning.tasks.glue.submission import write_predictions
from electra.finetuning.tasks.metrics import predictions, scores_text, task_metrics
from electra.finetuning.tasks.sources import Examples, TaskSource, double_unordered, drop_empty

__all__ = ['ClassificationTask']


class ClassificationTask(FinetuningTask):
    "A GLUE task, or a classification, regression or multi-label task from files: its examples come from `source`."
    kind = 'classification'
    type_one = property(lambda self: 'segment B is token type 1' if self.info.hf_text[1] else None)

    def __init__(self, info: TaskInfo, source: TaskSource):
        super().__init__(info)
        self.source, self.spec = source, getattr(source, 'spec', None)  # a task file's spec, or None (GLUE)

    def data_source(self) -> str:
        "The task file; for a GLUE task the folder its source reads (the demo's written one included), or 'hub'."
        if self.spec is not None: return str(self.spec.path)
        root = getattr(self.source, 'root', None)
        return 'hub' if root is None else str(Path(root).resolve())

    def data_files(self) -> dict[str, list[Path]]:
        return {split: self.source.files(self.info, split) for split in ('train', *self.dev_splits)}

    def test_data_files(self) -> list[Path]:
        if not all(self.source.has(self.info, split) for split, _ in self.info.test_files): return []
        return [f for split, _ in self.info.test_files for f in self.source.files(self.info, split)]

    def _train_examples(self, task_cfg: FinetuneConfig, doubled: bool) -> Examples:
        ex = self.source.load(self.info, 'train')
        if task_cfg.drop_empty: ex = self._dropped_said(ex)
        if (keep := training_subset(len(ex), task_cfg.max_train_samples, self.name)) is not None: ex = ex.take(keep)
        return double_unordered(ex) if doubled else ex

    def _dropped_said(self, ex: Examples) -> Examples:
        """`drop_empty` of the training set, the rows it leaves out said in one warning (their file, their count and the
        key that keeps them), as the GLUE reader says the lines it skips: a task file's empty cells were left out
        without a word, and its dev rows of an empty text are scored all the same. None left is refused."""
        kept = drop_empty(ex)
        if len(kept) == len(ex): return ex
        files, name = ', '.join(map(str, self.source.files(self.info, 'train'))), self.name
        alone = f"(task_overrides: {{{name}: {{drop_empty: false}}}} for {name} alone)"
        if not len(kept):
            raise ConfigError(f"{files}: every one of its {len(ex)} training rows has an empty or blank text, so "
                              f"drop_empty (true) leaves nothing to train on; fill in the texts, or keep the rows with "
                              f"--drop_empty false {alone}.")
        warnings.warn(f"{files}: {len(ex) - len(kept)} of its {len(ex)} training rows have an empty or blank text and "
                      f"are left out (drop_empty: true, as the replication drops QQP's); --drop_empty false keeps them "
                      f"{alone}.", RunWarning, stacklevel=2)
        return kept

    def encoded(self, task: TaskInfo, split: str, task_cfg: FinetuneConfig, tokenizer, cache_dir, examples=None):
        "A split encoded (cached under `<cache_dir>/glue_tokens`)."
        ex = self.source.load(task, split) if examples is None else examples
        return encode_cached(ex, tokenizer, task_cfg.max_length, Path(cache_dir) / 'glue_tokens', f'{task.name}-{split}')

    def prepare(self, task_cfg, tokenizer, cache_dir, doubled) -> TaskData:
        """Read, filter, double (when `doubled`) and encode the training set, and encode the dev splits (cached). The
        test files to predict are read too, so that a malformed one (a ragged row, an index twice) stops the job
        before the runs rather than after them; each split's text is kept for the [UNK] check."""
        tests = {s: self.source.load(self.info, s) for s, _ in self.info.test_files
                 if task_cfg.predict and self.source.has(self.info, s)}
        ex = self._train_examples(task_cfg, doubled)
        devs = {s: self.source.load(self.info, s) for s in self.dev_splits}
        train = self.encoded(self.info, 'train', task_cfg, tokenizer, cache_dir, ex)
        dev = {s: self.encoded(self.info, s, task_cfg, tokenizer, cache_dir, e) for s, e in devs.items()}
        texts = {s: (', '.join(map(str, self.source.files(self.info, s))), e.text_a + (e.text_b or []))
                 for s, e in {'train': ex, **devs, **tests}.items()}
        return TaskData(self, train, dev, texts)

    def new_model(self, body: nn.Module, task_cfg: FinetuneConfig) -> ElectraClassifier:
        scale = task_cfg.stsb_scale if self.info.reads_stsb_scale else self.info.target_scale or 1.0
        return ElectraClassifier(body, self.info.n_outputs, task_cfg.dropout, scale)

    def head(self, model: ElectraClassifier) -> dict:
        return {'n_outputs': model.n_outputs, 'dropout': model.dropout.p, 'target_scale': model.target_scale}

    def loss_func(self, model, task_cfg):
        return ClassifierLoss(self.info.is_regression, model.target_scale, self.info.multilabel, task_cfg.loss_reduction)

    def loader(self, enc, task_cfg, pad_id, train, seed=0, shard=None, pin=False):
        if train: return make_loader(enc, task_cfg.batch_size, True, pad_id, seed, task_cfg.num_workers, pin,
                                     task_cfg.length_bucketing, shard, task_cfg.length_buckets)  # the global batch
        return make_loader(enc, task_cfg.eval_batch_size, False, pad_id, 0, task_cfg.num_workers, pin, shard=shard,
                           buckets=task_cfg.length_buckets)

    def evaluate(self, model, data, dev_dls, autocast) -> dict[str, float]:
        preds = {s: predictions(self.info, predict_outputs(model, dl, autocast)) for s, dl in dev_dls.items()}
        return task_metrics(self.info, preds, {s: e.label for s, e in data.dev.items()})

    def write_predictions(self, job: TestJob, tasks: dict[str, FinetuningTask]) -> list[Path]:
        """The test files of this task and of the tasks predicted with its model, from the picked runs' averaged
        outputs; with more than one run, the ensemble's dev metrics are logged too."""
        cfg, task_cfg = job.cfg, job.cfg.for_task(self.name)
        targets = [(t, split, stem) for t in tasks.values() if isinstance(t, ClassificationTask)
                   and (t is self or t.predicted_by == self.name) for split, stem in t.info.test_files]
        encoded = {(t.name, split): t.encoded(t.info, split, task_cfg, job.tokenizer, cfg.cache_dir) for t, split, _ in targets}
        if len(job.picked) > 1:
            encoded |= {(self.name, s): self.encoded(self.info, s, task_cfg, job.tokenizer, cfg.cache_dir)
                        for s in self.dev_splits}
        sums = _averaged_outputs(cfg, job, encoded, task_cfg)
        runs = job.runs_text(self.score_metric)
        if len(job.picked) > 1:
            scores = task_metrics(self.info, {s: predictions(self.info, sums[(self.name, s)]) for s in self.dev_splits},
                                  {s: encoded[(self.name, s)].label for s in self.dev_splits})
            runs += f"; ensemble dev {scores_text(scores)}"
        written = []
        for t, split, stem in targets:
            enc, outs = encoded[(t.name, split)], sums[(t.name, split)]
            _check_finite(outs, f'{stem}.tsv', runs, t.name, split, Path(cfg.output_dir) / cfg.group / 'results.csv')
            written.append(t._write_test_file(job.file(f'{stem}.tsv'), split, enc, predictions(t.info, outs)))
            job.say(f'{stem}.tsv: {len(enc)} predictions from {self.name} {runs}')
        return written

    def _write_test_file(self, path: Path, split: str, enc, preds: np.ndarray) -> Path:
        "The GLUE site's format, or `id<TAB>prediction` for a task from files."
        if hasattr(self.source, 'ids'):
            return write_file_predictions(path, self.info, self.source.ids(split), enc.idx, preds)
        return write_predictions(path, self.info, enc.idx, preds)


def _averaged_outputs(cfg: FinetuneConfig, job: TestJob, encoded: dict, task_cfg: FinetuneConfig) -> dict:
    "Every encoded split's outputs averaged over the picked runs (one model in memory at a time)."
    device, autocast = device_and_autocast(cfg.device, cfg.precision)
    pad_id, sums = pad_token_id(job.tokenizer), {}
    for row in job.picked.to_dict('records'):
        model = load_run(row, device)  # refused when the file is not that run's (`loading.read_run`)
        for key, enc in encoded.items():
            loader = make_loader(enc, task_cfg.eval_batch_size, False, pad_id, pin_memory=device.type == 'cuda')
            sums[key] = sums.get(key, 0) + predict_outputs(model, loader, autocast) / len(job.picked)
        del model
    return sums


def _check_finite(outs: np.ndarray, file: str, runs: str, task: str, split: str, table: Path) -> None:
    "argmax of NaN logits is a valid-looking label: never let one reach a submission file."
    bad = int((~np.isfinite(outs)).reshape(len(outs), -1).any(1).sum()) if len(outs) else 0
    if bad:
        raise ConfigError(f"{file}: {runs} predict NaN or infinite outputs for {bad} of {len(outs)} {task} {split} "
                          f"examples; no file written. Delete those runs' rows from {table} and run the task again.")


register_file_kind(tuple(SENTENCE_KIND_METRICS), FileKind(read_spec=None, make=lambda spec: ClassificationTask(*file_task(spec))))
