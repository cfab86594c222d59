"""The pretraining loss (the paper, equation 1): total = gen_weight * L_gen + disc_weight * L_disc (1 and 50 in the paper).

L_gen: the generator's cross-entropy at the chosen positions (kept-original ones included), mean; absent without a
generator network (BERT, the uniform generator) and in the second stage of two-stage training. Electric's two-tower
generator: its cloze cross-entropy at every token masking may choose (`gen_targets`), mean.
L_disc, the discriminator's loss, by objective (the paper, section 3.2 and Table 5):
  electra          sigmoid BCE of replaced-token detection over every real token, [CLS] and [SEP] included, mean;
  electra_15       the same BCE over the chosen positions only;
  mlm, replace_mlm cross-entropy of the discriminator's MLM head at the chosen positions, mean;
  all_tokens_mlm   -log p(original) over every real token, p(x) = D 1[x = input] + (1 - D) softmax(x), D the copy gate.
  electric         the BCE of `electra` with every masked position fake, on the logit `electric_logits` corrects.
Both denominators get + 1e-6 as in the official code, so an empty batch gives 0 rather than NaN.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from electra.objective.masking import candidates_mask, positions_mask, write_at_positions
from electra.objective.variants import VARIANTS

__all__ = ['ElectraLoss', 'generator_targets', 'generator_loss_sum', 'disc_mask', 'disc_loss_terms', 'disc_predictions', 'loss_counts', 'batch_statistics']


def generator_targets(pred: dict[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
    "What the generator predicts: `labels` [B, P] at the chosen slots, or the two-tower generator's `gen_targets` [B, L]."
    return pred.get('gen_targets', labels)


def generator_loss_sum(pred: dict[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
    "The generator's cross-entropy summed over its targets (`generator_targets` >= 0)."
    return F.cross_entropy(pred['gen_logits'].flatten(0, 1).float(), generator_targets(pred, labels).flatten(),
                           ignore_index=-100, reduction='sum')


def disc_mask(pred: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """The positions of the discriminator's loss: `pred['disc_mask']`; every real token for replaced-token detection
    outputs without one; None when the discriminator did not run (two-stage training's first stage)."""
    if 'disc_mask' in pred: return pred['disc_mask']
    return pred['attention_mask'] if 'disc_logits' in pred else None


def disc_loss_terms(pred: dict[str, torch.Tensor]) -> torch.Tensor:
    "The discriminator's per-position losses, shaped like `disc_mask(pred)` ([B, L] or [B, P]), zero outside it."
    mask = disc_mask(pred)
    if 'disc_logits' in pred:
        terms = F.binary_cross_entropy_with_logits(pred['disc_logits'].float(), pred['is_replaced'].float(),
                                                   reduction='none')
    elif 'copy_logits' not in pred:
        logits = pred['mlm_logits'].float()
        terms = F.cross_entropy(logits.flatten(0, 1), pred['mlm_targets'].clamp(min=0).flatten(),
                                reduction='none').view(mask.shape)
    else:
        targets, gate = pred['mlm_targets'], pred['copy_logits'].float()                        # [B, L]
        log_softmax = pred['mlm_logits'].float().log_softmax(-1).gather(-1, targets[..., None])[..., 0]
        copied = F.logsigmoid(gate).masked_fill(pred['mlm_inputs'] != targets, float('-inf'))    # log(D 1[x = input])
        terms = -torch.logaddexp(copied, F.logsigmoid(-gate) + log_softmax)
    return terms * mask


def loss_counts(objective: str, input_ids: torch.Tensor, positions: torch.Tensor, labels: torch.Tensor,
                pad_token_id: int, special_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The counts [2] the two losses divide by, from a masked batch (`input_ids` [B, L], `positions` and `labels`
    [B, P]) before any forward: the generator's targets (chosen positions; for the two-tower generator the unmasked
    input's tokens masking may choose, not `special_ids`), and positions of `objective`'s main loss (as `disc_mask`)."""
    chosen, where = labels >= 0, VARIANTS[objective].positions
    targets = chosen.sum()
    if VARIANTS[objective].two_tower_generator:
        if special_ids is None: raise ValueError(f"objective '{objective}': give loss_counts the masking's special_ids")
        targets = candidates_mask(write_at_positions(input_ids, positions, labels, chosen), special_ids, pad_token_id).sum()
    if where == 'tokens': main = (input_ids != pad_token_id).sum()
    elif where == 'chosen': main = positions_mask(input_ids, positions, chosen).sum()
    else: main = chosen.sum()  # 'slots'
    return torch.stack([targets.float(), main.float()])


def disc_predictions(pred: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, flagged) of the discriminator, shaped like `pred['disc_mask']`: for replaced-token detection `flagged`
    (logit > 0) and `correct` (flagged == replaced); for the MLM objectives `correct` where the most probable token
    (copy gate included) is the target, and `flagged` all False."""
    if 'disc_logits' in pred:
        flagged = pred['disc_logits'] > 0
        return flagged == pred['is_replaced'], flagged
    probs = pred['mlm_logits'].float().softmax(-1)
    if 'copy_logits' in pred:
        gate = torch.sigmoid(pred['copy_logits'].float())[..., None]                        # [B, L, 1]
        probs = (1 - gate) * probs
        probs = probs.scatter_add(-1, pred['mlm_inputs'][..., None], gate)
    correct = probs.argmax(-1) == pred['mlm_targets']
    return correct, torch.zeros_like(correct)


class ElectraLoss(nn.Module):
    """Weighted sum of the generator's MLM loss and the discriminator's loss (replaced-token detection by default).

    `divisors` [2], when given, divide the two loss sums in place of this batch's own counts + 1e-6: the pretraining
    step (electra/pretraining/step.py) gives the whole step's counts, summed over micro-batches and processes."""

    def __init__(self, gen_weight: float = 1.0, disc_weight: float = 50.0):
        super().__init__()
        self.gen_weight, self.disc_weight = gen_weight, disc_weight
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None  # (gen, main) of the last call, detached, on device

    def forward(self, pred: dict[str, torch.Tensor], labels: torch.Tensor, divisors: torch.Tensor | None = None):
        gen_loss, disc_loss = self.losses(pred, labels, divisors)
        self.last = (gen_loss.detach(), disc_loss.detach())
        return self.gen_weight * gen_loss + self.disc_weight * disc_loss

    def losses(self, pred: dict[str, torch.Tensor], labels: torch.Tensor,
               divisors: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        "(L_gen, L_disc), each 0-d; 0 for a network that did not run."
        chosen = generator_targets(pred, labels) >= 0                                       # [B, P] or [B, L]
        mask = disc_mask(pred)                                                               # [B, L] or [B, P]
        counts = torch.stack([chosen.sum().float(), (chosen if mask is None else mask).sum().float()])  # [2]
        divisors = counts + 1e-6 if divisors is None else divisors
        zero = counts.new_zeros(())
        gen_loss = generator_loss_sum(pred, labels) / divisors[0] if 'gen_logits' in pred else zero
        return gen_loss, disc_loss_terms(pred).sum() / divisors[1] if mask is not None else zero


@torch.no_grad()
def batch_statistics(pred: dict[str, torch.Tensor], labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """What the metrics count in one batch, as 0-d tensors on its device (no read to the host): the generator's correct
    predictions among `gen_total` chosen positions; the discriminator's correct answers among the `disc_total` positions
    of its loss, and for replaced-token detection the replaced tokens flagged (`tp`), originals flagged (`fp`) and
    replaced tokens missed (`fn`) there; `replaced` of the `real` tokens. Counts a model does not have are 0."""
    chosen, real = labels >= 0, pred['attention_mask']
    zero = chosen.sum() * 0
    out = dict.fromkeys(('gen_correct', 'gen_total', 'disc_correct', 'disc_total', 'tp', 'fp', 'fn', 'replaced'), zero)
    out['real'] = real.sum()
    if 'gen_logits' in pred:
        targets = generator_targets(pred, labels)
        out.update(gen_correct=((pred['gen_logits'].argmax(-1) == targets) & (targets >= 0)).sum(),
                   gen_total=(targets >= 0).sum())
    if 'is_replaced' in pred: out['replaced'] = (pred['is_replaced'] & real).sum()
    mask = disc_mask(pred)
    if mask is None: return out
    correct, flagged = disc_predictions(pred)
    out.update(disc_correct=(correct & mask).sum(), disc_total=mask.sum())
    if 'disc_logits' in pred:
        replaced = pred['is_replaced'] & mask
        out.update(tp=(flagged & replaced).sum(), fp=(flagged & ~replaced & mask).sum(), fn=(~flagged & replaced).sum())
    return out
