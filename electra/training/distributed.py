"""Data-parallel training over the processes `torchrun` starts: PyTorch's process group; the steps
(electra/training/step.py) average the processes' gradients, and `loss_divisors` makes a loss the global batch's.

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK in every process; without them a job is one process and nothing here
does anything. Backends: NCCL when the job runs on GPUs (one per process, `cuda:LOCAL_RANK`), gloo on CPUs. A rank
that waits for another (the data cache, a checkpoint) waits at most `timeout_s` and then stops with a message naming
what it waited for; a process that dies makes torchrun end the others.
"""
from __future__ import annotations

import contextlib
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from electra.config.errors import ConfigError
from electra.runtime.processes import World, world

__all__ = ['check_batch_split', 'one_run_at_a_time', 'init_distributed', 'is_distributed', 'main_process_first',
           'wait_for_all', 'print_main', 'finish_distributed',
           'all_reduce_sum', 'loss_divisors', 'gather_objects', 'rank_seed']

DEFAULT_TIMEOUT_S = 1800  # a data build on one rank can take a while before the others see its cache


def check_batch_split(batch_size: int, micro_batches: int = 1, resume: bool = False) -> None:
    """Refuse, before any work, a global batch the job's processes cannot share: each takes batch_size / processes
    rows of every step, run as `micro_batches` (grad_accum_steps) equal micro-batches, so batch_size must divide by
    processes x micro_batches. The message names the nearest sizes that work and, for a `resume` (which keeps its
    checkpoint's batch_size, another size refused), the numbers of processes that work."""
    procs = world().size
    unit = procs * micro_batches
    if procs == 1 or batch_size % unit == 0: return
    below, above = batch_size // unit * unit, (batch_size // unit + 1) * unit
    use = f'{below} or {above}' if below else f'{above}'
    over, rows = ((f'{procs} processes x {micro_batches} micro-batches (grad_accum_steps)', ', in equal micro-batches')
                  if micro_batches > 1 else (f'{procs} processes', ''))
    counts = [p for p in range(1, batch_size + 1) if batch_size % (p * micro_batches) == 0][:8]
    each = f' over {micro_batches} micro-batches' if micro_batches > 1 else ''
    kept = (f" A resumed run keeps its checkpoint's batch_size: resume it on a number of processes that divides it"
            f"{each} ({', '.join(map(str, counts[:-1]))}{' or ' if len(counts) > 1 else ''}{counts[-1]})."
            if resume and counts else '')
    raise ConfigError(f"batch_size: {batch_size} cannot be split over {over}; use {use} (a multiple of {unit}: every "
                      f"process takes the same number of rows of the global batch{rows}).{kept}")


def one_run_at_a_time(key: str, value: int, instead: str) -> bool:
    """Whether this is a torchrun job, whose processes train every fine-tuning run together (data-parallel), so it
    takes one run at a time; there a `key` of `value` > 1 is refused, saying how to get it without torchrun (`instead`)."""
    if world().size == 1: return False
    if value > 1:
        raise ConfigError(f"{key}: {value} under torchrun, whose processes train every run together (data-parallel). "
                          f"Run `python finetune.py --{key} {value}` without torchrun {instead}, or drop --{key}.")
    return True


def is_distributed() -> bool:
    "True inside a process group of more than one process."
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def init_distributed(device: torch.device, timeout_s: int = DEFAULT_TIMEOUT_S) -> World:
    """Join the job's process group (NCCL on GPUs, gloo on CPUs) when torchrun started more than one process; returns
    this process's `World`. Idempotent."""
    w = world()
    if w.size > 1 and not dist.is_initialized():
        _check_rendezvous()
        backend = 'nccl' if device.type == 'cuda' else 'gloo'
        if device.type == 'cuda': torch.cuda.set_device(device)
        hook = sys.excepthook
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
        # torch wraps the hook to prefix what it prints with the rank, but drops the output of a hook that exits
        # with a status, as friendly_errors' does: keep that one (it names the rank itself)
        if getattr(hook, 'exits', False): sys.excepthook = hook
    return w


def _check_rendezvous() -> None:
    "The address torch's env:// rendezvous reads (torchrun sets it), checked before it is used: else a traceback there."
    addr, port = os.environ.get('MASTER_ADDR', '').strip(), os.environ.get('MASTER_PORT', '').strip()
    if not addr:
        raise ConfigError('environment: MASTER_ADDR is not set, but WORLD_SIZE says several processes: start the job '
                          'with torchrun, which sets it, or unset WORLD_SIZE to run one process.')
    if not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ConfigError(f"environment: MASTER_PORT={port!r} is not a port number (1 to 65535): start the job with "
                          "torchrun, which sets it, or give one such as 29500.")


def wait_for_all(what: str, timeout_s: int = DEFAULT_TIMEOUT_S) -> None:
    """Every process waits here until all have come; a process missing after `timeout_s` stops the job with a message
    naming `what` was waited for (gloo names the missing ranks)."""
    if not is_distributed(): return
    try:
        if dist.get_backend() == 'gloo':
            dist.monitored_barrier(timeout=timedelta(seconds=timeout_s), wait_all_ranks=True)
        else:
            dist.barrier()
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"distributed: rank {dist.get_rank()} waited {timeout_s}s for the other processes at "
                          f"'{what}' and not all came ({first}). A process died or hangs: see its output above.") from None


@contextlib.contextmanager
def main_process_first(what: str, timeout_s: int = DEFAULT_TIMEOUT_S):
    """Rank 0 runs the block first (building a cache, training a tokenizer) while the others wait; then they run it,
    finding what rank 0 made."""
    rank = dist.get_rank() if is_distributed() else 0
    if rank != 0: wait_for_all(what, timeout_s)
    yield
    if rank == 0: wait_for_all(what, timeout_s)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    "`t` summed over all processes, in place (itself in one process)."
    if is_distributed(): dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def loss_divisors(counts: torch.Tensor, loss_mean: str) -> torch.Tensor:
    """The divisors of this process's loss sums, from its counts (pretraining: [2], chosen positions and real tokens):
    with `loss_mean` 'global' in a job of W processes, (the counts summed over the processes + 1e-6) / W, so that the
    average of the processes' gradients is the whole batch's mean's; else its own counts + 1e-6."""
    n = world().size if is_distributed() else 1
    if loss_mean != 'global' or n == 1: return counts + 1e-6
    return (all_reduce_sum(counts.clone()) + 1e-6) / n  # (all_reduce works in place; `counts` stays this process's)


def gather_objects(obj) -> list:
    "Every process's `obj`, in rank order, on every process (`[obj]` in one process)."
    if not is_distributed(): return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank `rank`'s own random streams (masks, samples, dropout): `seed` itself on rank 0, so a job of one
    process draws exactly what it drew before there were ranks; a distinct, reproducible seed on the others."""
    if rank == 0: return seed
    import numpy as np
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


def print_main(*args, **kwargs) -> None:
    "`print` on the main process only: a job of N processes says things once."
    if world().rank == 0: print(*args, **kwargs)


def finish_distributed() -> None:
    """Leave the process group after training; every process but the main one ends here, with status 0 (exports,
    plots and the walkthrough are the main process's)."""
    if not (dist.is_available() and dist.is_initialized()): return
    wait_for_all('the end of training')
    rank = dist.get_rank()
    dist.destroy_process_group()
    if rank != 0:
        # no interpreter teardown: gloo's threads can abort it ('terminate called without an active exception',
        # seen once in a test run), which torchrun would report as a failed job; there is nothing left to save here
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(0)
