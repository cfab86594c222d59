"""The real pretraining step run for a number of steps in a fastai Learner (`LearnerRunner`, timed as the benchmark
times it: `Runner`, `FitRunner`, `step_timer`), and the host syncs of a Learner's steps (`count_host_syncs`): what the
tests and the benchmark (`benchmarks/bench/runners.py`, which imports them from here) share."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from electra.training.speed import HostSyncCounter
from tests.support.baseline import Batches, BenchTokenizer

__all__ = ['count_host_syncs', 'sync_device', 'Runner', 'step_timer', 'FitRunner', 'LearnerRunner']


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


def sync_device(device: torch.device):
    "Wait for the device's queued work (CUDA); nothing on the CPU."
    if device.type == 'cuda': torch.cuda.synchronize(device)


class Runner:
    "A training step to time: `run(k)` runs k steps and returns (wall seconds, process CPU seconds)."
    name = ''
    peak_mem: int | None = None

    def __init__(self, device: torch.device): self.device = device

    def steps(self, k: int): raise NotImplementedError

    def run(self, k: int) -> tuple[float, float]:
        if self.device.type == 'cuda': torch.cuda.reset_peak_memory_stats(self.device)
        sync_device(self.device)
        t, c = time.perf_counter(), time.process_time()
        self.steps(k)
        sync_device(self.device)
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
                sync_device(runner.device)
                if runner.device.type == 'cuda': torch.cuda.reset_peak_memory_stats(runner.device)
                self.t, self.c = time.perf_counter(), time.process_time()
            elif self.n == n_steps():
                sync_device(runner.device)
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
