"""The pretraining loss (the paper, equation 1): total = gen_weight * L_gen + disc_weight * L_disc (1 and 50 in the paper).

L_gen: the generator's cross-entropy at the chosen positions (kept-original ones included), mean; absent without a
generator network (BERT, the uniform generator) and in the second stage of two-stage training. Electric's two-tower
generator: its cloze cross-entropy at every token masking may choose (`gen_targets`), mean.
L_disc, the discriminator's loss, by the loss head of the objective's row (config/objectives.py; the paper, section 3.2
and Table 5), mean over the row's `positions`:
  rtd   sigmoid BCE of replaced-token detection (every real token, [CLS] and [SEP] included; or the chosen positions);
        Electric's row labels every masked position fake and corrects the logit (`electric_logits`);
  mlm   cross-entropy of the discriminator's MLM head at the chosen positions;
  copy  -log p(original) over every real token, p(x) = D 1[x = input] + (1 - D) softmax(x), D the copy gate.
Both denominators get + 1e-6 as in the official code, so an empty batch gives 0 rather than NaN.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from electra.config.objectives import HEADS, OBJECTIVES, Objective
from electra.objective.masking import candidates_mask, positions_mask, write_at_positions

if TYPE_CHECKING:
    from electra.objective.model import ElectraGeneratorDiscriminatorOutput as Output

__all__ = ['ElectraLoss', 'DISC_LOSSES', 'generator_loss_sum', 'disc_loss_terms', 'disc_predictions', 'loss_counts',
           'batch_statistics']


def generator_loss_sum(pred: Output) -> torch.Tensor:
    "The generator's cross-entropy summed over its targets (`gen_targets` >= 0)."
    return F.cross_entropy(pred.gen_logits.flatten(0, 1).float(), pred.gen_targets.flatten(), ignore_index=-100,
                           reduction='sum')


def _rtd_terms(pred: Output) -> torch.Tensor:
    "Replaced-token detection: the sigmoid BCE of `disc_logits` against `is_replaced`, [B, L]."
    return F.binary_cross_entropy_with_logits(pred.disc_logits.float(), pred.is_replaced.float(), reduction='none')


def _mlm_terms(pred: Output) -> torch.Tensor:
    "The discriminator's MLM head: the cross-entropy of `mlm_logits` against `mlm_targets` (-100 taken as 0), [B, P]."
    logits = pred.mlm_logits.float()
    return F.cross_entropy(logits.flatten(0, 1), pred.mlm_targets.clamp(min=0).flatten(),
                           reduction='none').view(pred.mlm_targets.shape)


def _copy_terms(pred: Output) -> torch.Tensor:
    "All-tokens MLM: -log p(original), p(x) = D 1[x = input] + (1 - D) softmax(x), D the copy gate, [B, L]."
    targets, gate = pred.mlm_targets, pred.copy_logits.float()                                 # [B, L]
    log_softmax = pred.mlm_logits.float().log_softmax(-1).gather(-1, targets[..., None])[..., 0]
    copied = F.logsigmoid(gate).masked_fill(pred.mlm_inputs != targets, float('-inf'))         # log(D 1[x = input])
    return -torch.logaddexp(copied, F.logsigmoid(-gate) + log_softmax)


def _rtd_predictions(pred: Output) -> tuple[torch.Tensor, torch.Tensor]:
    flagged = pred.disc_logits > 0
    return flagged == pred.is_replaced, flagged


def _token_predictions(pred: Output) -> tuple[torch.Tensor, torch.Tensor]:
    probs = pred.mlm_logits.float().softmax(-1)
    if pred.copy_logits is not None:  # the copy gate's share goes to the input token
        gate = torch.sigmoid(pred.copy_logits.float())[..., None]                          # [B, L, 1]
        probs = (1 - gate) * probs
        probs = probs.scatter_add(-1, pred.mlm_inputs[..., None], gate)
    correct = probs.argmax(-1) == pred.mlm_targets
    return correct, torch.zeros_like(correct)


# each loss head of the registry (config/objectives.py HEADS): (its per-position losses, its (correct, flagged))
DISC_LOSSES = {'rtd': (_rtd_terms, _rtd_predictions), 'mlm': (_mlm_terms, _token_predictions),
               'copy': (_copy_terms, _token_predictions)}


def disc_loss_terms(pred: Output, head: str) -> torch.Tensor:
    "The discriminator's per-position losses of loss head `head`, shaped like `pred.disc_mask`, zero outside it."
    return DISC_LOSSES[head][0](pred) * pred.disc_mask


def loss_counts(objective: Objective, input_ids: torch.Tensor, positions: torch.Tensor, labels: torch.Tensor,
                pad_token_id: int, special_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The counts [2] the two losses divide by, from a masked batch (`input_ids` [B, L], `positions` and `labels`
    [B, P]) before any forward: the generator's targets (chosen positions; for the two-tower generator the unmasked
    input's tokens masking may choose, not `special_ids`), and positions of `objective`'s main loss (as `disc_mask`)."""
    chosen, where = labels >= 0, objective.positions
    targets = chosen.sum()
    if objective.generator == 'two_tower':
        if special_ids is None: raise ValueError(f"objective '{objective.name}': give loss_counts the masking's special_ids")
        targets = candidates_mask(write_at_positions(input_ids, positions, labels, chosen), special_ids, pad_token_id).sum()
    if where == 'tokens': main = (input_ids != pad_token_id).sum()
    elif where == 'chosen': main = positions_mask(input_ids, positions, chosen).sum()
    else: main = chosen.sum()  # 'slots'
    return torch.stack([targets.float(), main.float()])


def disc_predictions(pred: Output, head: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, flagged) of the discriminator, shaped like `pred.disc_mask`: for replaced-token detection `flagged`
    (logit > 0) and `correct` (flagged == replaced); for the MLM heads `correct` where the most probable token (copy
    gate included) is the target, and `flagged` all False."""
    return DISC_LOSSES[head][1](pred)


class ElectraLoss(nn.Module):
    """Weighted sum of the generator's MLM loss and the discriminator's loss (`objective`'s loss head: replaced-token
    detection by default).

    `divisors` [2], when given, divide the two loss sums in place of this batch's own counts + 1e-6: the pretraining
    step (electra/pretraining/step.py) gives the whole step's counts, summed over micro-batches and processes."""

    def __init__(self, gen_weight: float = 1.0, disc_weight: float = 50.0, objective: str = 'electra'):
        super().__init__()
        self.gen_weight, self.disc_weight, self.objective = gen_weight, disc_weight, OBJECTIVES[objective]
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None  # (gen, main) of the last call, detached, on device

    def forward(self, pred: Output, labels: torch.Tensor, divisors: torch.Tensor | None = None):
        gen_loss, disc_loss = self.losses(pred, labels, divisors)
        self.last = (gen_loss.detach(), disc_loss.detach())
        return self.gen_weight * gen_loss + self.disc_weight * disc_loss

    def losses(self, pred: Output, labels: torch.Tensor,
               divisors: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        "(L_gen, L_disc), each 0-d; 0 for a network that did not run (its outputs None)."
        chosen = (labels if pred.gen_targets is None else pred.gen_targets) >= 0           # [B, P] or [B, L]
        mask = pred.disc_mask                                                                # [B, L] or [B, P]
        counts = torch.stack([chosen.sum().float(), (chosen if mask is None else mask).sum().float()])  # [2]
        divisors = counts + 1e-6 if divisors is None else divisors
        zero = counts.new_zeros(())
        gen_loss = generator_loss_sum(pred) / divisors[0] if pred.gen_logits is not None else zero
        disc_loss = disc_loss_terms(pred, self.objective.head).sum() / divisors[1] if mask is not None else zero
        return gen_loss, disc_loss


@torch.no_grad()
def batch_statistics(pred: Output, labels: torch.Tensor, head: str) -> dict[str, torch.Tensor]:
    """What the metrics count in one batch, as 0-d tensors on its device (no read to the host): the generator's correct
    predictions (`gen_preds`) among the `gen_total` chosen positions, as the official `masked_lm_accuracy` counts
    them; the discriminator's correct answers among the `disc_total` positions of its loss (loss head `head`), and for
    replaced-token detection the replaced tokens flagged (`tp`), originals flagged (`fp`) and replaced tokens missed
    (`fn`) there; `replaced` of the `real` tokens. Counts a model does not have are 0."""
    chosen, real = labels >= 0, pred.attention_mask
    zero = chosen.sum() * 0
    out = dict.fromkeys(('gen_correct', 'gen_total', 'disc_correct', 'disc_total', 'tp', 'fp', 'fn', 'replaced'), zero)
    out['real'] = real.sum()
    if pred.gen_preds is not None:
        out.update(gen_correct=((pred.gen_preds == labels) & chosen).sum(), gen_total=chosen.sum())
    if pred.is_replaced is not None: out['replaced'] = (pred.is_replaced & real).sum()
    mask = pred.disc_mask
    if mask is None: return out
    correct, flagged = disc_predictions(pred, head)
    out.update(disc_correct=(correct & mask).sum(), disc_total=mask.sum())
    if not HEADS[head]:  # replaced-token detection
        replaced = pred.is_replaced & mask
        out.update(tp=(flagged & replaced).sum(), fp=(flagged & ~replaced & mask).sum(), fn=(~flagged & replaced).sum())
    return out
