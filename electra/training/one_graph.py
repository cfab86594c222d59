"""The whole training step as one compiled graph: forward, loss, backward, gradient clipping and the optimizer update.

fastai's step is a chain of host-side events (`model(*xb)`, `loss.backward()`, `GradientClip`, `opt.step()`), and
compiling the model alone leaves everything after the forward to the host: one gradient tensor handed back per
parameter, autograd's per-parameter accumulation, the per-parameter norms of clipping. On a GPU that host work, not
the kernels, sets the pace of a small model (BENCHMARKS.md, "Where the fast step's time goes"). `whole_step` does
the same step as one function, with `torch.autograd.grad` in place of `.backward()` (no `.grad` is ever written) and
the optimizer's own update (`ElectraAdam.update`), so `torch.compile(fullgraph=True)` captures all of it in one
graph (dynamo's `trace_autograd_ops`, torch >= 2.11), and `mode='reduce-overhead'` replays it as one CUDA graph.

What it computes is fastai's step with `MixedPrecision` (bf16) and `GradientClip`: the forward and the loss under
autocast, the backward in fp32 outside it, clipping by the global norm as `torch.nn.utils.clip_grad_norm_` computes
it, then the update. The tests hold it to the plain Learner's step.
"""
from __future__ import annotations

import contextlib
import warnings

import torch
from fastai.callback.core import Callback, CancelBatchException
from fastai.torch_core import to_float

from electra.config.base import ConfigError, RunWarning
from electra.training.optim import ElectraAdam
from electra.training.speed import compile_failure

__all__ = ['whole_step', 'update_groups', 'clip_by_global_norm_', 'OneGraphStep', 'one_graph_supported']


def one_graph_supported() -> bool:
    "Whether this torch can trace `torch.autograd.grad` into a graph (dynamo's `trace_autograd_ops`, torch >= 2.11)."
    return hasattr(torch._dynamo.config, 'trace_autograd_ops')


def clip_by_global_norm_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale `grads` in place so their global L2 norm is at most `max_norm`, as `torch.nn.utils.clip_grad_norm_`
    does (coefficient max_norm / (norm + 1e-6), capped at 1; fastai's `GradientClip` calls it). Returns the norm."""
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


def whole_step(model, loss_func, groups: list[tuple], xb: tuple, yb: tuple, lrs: list[torch.Tensor], max_norm: float,
               autocast_dtype: torch.dtype | None, clip_fn=clip_by_global_norm_):
    """One training step of `model` on the batch (`xb`, `yb`): forward and loss (under bf16 autocast when
    `autocast_dtype` is given), the gradients of the parameters of `groups`, clipping to `max_norm` (0: none) by
    `clip_fn(grads, max_norm)` (in place; fine-tuning's stacked runs clip each run by its own norm), and
    `ElectraAdam`'s update of each group with its rate in `lrs` (0-d tensors). `groups`: per optimizer group
    (params, first moments, second moments, (beta1, beta2, eps, weight decay)), as `update_groups` makes them; plain
    lists and numbers, so a compiled step guards on nothing the schedule changes. Returns (pred, loss), detached."""
    device_type = lrs[0].device.type
    with torch.autocast(device_type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
        pred = to_float(model(*xb))      # as fastai's MixedPrecision.after_pred: the loss reads fp32 outputs
        loss = loss_func(pred, *yb)
    grads = list(torch.autograd.grad(loss, [p for ps, *_ in groups for p in ps]))
    if max_norm > 0: clip_fn(grads, max_norm)
    start = 0
    with torch.no_grad():
        for (ps, ms, vs, hypers), lr in zip(groups, lrs):
            ElectraAdam.foreach_update(ps, grads[start:start + len(ps)], ms, vs, lr, *hypers)
            start += len(ps)
    return _detached(pred), loss.detach()


def update_groups(opt: ElectraAdam) -> tuple[list[int], list[tuple]]:
    """The indices of `opt`'s groups with trainable parameters, and for each of them (params, first moments, second
    moments, hyperparameters) for `whole_step`, the moments made where missing."""
    index, groups = [], []
    for i, g in enumerate(opt.param_groups):
        ps = [p for p in g['params'] if p.requires_grad]
        if not ps: continue
        opt.init_state(ps)
        index.append(i)
        groups.append((ps, *opt.moments(ps), opt.hypers(g)))
    return index, groups


def _detached(pred):
    if isinstance(pred, dict): return {k: _detached(v) for k, v in pred.items()}
    if isinstance(pred, (list, tuple)): return type(pred)(_detached(v) for v in pred)
    return pred.detach() if isinstance(pred, torch.Tensor) else pred


class OneGraphStep(Callback):
    """Runs each training step as `whole_step`, compiled as one graph (`compile`), in place of fastai's step."""
    order = 65  # after every callback that prepares the step: masking (-5), ParamScheduler's rate for it (60)

    def __init__(self, max_norm: float, precision: str = 'fp32', compile: bool = True, backend='inductor',
                 mode: str | None = None, clip_fn=clip_by_global_norm_, key: str = 'compile_scope step',
                 instead: str = '--compile_scope model'):
        "`key`: the setting that asked for it, named in its messages; `instead`: what to use where it cannot run."
        if precision == 'fp16':
            raise ConfigError(f'{key}: the whole step as one graph runs bf16 or fp32; fp16 needs loss scaling, which '
                              f'skips steps on the host. Use --precision bf16, or {instead}.')
        self.max_norm, self.to_compile, self.backend, self.mode = max_norm, compile, backend, mode
        self.clip_fn, self.key = clip_fn, key
        self.dtype = torch.bfloat16 if precision == 'bf16' else None
        self.step_fn, self.compiled = None, None  # compiled: None until the first step, then True/False

    def before_fit(self):
        device = next(self.model.parameters()).device
        if not isinstance(self.opt.opt, ElectraAdam):
            raise TypeError(f'OneGraphStep updates as ElectraAdam, not {type(self.opt.opt).__name__}')
        self.index, self.groups = update_groups(self.opt.opt)  # the ElectraAdam inside fastai's OptimWrapper
        self.lrs = [torch.zeros((), device=device) for _ in self.groups]
        # the graph updates the moments in place and reads the rates where they are: as the parameters, they are
        # static inputs, so CUDA graphs neither copy them in nor skip a graph that mutates its inputs
        for t in [*self.lrs, *(t for _, ms, vs, _ in self.groups for t in (*ms, *vs))]:
            torch._dynamo.mark_static_address(t)

    def before_batch(self):
        if not self.training: return
        hypers = self.opt.opt.param_groups
        for lr, i in zip(self.lrs, self.index): lr.fill_(hypers[i]['lr'])  # this step's rate; no host read
        if self.step_fn is None: self.step_fn = self._compiled() if self.to_compile else whole_step
        if self.compiled and self.mode and 'reduce-overhead' in self.mode: torch.compiler.cudagraph_mark_step_begin()
        args = (self.model, self.loss_func, self.groups, self.xb, self.yb, self.lrs, self.max_norm, self.dtype,
                self.clip_fn)
        try:
            with torch._dynamo.config.patch(trace_autograd_ops=True) if self.compiled else contextlib.nullcontext():
                self.learn.pred, self.learn.loss = self.step_fn(*args)
        except Exception as e:  # a compiler failure: it happens while tracing, before the step changes anything
            if not self.compiled: raise
            self._fall_back(e)
            self.learn.pred, self.learn.loss = self.step_fn(*args)
        self.learn.loss_grad = self.learn.loss
        raise CancelBatchException  # fastai's own forward, backward and step are skipped; after_batch runs as usual

    def _fall_back(self, e: Exception):
        "After a failed compilation: a one-line warning, and the plain `whole_step` from here on."
        warnings.warn(f'{self.key}: torch.compile of the whole step failed ({compile_failure(e)}); the step '
                      'runs eagerly.', RunWarning, stacklevel=3)
        self.step_fn, self.compiled = whole_step, False

    def _compiled(self):
        "`whole_step` compiled as one graph, or the plain function with a one-line warning when this torch cannot."
        self.compiled = one_graph_supported()
        if not self.compiled:
            warnings.warn(f'{self.key}: torch {torch.__version__} cannot trace the backward into a graph '
                          '(needs torch >= 2.11); the whole step runs eagerly.', RunWarning, stacklevel=2)
            return whole_step
        kwargs = {} if self.mode is None else {'mode': self.mode}
        return torch.compile(whole_step, fullgraph=True, dynamic=False, backend=self.backend, **kwargs)

