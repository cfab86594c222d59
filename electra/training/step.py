"""What the library's two steps share (pretraining's `pretraining_step`, electra/pretraining/step.py, and fine-tuning's
`finetuning_step`, electra/finetuning/step.py): `apply_gradients`, the way from a step's gradients to its update
(the average over the processes of a torchrun job, fp16's unscaling, clipping, ElectraAdam's update), and
`StepCallback`, the base of the one callback that runs each job's step in place of fastai's forward, backward and
optimizer step: eager, or compiled as one graph (dynamo's `trace_autograd_ops`, `torch.autograd.grad` in place of
`.backward()`, so the whole step is one graph and `mode='reduce-overhead'` replays it as one CUDA graph), with a
one-line warning and the plain function where that cannot run.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable

import torch
import torch.distributed as dist
from fastai.callback.core import Callback

from electra.config.errors import RunWarning
from electra.training.distributed import is_distributed, rank_seed
from electra.training.speed import compile_failure

__all__ = ['one_graph_supported', 'clip_by_global_norm_', 'apply_gradients', 'StepCallback']


def one_graph_supported() -> bool:
    "Whether this torch can trace `torch.autograd.grad` into a graph (dynamo's `trace_autograd_ops`, torch >= 2.11)."
    return hasattr(torch._dynamo.config, 'trace_autograd_ops')


def clip_by_global_norm_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale `grads` in place so their global L2 norm is at most `max_norm`, as `torch.nn.utils.clip_grad_norm_`
    does (coefficient max_norm / (norm + 1e-6), capped at 1). Returns the norm."""
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


def apply_gradients(grads: list, params: list, opt, groups: list, lrs: list, max_norm: float, scaler=None,
                    clip_fn=clip_by_global_norm_) -> torch.Tensor:
    """The update of `params` by their gradients `grads` (None: a weight the step did not use), in place: averaged over
    the processes under torchrun, unscaled by fp16's `scaler`, clipped to `max_norm` (0: none) by `clip_fn(grads,
    max_norm)`, then ElectraAdam's (`opt`) update of each group (indices into `params`, settings) at its rate in `lrs`.
    Returns 1.0 where fp16's gradients overflowed (the step then changes no weight and no moment), else 0 [0-d]."""
    present = [g for g in grads if g is not None]
    if is_distributed():  # torchrun: the average of the processes' gradients (a collective: never in a graph)
        flat = torch.cat([g.flatten() for g in present])
        dist.all_reduce(flat)
        torch._foreach_copy_(present, [f.view_as(g) for f, g in zip(flat.split([g.numel() for g in present]), present)])
        torch._foreach_div_(present, dist.get_world_size())
    found_inf = present[0].new_zeros(1, dtype=torch.float32)
    if scaler is not None:  # fp16: unscale and update the scale by torch's GradScaler rules, without a host read:
        torch._amp_foreach_non_finite_check_and_unscale_(present, found_inf, scaler._scale.double().reciprocal().float())
        torch._amp_update_scale_(scaler._scale, scaler._growth_tracker, found_inf, scaler._growth_factor,
                                 scaler._backoff_factor, scaler._growth_interval)
        for g in present: g.masked_fill_(found_inf.bool(), 0)  # an overflow's gradients all 0, its update masked
    if max_norm > 0: clip_fn(present, max_norm)
    with torch.no_grad():  # ElectraAdam's update (training/optim.py): the official Adam, no bias correction
        for (index, group), lr in zip(groups, lrs):
            index = [i for i in index if grads[i] is not None]
            if index: opt.update(group, [params[i] for i in index], [grads[i] for i in index], lr,
                                 found_inf if scaler is not None else None)
    return found_inf[0]


class StepCallback(Callback):
    """Base of the callback that runs a job's step function (`plain`) in place of fastai's: holds what the step keeps
    from one to the next (the loss scale, the compiled step, the trainable weights and their groups and rates) and,
    under torchrun, starts every process from rank 0's weights with a dropout stream of its own."""
    order, run_valid = 65, False  # after every callback that prepares the step: the rate (ParamScheduler, 60)

    def __init__(self, plain: Callable, seed: int, precision: str = 'fp32', one_graph: bool = False,
                 mode: str | None = None, backend='inductor', key: str = 'compile_scope step'):
        "`one_graph`: `plain` compiled as one graph; `key`: the setting that asked for it, named in its warnings."
        self.plain, self.seed, self.precision, self.one_graph = plain, seed, precision, one_graph
        self.mode, self.backend, self.key = mode, backend, key
        self.dtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(precision)
        self.step_fn, self.scaler, self.compiled, self.params = plain, None, None, None  # compiled: None until tried

    def before_fit(self):
        device = next(self.model.parameters()).device
        if is_distributed():  # each process its own dropout stream; every process starts from rank 0's weights
            if dist.get_rank(): torch.manual_seed(rank_seed(self.seed, dist.get_rank()))
            for t in self.model.state_dict().values(): dist.broadcast(t, 0)
        if self.precision == 'fp16' and self.scaler is None: self.scaler = torch.amp.GradScaler(device.type)

    def run_step(self, step: Callable, again: Callable[[], None] = lambda: None):
        """`step()`, which calls `self.step_fn`, after this step's weights and rates are prepared; a failed compilation
        (while tracing, before the update changes anything) warns in one line, calls `again()` (to draw the same
        random numbers again) and runs `step()` with the plain function."""
        if self.compiled is None: self.compile()
        self.prepare()
        if self.compiled and self.mode and 'reduce-overhead' in self.mode: torch.compiler.cudagraph_mark_step_begin()
        one_graph = self.compiled and self.one_graph
        try:
            with torch._dynamo.config.patch(trace_autograd_ops=True) if one_graph else contextlib.nullcontext():
                return step()
        except Exception as e:
            if not one_graph: raise
            warnings.warn(f'{self.key}: torch.compile of the whole step failed ({compile_failure(e)}); the step '
                          'runs eagerly.', RunWarning, stacklevel=3)
            self.step_fn, self.compiled = self.plain, False
            again()
            return step()

    def compile(self):
        "The step function as one graph, or the plain one with a one-line warning where this torch cannot."
        if not self.one_graph: return  # eager: `compiled` stays None
        self.compiled = one_graph_supported()
        if not self.compiled:
            warnings.warn(f'{self.key}: torch {torch.__version__} cannot trace the backward into a graph (needs '
                          'torch >= 2.11); the whole step runs eagerly.', RunWarning, stacklevel=3)
            return
        kwargs = {'dynamic': False, **({} if self.mode is None else {'mode': self.mode})}
        self.step_fn = torch.compile(self.plain, fullgraph=True, backend=self.backend, **kwargs)

    def prepare(self):
        "This step's trainable weights (two-stage training freezes the generator), their optimizer groups and rates."
        groups, one_graph = self.opt.opt.param_groups, self.compiled and self.one_graph
        if one_graph and self.params is not None:
            for lr, g in zip(self.lrs, groups): lr.fill_(g['lr'])  # this step's rate: no new graph, no host read
            return
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        where = {id(p): i for i, p in enumerate(self.params)}
        # each group as indices into `params` and its constant settings (a compiled graph guards on what it reads)
        self.groups = [([where[id(p)] for p in g['params'] if id(p) in where],
                        {k: v for k, v in g.items() if k not in ('params', 'names', 'lr')}) for g in groups]
        self.lrs = [g['lr'] for g in groups]
        if one_graph:
            # the graph updates the moments in place and reads the rates where they are: static inputs for CUDA graphs
            self.opt.opt.init_state(self.params)
            self.lrs = [torch.tensor(lr, dtype=torch.float32, device=self.params[0].device) for lr in self.lrs]
            for t in [*self.lrs, *(t for st in self.opt.opt.state.values() for t in st.values())]:
                torch._dynamo.mark_static_address(t)
