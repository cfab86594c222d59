"""One fine-tuning run with a fastai `Learner`, as the official code trains one (google-research/electra,
run_finetuning.py): ElectraAdam over the layer-wise groups, warm-up and linear decay, dev scores after every epoch.
"""
from __future__ import annotations

import copy
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from electra.config.finetune import FinetuneConfig
from electra.finetuning.classifier import ElectraClassifier
from electra.finetuning.layerwise import optimizer_groups
from electra.finetuning.step import FinetuningStep
from electra.finetuning.tasks.base import TaskData
from electra.training.device import AUTOCAST_DTYPES, resolve_device, resolve_precision
from electra.training.distributed import all_reduce_sum, gather_objects, is_distributed
from electra.training.optim import electra_opt_func
from electra.training.schedule import warmup_decay_sched
from electra.training.speed import DeviceDataLoaders
from electra.training.step import clip_by_global_norm_

__all__ = ['TaskData', 'device_and_autocast', 'predict_examples', 'predict_outputs', 'finetuning_learner', 'train_run',
           'diverged']


# -- devices, data

def device_and_autocast(device: str, precision: str) -> tuple[torch.device, torch.dtype | None]:
    """The device and the autocast dtype (None: fp32), by the pretraining job's rules: 'auto' precision is bf16 on
    GPUs that support it, fp16 on older GPUs, fp32 on CPU; bf16 also runs on a CPU with native bf16 matmuls."""
    dev = resolve_device(device)
    return dev, AUTOCAST_DTYPES[resolve_precision(precision, dev)]


@torch.no_grad()
def predict_examples(model: nn.Module, loader, rows: Callable[[object, tuple], list],
                     autocast: torch.dtype | None = None) -> list:
    """Each example's prediction for an evaluation loader, in example order: the model, in eval mode under `autocast`,
    runs on each batch (input_ids, attention_mask, token_type_ids first), and `rows(out, batch)` turns its outputs into
    one object per row. In a torchrun job each process predicts its share of the batches (the loader's `shard=`) and
    all get the whole. The one prediction pass of every task kind (classification, tagging, QA)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    got: list[tuple[int, object]] = []
    try:
        for batch, picks in zip(loader, loader.batch_sampler):
            ids, mask, types = (x.to(device, non_blocking=True) for x in batch[:3])
            with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
                out = model(ids, mask, types)
            got += zip(map(int, picks), rows(out, batch))
    finally: model.train(was_training)
    result: list = [None] * len(loader.dataset)
    for part in gather_objects(got):  # one part in one process
        for i, row in part: result[i] = row
    return result


def predict_outputs(model: ElectraClassifier, loader, autocast: torch.dtype | None = None) -> np.ndarray:
    """The model's outputs for every example of an evaluation loader, in example order: logits [N, C], or scores [N]
    on the task's own scale (a regression head's outputs times its `target_scale`: the training scale's module of a
    run in training; a run read back, `on_task_scale`, has 1)."""
    rows = predict_examples(model, loader, lambda out, _: list(out.float().cpu().numpy()), autocast)
    if model.n_outputs > 1: return np.stack(rows) if rows else np.zeros((0, model.n_outputs), np.float32)
    return np.asarray(rows, np.float32) * np.float32(model.target_scale)


# -- one run

def _epoch_eval_callback(evaluate: Callable[[list[int]], list[dict]], reports: list[Callable[[int, float, dict], None]]):
    """The epoch's scoring of R runs trained together (R = 1 but for a stack, `electra.finetuning.stack`):
    `evaluate(runs)` gives the dev metrics of each of `runs` (indices), `reports[r]` is run r's. A run whose loss became
    NaN or infinite is not scored again: its history ends with `{'epoch', 'train_loss', 'diverged_at': step}`, and
    the fit stops when every run has (`diverged`)."""
    from fastai.callback.core import Callback, CancelFitException

    class EpochEval(Callback):
        "Sums each run's training loss on the device and, after each epoch, scores its dev sets and reports its mean (no per-step reads)."
        order = 70

        def before_fit(self):
            self.histories = [[] for _ in reports]
            # each run's first step whose loss was NaN or infinite (-1: none), kept on the device and read with the
            # epoch's losses: a non-finite loss is found at the end of its epoch, without a host sync per step
            self.first_bad = None

        def before_epoch(self): self.loss_sum, self.n = 0.0, 0

        def after_batch(self):
            if not self.training: return
            # this process's sums and counts [R] (examples; tagging's 'token': words), whatever the reduction trained on
            part, n = self.loss_func.local_sum.detach().float().reshape(-1), self.loss_func.local_count.detach().reshape(-1)
            self.loss_sum, self.n = self.loss_sum + part, self.n + n
            if self.first_bad is None: self.first_bad = torch.full(part.shape, -1, dtype=torch.int64, device=part.device)
            self.first_bad = torch.where(~torch.isfinite(part) & (self.first_bad < 0), self.train_iter, self.first_bad)

        def after_epoch(self):
            total = all_reduce_sum(torch.stack([torch.as_tensor(v, dtype=torch.float32) for v in (self.loss_sum, self.n)]))
            losses = (total[0] / total[1].clamp(min=1)).tolist()  # [R]; NaN or infinite in every process when in one
            bad = self.first_bad.tolist() if self.first_bad is not None else [-1] * len(reports)
            live = [r for r in range(len(reports)) if not diverged(self.histories[r])]
            for r in [r for r in live if not np.isfinite(losses[r])]:
                # the step this process saw first; another process's NaN reaches this one's loss a step later
                self.histories[r].append({'epoch': self.epoch, 'train_loss': losses[r],
                                          'diverged_at': bad[r] if bad[r] >= 0 else self.train_iter})
            live = [r for r in live if np.isfinite(losses[r])]
            if not live: raise CancelFitException()
            for r, metrics in zip(live, evaluate(live), strict=True):
                self.histories[r].append({'epoch': self.epoch, 'train_loss': losses[r], **metrics})
                reports[r](self.epoch, losses[r], self.histories[r][-1])

    return EpochEval()


def diverged(history: list[dict]) -> int | None:
    "The step at which a run's loss became NaN or infinite (its history's last entry says so), or None."
    return history[-1]['diverged_at'] if history and 'diverged_at' in history[-1] else None


def finetuning_learner(model: nn.Module, train_dl, valid_dls: list, task_cfg: FinetuneConfig, loss_func,
                       device: torch.device, autocast: torch.dtype | None, cbs: tuple = (), n_inp: int = 3,
                       clip_fn=clip_by_global_norm_, seed: int = 0, freeze_diverged: bool = False):
    """The fastai Learner of one fine-tuning run (run_finetuning.py): ElectraAdam over the layer-wise groups, warm-up and linear
    decay applied together at every step, gradient clipping, and mixed precision when `autocast` is set (with
    `compile`, the step as one compiled graph). fastai's own validation pass is skipped (the dev sets are scored by the
    caller, see `train_run`), and there is no Recorder or progress bar: both read the loss off the device at every
    step. `loss_func` and `n_inp` (the model's inputs at the front of a batch) are the task kind's. The step is
    `finetuning_step` (electra/finetuning/step.py), run by one `FinetuningStep` callback: `clip_fn` clips the gradients
    (default the global norm of all parameters; a stack's is per run), `seed` is the run's (under torchrun, the other
    processes' dropout streams are drawn from it), `freeze_diverged` (a stack in fp16) zeroes the gradients of its
    diverged runs. `learn.layer_lrs`: each group's peak rate, to be given to `fit`."""
    from fastai.callback.core import Callback, CancelValidException, TrainEvalCallback
    from fastai.callback.schedule import ParamScheduler
    from fastai.learner import Learner


    class SkipValidation(Callback):
        "Skips fastai's validation pass: the dev sets are scored with `predict_outputs` after each epoch."
        order = 0

        def before_validate(self): raise CancelValidException()

    groups, lrs = optimizer_groups(model, task_cfg.lr, task_cfg.layer_lr_decay, task_cfg.layer_lr_mode)
    total = task_cfg.epochs * len(train_dl)
    # a fractional warm-up, as the official create_optimizer's (warmup_proportion x num_train_steps): 0.8 steps give
    # step 0 the rate 0, where one truncated to whole steps (0) gave it the peak
    sched = warmup_decay_sched(lrs, task_cfg.warmup_fraction * total, total, task_cfg.decay_power, task_cfg.schedule)
    precision = {dtype: name for name, dtype in AUTOCAST_DTYPES.items()}[autocast]
    step = FinetuningStep(task_cfg.clip_grad, seed, precision, task_cfg.compile,
                          None if task_cfg.compile_mode == 'default' else task_cfg.compile_mode, clip_fn, freeze_diverged)
    cbs = [TrainEvalCallback(), SkipValidation(), ParamScheduler({'lr': sched}), *cbs, step]
    # fastai needs a validation loader to exist even though its pass is skipped
    learn = Learner(DeviceDataLoaders(train_dl, *(valid_dls or [train_dl]), device=device, n_inp=n_inp), model,
                    loss_func=loss_func,
                    opt_func=electra_opt_func((task_cfg.adam_beta1, task_cfg.adam_beta2), task_cfg.adam_eps,
                                              task_cfg.weight_decay),
                    splitter=lambda m: groups, lr=float(lrs.max()), default_cbs=False, cbs=cbs)
    learn.layer_lrs = lrs
    return learn


def train_run(data: TaskData, task_cfg: FinetuneConfig, body: nn.Module, seed: int, device: torch.device,
              autocast: torch.dtype | None, pad_id: int, report: Callable[[int, float, dict], None] | None = None,
              extra_cbs: tuple = ()):
    """Fine-tune a copy of `body` on `data.train` with `task_cfg` (a task's config) and seed `seed`, scoring the dev sets
    after each epoch; the model, loss, loaders and metrics are those of the task's kind (`data.task`). Returns the
    model and the per-epoch history (train loss and dev metrics); the last entry is the run's result, as the official
    code evaluates the final model. A run whose loss becomes NaN or infinite stops at the end of that epoch, its
    history's last entry saying at which step (`diverged`). `extra_cbs`: more fastai callbacks for the fit."""
    from fastai.torch_core import set_seed

    task = data.task
    set_seed(seed)
    model = task.new_model(copy.deepcopy(body), task_cfg).to(device)
    pin, shard = device.type == 'cuda', ((dist.get_rank(), dist.get_world_size()) if is_distributed() else None)
    train_dl = task.loader(data.train, task_cfg, pad_id, True, seed, shard, pin)
    dev_dls = {s: task.loader(e, task_cfg, pad_id, False, 0, shard, pin) for s, e in data.dev.items()}
    evaluator = _epoch_eval_callback(lambda runs: [task.evaluate(model, data, dev_dls, autocast)],
                                     [report or (lambda *a: None)])
    learn = finetuning_learner(model, train_dl, list(dev_dls.values()), task_cfg, task.loss_func(model, task_cfg),
                               device, autocast, (evaluator, *extra_cbs), task.n_inp, seed=seed)
    learn.fit(task_cfg.epochs, lr=learn.layer_lrs)
    return model, evaluator.histories[0]
