"""The official ELECTRA optimizer: Adam without bias correction, with decoupled weight decay.

Official `AdamWeightDecayOptimizer` (google-research/electra, model/optimization.py):
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    u = m / (sqrt(v) + eps) + wd * theta     (wd skipped for LayerNorm weights and biases)
    theta = theta - lr * u
No 1 / (1 - b^t) correction: together with the warm-up this keeps the first steps small.

Each parameter group is updated by torch's fused AdamW kernel (`torch._fused_adamw_`: one multi-tensor kernel, the
moments updated in place, the decay decoupled as above) with its step count held at 2^30, where 1 - b^t is exactly 1
in floating point: the kernel then computes the official, uncorrected update. Where that kernel is missing, the same
update runs as `torch._foreach_*` calls (`fused=False` forces them; the tests hold both to the official formula).
"""
from __future__ import annotations

from functools import partial
from typing import Iterable

import torch
from torch import nn

__all__ = ['ElectraAdam', 'no_decay_param', 'param_groups', 'electra_opt_func']

NO_DECAY_NAMES = ('LayerNorm', 'layer_norm', 'bias')  # the official exclude_from_weight_decay list


def no_decay_param(name: str) -> bool:
    "True for parameters the official code exempts from weight decay: LayerNorm weights and every bias."
    return any(n in name for n in NO_DECAY_NAMES)


class ElectraAdam(torch.optim.Optimizer):
    "Adam without bias correction and with decoupled weight decay, as in the official ELECTRA code."

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0, fused: bool | None = None):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f'invalid ElectraAdam hyperparameters lr={lr} betas={betas} eps={eps} wd={weight_decay}')
        # `no_decay` is per group: a group of LayerNorm weights and biases ignores `weight_decay`, so setting the
        # decay for every group at once (as fastai's `set_hypers(wd=...)` does) can never decay them.
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, no_decay=False))
        self.fused = hasattr(torch, '_fused_adamw_') if fused is None else fused
        self._no_correction: dict[torch.device, torch.Tensor] = {}  # device -> step count 2^30 (float32, 0-dim)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad(): loss = closure()
        for group in self.param_groups:
            params = [p for p in group['params'] if p.grad is not None]
            if params: self.update(group, params, [p.grad for p in params])
        return loss

    def init_state(self, params: Iterable[torch.Tensor]) -> None:
        "The moments of `params` that have none yet: zeros like the parameter."
        for p in params:
            if not self.state[p]:
                self.state[p]['exp_avg'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.state[p]['exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)

    def update(self, group: dict, params: list[torch.Tensor], grads: list[torch.Tensor], lr=None, found_inf=None) -> None:
        """One group's update of `params` by their gradients `grads`, at the group's rate or `lr` (a 0-d tensor in a
        compiled step, which dynamo cannot trace into the fused kernel: there the foreach calls run). `found_inf` [1]:
        1.0 where fp16's gradients overflowed (then zeroed): the update changes nothing, decided on the device."""
        self.init_state(params)
        ms, vs, lr = *self.moments(params), group['lr'] if lr is None else lr
        if not self.fused or torch.compiler.is_compiling():
            return self.foreach_update(params, grads, ms, vs, lr, *self.hypers(group), found_inf)
        device = params[0].device
        if device not in self._no_correction:
            self._no_correction[device] = torch.tensor(2.0 ** 30, device=device)
        b1, b2, eps, wd = self.hypers(group)
        # the fused kernel reads each gradient in its parameter's memory order, as `.grad` is laid out; a gradient
        # from `torch.autograd.grad` may not be (vmap's of a stack of runs): laid out so first
        grads = [g if g.stride() == p.stride() else torch.empty_like(p).copy_(g) for p, g in zip(params, grads)]
        # torch's fused AdamW kernel at step 2^30: b^t underflows to 0, so both bias corrections are exactly 1; it
        # leaves everything as it was where found_inf is 1 (as GradScaler's fused optimizers use it)
        torch._fused_adamw_(params, grads, ms, vs, [], [self._no_correction[device]] * len(params), lr=lr,
                            beta1=b1, beta2=b2, weight_decay=wd, eps=eps, amsgrad=False, maximize=False,
                            found_inf=found_inf)

    def moments(self, params: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        "The first and second moments of `params` (`init_state` made them)."
        return [self.state[p]['exp_avg'] for p in params], [self.state[p]['exp_avg_sq'] for p in params]

    @staticmethod
    def hypers(group: dict) -> tuple[float, float, float, float]:
        "(beta1, beta2, eps, weight decay) of a group; a `no_decay` group has no weight decay."
        b1, b2 = group['betas']
        return b1, b2, group['eps'], 0.0 if group['no_decay'] else group['weight_decay']

    @staticmethod
    def foreach_update(params, grads, ms, vs, lr, b1: float, b2: float, eps: float, wd: float, found_inf=None) -> None:
        """The same update as multi-tensor foreach calls; `lr` a float or a 0-d tensor on the parameters' device (a
        compiled step reads it when it runs, so a new rate needs no new graph; the fused kernel cannot be traced so).
        With `found_inf` 1.0 (fp16's overflow) nothing changes, decided on the device (no host read)."""
        kept = None if found_inf is None else [t.clone() for t in (*params, *ms, *vs)]
        torch._foreach_lerp_(ms, grads, 1 - b1)                   # m = b1 m + (1 - b1) g
        torch._foreach_mul_(vs, b2)
        torch._foreach_addcmul_(vs, grads, grads, value=1 - b2)   # v = b2 v + (1 - b2) g^2
        denom = torch._foreach_sqrt(vs)
        torch._foreach_add_(denom, eps)                           # sqrt(v) + eps
        if wd: torch._foreach_mul_(params, 1 - lr * wd)           # theta - lr * wd * theta (decoupled) ...
        steps = torch._foreach_div(ms, denom)
        torch._foreach_mul_(steps, lr)
        torch._foreach_sub_(params, steps)                        # ... - lr * m / (sqrt(v) + eps)
        # fp16's overflow: back to the kept values (lerp by weight 1 gives them exactly, by 0 the update's)
        for t, k in zip([*params, *ms, *vs], kept or []): t.lerp_(k, found_inf[0])  # (a tensor weight: no host read)


def param_groups(model: nn.Module, groups: Iterable[Iterable[str]] | None = None) -> list[dict]:
    """Parameter groups for `ElectraAdam`: each group of names (all parameters when `groups` is None) is split into
    a decayed group and a `no_decay` group. Tied parameters appear once. Groups keep their order."""
    named = dict(model.named_parameters())
    groups = [list(named)] if groups is None else [list(g) for g in groups]
    out = []
    for names in groups:
        for no_decay in (False, True):
            ps = [named[n] for n in names if no_decay_param(n) == no_decay and named[n].requires_grad]
            if ps: out.append({'params': ps, 'no_decay': no_decay, 'names': [n for n in names if no_decay_param(n) == no_decay]})
    return out


def _fastai_electra_adam(params, lr, betas, eps, wd):
    from fastai.optimizer import OptimWrapper
    return OptimWrapper(params, opt=partial(ElectraAdam, betas=betas, eps=eps, weight_decay=wd), lr=lr, convert_groups=False)


def electra_opt_func(betas=(0.9, 0.999), eps: float = 1e-6, wd: float = 0.0):
    "A fastai `opt_func`: the Learner's splitter must return `param_groups(...)`; fastai hypers lr/mom/sqr_mom/eps/wd work."
    return partial(_fastai_electra_adam, betas=tuple(betas), eps=eps, wd=wd)
