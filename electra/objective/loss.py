"""The ELECTRA objective (the paper, equation 1): total = gen_weight * L_gen + disc_weight * L_disc (1 and 50 in the paper).

L_gen: cross-entropy at the chosen positions (kept-original ones included), mean.
L_disc: sigmoid BCE over every real token, [CLS] and [SEP] included, mean.
Both denominators get + 1e-6 as in the official code, so an empty batch gives 0 rather than NaN.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ['ElectraLoss']


class ElectraLoss(nn.Module):
    "Weighted sum of the generator MLM loss and the discriminator replaced-token-detection loss."

    def __init__(self, gen_weight: float = 1.0, disc_weight: float = 50.0):
        super().__init__()
        self.gen_weight, self.disc_weight = gen_weight, disc_weight
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None  # (gen, disc) of the last call, detached, on device

    def forward(self, pred: dict[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        chosen = labels >= 0                                                     # [B, P]
        ce = F.cross_entropy(pred['gen_logits'].flatten(0, 1).float(), labels.flatten(), ignore_index=-100,
                             reduction='sum')
        gen_loss = ce / (chosen.sum() + 1e-6)
        real = pred['attention_mask'].float()                                    # [B, L]
        bce = F.binary_cross_entropy_with_logits(pred['disc_logits'].float(), pred['is_replaced'].float(),
                                                 reduction='none')
        disc_loss = (bce * real).sum() / (real.sum() + 1e-6)
        self.last = (gen_loss.detach(), disc_loss.detach())
        return self.gen_weight * gen_loss + self.disc_weight * disc_loss
