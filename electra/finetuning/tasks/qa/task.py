"""Extractive question answering (SQuAD 1.1 / 2.0, MRQA) as a task of the sweep, described by a task file:

    name: demo_squad          # default: the YAML file's stem
    kind: squad               # squad: the official SQuAD JSON (1.1, or 2.0 by its `version`, as read_squad tells);
                              # mrqa: MRQA JSONL (.jsonl or .jsonl.gz)
    train: squad/train.json   # paths relative to this file
    dev: squad/dev.json
    test: squad/test.json     # optional; answers not needed
    # the official QA options (google-research/electra, configure_finetuning.py), with their defaults:
    max_query_length: 64      # question tokens kept
    doc_stride: 128           # context tokens between the starts of consecutive windows
    n_best_size: 20           # candidates per question in nbest_predictions.json (and starts x ends without joint)
    max_answer_length: 30     # tokens of an answer at most
    answerable_classifier: true         # the unanswerable logit (official: on for every QA task, 1.1 and MRQA too)
    answerable_uses_start_logits: true
    answerable_weight: 0.5    # its loss's weight
    joint_prediction: true    # the end predicted given the start; a beam at inference
    beam_size: 20
    na_threshold: -2.75       # SQuAD 2.0: null odds above it answer "" (official qa_na_threshold)
    on_bad_answer: error      # a training answer not found at its answer_start: error, or skip the question
                              # (the official reader skips it); dev answers are scored by text only. Skipped or
                              # kept, one line counts them; more than 10% of a file's questions stops the job
    max_length: 512           # and any per-task hyperparameter of the job (epochs, lr, batch_size, ...); max_length
    epochs: 2                 #   is QA's max_seq_length; these three default to the official QA values
    eval_batch_size: 32

A question becomes one or more windows of its context (`features.featurize`); a run trains on every window of the
training questions (those without the answer learn [CLS], as officially) and counts its steps by windows. The dev
metrics are the official evaluation's (`metrics`), the test files the official ones: `<test_output_dir>/<group>/
<name>/<split>/predictions.json`, `nbest_predictions.json` and, for SQuAD 2.0, `null_odds.json`. The job's
`dropout` does not apply: the official QA head has none (the body keeps its own dropout). The SQuAD version is the dev
file's; a training file (or a test file that states its version) of the other version stops the job.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar
from pathlib import Path

import numpy as np
import torch

from electra.config.errors import ConfigError
from electra.config.fields import choice_field, field
from electra.config.finetune import qa_no_ensemble
from electra.config.values import CheckedConfig, config_to_dict, value_sources
from electra.config.yaml_reader import yaml_key_lines
from electra.data.tokenizer import pad_token_id
from electra.finetuning.learner import device_and_autocast, predict_examples
from electra.finetuning.loading import load_run
from electra.finetuning.tasks.base import FinetuningTask, TaskData, TaskInfo, TestJob, training_subset
from electra.finetuning.tasks.encoding import LengthBatchSampler, LoaderIndices, ShardedBatchSampler, padded_length
from electra.finetuning.tasks.files import FileKind, data_file, register_file_kind, task_hparams, task_settings
from electra.finetuning.tasks.metrics import scores_text
from electra.finetuning.tasks.qa.data import gold_answers, qa_format, read_mrqa, read_squad, squad_json, squad_version
from electra.finetuning.tasks.qa.features import Window, collate_windows, featurize_cached, question_ids
from electra.finetuning.tasks.qa.heads import ElectraQA, QALoss, decode, window_rows
from electra.finetuning.tasks.qa.metrics import (
    QA_NA_THRESHOLD,
    no_answer_f1,
    null_thresholded,
    qa_metrics,
    write_nbest,
    write_null_odds,
    write_predictions as write_answers,
)
from electra.runtime.processes import is_main_process

__all__ = ['QASpec', 'QAOptions', 'read_qa_spec', 'QASplit', 'QATask', 'make_qa_loader', 'predict_rows', 'OPTIONS', 'DEFAULTS']

@dataclass
class QAOptions(CheckedConfig):
    "A QA task file's own options (official configure_finetuning.py), each with its domain, checked as the job's keys."
    max_query_length: int = field(64, 'question tokens kept', ge=1)
    doc_stride: int = field(128, 'context tokens between the starts of consecutive windows', ge=1)
    n_best_size: int = field(20, 'candidates per question in nbest_predictions.json', ge=1)
    max_answer_length: int = field(30, 'tokens of an answer at most', ge=1)
    answerable_classifier: bool = field(True, 'the unanswerable logit')
    answerable_uses_start_logits: bool = field(True, 'the unanswerable logit reads the start logits')
    answerable_weight: float = field(0.5, "the unanswerable logit's loss weight", ge=0)
    joint_prediction: bool = field(True, 'the end predicted given the start; a beam at inference')
    beam_size: int = field(20, 'starts and ends kept in the joint beam', ge=1)
    na_threshold: float = field(QA_NA_THRESHOLD, 'SQuAD 2.0: null odds above it answer ""', finite=True)
    on_bad_answer: str = choice_field('error', ['error', 'skip'], 'a training answer not found at its answer_start')


OPTIONS = config_to_dict(QAOptions())
KEYS = ('name', 'kind', 'train', 'dev', 'test', *OPTIONS)
# configure_finetuning.py: max_seq_length 512 and 2 epochs for QA, predict_batch_size 32 (the joint head's beam holds
# [batch, beam, length, 512] activations at evaluation: 2.7 GB in fp32 for a batch of 128 at 512 tokens)
DEFAULTS = {'max_length': 512, 'epochs': 2, 'eval_batch_size': 32}
KINDS = ('squad', 'mrqa')  # the official SQuAD JSON, MRQA JSON lines (plain or gzip): read by content, any file name


@dataclass(frozen=True)
class QASpec:
    "A QA task as its YAML file describes it (paths resolved; no data read)."
    path: Path
    name: str
    kind: str                   # 'squad' or 'mrqa'
    files: dict[str, Path]      # split -> file
    hparams: dict               # the task file's own hyperparameters (`FinetuneConfig.for_task`)
    defaults: ClassVar[dict] = DEFAULTS  # the kind's hyperparameters where nobody sets them
    max_query_length: int = 64
    doc_stride: int = 128
    n_best_size: int = 20
    max_answer_length: int = 30
    answerable_classifier: bool = True
    answerable_uses_start_logits: bool = True
    answerable_weight: float = 0.5
    joint_prediction: bool = True
    beam_size: int = 20
    na_threshold: float = QA_NA_THRESHOLD
    on_bad_answer: str = 'error'

    def options(self) -> dict:
        "The QA options, by name (what the results depend on besides the files and hyperparameters)."
        return {k: getattr(self, k) for k in OPTIONS}


def _fail(path, msg: str):
    raise ConfigError(f"{path}: {msg}")


def read_qa_spec(path: Path, raw: dict) -> QASpec:
    """The QA task a YAML file describes (`raw`: its mapping), checked: keys, kind, options, files present and of the
    kind's format. Cheap (no data is read): the job's config reads it whenever it needs a task's settings."""
    path = Path(path)
    hparams = task_hparams(path, raw)
    unknown = sorted(set(map(str, raw)) - set(KEYS))
    if unknown:
        _fail(path, f"unknown key(s) {', '.join(unknown)}; a QA task file has {', '.join(KEYS)} and per-task "
                    "hyperparameters (epochs, max_length, lr, ...).")
    kind = raw.get('kind')
    if kind not in KINDS: _fail(path, f"kind: {kind!r} is not squad or mrqa.")
    for key in ('train', 'dev'):
        if not raw.get(key): _fail(path, f"'{key}' is missing: a QA task names its train and dev files.")
    files = {}
    for split in ('train', 'dev', 'test'):
        if not raw.get(split): continue
        if not isinstance(raw[split], str): _fail(path, f"{split}: {raw[split]!r} is not a file name.")
        f = data_file(path, raw, split)
        if f.is_dir(): _fail(path, f"{split}: {f} is a folder, not a data file: give the file in it.")
        if not f.is_file(): _fail(path, f"{split}: {f} not found.")
        held = qa_format(f)
        if held not in (None, kind):
            _fail(path, f"{split}: {f.name} holds {'SQuAD JSON' if held == 'squad' else 'MRQA JSON lines'}, but kind is "
                        f"{kind}: set kind: {held}, or give a {kind} file.")
        files[split] = f
    options = config_to_dict(task_settings(QAOptions, path, {k: raw[k] for k in OPTIONS if k in raw}))
    return QASpec(path.resolve(), raw['name'], kind, files, hparams, **options)


def _squad_version(path: Path) -> tuple[bool, str]:
    "Whether a SQuAD file is 2.0 and what says so, as `read_squad` decides it (`data.squad_version`)."
    data = squad_json(path)
    articles = data.get('data') if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise ConfigError(f"{path}: top level: the field 'data' is missing or not a list. Give the official SQuAD JSON.")
    return squad_version(data, articles)


def _task_squad_version(spec: QASpec) -> bool:
    """Whether a SQuAD task is 2.0: its dev file's version, which its training file (and a test file that says its
    version) must share. The official code takes the version from the task's name (`squad`, `squadv1`) and stops on a
    training file of the other (qa_tasks.py `_add_examples`: a KeyError on `is_impossible`, an IndexError on the empty
    `answers` of an unanswerable question)."""
    dev = spec.files['dev']
    v2, how = _squad_version(dev)
    for split in ('train', 'test'):
        if split not in spec.files: continue
        other, other_how = _squad_version(spec.files[split])
        if other == v2 or not (split == 'train' or other_how): continue  # a test file without answers may not say
        why = (f"the test answers would be written as SQuAD {'2.0' if v2 else '1.1'}'s" if split == 'test' else
               'trained without unanswerable questions, the model would be scored on them' if v2 else
               'the unanswerable training questions would teach a null answer that SQuAD 1.1 never scores')
        raise ConfigError(f"{spec.path}: {split} {spec.files[split].name} is SQuAD {'2.0' if other else '1.1'} "
                          f"({other_how or 'no version, no is_impossible'}), but dev {dev.name} is SQuAD "
                          f"{'2.0' if v2 else '1.1'} ({how or 'no version, no is_impossible'}): {why}. Give '{split}' "
                          "and 'dev' files of one SQuAD version (train-v2.0.json with dev-v2.0.json, or train-v1.1.json "
                          "with dev-v1.1.json).")
    return v2


@dataclass
class QASplit:
    "A split's questions and their windows; `len` counts windows (a run's steps are counted by windows)."
    examples: list
    windows: list[Window]

    def __len__(self) -> int: return len(self.windows)


# -- batches

class _Collate:
    """Windows padded to the batch's longest. Training: (input_ids, attention_mask, token_type_ids, start_positions,
    start_positions, end_positions, is_impossible[, weight]): the model's 4 inputs (the joint head's end logits are
    those given the gold start) and the loss's targets; `weight` 0 for a stand-in row written -(i + 1)
    (`ShardedBatchSampler`). Evaluation: the 3 inputs only."""

    def __init__(self, windows: list[Window], pad_id: int, train: bool, weights: bool = False,
                 buckets: Sequence[int] = ()):
        self.windows, self.pad_id, self.train, self.weights, self.buckets = windows, pad_id, train, weights, buckets

    def __call__(self, pick: list[int]):
        pick = np.asarray(pick, dtype=np.int64)
        weight, pick = (pick >= 0).astype(np.float32), np.where(pick >= 0, pick, -pick - 1)
        windows = [self.windows[i] for i in pick]
        length = padded_length(max(len(w) for w in windows), self.buckets)  # the answer mask's -1000 covers padding
        ids, mask, types, start, end, impossible = collate_windows(windows, self.pad_id, length)
        if not self.train: return ids, mask, types
        batch = (ids, mask, types, start, start.clone(), end, impossible)
        return (*batch, torch.from_numpy(weight)) if self.weights else batch


def make_qa_loader(windows: list[Window], batch_size: int, train: bool, pad_id: int, seed: int = 0,
                   num_workers: int = 0, pin_memory: bool = False, bucketing: bool = False,
                   shard: tuple[int, int] | None = None, buckets: Sequence[int] = ()) -> torch.utils.data.DataLoader:
    """A loader of windows batched as GLUE's (`LengthBatchSampler`): training batches shuffled with `seed` (length
    bucketed with `bucketing`), with the targets; evaluation batches longest first, inputs only, their window order in
    `loader.batch_sampler`. `shard` (rank, size): this process's part of each batch in a torchrun job, training
    batches with the windows' weights. `buckets`: lengths a batch is padded up to (`padded_length`)."""
    sampler = LengthBatchSampler(np.array([len(w) for w in windows], dtype=np.int64), batch_size, train, seed,
                                 bucketing=bucketing)
    if shard is not None: sampler = ShardedBatchSampler(sampler, *shard)
    collate = _Collate(windows, pad_id, train, weights=shard is not None and train, buckets=buckets)
    return torch.utils.data.DataLoader(LoaderIndices(len(windows)), batch_sampler=sampler, collate_fn=collate,
                                       num_workers=num_workers, pin_memory=pin_memory)


def predict_rows(model: torch.nn.Module, loader, autocast: torch.dtype | None = None) -> list[dict]:
    """The head's outputs for every window of an evaluation loader (`make_qa_loader(train=False)`), one `window_rows`
    dict per window in window order, for `decode`; the model in eval mode, so a joint head gives its beam. Per-token
    outputs are cut to the window's own length (`predict_examples`: a torchrun job's processes share the batches)."""

    def rows(out, batch):
        got = window_rows(out)
        for row, n in zip(got, batch[1].sum(1).tolist()):
            for k in ('start_logits', 'end_logits'): row[k] = row[k][:n]
        return got
    return predict_examples(model, loader, rows, autocast)


# -- the task

class QATask(FinetuningTask):
    """A SQuAD 1.1 / 2.0 or MRQA task from files. The dev file's SQuAD version is read when the task is made, as the
    metrics depend on it; the questions are read by `prepare`."""
    kind = 'qa'
    type_one = 'the context is token type 1'
    n_inp = 4  # input_ids, attention_mask, token_type_ids, start_positions (see `_Collate`)

    def __init__(self, spec: QASpec):
        self.spec = spec
        self.v2 = spec.kind == 'squad' and _task_squad_version(spec)
        # The score is the official one at the official threshold: SQuAD 2.0's `exact` and `f1` answer "" where the
        # null odds exceed `na_threshold` (official qa_na_threshold, -2.75), as run_finetuning.py reports dev scores:
        # finetune/qa/qa_metrics.py `SpanBasedQAScorer._get_results` runs squad_official_eval.py, whose `set_opts`
        # passes `na_prob_thresh=config.qa_na_threshold` to `apply_no_ans_threshold`. `best_f1` / `best_exact` (the
        # threshold tuned on dev itself, `find_best_thresh`) are reported beside them, not used to select runs: they
        # would select on a threshold fitted to the very set they score.
        # no_answer_f1: the official score of answering "" everywhere (`metrics.no_answer_f1`), the baseline to beat
        metrics = ('f1', 'no_answer_f1', 'exact', 'best_f1', 'best_exact', 'HasAns_f1', 'NoAns_f1') if self.v2 \
            else ('f1', 'exact')
        super().__init__(TaskInfo(spec.name, '', ('answer',), metrics, 'f1', ('question', 'context'),
                                  test_files=(('test', spec.name),) if 'test' in spec.files else ()))

    @property
    def eval_kind(self) -> str:
        "The official evaluation: 'squad' (2.0), 'squadv1' or 'mrqa' (`metrics.qa_metrics`)."
        return 'mrqa' if self.spec.kind == 'mrqa' else 'squad' if self.v2 else 'squadv1'

    def read(self, split: str) -> list:
        """A split's questions: training answers checked (`on_bad_answer`), dev answers kept as they are (only their
        texts are scored), test read without answers."""
        path = self.spec.files[split]
        mode, labeled = {'train': (self.spec.on_bad_answer, True), 'dev': ('keep', True)}.get(split, ('keep', False))
        examples = read_squad(path, mode, labeled) if self.spec.kind == 'squad' else read_mrqa(path, mode, labeled)
        if not examples: raise ConfigError(f"{path}: no questions to {'train on' if split == 'train' else 'answer'}.")
        return examples

    def _windows(self, split: str, examples: list, tokenizer, task_cfg, cache_dir) -> list[Window]:
        line = yaml_key_lines(self.spec.path).get(('max_query_length',))
        places = {'max_length': value_sources(task_cfg)['max_length'],  # for a question that leaves no room
                  'max_query_length': f'{self.spec.path}: line {line}' if line else 'the default'}
        return featurize_cached(examples, tokenizer, Path(cache_dir) / 'qa_features', f'{self.name}-{split}',
                                task_cfg.max_length, self.spec.max_query_length, self.spec.doc_stride,
                                is_training=split == 'train', where=str(self.spec.files[split]), places=places)

    def split(self, name: str, tokenizer, task_cfg, cache_dir, examples: list | None = None) -> QASplit:
        "A split's questions (those read from its file unless given) and their windows."
        examples = self.read(name) if examples is None else examples
        return QASplit(examples, self._windows(name, examples, tokenizer, task_cfg, cache_dir))

    def prepare(self, task_cfg, tokenizer, cache_dir, doubled) -> TaskData:
        "The training questions (a fixed subset with `max_train_samples`), trained on window by window, and dev's."
        train = self.read('train')
        if (keep := training_subset(len(train), task_cfg.max_train_samples, self.name, 'questions')) is not None:
            train = [train[i] for i in keep]
        dev = self.split('dev', tokenizer, task_cfg, cache_dir)
        questions = {'train': train, 'dev': dev.examples} | (
            {'test': self.read('test')} if task_cfg.predict and 'test' in self.spec.files else {})
        # the test questions, featurized only after the runs, refused as train's and dev's are, before any run
        if 'test' in questions: question_ids(questions['test'], tokenizer, str(self.spec.files['test']))
        return TaskData(self, self.split('train', tokenizer, task_cfg, cache_dir, train), {'dev': dev},
                        {s: (str(self.spec.files[s]), [*(e.question for e in q), *dict.fromkeys(e.context for e in q)])
                         for s, q in questions.items()})

    def count(self, enc: QASplit, split: str) -> str:
        return f"{len(enc.examples)} {'training' if split == 'train' else split} questions ({len(enc)} windows)"

    def _no_ensemble(self, k: int):
        raise qa_no_ensemble(k, self.name)

    def new_model(self, body, task_cfg):
        s = self.spec
        return ElectraQA(body, joint_prediction=s.joint_prediction, beam_size=s.beam_size,
                         answerable_classifier=s.answerable_classifier,
                         answerable_uses_start_logits=s.answerable_uses_start_logits)

    def head(self, model) -> dict:
        c = model.classifier
        return {'joint_prediction': c.joint, 'beam_size': c.beam_size, 'answerable_classifier': c.answerable_classifier,
                'answerable_uses_start_logits': c.uses_start}

    def loss_func(self, model, task_cfg):
        return QALoss(self.spec.answerable_classifier, self.spec.answerable_weight, task_cfg.loss_reduction)

    def loader(self, enc, task_cfg, pad_id, train, seed=0, shard=None, pin=False):
        windows = enc.windows if isinstance(enc, QASplit) else enc
        bs = task_cfg.batch_size if train else task_cfg.eval_batch_size  # `batch_size`: the global batch under torchrun
        return make_qa_loader(windows, bs, train, pad_id, seed, task_cfg.num_workers, pin,
                              task_cfg.length_bucketing, shard, task_cfg.length_buckets)

    def decode_options(self, model) -> dict:
        "`heads.decode`'s options: the file's, and the head's own (joint, answerable) as the model was built."
        c = model.classifier
        return dict(n_best_size=self.spec.n_best_size, max_answer_length=self.spec.max_answer_length,
                    joint_prediction=c.joint, v2=self.v2, answerable_classifier=c.answerable_classifier)

    def answers(self, model, split: QASplit, rows: list[dict]):
        "(predictions, null odds, n-best lists) of a split's questions from its window rows."
        return decode(split.examples, split.windows, rows, **self.decode_options(model))

    def scores(self, split: QASplit, preds: dict, null_odds: dict) -> dict[str, float]:
        """The official metrics (percent) of a labelled split, as floats: `f1` and `exact` (SQuAD 2.0: at
        `na_threshold`), and for SQuAD 2.0 the HasAns / NoAns splits (NaN when the split has no such question), the
        best threshold's scores and the thresholds."""
        gold = gold_answers(split.examples)
        got = qa_metrics(self.eval_kind, gold, preds, null_odds if self.v2 else None, self.spec.na_threshold)
        if not self.v2: return {'exact': float(got['exact_match']), 'f1': float(got['f1'])}
        out = {k: float(v) for k, v in got.items()}
        for m in ('HasAns_exact', 'HasAns_f1', 'NoAns_exact', 'NoAns_f1'): out.setdefault(m, float('nan'))
        out['no_answer_f1'] = no_answer_f1(gold)
        return out

    def evaluate(self, model, data, dev_dls, autocast) -> dict[str, float]:
        split = data.dev['dev']
        preds, odds, _ = self.answers(model, split, predict_rows(model, dev_dls['dev'], autocast))
        return self.scores(split, preds, odds)

    def write_predictions(self, job: TestJob, tasks: dict) -> list[Path]:
        """The picked run's answers to the dev questions and to the test questions (when given), in the official
        files under `<out>/<name>/<split>/`: `predictions.json` (dev: each question's best non-null answer, as the
        official scorer writes it for the evaluation script, which takes the threshold from `null_odds.json`; test:
        "" where the null odds exceed `na_threshold`, as run_finetuning.py writes SQuAD 2.0 test predictions),
        `null_odds.json` (SQuAD 2.0) and `nbest_predictions.json`."""
        if len(job.picked) > 1: self._no_ensemble(len(job.picked))
        run = job.picked.to_dict('records')[0]
        cfg, task_cfg = job.cfg, job.cfg.for_task(self.name)
        device, autocast = device_and_autocast(cfg.device, cfg.precision)
        model = load_run(run, device)  # refused when the file is not that run's (`loading.read_run`)
        runs = job.runs_text(self.score_metric)
        written = []
        for name in ('dev', 'test'):
            if name not in self.spec.files: continue
            split = self.split(name, job.tokenizer, task_cfg, cfg.cache_dir)
            loader = self.loader(split, task_cfg, pad_token_id(job.tokenizer), False, pin=device.type == 'cuda')
            rows = predict_rows(model, loader, autocast)
            bad = sum(not all(np.isfinite(v).all() for v in r.values() if np.issubdtype(np.asarray(v).dtype, np.floating))
                      for r in rows)
            if bad:
                raise ConfigError(f"{self.name} {name}: {runs} predicts NaN or infinite outputs for {bad} of {len(rows)} "
                                  f"windows; no file written. Delete that run's row from the results table and run it again.")
            preds, odds, nbest = self.answers(model, split, rows)
            out = job.file(self.name, name)
            files = {'predictions.json': (write_answers, null_thresholded(preds, odds, self.spec.na_threshold)
                                          if name == 'test' and self.v2 else preds)}
            if self.v2: files['null_odds.json'] = (write_null_odds, odds)
            files['nbest_predictions.json'] = (write_nbest, nbest)
            scored = ''
            if name == 'dev':
                scored = '; ' + scores_text(self.scores(split, preds, odds), self.metrics)
                if self.v2: scored += f' (official evaluate-v2.0.py: --na-prob-file null_odds.json --na-prob-thresh ' \
                                      f'{self.spec.na_threshold:g})'
            for fname, (write, content) in files.items():
                path = out / fname
                if is_main_process(): write(content, path)
                written.append(path)
                what = {'predictions.json': 'answers', 'null_odds.json': 'null odds',
                        'nbest_predictions.json': 'n-best answers'}[fname]
                job.say(f'{path.relative_to(job.out)}: {what} of {len(split.examples)} questions from {self.name} '
                        f'{runs}{scored if fname == "predictions.json" else ""}')
        del model
        return written


register_file_kind(('squad', 'mrqa'), FileKind(read_qa_spec, QATask))
