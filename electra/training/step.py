"""What the library's two steps share (pretraining's `pretraining_step`, electra/pretraining/step.py, and fine-tuning's
`finetuning_step`, electra/finetuning/step.py): their constants (`StepConstants`), the named value of an update
(`Update`), `apply_gradients`, the way from a step's gradients to its update (the average over the processes of a
torchrun job, fp16's unscaling, clipping, ElectraAdam's update), and `StepCallback`, the base of the one callback that
runs each job's step function in place of fastai's forward, backward and optimizer step: eager, or compiled as one
graph (dynamo's `trace_autograd_ops`, `torch.autograd.grad` in place of `.backward()`, so the whole step is one graph
and `mode='reduce-overhead'` replays it as one CUDA graph), with a one-line warning and the step function itself
where that cannot run.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, replace
from typing import Callable

import torch
import torch.distributed as dist
from fastai.callback.core import Callback

from electra.config.errors import RunWarning
from electra.training.distributed import is_distributed, rank_seed
from electra.training.speed import compile_failure

__all__ = ['one_graph_supported', 'clip_by_global_norm_', 'StepConstants', 'Update', 'apply_gradients', 'StepCallback']


def one_graph_supported() -> bool:
    "Whether this torch can trace `torch.autograd.grad` into a graph (dynamo's `trace_autograd_ops`, torch >= 2.11)."
    return hasattr(torch._dynamo.config, 'trace_autograd_ops')


def clip_by_global_norm_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale `grads` in place so their global L2 norm is at most `max_norm`, as `torch.nn.utils.clip_grad_norm_`
    does (coefficient max_norm / (norm + 1e-6), capped at 1). Returns the norm."""
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


@dataclass(frozen=True, kw_only=True)
class StepConstants:
    """What a step reads that stays the same for the whole run: autocast's `dtype` (None: fp32), the clipping norm
    `max_norm` (0: none) and `clip_fn(grads, max_norm)`, which clips by it (fine-tuning's stack: each run's own)."""
    dtype: torch.dtype | None = None
    max_norm: float = 1.0
    clip_fn: Callable[[list, float], torch.Tensor] = clip_by_global_norm_


@dataclass(frozen=True)
class Update:
    """What a step's gradients update: the optimizer `opt` (`ElectraAdam`), the weights the step trains `params`, the
    optimizer's groups as (indices into `params`, constant settings) and their rates `lrs` (floats, or 0-d tensors
    that a step compiled as one graph reads where they are)."""
    opt: object
    params: list
    groups: list
    lrs: list


def apply_gradients(grads: list, update: Update, c: StepConstants, scaler=None) -> torch.Tensor:
    """The update of `update.params` by their gradients `grads` (None: a weight the step did not use), in place:
    averaged over the processes under torchrun, unscaled by fp16's `scaler`, clipped to `c.max_norm` (0: none) by
    `c.clip_fn`, then ElectraAdam's update of each group at its rate. Returns 1.0 where fp16's gradients overflowed
    (the step then changes no weight and no moment), else 0 [0-d]."""
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
    if c.max_norm > 0: c.clip_fn(present, c.max_norm)
    with torch.no_grad():  # ElectraAdam's update (training/optim.py): the official Adam, no bias correction
        for (index, group), lr in zip(update.groups, update.lrs):
            index = [i for i in index if grads[i] is not None]
            if index: update.opt.update(group, [update.params[i] for i in index], [grads[i] for i in index], lr,
                                        found_inf if scaler is not None else None)
    return found_inf[0]


class StepCallback(Callback):
    "Base of the callback that runs a job's step function in place of fastai's and keeps its state between steps."
    order, run_valid = 65, False  # after every callback that prepares the step: the rate (ParamScheduler, 60)

    def __init__(self, step_function: Callable, seed: int, precision: str = 'fp32', one_graph: bool = False,
                 mode: str | None = None, backend='inductor', key: str = 'compile_scope step'):
        """`step_function`: the job's (pretraining's `learn_from`, fine-tuning's `finetuning_step`); `one_graph`: it
        runs compiled as one graph; `key`: the setting that asked for that, named in its warnings. The state kept: fp16's
        loss `scaler`, the step function's `graph` (`compiled`: None until tried) and the `update` (the trainable
        weights, their groups and rates). Under torchrun every process starts from rank 0's weights, with a dropout
        stream of its own."""
        self.step_function, self.seed, self.precision, self.one_graph = step_function, seed, precision, one_graph
        self.mode, self.backend, self.key = mode, backend, key
        self.dtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(precision)
        self.graph, self.scaler, self.compiled, self.update = None, None, None, None

    def before_fit(self):
        device = next(self.model.parameters()).device
        if is_distributed():  # each process its own dropout stream; every process starts from rank 0's weights
            if dist.get_rank(): torch.manual_seed(rank_seed(self.seed, dist.get_rank()))
            for t in self.model.state_dict().values(): dist.broadcast(t, 0)
        if self.precision == 'fp16' and self.scaler is None: self.scaler = torch.amp.GradScaler(device.type)

    def run_step(self, step: Callable[[Callable], object], again: Callable[[], None] = lambda: None):
        """`step(f)`, `f` the step function or its graph, after this step's `update` is prepared; a failed compilation
        (while tracing, before the update changes anything) warns in one line, calls `again()` (to draw the same
        random numbers again) and runs `step` with the step function itself."""
        if self.compiled is None: self.compile()
        self.prepare()
        if self.compiled and self.mode and 'reduce-overhead' in self.mode: torch.compiler.cudagraph_mark_step_begin()
        one_graph = self.compiled and self.one_graph
        try:
            with torch._dynamo.config.patch(trace_autograd_ops=True) if one_graph else contextlib.nullcontext():
                return step(self.graph if one_graph else self.step_function)
        except Exception as e:
            if not one_graph: raise
            warnings.warn(f'{self.key}: torch.compile of the whole step failed ({compile_failure(e)}); the step '
                          'runs eagerly.', RunWarning, stacklevel=3)
            self.compiled = False
            again()
            return step(self.step_function)

    def compile(self):
        "The step function as one graph, or the step function itself with a one-line warning where this torch cannot."
        if not self.one_graph: return  # eager: `compiled` stays None
        self.compiled = one_graph_supported()
        if not self.compiled:
            warnings.warn(f'{self.key}: torch {torch.__version__} cannot trace the backward into a graph (needs '
                          'torch >= 2.11); the whole step runs eagerly.', RunWarning, stacklevel=3)
            return
        kwargs = {'dynamic': False, **({} if self.mode is None else {'mode': self.mode})}
        self.graph = torch.compile(self.step_function, fullgraph=True, backend=self.backend, **kwargs)

    def trainable(self) -> list:
        "The weights the step trains (those that take a gradient), in the model's order."
        return [p for p in self.model.parameters() if p.requires_grad]

    def prepare(self):
        """This step's `update`: the trainable weights and their groups, listed when there is none yet (or a new
        optimizer), and this step's rates."""
        opt, one_graph = self.opt.opt, self.compiled and self.one_graph
        if self.update is None or self.update.opt is not opt: self.update = self.new_update(self.trainable())
        elif one_graph:  # this step's rates where the graph reads them: no new graph, no host read
            for lr, g in zip(self.update.lrs, opt.param_groups): lr.fill_(g['lr'])
        else: self.update = replace(self.update, lrs=[g['lr'] for g in opt.param_groups])

    def new_update(self, params: list) -> Update:
        "The `Update` of `params`: the optimizer's groups as indices into them, and the groups' rates now."
        opt = self.opt.opt
        where = {id(p): i for i, p in enumerate(params)}
        # each group as indices into `params` and its constant settings (a compiled graph guards on what it reads)
        groups = [([where[id(p)] for p in g['params'] if id(p) in where],
                   {k: v for k, v in g.items() if k not in ('params', 'names', 'lr')}) for g in opt.param_groups]
        lrs = [g['lr'] for g in opt.param_groups]
        if self.compiled and self.one_graph:
            # the graph updates the moments in place and reads the rates where they are: static inputs for CUDA graphs
            opt.init_state(params)
            lrs = [torch.tensor(lr, dtype=torch.float32, device=params[0].device) for lr in lrs]
            for t in [*lrs, *(t for st in opt.state.values() for t in st.values())]:
                torch._dynamo.mark_static_address(t)
        return Update(opt, params, groups, lrs)
