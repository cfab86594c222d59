"""Stacked runs: N fine-tuning runs of one task (seeds apart) trained in one model pass, each the run it would be alone.

Every parameter of the N models is stacked to [N, ...] under its own name, and the forward is `torch.func.vmap` of
`functional_call` over the runs, so one pass does N runs' work with batched matmuls instead of N passes of small
ones. Each run keeps what it has alone: its seed's head, its loader (data order), the layer-wise rates and schedule
(shared: the runs of a task have the same steps), its Adam moments (ElectraAdam is elementwise, so an [N, ...]
parameter is N runs' updates), its own gradient clipping (`clip_runs_by_norm_`), its evaluation and its history. The
loss is the sum of the runs' own losses, so each run's gradient is its gradient alone. What differs: dropout masks
(drawn per run under `randomness='different'`, not from the run's seed as alone) and float rounding. A run whose
loss becomes NaN or infinite poisons no other: its NaN stays in its own slices, and with fp16 its gradients are zeroed
before the shared loss scale sees them (`finetuning_step`, electra/finetuning/step.py).

Two traps, both tested: the runs' batches differ in rows (length bucketing puts a short batch anywhere) and length,
so `stack_batches` pads them to one shape, the extra rows copies of a real row with weight 0 (no gradient); and HF's
attention-mask builder branches on the mask's values, which vmap cannot, so the 4-D additive mask is made outside
vmap and handed to the body, whose attention runs the eager path (matmul + softmax, which vmap batches).
"""
from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call, vmap
from torch.utils._pytree import tree_map

from electra.config.finetune import FinetuneConfig
from electra.finetuning.learner import _epoch_eval_callback, finetuning_learner
from electra.finetuning.tasks.base import TaskData
from electra.training.distributed import one_run_at_a_time

__all__ = ['StackedRuns', 'stacked_dev_outputs', 'ReplayedRun', 'StackedLoader', 'stack_batches', 'StackedLoss',
           'clip_runs_by_norm_', 'train_stack', 'stack_size']


class StackedRuns(nn.Module):
    """N models of one architecture as one module: each parameter stacked to [N, ...] under the models' own names (so
    `optimizer_groups` and `param_groups` see the same names, layers and no-decay split), the forward vmapped over the
    runs. Inputs and outputs carry the runs in front: [N, B, ...]."""

    def __init__(self, models: list[nn.Module]):
        super().__init__()
        one = copy.deepcopy(models[0])  # one run's module: the forward's code, its parameters the stacked ones
        # eager attention (matmul, softmax, dropout) is batched by vmap; SDPA's fused kernels have no batching rule
        one.electra.config._attn_implementation = 'eager'
        own = [dict(m.named_parameters()) for m in models]
        for name, _ in models[0].named_parameters():
            module, _, leaf = name.rpartition('.')
            stacked = torch.stack([o[name].detach() for o in own])  # [N, *shape]
            setattr(one.get_submodule(module), leaf, nn.Parameter(stacked))
        for name, child in one.named_children(): self.add_module(name, child)  # the stacked parameters, by name
        self.__dict__['one'] = one  # not a submodule: its parameters are this module's already
        self.n_runs, self._mask4 = len(models), None
        one.electra.register_forward_pre_hook(self._given_mask, with_kwargs=True)

    def _given_mask(self, body, args, kwargs):
        "The body's [B, L] mask replaced by the run's 4-D additive mask [B, 1, 1, L], made outside vmap."
        return args, {**kwargs, 'attention_mask': self._mask4}

    def train(self, mode: bool = True):
        self.one.training = mode
        return super().train(mode)

    def forward(self, input_ids, attention_mask, token_type_ids, *more, shared: bool = False):
        """Each run's outputs [N, B, ...] for its inputs [N, B, L] (`more`: further inputs, e.g. QA's start positions
        [N, B]); with `shared`, for one batch [B, L] given to every run (a dev batch)."""
        # 0 where attended, the dtype's lowest where padded, as HF's eager mask: [(N,) B, 1, 1, L]
        mask4 = (1.0 - attention_mask[..., None, None, :].float()) * torch.finfo(torch.float32).min

        def one_run(params, mask, *inputs):
            self._mask4 = mask
            return functional_call(self.one, params, inputs)

        inputs = (mask4, input_ids, attention_mask, token_type_ids, *more)
        in_dims = (0, *[None if shared else 0] * len(inputs))  # the parameters always per run
        try: return vmap(one_run, in_dims, randomness='different')(dict(self.named_parameters()), *inputs)
        finally: self._mask4 = None

    @torch.no_grad()
    def copy_run_to(self, r: int, model: nn.Module) -> nn.Module:
        "`model` (of the runs' architecture) holding run r's weights."
        stacked = dict(self.named_parameters())
        for name, p in model.named_parameters(): p.copy_(stacked[name][r])
        return model


@torch.no_grad()
def stacked_dev_outputs(stacked: StackedRuns, dev_dls: dict, autocast: torch.dtype | None) -> list[list[tuple]]:
    """Every run's outputs for every batch of the dev loaders, from one pass of the stack over each batch (eval mode):
    per run, its (input ids, attention mask, token types, outputs) of each batch, in the loaders' order."""
    device = next(stacked.parameters()).device
    was_training, per_run = stacked.training, [[] for _ in range(stacked.n_runs)]
    stacked.eval()
    try:
        for dl in dev_dls.values():
            for batch in dl:
                xb = tuple(x.to(device, non_blocking=True) for x in batch[:3])  # [B, L] each
                with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
                    out = stacked(*xb, shared=True)  # [N, B, ...]
                out = tree_map(lambda x: x.cpu(), out)  # held until scored: a big dev set's N runs' outputs off the GPU
                for r, outs in enumerate(per_run): outs.append((*xb, tree_map(lambda x: x[r], out)))
    finally: stacked.train(was_training)
    return per_run


class ReplayedRun(nn.Module):
    """Run r's model (`model`, holding its weights) for its task's own `evaluate`, whose forward hands back the run's
    outputs from the stack's pass (`stacked_dev_outputs`) batch by batch; each call's inputs must be that batch's,
    so an evaluation that reads the batches in another order stops instead of scoring the wrong outputs."""

    def __init__(self, model: nn.Module, outputs: list[tuple]):
        super().__init__()
        self.model, self.outputs = model, list(reversed(outputs))

    def __getattr__(self, name: str):  # the task's evaluation reads the run's head options (n_outputs, QA's beam)
        try: return super().__getattr__(name)
        except AttributeError: return getattr(self._modules['model'], name)

    def forward(self, input_ids, attention_mask, token_type_ids):
        given = (input_ids, attention_mask, token_type_ids)
        if not self.outputs or not all(map(torch.equal, self.outputs[-1][:3], given)):
            raise RuntimeError("a stacked run's evaluation read a batch the stack did not score, or in another order; "
                               'the stack scores the dev loaders in their order, each batch once.')
        return self.outputs.pop()[3]


def stack_batches(batches: list[tuple], pad_id: int, pad_target: int = 0, rows: int = 0) -> tuple:
    """N runs' batches (input_ids, attention_mask, token_type_ids, targets...) as one: each item padded to the largest
    rows (at least `rows`) and lengths and stacked [N, B, ...], then the rows' weights [N, B]. Extra rows are copies of the run's first
    row with weight 0, so they add nothing to its loss or gradient (a copy, not a blank row, keeps their loss finite:
    0 x inf would be NaN); extra positions take the padding id, mask 0, token type 0, and a target's `pad_target`
    (tagging's ignore index)."""
    rows = max(rows, *(len(b[0]) for b in batches))
    items = []
    for k, fill in enumerate((pad_id, 0, 0, *[pad_target] * (len(batches[0]) - 3))):
        shape = [max(b[k].shape[d] for b in batches) for d in range(1, batches[0][k].dim())]
        out = batches[0][k].new_full((len(batches), rows, *shape), fill)  # [N, B, ...]
        for r, b in enumerate(batches):
            x = b[k]
            out[(r, slice(0, len(x)), *(slice(0, s) for s in x.shape[1:]))] = x
            out[(r, slice(len(x), rows), *(slice(0, s) for s in x.shape[1:]))] = x[:1]
        items.append(out)
    weight = torch.zeros(len(batches), rows)
    for r, b in enumerate(batches): weight[r, :len(b[0])] = 1.0
    return (*items, weight)


class StackedLoader:
    """The N runs' training loaders step by step, each step's batches as one (`stack_batches`); each run's order its
    own. `rows`: at least this many rows a step (a compiled step's batch_size: one shape however short a batch)."""

    def __init__(self, loaders: list, pad_id: int, pad_target: int = 0, rows: int = 0):
        self.loaders, self.pad_id, self.pad_target, self.rows = loaders, pad_id, pad_target, rows

    def __len__(self) -> int: return len(self.loaders[0])

    def __iter__(self):
        for batches in zip(*self.loaders): yield stack_batches(list(batches), self.pad_id, self.pad_target, self.rows)


class StackedLoss:
    """The loss of N stacked runs: the task's loss of each run's slice (its rows' weights last), summed, so that each run's
    gradient is the gradient of its own loss. `local_sum` and `local_count` [N]: each run's, for the epoch's report."""

    def __init__(self, loss, n: int):
        self.loss, self.n = loss, n

    def __call__(self, out, *targets):
        losses, sums, counts = [], [], []
        for r in range(self.n):
            losses.append(self.loss(tree_map(lambda x: x[r], out), *(t[r] for t in targets)))
            sums.append(self.loss.local_sum); counts.append(self.loss.local_count)
        self.local_sum, self.local_count = torch.stack(sums), torch.stack(counts)
        return torch.stack(losses).sum()


def clip_runs_by_norm_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Clip each stacked run's gradients (each [N, ...]) in place by that run's own global norm, as `clip_grad_norm_`
    clips a run alone (clipping by the stack's norm would clip every run by the others'). Returns the norms [N]."""
    norms = torch.stack([g.flatten(1).float().norm(dim=1) for g in grads])  # [params, N]
    total = norms.norm(dim=0)  # [N]: each run's global norm
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)  # torch's clip_grad_norm_ rule, per run
    for g in grads: g.mul_(coef.view(-1, *[1] * (g.dim() - 1)).to(g.dtype))
    return total


def train_stack(data: TaskData, task_cfg: FinetuneConfig, body: nn.Module, seeds: list[int], device: torch.device,
                autocast: torch.dtype | None, pad_id: int, reports: list[Callable[[int, float, dict], None]] | None = None,
                extra_cbs: tuple = ()):
    """`train_run` for len(seeds) runs at once: each run's model is made from its seed as alone (the head's
    initialisation), its loader shuffles by its seed, and its dev sets are scored after each epoch by the task's own
    `evaluate`, the outputs of all runs from one pass of the stack over each dev batch. Returns the `StackedRuns`, a model of the runs' architecture (for
    `StackedRuns.copy_run_to`) and each run's history. `reports[r]`: run r's epoch report. A run whose loss becomes
    NaN or infinite is dropped at the end of that epoch (its history says so, `learner.diverged`) and the others train
    on as they would without it; the fit stops when every run has diverged."""
    from fastai.torch_core import set_seed

    task, models = data.task, []
    for seed in seeds:
        set_seed(seed)
        models.append(task.new_model(copy.deepcopy(body), task_cfg))
    stacked, run_model = StackedRuns(models).to(device), models[0].to(device)
    del models  # their weights are in `stacked` now; `run_model` takes each run's in turn
    pin = device.type == 'cuda'
    train_dl = StackedLoader([task.loader(data.train, task_cfg, pad_id, True, s, None, pin) for s in seeds], pad_id,
                             task.pad_target, task_cfg.batch_size if task_cfg.compile else 0)
    dev_dls = {s: task.loader(e, task_cfg, pad_id, False, 0, None, pin) for s, e in data.dev.items()}

    def evaluate(runs: list[int]) -> list[dict]:  # dev metrics of `runs`: one pass of the stack, the task's scoring per run
        outputs = stacked_dev_outputs(stacked, dev_dls, autocast)
        return [task.evaluate(ReplayedRun(stacked.copy_run_to(r, run_model), outputs[r]), data, dev_dls, autocast)
                for r in runs]
    evaluator = _epoch_eval_callback(evaluate, reports or [lambda *a: None] * len(seeds))
    loss = StackedLoss(task.loss_func(run_model, task_cfg), len(seeds))
    learn = finetuning_learner(stacked, train_dl, list(dev_dls.values()), task_cfg, loss, device, autocast,
                               (evaluator, *extra_cbs), task.n_inp, clip_fn=clip_runs_by_norm_,
                               freeze_diverged=autocast == torch.float16)
    learn.fit(task_cfg.epochs, lr=learn.layer_lrs)
    return stacked, run_model, evaluator.histories


def run_bytes(body: nn.Module, task_cfg: FinetuneConfig, autocast: torch.dtype | None) -> int:
    """Device memory one stacked run takes while training, estimated: its weights, gradient and two Adam moments (fp32,
    16 bytes a parameter), and the activations a transformer layer keeps for the backward pass, s b h (34 + 5 a s / h)
    bytes in 16 bits (Korthikanti et al. 2022, 'Reducing activation recomputation', table 2), twice that in fp32."""
    c = body.config
    weights = 16 * sum(p.numel() for p in body.parameters())
    s, b, h, a = task_cfg.max_length, task_cfg.batch_size, c.hidden_size, c.num_attention_heads
    layer = s * b * h * (34 + 5 * a * s / h) * (1 if autocast in (torch.bfloat16, torch.float16) else 2)
    return int(weights + c.num_hidden_layers * layer)


def stack_size(cfg: FinetuneConfig, task_cfg: FinetuneConfig, body: nn.Module, device: torch.device,
               autocast: torch.dtype | None, todo: int, share: int = 1) -> int:
    """How many of a task's `todo` runs to train at a time: `stack_runs`, or with 0 on a GPU as many as 80% of its
    free memory holds (`run_bytes`; a `share` of it when that many processes train on it at once), on the CPU one.
    A torchrun job trains each run over all its processes: one."""
    if one_run_at_a_time('stack_runs', cfg.stack_runs, 'to stack runs'): return 1
    if cfg.stack_runs: return min(cfg.stack_runs, todo)
    if device.type != 'cuda': return 1
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(todo, int(0.8 * free / share) // run_bytes(body, task_cfg, autocast)))
