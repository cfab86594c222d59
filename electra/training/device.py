"""Where a job runs, in which precision and on how many CPU threads: the same rules for pretraining and fine-tuning."""
from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import torch

from electra.config.errors import ConfigError, RunWarning
from electra.config.shared_keys import threads_setting
from electra.runtime.processes import world

__all__ = ['AUTOCAST_DTYPES', 'cpu_bf16_supported', 'resolve_device', 'resolve_precision', 'CpuThreads', 'cpu_threads',
           'auto_threads', 'affinity_cpus', 'busy_cores', 'use_cpu_threads']

AUTOCAST_DTYPES = {'fp32': None, 'bf16': torch.bfloat16, 'fp16': torch.float16}  # precision -> autocast dtype


def cpu_bf16_supported() -> bool:
    "True when this CPU multiplies bf16 natively (AVX512-BF16 or AMX), so bf16 autocast speeds CPU training up."
    try: return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError): return False


def resolve_device(name: str) -> torch.device:
    """The torch device of `device`: auto (a GPU when there is one), cpu, cuda or cuda:N; checked. Under torchrun,
    'auto' and 'cuda' mean this process's own GPU, cuda:LOCAL_RANK."""
    if name == 'auto': name = 'cuda' if torch.cuda.is_available() else 'cpu'
    try: device = torch.device(name)
    except RuntimeError: raise ConfigError(f"device: '{name}' is not a device; use auto, cpu, cuda or cuda:N.") from None
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise ConfigError(f"device: '{name}' asked for, but no CUDA GPU is visible. Use --device cpu.")
    w = world()
    if device.type == 'cuda' and device.index is None and w.size > 1:
        if w.local_rank >= torch.cuda.device_count():
            raise ConfigError(f"device: process {w.local_rank} of this machine has no GPU of its own "
                              f"({torch.cuda.device_count()} visible): start at most that many with --nproc_per_node.")
        device = torch.device('cuda', w.local_rank)
    return device


def resolve_precision(name: str, device: torch.device) -> str:
    """'auto' is bf16 on GPUs that support it, fp16 on older GPUs, fp32 on CPU. bf16 may also be asked for on a CPU
    with native bf16 matmuls (AVX512-BF16 / AMX)."""
    if device.type != 'cuda':
        if name == 'bf16' and cpu_bf16_supported(): return 'bf16'
        if name in ('bf16', 'fp16'):
            where = 'a GPU' if name == 'fp16' else 'a GPU or a CPU with native bf16 (AVX512-BF16, AMX)'
            raise ConfigError(f"precision: {name} mixed precision needs {where}; use fp32 on this CPU.")
        return 'fp32'
    if name == 'auto': return 'bf16' if torch.cuda.is_bf16_supported() else 'fp16'
    return name


def affinity_cpus() -> list[int]:
    "The CPUs this process may run on (a container's or taskset's share, not the host's)."
    return sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else list(range(os.cpu_count() or 1))


def _cpu_ticks(path: str | Path = '/proc/stat') -> dict[int, tuple[int, int]]:
    "Each CPU's (busy, total) clock ticks since boot, from Linux's /proc/stat; {} where it cannot be read."
    try: lines = Path(path).read_text().splitlines()
    except OSError: return {}
    out = {}
    for line in lines:
        name, *fields = line.split()
        if not name.startswith('cpu') or not name[3:].isdigit(): continue  # 'cpu' alone is the sum of all
        ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal (guest is in user)
        out[int(name[3:])] = (sum(ticks) - ticks[3] - ticks[4], sum(ticks))
    return out


def busy_cores(cpus: list[int], seconds: float = 0.25, ticks: Callable[[], dict] = _cpu_ticks,
               clock: Callable[[], float] = time.process_time) -> float:
    """How many of the CPUs `cpus` other processes keep busy, in cores: each one's busy share over `seconds`, summed,
    less what this process ran meanwhile (`clock`: its CPU seconds). Without /proc/stat, the 1-minute load average
    (0 where there is none)."""
    before, own = ticks(), clock()
    if not before:
        try: return min(float(len(cpus)), os.getloadavg()[0])
        except (AttributeError, OSError): return 0.0
    time.sleep(seconds)
    after, own = ticks(), clock() - own
    busy = sum((after[c][0] - before[c][0]) / max(after[c][1] - before[c][1], 1) for c in cpus if c in before and c in after)
    return max(0.0, busy - own / seconds)


def auto_threads(cores: int, busy: float, processes: int = 1) -> int:
    """The default threads of each of a job's `processes` on a machine where it may run on `cores` cores and other
    processes keep `busy` of them busy: the free cores (a core half busy or more counts as busy), shared out evenly,
    at least 1. An intra-op thread on a core another process uses waits for its turn at every parallel region, and
    the others wait for it: on 2 cores with one busy, 2 threads run the demo many times slower than 1 (BENCHMARKS.md)."""
    free = cores - math.floor(busy + 0.5)
    return max(1, free // max(processes, 1))


@dataclass(frozen=True)
class CpuThreads:
    "How many threads each process of a job takes (`n`), and why (for the log)."
    n: int
    why: str

    def __str__(self) -> str: return f"{self.n} CPU thread{'s' if self.n > 1 else ''} ({self.why})"


def cpu_threads(setting: int | str, processes: int = 1, env: Mapping[str, str] = os.environ,
                cpus: Callable[[], list[int]] | None = None, busy: Callable[[list[int]], float] = busy_cores) -> CpuThreads:
    """The threads of each of `processes` processes of a job on this machine for a `threads` setting: a number is
    shared out among them; auto is OMP_NUM_THREADS when set (shared out the same way), else `auto_threads` of the
    cores in this process's affinity and those other processes keep busy now. More threads in all than those cores,
    and an OMP_NUM_THREADS auto cannot read, are said in one warning each."""
    n, shared = threads_setting(setting), f', shared by {processes} processes' if processes > 1 else ''
    mine, omp = (cpus or affinity_cpus)(), env.get('OMP_NUM_THREADS', '').strip()
    if n or (omp.isdigit() and int(omp) > 0):
        chosen = (CpuThreads(max(1, n // processes), f'threads {n}{shared}') if n else
                  CpuThreads(max(1, int(omp) // processes), f'auto: OMP_NUM_THREADS={omp}{shared}'))
        _say_past_cores(chosen.n, processes, len(mine), 'threads' if n else 'OMP_NUM_THREADS')
        return chosen
    load = busy(mine)
    each = auto_threads(len(mine), load, processes)
    if omp:
        warnings.warn(f"OMP_NUM_THREADS: {omp!r} is not a positive whole number, so threads auto ignores it and takes "
                      f"the cores left free ({each} here).", RunWarning, stacklevel=3)
    return CpuThreads(each, f'auto: {len(mine)} cores, {load:.1f} busy with other processes{shared}')


def _say_past_cores(each: int, processes: int, cores: int, key: str) -> None:
    "One warning where a job's threads in all (`each` in each of its `processes`) are more than the `cores` it has."
    if each * processes <= cores: return
    split = f' ({each} in each of {processes} processes)' if processes > 1 else ''
    fix = 'threads auto (the cores left free)' if key == 'threads' else 'unset it for threads auto to take the cores left free'
    warnings.warn(f"{key}: {each * processes} CPU threads{split} on the {cores} cores this process may run on: threads "
                  f"that share a core wait for each other at every step. Give at most {cores}, or {fix}.", RunWarning,
                  stacklevel=4)


def use_cpu_threads(setting: int | str, processes: int | None = None, resumed: int | None = None) -> CpuThreads:
    """`cpu_threads` for this process (one of torchrun's `local_size` on its machine by default), set in torch.
    `resumed`: the threads of the run this job resumes (its checkpoint's); with auto they are kept, since another
    number of threads sums in another order and the resumed run would not be the run it continues, bit for bit."""
    chosen = cpu_threads(setting, world().local_size if processes is None else processes)
    if resumed and threads_setting(setting) == 0:
        chosen = CpuThreads(resumed, f'auto: the {resumed} the run used before, so it resumes bit for bit; '
                                     f'now {chosen.n} would be chosen')
    elif resumed and chosen.n != resumed:
        chosen = CpuThreads(chosen.n, f'{chosen.why}; the run used {resumed} before: another number of threads sums '
                                      f'in another order, so it goes on as another draw of the run, not bit for bit')
    torch.set_num_threads(chosen.n)
    return chosen
