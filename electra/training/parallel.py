"""Data-parallel training over the processes of a torchrun job, for any fastai `Learner` of the library (pretraining
and fine-tuning): PyTorch's DDP wraps the model for the fit, and the loss is a mean over the whole global batch."""
from __future__ import annotations

import torch
from fastai.callback.core import Callback

from electra.runtime.processes import world
from electra.training.distributed import all_reduce_sum, bare_model, is_distributed, rank_seed

__all__ = ['DataParallel', 'loss_divisors']


def loss_divisors(counts: torch.Tensor, loss_mean: str) -> torch.Tensor:
    """The divisors [2] of this process's loss sums, from its token counts [2] (chosen positions, real tokens): with
    `loss_mean` 'global' in a job of W processes, (the counts summed over the processes + 1e-6) / W, so that DDP's
    average of the processes' losses is the mean over the whole batch; else its own counts + 1e-6."""
    n = world().size if is_distributed() else 1
    if loss_mean != 'global' or n == 1: return counts + 1e-6
    return (all_reduce_sum(counts.clone()) + 1e-6) / n  # (all_reduce works in place; `counts` stays this process's)


class DataParallel(Callback):
    """Data-parallel training over the processes of a torchrun job: PyTorch's DDP wraps the model for the fit (it
    averages the processes' gradients during the backward pass); each process keeps random streams of its own; with
    `loss_mean` 'global' the loss is a mean over the whole global batch (the loss function's `global_divisors`)."""
    order, run_valid = -4, False  # pretraining: after MaskingCallback (-5) handed the bare model its generator

    def __init__(self, loss_mean: str = 'global', seed: int = 0):
        "`seed`: the run's; rank 0 keeps the stream it set, the others draw from `rank_seed(seed, rank)`."
        self.loss_mean, self.seed = loss_mean, seed

    def before_fit(self):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        rank = dist.get_rank()
        if rank: torch.manual_seed(rank_seed(self.seed, rank))  # dropout; a resumed run restores its own state next
        if self.loss_mean == 'global':  # (MicroBatches, when there, sets the step's divisors itself)
            self.loss_func.global_divisors = lambda counts: loss_divisors(counts, 'global')
        device = next(self.model.parameters()).device
        self.learn.model = DistributedDataParallel(self.model, device_ids=[device] if device.type == 'cuda' else None)

    def after_fit(self):
        self.learn.model = bare_model(self.model)
        self.loss_func.global_divisors = None
