"""Fine-tuning a pretrained ELECTRA discriminator on GLUE, as the official code does it
(google-research/electra, run_finetuning.py and finetune/classification/): the model, layer-wise learning rates,
one run with a fastai `Learner`, a resumable sweep of runs per task, and the test predictions of the selected runs.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .checkpoint import atomic_save, atomic_write_text, is_main_process
from .config import ConfigError, TrainingStopped, writable_dir
from .finetune_config import FinetuneConfig
from .glue import TASKS, Examples, GlueSource, GlueTask, double_unordered, drop_empty, open_source
from .glue_data import Encoded, encode_cached, make_loader
from .glue_results import ResultsTable, plot_summary, select_runs, summarize, summary_markdown
from .metrics import dev_metric_names, predictions, task_metrics
from .optim import electra_opt_func, param_groups
from .schedule import warmup_decay_sched
from .speed import AUTOCAST_DTYPES
from .submission import write_predictions, zip_submission

__all__ = ['load_pretrained', 'ElectraClassifier', 'layer_groups', 'layer_lrs', 'optimizer_groups',
           'resolve_data', 'resolve_device', 'TaskData', 'prepare_task', 'predict_outputs', 'train_run', 'run_sweep',
           'write_summary', 'load_finetuned', 'write_test_predictions']


# -- the pretrained model

def load_pretrained(source: str, device: str = 'cpu'):
    "The discriminator and tokenizer of `source` (a pretrain.py .pth, a save_pretrained directory or a hub name), checked."
    if source.endswith('.pth') and not Path(source).is_file():
        raise ConfigError(f"model: {source} not found: run `python pretrain.py` first (the demo preset writes it), or set "
                          "--model to a .pth checkpoint, a save_pretrained directory or a hub name.")
    from .export import load_discriminator
    return load_discriminator(source, device=device)


class ElectraClassifier(nn.Module):
    """The ELECTRA body and the official GLUE head: the final hidden state of [CLS] -> dropout -> linear, no pooler
    and no tanh. The output layer starts as TF1's default initialisation: xavier-uniform weights, zero bias.
    `target_scale`: a regression head learns targets divided by it (official STS-B: 5, so [0, 1]); `predict_outputs`
    multiplies its outputs back, so scores stay on the task's own scale."""

    def __init__(self, electra: nn.Module, n_outputs: int, dropout: float = 0.1, target_scale: float = 1.0):
        super().__init__()
        self.electra, self.n_outputs, self.target_scale = electra, n_outputs, target_scale
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(electra.config.hidden_size, n_outputs)
        nn.init.xavier_uniform_(self.classifier.weight)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.electra(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        out = self.classifier(self.dropout(h[:, 0]))
        return out.squeeze(-1) if self.n_outputs == 1 else out


def scaled_mse(out: torch.Tensor, target: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    "Mean squared error against `target / scale` (official STS-B: scores 0-5 learned as 0-1)."
    return F.mse_loss(out.float(), target / scale)


# -- layer-wise learning rates

def layer_lrs(lr: float, decay: float, n_layers: int, mode: str = 'official') -> np.ndarray:
    """Peak learning rates of [embeddings, layer 0, ..., layer L-1, head].

    Official `_get_layer_lrs` (google-research/electra, model/optimization.py) gives depth 0 to the embeddings (and
    embeddings_project), i + 1 to layer i and L + 2 to the head, and the rate lr * d^(L + 2 - depth): the top layer
    gets d^2 and no parameter d^1 (google-research/electra issue 51). 'intended' puts the head at depth L + 1, so the
    top layer gets d and the embeddings d^(L + 1), as the paper describes."""
    if mode not in ('official', 'intended'): raise ValueError(f"layer_lr_mode: {mode!r} is not 'official' or 'intended'")
    head = n_layers + 2 if mode == 'official' else n_layers + 1
    depths = np.array([0, *range(1, n_layers + 1), head], dtype=np.float64)
    return lr * decay ** (head - depths)


def layer_groups(model: ElectraClassifier) -> list[list[str]]:
    "Parameter names of [embeddings (+ embeddings_project), layer 0, ..., layer L-1, head], matching `layer_lrs`."
    n = model.electra.config.num_hidden_layers
    groups: list[list[str]] = [[] for _ in range(n + 2)]
    for name, _ in model.named_parameters():
        if name.startswith('electra.embeddings'): g = 0
        elif m := re.match(r'electra\.encoder\.layer\.(\d+)\.', name): g = int(m[1]) + 1
        elif name.startswith('classifier.'): g = n + 1
        else: raise ValueError(f'no layer-wise learning rate for parameter {name}')
        groups[g].append(name)
    return groups


def optimizer_groups(model: ElectraClassifier, lr: float, decay: float, mode: str) -> tuple[list[dict], np.ndarray]:
    "`electra.optim.param_groups` per layer (each split into decayed and no-decay parameters) and each group's peak lr."
    names = layer_groups(model)
    rates = layer_lrs(lr, decay, len(names) - 2, mode)
    layer_of = {n: g for g, ns in enumerate(names) for n in ns}
    groups = param_groups(model, names)
    return groups, np.array([rates[layer_of[g['names'][0]]] for g in groups])


# -- devices, data

def resolve_device(device: str, precision: str) -> tuple[torch.device, torch.dtype | None]:
    """The device and the autocast dtype (None: fp32), by the pretraining job's rules: 'auto' precision is bf16 on
    GPUs that support it, fp16 on older GPUs, fp32 on CPU; bf16 also runs on a CPU with native bf16 matmuls."""
    from .pretraining import resolve_device as pick_device, resolve_precision
    dev = pick_device(device)
    return dev, AUTOCAST_DTYPES[resolve_precision(precision, dev)]


def resolve_data(data: str, cache_dir: str | Path) -> GlueSource:
    "The source named by the `data` key; 'demo' writes the project's sample tasks to `<cache_dir>/demo_glue` once."
    writable_dir(cache_dir, 'cache_dir')  # the token cache and the demo tasks live there
    if data == 'demo':
        from .demo_glue import write_demo_glue
        root = Path(cache_dir) / 'demo_glue'
        if not (root / 'diagnostic' / 'diagnostic.tsv').is_file() and is_main_process(): write_demo_glue(root)
        return open_source(str(root))
    return open_source(data)


@dataclass
class TaskData:
    "A task's encoded training set and dev splits."
    task: GlueTask
    train: Encoded
    dev: dict[str, Encoded]


def _train_examples(task: GlueTask, cfg: FinetuneConfig, source: GlueSource, doubled: bool) -> Examples:
    ex = source.load(task, 'train')
    if cfg.drop_empty: ex = drop_empty(ex)
    if cfg.max_train_samples and len(ex) > cfg.max_train_samples:
        ex = ex.take(np.sort(np.random.default_rng(0).choice(len(ex), cfg.max_train_samples, replace=False)))
    return double_unordered(ex) if doubled else ex


def prepare_task(task: GlueTask, cfg: FinetuneConfig, source: GlueSource, tokenizer, cache_dir: str | Path,
                 doubled: bool) -> TaskData:
    "Read, filter, double (when `doubled`) and encode a task's training set, and encode its dev splits (cached)."
    cache = Path(cache_dir) / 'glue_tokens'
    train = encode_cached(_train_examples(task, cfg, source, doubled), tokenizer, cfg.max_length, cache, f'{task.name}-train')
    dev = {s: encode_cached(source.load(task, s), tokenizer, cfg.max_length, cache, f'{task.name}-{s}') for s in task.dev_splits}
    return TaskData(task, train, dev)


def _doubled(task: GlueTask, job: FinetuneConfig, cfg: FinetuneConfig) -> bool:
    "double_unordered applies to unordered-pair tasks, or to any task whose `task_overrides` switch it on."
    return cfg.double_unordered and (task.symmetric or 'double_unordered' in job.task_overrides.get(task.name, {}))


@torch.no_grad()
def predict_outputs(model: ElectraClassifier, loader, autocast: torch.dtype | None = None) -> np.ndarray:
    "The model's outputs (logits, or STS-B scores) for every example of an evaluation loader, in example order."
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    outs = []
    for ids, mask, types, _ in loader:
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            out = model(ids.to(device, non_blocking=True), mask.to(device, non_blocking=True), types.to(device, non_blocking=True))
        outs.append(out.float())
    model.train(was_training)
    if not outs: return np.zeros((0,) if model.n_outputs == 1 else (0, model.n_outputs), dtype=np.float32)
    got = torch.cat(outs).cpu().numpy() * (model.target_scale if model.n_outputs == 1 else 1)  # one copy per pass
    result = np.empty_like(got)
    result[np.concatenate(list(loader.batch_sampler))] = got
    return result


# -- one run

def _epoch_eval_callback(evaluate: Callable[[], dict], report: Callable[[int, float, dict], None]):
    from fastai.callback.core import Callback

    class EpochEval(Callback):
        "Sums the training loss on the device and, after each epoch, scores the dev sets and reports (no per-step reads)."
        order = 70

        def before_epoch(self): self.loss_sum, self.n = 0.0, 0

        def after_batch(self):
            if not self.training: return
            bs = self.yb[0].shape[0]
            self.loss_sum, self.n = self.loss_sum + self.learn.loss.detach().float() * bs, self.n + bs

        def after_epoch(self):
            loss = float(self.loss_sum / max(self.n, 1))
            self.history.append({'epoch': self.epoch, 'train_loss': loss, **evaluate()})
            report(self.epoch, loss, self.history[-1])

        def before_fit(self): self.history = []

    return EpochEval()


def build_learner(model: ElectraClassifier, train_dl, valid_dls: list, cfg: FinetuneConfig, regression: bool,
                  device: torch.device, autocast: torch.dtype | None, cbs: tuple = ()):
    """The fastai Learner of one fine-tuning run (spec 7): ElectraAdam over the layer-wise groups, warm-up and linear
    decay applied together at every step, gradient clipping, and mixed precision when `autocast` is set. fastai's own
    validation pass is skipped (the dev sets are scored by the caller, see `train_run`), and there is no Recorder or
    progress bar: both read the loss off the device at every step. `learn.layer_lrs`: each group's peak rate, to be
    given to `fit`."""
    from fastai.callback.core import Callback, CancelValidException, TrainEvalCallback
    from fastai.callback.schedule import ParamScheduler
    from fastai.callback.training import GradientClip
    from fastai.data.core import DataLoaders
    from fastai.learner import Learner

    from .callbacks import DeviceMixedPrecision

    class SkipValidation(Callback):
        "Skips fastai's validation pass: the dev sets are scored with `predict_outputs` after each epoch."
        order = 0

        def before_validate(self): raise CancelValidException()

    groups, lrs = optimizer_groups(model, cfg.lr, cfg.layer_lr_decay, cfg.layer_lr_mode)
    total = cfg.epochs * len(train_dl)
    sched = warmup_decay_sched(lrs, int(cfg.warmup_fraction * total), total, cfg.decay_power, cfg.schedule)
    cbs = [TrainEvalCallback(), SkipValidation(), ParamScheduler({'lr': sched}), *cbs]
    if cfg.clip_grad: cbs.append(GradientClip(cfg.clip_grad))
    if autocast is not None: cbs.append(DeviceMixedPrecision(amp_mode='bf16' if autocast == torch.bfloat16 else 'fp16'))
    # fastai needs a validation loader to exist even though its pass is skipped
    learn = Learner(DataLoaders(train_dl, *(valid_dls or [train_dl]), device=device), model,
                    loss_func=partial(scaled_mse, scale=model.target_scale) if regression else F.cross_entropy,
                    opt_func=electra_opt_func((cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps, cfg.weight_decay),
                    splitter=lambda m: groups, lr=float(lrs.max()), default_cbs=False, cbs=cbs)
    learn.layer_lrs = lrs
    return learn


def train_run(data: TaskData, cfg: FinetuneConfig, body: nn.Module, seed: int, device: torch.device,
              autocast: torch.dtype | None, pad_id: int, report: Callable[[int, float, dict], None] | None = None,
              extra_cbs: tuple = ()):
    """Fine-tune a copy of `body` on `data.train` with `cfg` (a task's config) and seed `seed`, scoring the dev sets
    after each epoch. Returns the model and the per-epoch history (train loss and dev metrics); the last entry is the
    run's result, as the official code evaluates the final model. `extra_cbs`: more fastai callbacks for the fit."""
    from fastai.torch_core import set_seed

    task = data.task
    set_seed(seed)
    model = ElectraClassifier(copy.deepcopy(body), task.n_outputs, cfg.dropout,
                              cfg.stsb_scale if task.is_regression else 1.0).to(device)
    pin = device.type == 'cuda'
    train_dl = make_loader(data.train, cfg.batch_size, True, pad_id, seed, cfg.num_workers, pin, cfg.length_bucketing)
    dev_dls = {s: make_loader(e, cfg.eval_batch_size, False, pad_id, 0, cfg.num_workers, pin) for s, e in data.dev.items()}

    def evaluate() -> dict:
        preds = {s: predictions(task, predict_outputs(model, dl, autocast)) for s, dl in dev_dls.items()}
        return task_metrics(task, preds, {s: e.label for s, e in data.dev.items()})

    evaluator = _epoch_eval_callback(evaluate, report or (lambda *a: None))
    learn = build_learner(model, train_dl, list(dev_dls.values()), cfg, task.is_regression, device, autocast,
                          (evaluator, *extra_cbs))
    learn.fit(cfg.epochs, lr=learn.layer_lrs)
    return model, evaluator.history


# -- the sweep

def _settings_key(job: FinetuneConfig, task: str, cfg: FinetuneConfig, seed: int, doubled: bool) -> str:
    "A hash of what a run's result depends on; a resumed sweep refuses to mix runs of different settings."
    hp = {k: v for k, v in cfg.hparams().items() if k != 'eval_batch_size'}
    blob = json.dumps({'task': task, 'model': job.model, 'data': job.data, 'seed': seed, 'doubled': doubled, **hp},
                      sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _neptune_run(job: FinetuneConfig, task: str, run: int, seed: int, cfg: FinetuneConfig):
    "A Neptune run for one fine-tuning run (`logger: neptune`), or None."
    if job.logger != 'neptune' or not is_main_process(): return None
    try: import neptune
    except ImportError: raise ConfigError("logger: neptune needs the neptune package: pip install neptune.") from None
    try:
        nrun = neptune.init_run(project=job.neptune_project or None, name=f'{job.group}/{task}_{run}',
                                tags=[job.group, task])
    except Exception as e:
        raise ConfigError(f"logger: cannot start a Neptune run ({e}). Set NEPTUNE_API_TOKEN and --neptune_project, or "
                          "NEPTUNE_MODE=offline, or use --logger none.") from None
    nrun['parameters'] = {'task': task, 'run': run, 'seed': seed, 'model': job.model, 'data': job.data, **cfg.hparams()}
    return nrun


def run_sweep(job: FinetuneConfig, pretrained, tokenizer, source: GlueSource,
              log: Callable[[str], None] = print) -> ResultsTable:
    """Fine-tune `job.runs` runs of every training task in `job.tasks` from `pretrained` (an `ElectraForPreTraining`).
    Each finished run's weights go to `<output_dir>/<group>/<task>_<i>.pth` and its dev metrics to the results table
    `<output_dir>/<group>/results.csv` at once; runs already in the table with the same settings are skipped."""
    out = Path(job.output_dir) / job.group
    results = ResultsTable(out / 'results.csv')
    device, autocast = resolve_device(job.device, job.precision)
    body = pretrained.electra
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    say = log if is_main_process() else (lambda *_: None)
    for name in (n for n in job.tasks if not TASKS[n].predicted_by):
        task, cfg = TASKS[name], job.for_task(name)
        doubled = _doubled(task, job, cfg)
        todo = []
        for i, seed in enumerate(job.seed_list):
            key, ckpt, row = _settings_key(job, name, cfg, seed, doubled), out / f'{name}_{i}.pth', results.get(name, i)
            if row is not None and row['settings'] != key:
                raise ConfigError(f"{results.path}: {name} run {i} was made with other settings (model, data, seed or "
                                  f"hyperparameters changed). Use another --group, or delete that row and {ckpt} to redo it.")
            if row is None or not ckpt.is_file(): todo.append((i, seed, key, ckpt))
        if not todo:
            say(f'{name}: all {job.runs} runs finished before; skipped')
            continue
        data = prepare_task(task, cfg, source, tokenizer, job.cache_dir, doubled)
        say(f'{name}: {len(data.train)} training examples{" (both segment orders)" if doubled else ""}, '
            f'{", ".join(f"{len(e)} {s}" for s, e in data.dev.items())}; {cfg.epochs} epochs, lr {cfg.lr:g}, '
            f'{len(todo)} of {job.runs} runs to do')
        for i, seed, key, ckpt in todo:
            nrun, start = _neptune_run(job, name, i, seed, cfg), time.perf_counter()

            def report(epoch, loss, metrics, i=i, seed=seed, start=start, nrun=nrun):
                shown = ', '.join(f'{m} {metrics[m]:.2f}' for m in dev_metric_names(task))
                say(f'  {name} run {i} (seed {seed}) epoch {epoch + 1}/{cfg.epochs}: train loss {loss:.4f}, dev {shown} '
                    f'[{time.perf_counter() - start:.0f}s]')
                if nrun is not None:
                    nrun['train/loss'].append(loss)
                    for m in dev_metric_names(task): nrun[f'dev/{m}'].append(metrics[m])

            try: model, history = train_run(data, cfg, body, seed, device, autocast, pad_id, report)
            except KeyboardInterrupt:
                raise TrainingStopped(f"by Ctrl-C during {name} run {i}; the {len(results.df)} finished run(s) are kept in "
                                      f"{results.path}. Run the same command again to do the rest.") from None
            final = history[-1]
            if is_main_process():
                atomic_save({'format': 'electra-glue', 'task': name, 'run': i, 'seed': seed, 'n_outputs': task.n_outputs,
                             'dropout': cfg.dropout, 'target_scale': model.target_scale,
                             'electra_config': body.config.to_dict(), 'model': model.state_dict(),
                             'pretrained': job.model, 'hparams': cfg.hparams(), 'dev': final}, ckpt)
            results.add({'task': name, 'run': i, 'seed': seed, 'score': final[task.score_metric], **final,
                         'steps': cfg.epochs * -(-len(data.train) // cfg.batch_size),
                         'seconds': round(time.perf_counter() - start, 1), 'settings': key, 'checkpoint': str(ckpt),
                         'finished_at': datetime.now(timezone.utc).isoformat(timespec='seconds')})
            if nrun is not None:
                for m in dev_metric_names(task): nrun[f'final/{m}'] = final[m]
                nrun.stop()
            del model
    return results


def write_summary(job: FinetuneConfig, results: ResultsTable) -> str:
    "The per-task summary as markdown, saved with a plot of the spread over runs as `summary.md` and `summary.png`."
    out = Path(job.output_dir) / job.group
    df = results.df[results.df['task'].isin(job.tasks) & (results.df['run'] < job.runs)]
    text = summary_markdown(summarize(df)) if not df.empty else 'no finished runs'
    if is_main_process():
        atomic_write_text(f'# GLUE dev results of {job.group} ({job.model})\n\n{text}\n', out / 'summary.md')
    if not df.empty: plot_summary(df, out / 'summary.png', title=f'{job.group}: GLUE dev score per run (bar: median)')
    return text


# -- test predictions

def load_finetuned(path: str | Path, device: torch.device | str = 'cpu') -> ElectraClassifier:
    "A fine-tuned model saved by `run_sweep`."
    from transformers import ElectraConfig, ElectraModel
    ckpt = torch.load(path, map_location='cpu', weights_only=True)
    if not isinstance(ckpt, dict) or ckpt.get('format') != 'electra-glue':
        raise ConfigError(f"{path}: not a fine-tuned GLUE checkpoint of finetune.py; delete it and its results row to redo the run.")
    model = ElectraClassifier(ElectraModel(ElectraConfig.from_dict(ckpt['electra_config'])), ckpt['n_outputs'],
                              ckpt['dropout'], ckpt.get('target_scale', 1.0))  # runs saved before the key: raw targets
    model.load_state_dict(ckpt['model'])
    return model.to(device).eval()


def write_test_predictions(job: FinetuneConfig, results: ResultsTable, tokenizer, source: GlueSource,
                           log: Callable[[str], None] = print) -> list[Path]:
    """Predict the test sets with the selected run of each task (`select`), or the averaged logits of the top
    `ensemble_k` runs; AX with MNLI's. Writes `<test_output_dir>/<group>/<file>.tsv` and `glue_submission.zip`."""
    device, autocast = resolve_device(job.device, job.precision)
    out = Path(job.test_output_dir) / job.group
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    cache = Path(job.cache_dir) / 'glue_tokens'
    say = log if is_main_process() else (lambda *_: None)
    written = []
    for model_task in (n for n in job.tasks if not TASKS[n].predicted_by):
        rows = results.task_rows(model_task)
        rows = rows[rows['run'] < job.runs]  # this job's runs, not later ones left by a larger sweep
        if rows.empty:
            say(f'{model_task}: no finished runs, no test predictions')
            continue
        cfg = job.for_task(model_task)
        picked = select_runs(rows, job.select, job.ensemble_k)
        targets = [(TASKS[n], split, stem) for n in job.tasks if n == model_task or TASKS[n].predicted_by == model_task
                   for split, stem in TASKS[n].test_files]
        encoded = {(t.name, split): encode_cached(source.load(t, split), tokenizer, cfg.max_length, cache, f'{t.name}-{split}')
                   for t, split, _ in targets}
        dev = {s: encode_cached(source.load(TASKS[model_task], s), tokenizer, cfg.max_length, cache, f'{model_task}-{s}')
               for s in TASKS[model_task].dev_splits} if len(picked) > 1 else {}
        sums: dict = {}
        for path in picked['checkpoint']:
            model = load_finetuned(path, device)
            for key, enc in [*encoded.items(), *(((model_task, s), e) for s, e in dev.items())]:
                loader = make_loader(enc, cfg.eval_batch_size, False, pad_id, pin_memory=device.type == 'cuda')
                outs = predict_outputs(model, loader, autocast)
                sums[key] = sums.get(key, 0) + outs / len(picked)
            del model
        runs = ', '.join(f"run {int(r['run'])} (seed {int(r['seed'])}, dev {TASKS[model_task].score_metric} {r['score']:.2f})"
                         for r in picked.to_dict('records'))
        if dev:
            scores = task_metrics(TASKS[model_task], {s: predictions(TASKS[model_task], sums[(model_task, s)]) for s in dev},
                                  {s: e.label for s, e in dev.items()})
            runs += f"; ensemble dev {', '.join(f'{m} {v:.2f}' for m, v in scores.items())}"
        for t, split, stem in targets:
            enc, outs = encoded[(t.name, split)], sums[(t.name, split)]
            bad = int((~np.isfinite(outs)).reshape(len(outs), -1).any(1).sum()) if len(outs) else 0
            if bad:  # argmax of NaN logits is a valid-looking label: never let one reach a submission file
                raise ConfigError(f"{stem}.tsv: {runs} predict NaN or infinite outputs for {bad} of {len(outs)} "
                                  f"{t.name} {split} examples; no file written. Delete those runs' rows from "
                                  f"{Path(job.output_dir) / job.group / 'results.csv'} and run the task again.")
            written.append(write_predictions(out / f'{stem}.tsv', t, enc.idx, predictions(t, outs)))
            say(f'{stem}.tsv: {len(enc)} predictions from {model_task} {runs}')
    if written: written.append(zip_submission(out))
    return written
