"""electra/training/optim.py: the official AdamWeightDecayOptimizer against its update formula."""
import numpy as np
import pytest
import torch
from torch import nn

from electra.training.optim import ElectraAdam, electra_opt_func, no_decay_param, param_groups
from tests.support.optim import Tiny


def reference_update(theta, m, v, g, lr, wd, b1=0.9, b2=0.999, eps=1e-6):
    "The official AdamWeightDecayOptimizer, element by element in float64 numpy."
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (np.sqrt(v) + eps) + wd * theta
    return theta - lr * u, m, v


@pytest.mark.parametrize('fused', [True, False])
def test_matches_reference_and_skips_decay_on_layernorm_and_bias(fused):
    "Both implementations (torch's fused AdamW kernel at step 2^30, and foreach calls) compute the official update."
    torch.manual_seed(0)
    model = Tiny().double()
    opt = ElectraAdam(param_groups(model), lr=0.01, weight_decay=0.1, fused=fused)
    assert opt.fused is fused
    ref = {n: [p.detach().numpy().copy(), 0.0, 0.0] for n, p in model.named_parameters()}
    g = torch.Generator().manual_seed(1)
    for step in range(6):
        lr = 0.01 * (step + 1) / 6
        for group in opt.param_groups: group['lr'] = lr
        x = torch.randn(8, 4, generator=g, dtype=torch.float64)
        loss = model(x).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        for n, p in model.named_parameters():
            wd = 0.0 if ('LayerNorm' in n or n.endswith('bias')) else 0.1
            ref[n] = list(reference_update(ref[n][0], ref[n][1], ref[n][2], p.grad.numpy(), lr, wd))
        opt.step()
        for n, p in model.named_parameters():
            np.testing.assert_allclose(p.detach().numpy(), ref[n][0], rtol=0, atol=1e-6, err_msg=n)


@pytest.mark.parametrize('fused', [True, False])
def test_no_bias_correction_first_step_is_small(fused):
    # With bias correction the first Adam step would be lr * sign(g); without it, it is lr * 0.1 g / (sqrt(0.001) |g|).
    p = nn.Parameter(torch.tensor([1.0]))
    opt = ElectraAdam([p], lr=1.0, fused=fused)
    p.grad = torch.tensor([2.0])
    opt.step()
    assert p.item() == pytest.approx(1.0 - 0.2 / (np.sqrt(0.001 * 4) + 1e-6), rel=1e-6)


def test_decay_groups_split():
    groups = param_groups(Tiny())
    assert [g['no_decay'] for g in groups] == [False, True]
    assert sorted(groups[1]['names']) == ['LayerNorm.bias', 'LayerNorm.weight', 'dense.bias']
    assert no_decay_param('electra.embeddings.LayerNorm.weight') and not no_decay_param('dense.weight')


def test_fastai_wrapper_hypers_and_wd_never_reaches_no_decay_group():
    opt = electra_opt_func(wd=0.01)(param_groups(Tiny()), lr=0.5)
    opt.set_hypers(wd=0.3, lr=0.2)  # fastai sets a hyper on every group at once
    assert [h['wd'] for h in opt.hypers] == [0.3, 0.3] and [h['lr'] for h in opt.hypers] == [0.2, 0.2]
    p_ln = opt.opt.param_groups[1]['params'][0]
    before = p_ln.detach().clone()
    p_ln.grad = torch.zeros_like(p_ln)
    opt.step()
    assert torch.equal(p_ln.detach(), before)  # zero gradient and no decay: unchanged
