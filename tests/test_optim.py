"The optimizer (the official AdamWeightDecayOptimizer) against a plain reference of the update formula, and the schedule against its formula."
import numpy as np
import pytest
import torch
from fastai.callback.schedule import ParamScheduler
from torch import nn

from electra.training.optim import ElectraAdam, electra_opt_func, no_decay_param, param_groups
from electra.training.schedule import lr_at_step, warmup_decay_sched


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(4, 3)
        self.LayerNorm = nn.LayerNorm(3)
        self.out = nn.Linear(3, 2, bias=False)

    def forward(self, x): return self.out(self.LayerNorm(self.dense(x)))


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


@pytest.mark.parametrize('W,T', [(10_000, 1_000_000), (10, 100), (0, 50)])
def test_schedule_formula(W, T):
    peak = 5e-4
    formula = lambda t: peak * (min(1, t / W) if W else 1) * (1 - min(t, T) / T)
    for t in [0, W // 2, W, T // 2, T - 1]:
        assert lr_at_step(t, peak, W, T) == pytest.approx(formula(t), rel=1e-12, abs=1e-15)
    sched = warmup_decay_sched(peak, W, T)
    for t in [0, W // 2, W, T // 2, T - 1]:
        assert sched(t / T) == pytest.approx(formula(t), rel=1e-9, abs=1e-15)
    if W: assert lr_at_step(W, peak, W, T) == pytest.approx(peak * (1 - W / T))  # not the peak: applied together


def test_warmup_then_decay_option_and_per_group_peaks():
    assert lr_at_step(10, 1.0, 10, 110, mode='warmup_then_decay') == pytest.approx(1.0)
    assert lr_at_step(60, 1.0, 10, 110, mode='warmup_then_decay') == pytest.approx(0.5)
    np.testing.assert_allclose(lr_at_step(5, np.array([1.0, 0.5]), 10, 100), [0.5 * 0.95, 0.25 * 0.95])


def test_schedule_runs_as_fastai_param_scheduler():
    opt = electra_opt_func()(param_groups(Tiny()), lr=1.0)
    cb = ParamScheduler({'lr': warmup_decay_sched(1.0, 10, 100)})
    cb.learn = type('L', (), {'opt': opt, 'pct_train': 0.3})()
    cb.before_batch()
    assert opt.hypers[0]['lr'] == pytest.approx(1.0 * 0.7)
