"""How a fine-tuning loss turns each example's loss into the batch's, one rule for every task kind (GLUE
classification and regression, multi-label, tagging, QA).

Official `FinetuningModel` (google-research/electra, run_finetuning.py) sums the per-example losses over the batch
(`tf.reduce_sum`), so its gradient is 32 times the mean's at batch 32. Adam mostly cancels the factor, but gradient
clipping at global norm 1.0 and Adam's eps of 1e-6 act on the larger gradient: the summed loss is clipped at nearly
every step. `loss_reduction: sum` (the default) trains on that sum; 'mean' averages over the batch as PyTorch's losses
and the fastai replication do; 'token' (tagging only) averages over the batch's labelled words.
"""
from __future__ import annotations

import torch

from electra.config.finetune import LOSS_REDUCTIONS
from electra.runtime.processes import world
from electra.training.distributed import is_distributed, loss_divisors

__all__ = ['LOSS_REDUCTIONS', 'FinetuningLoss']


class FinetuningLoss:
    """Base of the fine-tuning losses: a subclass computes each example's loss [B] and returns `self.reduce(...)`.

    `weight` [B] is each example's weight (0 for a stand-in row of `ShardedBatchSampler`). In a torchrun job of W
    processes the step averages the processes' gradients (electra/training/step.py), so 'sum' returns this
    process's sum times W, and 'mean' / 'token' divide this process's sum by the global batch's count over W: either
    way the gradient is the whole batch's. `local_sum` and `local_count` keep this process's share of the last batch
    (examples, or labelled words for 'token'), so the epoch's reported loss is a mean whatever the reduction."""

    reductions = ('sum', 'mean')

    def __init__(self, reduction: str = 'sum'):
        if reduction not in self.reductions:
            raise ValueError(f"loss_reduction: {reduction!r} is not one of {', '.join(self.reductions)} for "
                             f"{type(self).__name__}")
        self.reduction = reduction

    def reduce(self, per: torch.Tensor, weight: torch.Tensor | None = None,
               counts: torch.Tensor | None = None) -> torch.Tensor:
        "The batch's loss from each example's float32 loss `per` [B]; `counts` [B]: what 'token' averages over."
        w = torch.ones_like(per) if weight is None else weight.to(per.device, per.dtype)
        total = (per * w).sum()
        # kept detached: they are read for reports, and a compiled step may not hand out what its backward consumed
        self.local_sum = total.detach()
        self.local_count = ((counts.to(per.dtype) if self.reduction == 'token' else torch.ones_like(per)) * w).sum().detach()
        if self.reduction == 'sum': return total * (world().size if is_distributed() else 1)
        count = self.local_count.reshape(1)  # [1]
        divisor = loss_divisors(count, 'global') if is_distributed() else count.clamp(min=1e-6)
        return total / divisor[0]
