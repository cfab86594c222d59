"""The steps being timed (`Runner`s), interleaved round by round, and what is measured besides time: host syncs, profiles."""
from __future__ import annotations

import copy
import dataclasses
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from electra.objective.loss import ElectraLoss
from benchmarks.bench.baseline import (
    Batches,
    BenchTokenizer,
    LoopAdam,
    baseline_pretrain_loss,
    fast_pretrain_loss,
    masked_batch,
    unique_named_parameters,
)
from electra.training.optim import ElectraAdam, param_groups
from electra.training.speed import HostSyncCounter, try_compile, uncompile

__all__ = ['count_host_syncs', 'Runner', 'step_timer', 'FitRunner', 'LearnerRunner', 'PretrainLoopRunner',
           'FinetuneBaselineRunner', 'FinetuneLearnerRunner', 'interleaved', 'ratio_per_round', 'profile_steps',
           'sync_check']


def count_host_syncs(learn, n_steps: int) -> HostSyncCounter:
    "Run `n_steps` steps of a Learner (eager) under `HostSyncCounter`; returns the counter."
    loader = learn.dls.train.loader
    old = loader.n
    loader.n = n_steps
    counter = HostSyncCounter()
    try:
        with counter: learn.fit(1)
    finally:
        loader.n = old
    return counter




def _sync(device: torch.device):
    if device.type == 'cuda': torch.cuda.synchronize(device)


class Runner:
    "A training step to time: `run(k)` runs k steps and returns (wall seconds, process CPU seconds)."
    name = ''
    peak_mem: int | None = None

    def __init__(self, device: torch.device): self.device = device

    def steps(self, k: int): raise NotImplementedError

    def run(self, k: int) -> tuple[float, float]:
        if self.device.type == 'cuda': torch.cuda.reset_peak_memory_stats(self.device)
        _sync(self.device)
        t, c = time.perf_counter(), time.process_time()
        self.steps(k)
        _sync(self.device)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        if self.device.type == 'cuda':
            self.peak_mem = max(self.peak_mem or 0, torch.cuda.max_memory_allocated(self.device))
        return wall, cpu


def step_timer(runner: 'Runner', n_steps: Callable[[], int]):
    """A callback that times a Learner's fit from the end of its first batch (untimed: the loader and callbacks
    start up) to the end of its last, between two device synchronisations, into `runner.timed`."""
    from fastai.callback.core import Callback

    class StepTimer(Callback):
        "Times the steps after the first one of a fit."
        order, run_valid = 100, False  # after every other callback: a step ends here

        def before_fit(self): self.n = 0

        def after_batch(self):
            self.n += 1
            if self.n == 1:
                _sync(runner.device)
                if runner.device.type == 'cuda': torch.cuda.reset_peak_memory_stats(runner.device)
                self.t, self.c = time.perf_counter(), time.process_time()
            elif self.n == n_steps():
                _sync(runner.device)
                runner.timed = (time.perf_counter() - self.t, time.process_time() - self.c)
    return StepTimer()


class FitRunner(Runner):
    """A step inside a fastai Learner (`self.learn`, over the loader `self.loader`): each `run` is one `fit` of k + 1
    batches, the first untimed (`step_timer`); `fit_kwargs` go to `fit`."""
    fit_kwargs: dict = {}

    def run(self, k: int) -> tuple[float, float]:
        self.loader.n = k + 1
        self.learn.fit(1, **self.fit_kwargs)
        if self.device.type == 'cuda':
            self.peak_mem = max(self.peak_mem or 0, torch.cuda.max_memory_allocated(self.device))
        return self.timed


class LearnerRunner(FitRunner):
    "The real pretraining step: `electra.pretraining.learner.pretraining_learner`'s Learner."

    def __init__(self, name, cfg, model, batches, device, precision):
        super().__init__(device)
        from electra.pretraining.callbacks import ProgressBar
        from electra.pretraining.learner import pretraining_learner
        self.name, self.loader = name, Batches(batches)
        self._tmp = tempfile.TemporaryDirectory(prefix='electra_bench_')  # removed with the runner, or at exit
        self.run_dir = Path(self._tmp.name)
        self.learn = pretraining_learner(cfg, model, BenchTokenizer(model.vocab_size), self.loader, self.run_dir, device,
                                   precision)
        self.learn.remove_cbs([cb for cb in self.learn.cbs if isinstance(cb, ProgressBar)])
        self.learn.metrics_logger.sinks = []
        self.learn.add_cb(step_timer(self, lambda: self.loader.n))

    @property
    def compiled(self): return self.learn.pretraining_step.compiled


class PretrainLoopRunner(Runner):
    """A plain loop of the pretraining objective, for the baseline and the breakdown: `kind` 'hf' (the HF classes
    as-is, full-length generator logits) or 'project' (`ElectraGeneratorDiscriminator` + `ElectraLoss`); `opt` 'loop'
    (LoopAdam + per-parameter clipping) or 'electra' (ElectraAdam + foreach clipping); `read_loss`: `.item()` every
    step, as a plain loop logs it."""

    def __init__(self, name, cfg, model, batches, device, kind='hf', opt='loop', read_loss=True, autocast=None):
        super().__init__(device)
        self.name, self.cfg, self.kind, self.read_loss, self.autocast = name, cfg, kind, read_loss, autocast
        self.model = copy.deepcopy(model).to(device)  # its own weights: every runner starts from the same ones
        self.vocab = model.vocab_size
        self.loss_func = ElectraLoss(cfg.gen_loss_weight, cfg.disc_loss_weight, cfg.objective)
        self.batches = [tuple(t.to(device) for t in b) for b in batches]
        self.i = 0
        self.mask_rng = torch.Generator(device=device).manual_seed(cfg.seed)
        self.sample_rng = torch.Generator(device=device).manual_seed(cfg.seed + 1)
        self.model.rng = self.sample_rng
        if opt == 'loop':
            named = unique_named_parameters(self.model)
            self.opt = LoopAdam(named, cfg.lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps)
            self.clip = lambda: nn.utils.clip_grad_norm_([p for _, p in named], cfg.clip_grad, foreach=False)
        else:
            self.opt = ElectraAdam(param_groups(self.model), lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2),
                                   eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
            self.clip = lambda: nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_grad)
        self.model.train()

    def loss(self, masked, types):
        if self.kind == 'hf':
            return baseline_pretrain_loss(self.model.generator, self.model.discriminator, self.cfg, masked, types,
                                          self.sample_rng)[0]
        return fast_pretrain_loss(self.model, self.loss_func, masked, types)[0]

    def steps(self, k: int):
        for _ in range(k):
            ids, types = self.batches[self.i % len(self.batches)]
            self.i += 1
            m = masked_batch(self.cfg, ids, self.vocab, self.mask_rng)
            with torch.autocast(self.device.type, dtype=self.autocast or torch.float32, enabled=self.autocast is not None):
                loss = self.loss(m, types)
            loss.backward()
            if self.cfg.clip_grad > 0: self.clip()
            self.opt.step()
            self.opt.zero_grad()
            if self.read_loss: loss.item()


class FinetuneBaselineRunner(Runner):
    """A GLUE-style classification step written plainly: HF `ElectraModel` + dropout + linear head on [CLS], fp32,
    LoopAdam with the layer-wise rates, per-parameter clipping, the loss read every step."""

    def __init__(self, name, body, batches, device, lr=3e-4, layer_decay=0.8, n_outputs=2):
        super().__init__(device)
        from electra.finetuning.classifier import ElectraClassifier, optimizer_groups
        self.name, self.batches, self.i = name, [tuple(t.to(device) for t in b) for b in batches], 0
        self.model = ElectraClassifier(copy.deepcopy(body), n_outputs).to(device).train()
        groups, lrs = optimizer_groups(self.model, lr, layer_decay, 'official')
        lr_of = {n: float(r) for g, r in zip(groups, lrs) for n in g['names']}
        self.opt = LoopAdam(list(self.model.named_parameters()), lr, 0.0, lrs=lr_of)

    def steps(self, k: int):
        for _ in range(k):
            ids, mask, types, y = self.batches[self.i % len(self.batches)]
            self.i += 1
            loss = F.cross_entropy(self.model(ids, mask, types), y)
            loss.backward()
            nn.utils.clip_grad_norm_(list(self.model.parameters()), 1.0, foreach=False)
            self.opt.step()
            self.opt.zero_grad()
            loss.item()


class FinetuneLearnerRunner(FitRunner):
    """The real fine-tuning step: the fastai Learner of `electra.finetuning.learner.finetuning_learner` (ElectraAdam over the
    layer-wise groups, schedule, clipping, mixed precision), optionally with the classifier compiled."""

    def __init__(self, name, body, batches, device, cfg, autocast=None, compile_mode=None, n_outputs=2):
        super().__init__(device)
        from electra.finetuning.classifier import ClassifierLoss, ElectraClassifier
        from electra.finetuning.learner import finetuning_learner
        self.name, self.loader = name, Batches([tuple(t.to(device) for t in b) for b in batches])
        model = ElectraClassifier(copy.deepcopy(body), n_outputs).to(device)
        self.compiled = None
        if compile_mode is not None:
            def trial():
                ids, mask, types, y = self.loader.batches[0]
                with torch.autocast(device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
                    F.cross_entropy(model(ids, mask, types).float(), y).backward()
                model.zero_grad(set_to_none=True)
            self.compiled = try_compile([model], trial, what='the classifier',
                                        mode=None if compile_mode == 'default' else compile_mode)
        self.learn = finetuning_learner(model, self.loader, [], cfg, ClassifierLoss(False), device, autocast,
                                   (step_timer(self, lambda: self.loader.n),))
        self.fit_kwargs = {'lr': self.learn.layer_lrs}


# ---------------------------------------------------------------- timing

def interleaved(runners: list[Runner], warmup: int, rounds: int, steps: int, log=print) -> dict[str, dict]:
    """Warm every runner up, then `rounds` rounds in which every runner runs `steps` steps (the order alternates
    between rounds). Per runner: the per-round seconds per step (wall and process CPU) and their medians."""
    for r in runners:
        t = time.perf_counter()
        if warmup: r.run(warmup)
        log(f'  warm-up {r.name}: {warmup} step(s) in {time.perf_counter() - t:.1f}s')
    res = {r.name: {'wall': [], 'cpu': []} for r in runners}
    for i in range(rounds):
        order = runners if i % 2 == 0 else runners[::-1]
        for r in order:
            wall, cpu = r.run(steps)
            res[r.name]['wall'].append(wall / steps)
            res[r.name]['cpu'].append(cpu / steps)
        log(f'  round {i + 1}/{rounds}: ' + ', '.join(f'{r.name} {res[r.name]["wall"][-1]:.3f}s' for r in runners))
    for r in runners:
        d = res[r.name]
        d['median_s'] = statistics.median(d['wall'])
        d['median_cpu_s'] = statistics.median(d['cpu'])
        d['peak_mem_bytes'] = r.peak_mem
    return res


def ratio_per_round(res: dict, num: str, den: str) -> tuple[float, list[float]]:
    "Median over rounds of time(num) / time(den) in the same round: how many times faster `den` is."
    ratios = [a / b for a, b in zip(res[num]['wall'], res[den]['wall'])]
    return statistics.median(ratios), ratios



def profile_steps(runner: Runner, k: int, device: torch.device, rows: int = 20) -> str:
    """torch.profiler's table of the ops that took the most time (device time on a GPU) in `k` more steps of `runner`;
    on a GPU also the kernels launched per step and how busy the GPU was: kernel time / wall time near 100% means
    the GPU is the limit, far below it means the host (Python, launches) is."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
    with profile(activities=activities) as prof:
        wall, _ = runner.run(k)
        _sync(device)
    key = 'self_cuda_time_total' if device.type == 'cuda' else 'self_cpu_time_total'
    head = f'\nprofile of {runner.name} ({k} step(s) after warm-up; top {rows} by {key}):\n'
    table = prof.key_averages().table(sort_by=key, row_limit=rows)
    if device.type != 'cuda': return head + table
    # the host's side: what keeps the CPU busy while the GPU waits for work
    table += f'\ntop {rows} by self_cpu_time_total:\n' + prof.key_averages().table(sort_by='self_cpu_time_total',
                                                                                  row_limit=rows)
    kernels = [e for e in prof.events() if str(getattr(e, 'device_type', '')).endswith('CUDA')]
    n = k + 1 if isinstance(runner, FitRunner) else k  # a Learner's fit runs one untimed step first
    busy_ms, wall_ms = sum(e.self_device_time_total for e in kernels) / 1e3 / n, 1e3 * wall / k
    return (head + table + f'\nGPU busy: {len(kernels) / n:.0f} kernels per step, kernel time {busy_ms:.3f} ms of '
            f'{wall_ms:.3f} ms wall per step ({100 * busy_ms / wall_ms:.0f}%)')



def sync_check(cfg, model, batches, device, precision, log=print, n_steps: int = 3) -> dict:
    """Device-to-host synchronisations in `n_steps` steps of the real (eager) Learner: counted with `HostSyncCounter`,
    and on CUDA also with `torch.cuda.set_sync_debug_mode('warn')`."""
    model = copy.deepcopy(model)
    uncompile(model)  # a deep copy of a compiled module would call the original's compiled forward
    runner = LearnerRunner('sync_check', dataclasses.replace(cfg, compile=False), model, batches, device, precision)
    runner.run(1)  # first fit: optimizer state, generators
    counter = count_host_syncs(runner.learn, n_steps)
    out = {'steps': n_steps, 'ops': dict(counter.counts)}
    if device.type == 'cuda':
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            torch.cuda.set_sync_debug_mode('warn')
            try: runner.run(n_steps)
            finally: torch.cuda.set_sync_debug_mode(0)
        out['cuda_sync_warnings'] = [str(w.message).splitlines()[0] for w in caught if 'synchroniz' in str(w.message)]
    log(f'host syncs in {n_steps} steps of the real step: {out}')
    return out

