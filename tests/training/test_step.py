"""electra/training/step.py's `apply_gradients`, the way from a step's gradients to its update that pretraining and
fine-tuning share: with fp16's loss scaler its steps are torch's `GradScaler` rules (unscale, clip, step, update the
scale) to the last bit, and an overflowing step changes no weight and no moment, without a host read."""
import copy

import pytest
import torch
from torch import nn

from electra.training.optim import ElectraAdam, param_groups
from electra.training.speed import HostSyncCounter
from electra.training.step import StepConstants, Update, apply_gradients


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))


def optimizer(m: nn.Module, fused: bool):
    "ElectraAdam over `m` (decay and no-decay groups), and its groups as the step callback hands them over."
    opt = ElectraAdam(param_groups(m), lr=1e-2, weight_decay=0.01, fused=fused)
    params = list(m.parameters())
    where = {id(p): i for i, p in enumerate(params)}
    groups = [([where[id(p)] for p in g['params']], {k: v for k, v in g.items() if k not in ('params', 'names', 'lr')})
              for g in opt.param_groups]
    return opt, params, groups, [g['lr'] for g in opt.param_groups]


def loss_of(m: nn.Module, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return m(torch.randn(16, 4, generator=g)).pow(2).sum()


@pytest.mark.parametrize('fused', [True, False], ids=['fused', 'foreach'])
def test_fp16_steps_are_grad_scalers_rules_and_an_overflow_changes_nothing(fused):
    ref, mine = model(), model()
    ref_opt, mine_opt = optimizer(ref, fused)[0], optimizer(mine, fused)
    ref_scaler, scaler = (torch.amp.GradScaler('cpu', init_scale=2.0 ** 8, growth_interval=2) for _ in range(2))
    for seed in range(3):  # the scale grows after 2 good steps
        ref_scaler.scale(loss_of(ref, seed)).backward()
        ref_scaler.unscale_(ref_opt)
        torch.nn.utils.clip_grad_norm_(list(ref.parameters()), 0.5)
        ref_scaler.step(ref_opt)
        ref_scaler.update()
        ref_opt.zero_grad()
        opt, params, groups, lrs = mine_opt
        grads = list(torch.autograd.grad(scaler.scale(loss_of(mine, seed)), params))
        assert apply_gradients(grads, Update(opt, params, groups, lrs), StepConstants(max_norm=0.5), scaler).item() == 0
        assert scaler.get_scale() == ref_scaler.get_scale()
        for p, q in zip(mine.parameters(), ref.parameters()): assert torch.equal(p, q)
    assert scaler.get_scale() == 2.0 ** 9
    before = copy.deepcopy((mine.state_dict(), [t for st in opt.state.values() for t in st.values()]))
    grads = list(torch.autograd.grad(scaler.scale(loss_of(mine, 5)), params))
    grads[0][0, 0] = float('inf')  # one overflowing gradient
    with HostSyncCounter() as reads:
        skipped = apply_gradients(grads, Update(opt, params, groups, lrs), StepConstants(max_norm=0.5), scaler)
    assert reads.total == 0 and skipped.item() == 1 and scaler.get_scale() == 2.0 ** 8  # halved, on the device
    for k, v in mine.state_dict().items(): assert torch.equal(v, before[0][k]), k
    assert all(torch.equal(a, b) for a, b in zip(before[1], [t for st in opt.state.values() for t in st.values()]))
