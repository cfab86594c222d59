"""The pretraining step spread out: over the processes of a torchrun job (`DataParallel`, PyTorch DDP) and over
micro-batches of one process (`GradientAccumulation`); either way one optimizer step equals the step of the whole
batch in one process (with `loss_mean` 'global')."""
from __future__ import annotations

import contextlib

import torch
from fastai.callback.core import Callback

from electra.training.distributed import all_reduce_sum, bare_model, is_distributed, rank_seed, world

__all__ = ['DataParallel', 'GradientAccumulation', 'loss_divisors']


def loss_divisors(counts: torch.Tensor, loss_mean: str) -> torch.Tensor:
    """The divisors [2] of this process's loss sums, from its token counts [2] (chosen positions, real tokens): with
    `loss_mean` 'global' in a job of W processes, (the counts summed over the processes + 1e-6) / W, so that DDP's
    average of the processes' losses is the mean over the whole batch; else its own counts + 1e-6."""
    n = world().size if is_distributed() else 1
    if loss_mean != 'global' or n == 1: return counts + 1e-6
    return (all_reduce_sum(counts) + 1e-6) / n


class DataParallel(Callback):
    """Data-parallel training over the processes of a torchrun job: PyTorch's DDP wraps the model for the fit (it
    averages the processes' gradients during the backward pass); each process keeps random streams of its own; with
    `loss_mean` 'global' the loss is a mean over the whole global batch (`ElectraLoss.global_divisors`)."""
    order, run_valid = -4, False  # after MaskingCallback (-5) handed the bare model its generator

    def __init__(self, loss_mean: str = 'global', seed: int = 0):
        self.loss_mean, self.seed = loss_mean, seed

    def before_fit(self):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        rank = dist.get_rank()
        if rank: torch.manual_seed(rank_seed(self.seed, rank))  # dropout; a resumed run restores its own state next
        if self.loss_mean == 'global':  # (GradientAccumulation, when there, sets the step's divisors itself)
            self.loss_func.global_divisors = lambda counts: loss_divisors(counts, 'global')
        device = next(self.model.parameters()).device
        self.learn.model = DistributedDataParallel(self.model, device_ids=[device] if device.type == 'cuda' else None)

    def after_fit(self):
        self.learn.model = bare_model(self.model)
        self.loss_func.global_divisors = None


class GradientAccumulation(Callback):
    """Splits each step's batch (this process's share of it) into `n` micro-batches: the first n - 1 run forward and
    backward here, the last goes through fastai's own step; one optimizer step for the whole batch. The loss of
    every micro-batch is divided by the whole step's token counts (summed over the processes with `loss_mean`
    'global'), so the gradients add up to those of the whole batch at once."""
    order, run_valid = 11, False  # inside MixedPrecision's autocast (entered at 10); before CompileModel (12)

    def __init__(self, n: int, pad_token_id: int, loss_mean: str = 'global'):
        self.n, self.pad_token_id, self.loss_mean = n, pad_token_id, loss_mean

    def before_batch(self):
        labels, xb = self.yb[0], self.xb
        counts = torch.stack([(labels >= 0).sum().float(), (xb[0] != self.pad_token_id).sum().float()])  # [2]
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
