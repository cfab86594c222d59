"""Token tagging (NER, chunking, POS) as a task of the sweep, described by a task file:

    name: my_ner                  # default: the YAML file's stem
    kind: tagging
    train: ner/train.txt          # CoNLL-style (word ... tag per line) or JSONL {"tokens": [...], "tags": [...]}
    dev: ner/dev.txt              # paths relative to this file
    test: ner/test.txt            # optional; may have no tags (one word per line, or records without "tags")
    scheme: auto                  # IOB2, IOBES, IOB1 (never guessed), plain (POS: no entities), or auto
    metrics: [f1, precision, recall, accuracy]   # the first is the score; plain: accuracy
    strict: false                 # seqeval's strict mode for the entity scores (default: conlleval's rules)
    stride: 32                    # word pieces of context shared by the windows of a sentence too long for one
    max_length: 256               # and any per-task hyperparameter of the job (epochs, lr, ...)
    loss_reduction: sum           # over the batch's windows, as official; 'mean' over windows; 'token' over words

As the official tagging task (google-research/electra, finetune/tagging/tagging_tasks.py): labels are the training
file's tags, sorted; each word's label sits on its first word piece; the head is a dense layer on every position,
without dropout; the official chunking task takes max_seq_length 256 (configure_finetuning.py), the default here.
Entity scores are seqeval's. Predictions are written in the input's format (a column or a `pred_tags` field more).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar
from pathlib import Path

import numpy as np

from electra.config.errors import ConfigError
from electra.config.fields import field
from electra.config.values import CheckedConfig
from electra.data.tokenizer import pad_token_id
from electra.finetuning.learner import device_and_autocast
from electra.finetuning.loading import load_run
from electra.finetuning.tasks.base import FinetuningTask, TaskData, TaskInfo, TestJob, training_subset
from electra.finetuning.tasks.files import FileKind, data_file, register_file_kind, task_hparams, task_settings
from electra.finetuning.tasks.metrics import check_metrics, fitting, metric_names, scores_text
from electra.finetuning.tasks.tagging.data import SCHEMES, TaggedFile, entity_types, read_tagging_files
from electra.finetuning.tasks.tagging.encoding import (IGNORE_INDEX, EncodedTagging, encode_tagging, make_tagging_loader,
                                                      word_pieces, word_predictions)
from electra.finetuning.tasks.tagging.metrics import tagging_metrics, write_predictions
from electra.finetuning.tasks.tagging.model import ElectraTagger, TaggingLoss, one_token_type, predict_windows

__all__ = ['TaggingSpec', 'TaggingOptions', 'read_tagging_spec', 'TaggingSplit', 'TaggingTask']

KEYS = ('name', 'kind', 'train', 'dev', 'test', 'scheme', 'metrics', 'strict', 'stride')
METRICS = tuple(fitting('tagging'))  # the default: every metric of the table for tagging (the first is the score)
DEFAULTS = {'max_length': 256, 'dropout': 0.0}  # the official chunking length; the official head has no dropout


@dataclass
class TaggingOptions(CheckedConfig):
    "A tagging task file's own settings, each with its domain, checked as the job's keys."
    strict: bool = field(False, "seqeval's strict mode for the entity scores (default: conlleval's rules)")
    stride: int = field(32, 'word pieces of context shared by the windows of a sentence too long for one', ge=0,
                        zero='the windows share none')


@dataclass(frozen=True)
class TaggingSpec:
    "A tagging task as its YAML file describes it (paths resolved)."
    path: Path
    name: str
    kind: str
    files: dict[str, Path]
    scheme: str
    metrics: tuple[str, ...]
    strict: bool
    stride: int
    hparams: dict                # the task file's own hyperparameters (`FinetuneConfig.for_task`)
    metrics_named: bool = False  # named in the file (else the default: entity scores where the data have entities)
    defaults: ClassVar[dict] = DEFAULTS  # the kind's hyperparameters where nobody sets them


def _fail(path, msg: str):
    raise ConfigError(f"{path}: {msg}")


def _metrics(path: Path, raw: dict) -> tuple[str, ...]:
    "The metrics the file names (checked against the table of tasks/metrics.py), or the default of its scheme."
    if not raw.get('metrics'): return ('accuracy',) if raw.get('scheme') == 'plain' else METRICS
    metrics = metric_names(raw['metrics'], path)
    check_metrics(metrics, 'tagging', path, 0 if raw.get('scheme') == 'plain' else None)  # plain: no entity types
    return metrics


def read_tagging_spec(path: Path, raw: dict) -> TaggingSpec:
    "The tagging task a YAML file describes (`raw`: its mapping), checked: keys, scheme, metrics, files present."
    if 'loss' in raw: _fail(path, "loss: now the job's per-task key loss_reduction: sum (official), mean or token.")
    hparams = task_hparams(path, raw)
    unknown = sorted(set(raw) - set(KEYS))
    if unknown: _fail(path, f"unknown key(s) {', '.join(unknown)}; a tagging task file has {', '.join(KEYS)} and per-task hyperparameters.")
    for key in ('train', 'dev'):
        if not raw.get(key): _fail(path, f"'{key}' is missing: a tagging task names its train and dev files.")
    scheme = raw.get('scheme', 'auto')
    if scheme not in (*SCHEMES, 'auto'): _fail(path, f"scheme: {scheme!r} is not one of {', '.join(SCHEMES)} or auto.")
    options = task_settings(TaggingOptions, path, {k: raw[k] for k in ('strict', 'stride') if k in raw})
    files = {s: data_file(path, raw, s) for s in ('train', 'dev', 'test') if raw.get(s)}
    for split, f in files.items():
        if not f.is_file(): _fail(path, f"{split}: {f} not found.")
    return TaggingSpec(path.resolve(), raw['name'], 'tagging', files, scheme, _metrics(path, raw),
                       options.strict, options.stride, hparams,
                       bool(raw.get('metrics')))


@dataclass
class TaggingSplit:
    "A file of the task and its windows; `len` counts windows (the sweep's training steps are by windows)."
    file: TaggedFile
    enc: EncodedTagging

    def __len__(self) -> int: return len(self.enc)


def _places(f: TaggedFile):
    "Where word k of sentence i of `f` is, for messages (`encoding.word_pieces`)."
    return lambda i, k: f.where(f.sentences[i], k)


class TaggingTask(FinetuningTask):
    "A token tagging task from files; its files are read and checked when it is made (scheme, tags known in training)."
    kind = 'tagging'
    type_one = 'every token of a window is token type 1, as the official segment_ids'
    pad_target = IGNORE_INDEX  # labels of the positions that even out stacked runs' batches: not scored

    def __init__(self, spec: TaggingSpec):
        self.spec = spec
        self.data = read_tagging_files(spec.files['train'], spec.scheme, **{s: p for s, p in spec.files.items() if s != 'train'})
        # the entity types, known once the scheme is (a plain scheme's tags are no entities, whatever their prefixes)
        types = entity_types([self.data.labels]) if self.data.scheme != 'plain' else []
        metrics = spec.metrics if spec.metrics_named or types else ('accuracy',)
        check_metrics(metrics, 'tagging', spec.path, len(types), types)
        super().__init__(TaskInfo(spec.name, '', tuple(self.data.labels), metrics, metrics[0], ('tokens', None),
                                  test_files=(('test', spec.name),) if 'test' in spec.files else ()))

    def split(self, name: str, tokenizer, max_length: int, keep: int = 0) -> TaggingSplit:
        "A file's windows (of `keep` of its sentences, a fixed random subset, where given); a test file gets no labels."
        f = self.data.splits[name]
        if (chosen := training_subset(len(f.sentences), keep, self.name, 'sentences')) is not None:
            f = dataclasses.replace(f, sentences=[f.sentences[i] for i in chosen])
        tags = [s.tags for s in f.sentences] if f.labeled else None
        return TaggingSplit(f, encode_tagging([s.words for s in f.sentences], tags, tokenizer, self.data.labels,
                                              max_length, self.spec.stride, _places(f)))

    def prepare(self, task_cfg, tokenizer, cache_dir, doubled) -> TaskData:
        "The training sentences (a fixed subset with `max_train_samples`, chosen as classification's) and dev's."
        train = self.split('train', tokenizer, task_cfg.max_length, task_cfg.max_train_samples)
        dev = self.split('dev', tokenizer, task_cfg.max_length)
        for name, f in self.data.splits.items():  # the test file is encoded after the runs: its words are checked now
            if name not in ('train', 'dev'): word_pieces([s.words for s in f.sentences], tokenizer, _places(f))
        read = ['dev', *(['test'] if task_cfg.predict and 'test' in self.data.splits else [])]
        files = {'train': train.file, **{s: self.data.splits[s] for s in read}}
        return TaskData(self, train, {'dev': dev},
                        {s: (f.path, [' '.join(x.words) for x in f.sentences]) for s, f in files.items()})

    def count(self, enc: TaggingSplit, split: str) -> str:
        n, what = len(enc.file.sentences), 'training' if split == 'train' else split
        return f'{n} {what} sentences' + (f' ({len(enc)} windows)' if len(enc) != n else '')

    def new_model(self, body, task_cfg):
        return ElectraTagger(body, len(self.data.labels), task_cfg.dropout)

    def head(self, model) -> dict: return {'n_labels': model.n_labels, 'dropout': model.dropout.p}

    def saved_state(self, model) -> dict: return one_token_type(model.state_dict())

    def loss_func(self, model, task_cfg):
        return TaggingLoss(task_cfg.loss_reduction)

    def loader(self, split, task_cfg, pad_id, train, seed=0, shard=None, pin=False):
        bs = task_cfg.batch_size if train else task_cfg.eval_batch_size  # `batch_size`: the global batch under torchrun
        return make_tagging_loader(split.enc, bs, train, pad_id, seed, num_workers=task_cfg.num_workers, pin_memory=pin,
                                   bucketing=task_cfg.length_bucketing, shard=shard, buckets=task_cfg.length_buckets)

    def scores(self, split: TaggingSplit, pred_tags: list) -> dict[str, float]:
        "The metrics of predicted tags against a labelled file's."
        gold = [s.tags for s in split.file.sentences]
        return tagging_metrics(gold, pred_tags, self.data.scheme, self.spec.strict)

    def evaluate(self, model, data, dev_dls, autocast) -> dict[str, float]:
        split = data.dev['dev']
        return self.scores(split, word_predictions(split.enc, predict_windows(model, dev_dls['dev'], autocast), self.data.labels))

    def write_predictions(self, job: TestJob, tasks: dict) -> list[Path]:
        """The picked runs' tags for the dev file and the test file (when given), in the input's format, as
        `<out>/<name>/<split><suffix>`; several runs (`ensemble_k`) average their logits per window."""
        task_cfg = job.cfg.for_task(self.name)
        splits = {s: self.split(s, job.tokenizer, task_cfg.max_length) for s in ('dev', 'test') if s in self.data.splits}
        logits = _averaged_window_logits(job, splits, self, task_cfg)
        runs = job.runs_text(self.score_metric)
        written = []
        for s, split in splits.items():
            tags = word_predictions(split.enc, logits[s], self.data.labels)
            path = job.file(self.name, f'{s}{Path(split.file.path).suffix}')
            written.append(write_predictions(split.file, tags, path))
            scored = ''
            if split.file.labeled:
                scored = ': ' + scores_text(self.scores(split, tags), self.metrics)
            job.say(f'{path.relative_to(job.out)}: tags of {len(split.file.sentences)} sentences from {runs}{scored}')
        return written


def _averaged_window_logits(job: TestJob, splits: dict[str, TaggingSplit], task: TaggingTask, task_cfg) -> dict:
    "Each split's per-window logits [L_i, C] averaged over the picked runs (one model in memory at a time)."
    device, autocast = device_and_autocast(job.cfg.device, job.cfg.precision)
    pad_id, sums = pad_token_id(job.tokenizer), {}
    for row in job.picked.to_dict('records'):
        model = load_run(row, device)  # refused when the file is not that run's (`loading.read_run`)
        for s, split in splits.items():
            outs = predict_windows(model, task.loader(split, task_cfg, pad_id, False, pin=device.type == 'cuda'), autocast)
            prev = sums.get(s, [0.0] * len(outs))
            sums[s] = [p + o / len(job.picked) for p, o in zip(prev, outs)]
        del model
    for s, outs in sums.items():
        bad = sum(not np.isfinite(o).all() for o in outs)
        if bad: raise ConfigError(f"{task.name} {s}: the picked runs predict NaN or infinite logits in {bad} windows; no "
                                  f"file written. Delete those runs' rows from the results table and run the task again.")
    return sums


register_file_kind(('tagging',), FileKind(read_tagging_spec, TaggingTask))
