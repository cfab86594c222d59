"""The fine-tuning step, read top to bottom: `finetuning_step` runs the model on the batch, takes the task's loss and
its gradients, (a stack in fp16) zeroes those of the runs whose loss was ever NaN or infinite, averages them over the
processes of a torchrun job, unscales them (fp16), clips them and updates the weights. A run alone and a stack of runs
(electra/finetuning/stack.py: every tensor with the N runs in front) train through it, run by the Learner's one
`FinetuningStep` callback: eager, or with `compile` the whole step as one graph.

Official code: google-research/electra, run_finetuning.py (`model_fn_builder`) and model/optimization.py, as the
pretraining step (electra/pretraining/step.py), whose gradients take the same way (electra/training/step.py).
"""
from __future__ import annotations

import torch
from fastai.callback.core import CancelBatchException
from fastai.torch_core import to_float

from electra.config.errors import ConfigError
from electra.training.distributed import is_distributed
from electra.training.step import StepCallback, StepConstants, Update, apply_gradients, clip_by_global_norm_

__all__ = ['finetuning_step', 'FinetuningStep']


def finetuning_step(model, loss_func, c: StepConstants, xb: tuple, yb: tuple, update: Update, scaler,
                    diverged) -> torch.Tensor:
    """The step function: one optimizer step on this process's batch, inputs `xb` (input_ids, attention_mask,
    token_type_ids [B, L], and what the task's model takes beyond them), targets `yb` (the task's, and the rows' weights
    [B]; a stack's [N, B, ...]), with the run's constants `c` (autocast's dtype, the clipping); `update`: the weights it
    trains, the optimizer and its rates; `scaler`: fp16's loss scaler (else None); `diverged` [N]: a stack's runs whose
    loss was ever NaN or infinite (fp16; else None). Returns the loss [0-d]."""
    # 1. The model and the task's loss under autocast; the loss reads fp32 outputs (as fastai's MixedPrecision):
    #    logits [B, C], scores [B], tags [B, L, T] or QA's positions; the loss (finetuning/loss.py) the batch's sum
    #    (official) or mean, over the whole global batch under torchrun; a stack's the sum of its runs' (StackedLoss).
    with torch.autocast(xb[0].device.type, dtype=c.dtype or torch.float32, enabled=c.dtype is not None):
        pred = to_float(model(*xb))
        loss = loss_func(pred, *yb)                                                                          # 0-d
    # 2. The gradients of the trainable weights, in fp32 outside autocast (None: a weight the task does not use);
    #    fp16 scales the loss first (loss scaling).
    grads = list(torch.autograd.grad(loss if scaler is None else scaler.scale(loss), update.params, allow_unused=True))
    if diverged is not None:
        # 3. A stack in fp16: the runs share one loss scale, and one run's inf gradients would skip every run's steps;
        #    the runs whose loss was ever NaN or infinite take zero gradients instead (their own dropped at the epoch's
        #    end). In fp32 and bf16 no NaN crosses runs (vmap batches each run's matmuls apart, clipping is per run).
        diverged |= ~torch.isfinite(loss_func.local_sum.detach().reshape(-1))                               # [N]
        for g in grads:
            if g is not None: g.masked_fill_(diverged.view(-1, *[1] * (g.dim() - 1)), 0)
    # 4.-7. training/step.py: under torchrun the average of the processes' gradients; fp16's unscaling by GradScaler's
    #    rules, an overflow's update masked on the device; clipping (`c.clip_fn`: the global norm as
    #    torch.nn.utils.clip_grad_norm_, a stack's per run); ElectraAdam's update, the official Adam.
    apply_gradients(grads, update, c, scaler)
    return loss.detach()


class FinetuningStep(StepCallback):
    "Runs every training step of a fine-tuning run or stack as `finetuning_step` in place of fastai's; holds its state."
    order = 65  # after every callback that prepares the step: the rate (ParamScheduler, 60)

    def __init__(self, max_norm: float, seed: int, precision: str = 'fp32', compile: bool = False,
                 mode: str | None = None, clip_fn=clip_by_global_norm_, freeze_diverged: bool = False, backend='inductor'):
        """`compile`: the whole step as one graph; `clip_fn(grads, max_norm)`: the clipping (a stack's: each run's own);
        `freeze_diverged`: the model is a stack of runs (`StackedRuns`) whose diverged runs take zero gradients (fp16),
        the state kept as `diverged` beside the loss scale, the compiled step and the update."""
        if compile and is_distributed():
            raise ConfigError('compile: the step as one graph runs in one process; under torchrun the gradients are '
                              'averaged between the backward and the update. Drop --compile, or run without torchrun.')
        if compile and precision == 'fp16':
            raise ConfigError("compile: the whole step as one graph runs bf16 or fp32; fp16's loss scaler is not "
                              'traced. Use --precision bf16, or drop --compile.')
        super().__init__(finetuning_step, seed, precision, compile, mode, backend, key='compile')
        self.constants = StepConstants(dtype=self.dtype, max_norm=max_norm, clip_fn=clip_fn)
        self.freeze_diverged, self.diverged = freeze_diverged, None

    def before_fit(self):
        super().before_fit()
        if self.freeze_diverged:
            self.diverged = torch.zeros(self.model.n_runs, dtype=torch.bool, device=next(self.model.parameters()).device)

    def before_batch(self):
        self.learn.loss = self.run_step(lambda f: f(self.model, self.loss_func, self.constants, self.xb, self.yb,
                                                    self.update, self.scaler, self.diverged))
        raise CancelBatchException  # fastai's own forward, backward and step are skipped; after_batch runs as usual
