"""The ELECTRA objective (the paper, equation 1): total = gen_weight * L_gen + disc_weight * L_disc (1 and 50 in the paper).

L_gen: cross-entropy at the chosen positions (kept-original ones included), mean.
L_disc: sigmoid BCE over every real token, [CLS] and [SEP] included, mean.
Both denominators get + 1e-6 as in the official code, so an empty batch gives 0 rather than NaN.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ['ElectraLoss']


class ElectraLoss(nn.Module):
    """Weighted sum of the generator MLM loss and the discriminator replaced-token-detection loss.

    In data-parallel training, each process holds part of the batch and DDP averages the processes' gradients.
    `global_divisors`, when set, turns this process's token counts [2] (chosen positions, real tokens) into the
    divisors of its loss: `(counts summed over the W processes + 1e-6) / W`, so that the average of the processes'
    losses is the loss of the whole batch in one process, whatever its split. Unset, each process divides by its own
    counts: the average of per-process means, as the official TPU code averages per-core losses."""

    def __init__(self, gen_weight: float = 1.0, disc_weight: float = 50.0):
        super().__init__()
        self.gen_weight, self.disc_weight = gen_weight, disc_weight
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None  # (gen, disc) of the last call, detached, on device
        self.global_divisors: Callable[[torch.Tensor], torch.Tensor] | None = None

    def forward(self, pred: dict[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        chosen = labels >= 0                                                     # [B, P]
        ce = F.cross_entropy(pred['gen_logits'].flatten(0, 1).float(), labels.flatten(), ignore_index=-100,
                             reduction='sum')
        real = pred['attention_mask'].float()                                    # [B, L]
        bce = F.binary_cross_entropy_with_logits(pred['disc_logits'].float(), pred['is_replaced'].float(),
                                                 reduction='none')
        counts = torch.stack([chosen.sum().float(), real.sum()])                 # [2]
        divisors = counts + 1e-6 if self.global_divisors is None else self.global_divisors(counts)
        gen_loss, disc_loss = ce / divisors[0], (bce * real).sum() / divisors[1]
        self.last = (gen_loss.detach(), disc_loss.detach())
        return self.gen_weight * gen_loss + self.disc_weight * disc_loss
