"""The pretraining step spread over micro-batches of one process (`MicroBatches`), alone or with the
processes of a torchrun job (`electra.training.parallel.DataParallel`): one optimizer step equals the step of the
whole batch in one process (with `loss_mean` 'global')."""
from __future__ import annotations

import contextlib

import torch
from fastai.callback.core import Callback

from electra.objective.loss import loss_counts
from electra.training.parallel import loss_divisors

__all__ = ['MicroBatches']


class MicroBatches(Callback):
    """Splits each step's batch (this process's share of it) into `n` micro-batches: the first n - 1 run forward and
    backward here, the last goes through fastai's own step; one optimizer step for the whole batch. The loss of
    every micro-batch is divided by the whole step's token counts (summed over the processes with `loss_mean`
    'global'), so the gradients add up to those of the whole batch at once. (fastai's `GradientAccumulation` does
    otherwise: it skips optimizer steps until a number of whole batches have been seen.)"""
    order, run_valid = 11, False  # inside MixedPrecision's autocast (entered at 10); before CompileModel (12)

    def __init__(self, n: int, pad_token_id: int, loss_mean: str = 'global', objective: str = 'electra'):
        self.n, self.pad_token_id, self.loss_mean, self.objective = n, pad_token_id, loss_mean, objective

    def before_batch(self):
        labels, xb = self.yb[0], self.xb
        counts = loss_counts(self.objective, xb[0], xb[2], labels, self.pad_token_id)  # [2]
        divisors = loss_divisors(counts, self.loss_mean)
        self.loss_func.global_divisors = lambda _: divisors  # every micro-batch divides by the whole step's counts
        xs, ys = [t.chunk(self.n) for t in xb], labels.chunk(self.n)  # n x [b / n, ...]
        scaler = getattr(self.learn, 'scaler', None)
        for i in range(self.n - 1):
            sync = getattr(self.model, 'no_sync', contextlib.nullcontext)  # DDP all-reduces with the last one only
            with sync():
                pred = self.model(*(x[i] for x in xs))
                loss = self.loss_func(pred, ys[i])
                self.learn.metrics_logger.add(pred, ys[i], loss)
                if scaler is not None and scaler.is_enabled(): loss = scaler.scale(loss)
                with torch.autocast(labels.device.type, enabled=False): loss.backward()
        self.learn.xb, self.learn.yb = tuple(x[-1] for x in xs), (ys[-1],)

    def after_fit(self): self.loss_func.global_divisors = None
