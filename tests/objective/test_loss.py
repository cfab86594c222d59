"""electra/objective/loss.py: the ELECTRA loss against a hand computation."""
import pytest
import torch
import torch.nn.functional as F

from electra.objective.loss import ElectraLoss
from electra.objective.model import ElectraGeneratorDiscriminatorOutput


def test_loss_equals_hand_computation():
    g = torch.Generator().manual_seed(0)
    B, L, P, V = 3, 7, 2, 11
    gen_logits = torch.randn(B, P, V, generator=g)
    labels = torch.tensor([[3, 4], [5, -100], [6, 7]])
    disc_logits = torch.randn(B, L, generator=g)
    attention = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 5 + [0] * 2]).bool()
    replaced = torch.rand(B, L, generator=g) < 0.3
    pred = ElectraGeneratorDiscriminatorOutput(attention_mask=attention, gen_logits=gen_logits, gen_targets=labels,
                                               disc_logits=disc_logits, is_replaced=replaced & attention,
                                               disc_mask=attention)
    # by hand: mean -log softmax at the 5 labelled slots; mean BCE over the 16 real tokens
    ce = [-torch.log_softmax(gen_logits[b, p], -1)[labels[b, p]] for b in range(B) for p in range(P) if labels[b, p] >= 0]
    gen = sum(ce) / 5
    bce = []
    for b in range(B):
        for t in range(L):
            if attention[b, t]:
                p = torch.sigmoid(disc_logits[b, t])
                y = float(replaced[b, t])
                bce.append(-(y * torch.log(p) + (1 - y) * torch.log(1 - p)))
    disc = sum(bce) / 16
    loss = ElectraLoss()(pred, labels)
    assert loss.item() == pytest.approx((1.0 * gen + 50.0 * disc).item(), rel=1e-5)
    assert ElectraLoss(2.0, 10.0)(pred, labels).item() == pytest.approx((2 * gen + 10 * disc).item(), rel=1e-5)
    assert F.cross_entropy(gen_logits.flatten(0, 1), labels.flatten()).item() == pytest.approx(gen.item(), rel=1e-5)
