"""A sweep's runs spread over worker processes: one or more per GPU, each taking the next run from a shared queue
when it is free, so a node of 8 GPUs trains 8 runs at once (or more: small models leave most of a GPU idle).

The main process plans the runs and encodes the data as a sequential sweep does, saves the pretrained model once
for the workers to load, then hands out runs and writes every finished run's row to the results table itself: the
table is the same as a sequential sweep's (a run's result depends on its seed and settings only, not on which
process trained it or when), and an interrupted sweep resumes the same way. Workers are fresh Python processes
(`python -m electra.finetuning.workers`) talking to the main one over a pair of pipes: a worker that dies is seen at
once (end of its pipe) and stops the sweep with a message; Ctrl-C or a stop signal (to the sweep, to its process
group, or to a worker) stops them all, keeping the finished runs.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Callable, Iterator

import torch

from electra.config.errors import ConfigError
from electra.config.finetune import FinetuneConfig
from electra.data.tokenizer import pad_token_id
from electra.finetuning.learner import device_and_autocast
from electra.finetuning.loading import load_pretrained
from electra.finetuning.tasks.base import TaskData
from electra.finetuning.runs import RunJob, group_dir, runs_phrase, stacks, train_jobs
from electra.pretrained.export import quiet_transformers
from electra.runtime.errors import STOP_SIGNALS, TrainingStopped, stop_on_signals
from electra.runtime.files import owner_gone
from electra.runtime.processes import command_again, library_env
from electra.training.device import cpu_threads
from electra.training.distributed import one_run_at_a_time

__all__ = ['parallel_runs', 'worker_devices', 'run_on_workers', 'remove_dead_model_copies', 'worker_main',
           'do_the_rest']

_COPY = '.pretrained-'  # the model handed to the workers: `.pretrained-<pid>.<host>.<random>/` in the group folder

# torchrun's variables: a worker is a process of its own, not a rank of the job that started it
_TORCHRUN_VARS = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'ROLE_RANK', 'MASTER_ADDR',
                  'MASTER_PORT', 'TORCHELASTIC_RUN_ID')


def _cuda_wanted(device: str) -> bool:
    return device.startswith('cuda') or (device == 'auto' and torch.cuda.is_available())


def parallel_runs(cfg: FinetuneConfig) -> int:
    """How many runs train at once: `parallel_runs`, or with 0 one per visible GPU (1 on the CPU, and 1 for a fixed
    `cuda:N`). A torchrun job trains each run over all its processes instead, so it takes 1."""
    if one_run_at_a_time('parallel_runs', cfg.parallel_runs, 'to train separate runs at once'): return 1
    if cfg.parallel_runs: return cfg.parallel_runs
    return torch.cuda.device_count() if _cuda_wanted(cfg.device) and ':' not in cfg.device else 1


def worker_devices(device: str, n: int) -> list[str]:
    "The device of each of `n` workers: the visible GPUs in turn for 'auto'/'cuda', else `device` itself for all."
    if _cuda_wanted(device) and ':' not in device:
        count = torch.cuda.device_count()
        if not count: raise ConfigError(f"device: '{device}' asked for, but no CUDA GPU is visible. Use --device cpu.")
        return [f'cuda:{k % count}' for k in range(n)]
    return ['cpu' if device == 'auto' else device] * n


@dataclass
class _Worker:
    "The main process's end of one worker: its process, the pipes to and from it, the run it is training."
    index: int
    device: str
    proc: subprocess.Popen
    jobs: Connection
    replies: Connection
    jobs_now: list[RunJob] | None = None  # the runs it is training (a stack: several of one task)
    stopped: bool = False


def _start(index: int, device: str, setup: tuple) -> _Worker:
    "A worker process on `device`, sent its setup; the library is importable wherever the job was started."
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    env = library_env({k: v for k, v in os.environ.items() if k not in _TORCHRUN_VARS})
    proc = subprocess.Popen([sys.executable, '-m', 'electra.finetuning.workers', str(to_r), str(from_w)],
                            pass_fds=(to_r, from_w), env=env)
    os.close(to_r), os.close(from_w)
    w = _Worker(index, device, proc, Connection(to_w, readable=False), Connection(from_r, writable=False))
    _send(w, ('setup', index, device, *setup))
    return w


def _send(w: _Worker, msg: tuple) -> bool:
    """Send `msg` to worker `w`; False when `w` is gone already (a stop signal to the process group reaches it and
    the sweep at once): the end of its replies pipe then tells `_serve` whether it was stopped or died."""
    try: w.jobs.send(msg)
    except (BrokenPipeError, ConnectionResetError): return False
    return True


def _stop_all(workers: list[_Worker]) -> None:
    """End every worker still running (Ctrl-C in a notebook reaches the kernel only; a signal to this process alone
    reaches no worker), then close the pipes. A worker told to stop is waited for: it ends by itself."""
    for w in workers:
        if w.stopped:
            try: w.proc.wait(timeout=20)
            except subprocess.TimeoutExpired: pass
        if w.proc.poll() is None: w.proc.terminate()  # a stop signal to the worker: it ends as on Ctrl-C
    for w in workers:
        try: w.proc.wait(timeout=20)
        except subprocess.TimeoutExpired: w.proc.kill(); w.proc.wait()
        w.jobs.close(), w.replies.close()


def do_the_rest() -> str:
    "How a stopped sweep goes on: the same command (it skips the finished runs), named."
    again = command_again()
    return f'Run the same command again to do the rest: {again}' if again else 'Run the same cell again to do the rest.'


def _failed(w: _Worker, what: str, done: int, stopped: bool = False) -> TrainingStopped:
    "The end of a sweep whose worker `w` failed or was `stopped` (then with the status of a stop: 130, else 1)."
    during = f' during {w.jobs_now[0].task} {runs_phrase([j.run for j in w.jobs_now])}' if w.jobs_now else ''
    err = TrainingStopped(f"fine-tuning worker {w.index} ({w.device}) {what}{during}; the {done} run(s) finished in "
                          f"this sweep are kept in the results table. {do_the_rest()}")
    if not stopped: err.exit_status = 1
    return err


def _ended(w: _Worker, done: int) -> TrainingStopped:
    """A worker gone before it was told to stop: stopped (status 130: Ctrl-C or a stop signal reached it; or a stop
    signal ended it before its handler was set), or died."""
    status = w.proc.wait()
    if status == TrainingStopped.exit_status or -status in [getattr(signal, n) for n in STOP_SIGNALS]:
        return _failed(w, 'was stopped by a signal', done, stopped=True)
    return _failed(w, f'died (exit status {status})', done)


def _serve(workers: list[_Worker], queue: deque, say: Callable[[str], None]) -> Iterator[dict]:
    "Hand out runs as workers ask for them; yield every finished run's row; stop at the first failure."
    done, live = 0, {w.replies: w for w in workers}
    while live:
        for conn in wait(list(live)):
            w = live[conn]
            try: msg = conn.recv()
            except (EOFError, OSError):
                del live[conn]
                if not w.stopped: raise _ended(w, done) from None
                continue
            if msg[0] == 'ready':
                w.jobs_now = None
                if queue: data, w.jobs_now = queue.popleft(); _send(w, ('run', data, w.jobs_now))
                else: w.stopped = _send(w, ('stop',))  # a worker gone before it was told is not one that ended well
            elif msg[0] == 'log': say(f'[worker {w.index}] {msg[1]}')
            elif msg[0] == 'row': done += isinstance(msg[1], dict); yield msg[1]  # or a run's `Diverged` record
            elif msg[0] == 'config_error': raise ConfigError(msg[1])
            else: raise _failed(w, f'failed:\n{msg[1]}', done)


def run_on_workers(cfg: FinetuneConfig, plan: list[tuple[TaskData, list[RunJob]]], pretrained, tokenizer, n: int,
                   say: Callable[[str], None] = print) -> Iterator[dict]:
    """Train the runs of `plan` on `n` worker processes (fewer when there are fewer runs), a stack of runs of one task
    at a time (`runs.stacks`), yielding each finished run's row of the results table as it comes (a run whose loss
    became NaN or infinite: its `runs.Diverged` record; the worker goes on with the next runs)."""
    n = min(n, sum(len(todo) for _, todo in plan))
    if not n: return
    devices = worker_devices(cfg.device, n)
    device, autocast = device_and_autocast(devices[0], cfg.precision)
    share = -(-n // len(set(devices)))  # workers training on one device at once
    queue = deque(stacks(cfg, plan, pretrained.electra, device, autocast, say, n, share))
    n, devices = min(n, len(queue)), devices[:len(queue)]
    threads = cpu_threads(cfg.threads, n)  # the job's threads shared out among the workers, never oversubscribed
    out = group_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f'{_COPY}{os.getpid()}.{socket.gethostname()}.', dir=out) as model_dir:
        with quiet_transformers(): pretrained.save_pretrained(model_dir)  # the workers load exactly these weights
        tokenizer.save_pretrained(model_dir)
        what = f'{len(queue)} runs' if all(len(jobs) == 1 for _, jobs in queue) else f'{len(queue)} stacks of runs'
        say(f'{what} on {n} worker processes: ' + ', '.join(f'worker {k} on {d}' for k, d in enumerate(devices))
            + f'; {threads} each')
        workers = []
        try:
            workers += [_start(k, d, (cfg, model_dir, threads.n)) for k, d in enumerate(devices)]
            yield from _serve(workers, queue, say)
        finally:  # on Ctrl-C too (the caller says what was kept)
            _stop_all(workers)


def remove_dead_model_copies(out: Path, say: Callable[[str], None]) -> None:
    """The model copies (`run_on_workers`) in the group folder `out` of jobs whose process died on this host (a
    `kill -9` cannot clean up: a full model each) removed, one line each; a live job's, or another host's, left alone
    (as the data cache's dead builds, `electra.data.cache`)."""
    for d in sorted(Path(out).glob(f'{_COPY}*')):
        pid, _, host = d.name[len(_COPY):].rpartition('.')[0].partition('.')  # a host may hold dots, the rest none
        if d.is_dir() and pid.isdigit() and host and owner_gone(int(pid), host):
            shutil.rmtree(d, ignore_errors=True)
            say(f"{d.name} removed from {out}: the model copy a job on workers handed them, left when that job was "
                f"killed (its process {pid} has ended)")


def worker_main(jobs_fd: int, replies_fd: int) -> int:
    "A worker: load the model once, then train the runs it is sent until told to stop."
    jobs, replies = Connection(jobs_fd, writable=False), Connection(replies_fd, readable=False)
    _, index, device_name, cfg, model_dir, threads = jobs.recv()
    torch.set_num_threads(threads)
    try:
        pretrained, tokenizer = load_pretrained(model_dir)
        device, autocast = device_and_autocast(device_name, cfg.precision)
        pad_id = pad_token_id(tokenizer)
        while True:
            replies.send(('ready',))
            msg = jobs.recv()
            if msg[0] == 'stop': return 0
            _, data, jobs_now = msg
            for row in train_jobs(cfg, data, jobs_now, pretrained.electra, device, autocast, pad_id,
                                  lambda line: replies.send(('log', line))):
                replies.send(('row', row))
    except KeyboardInterrupt: return TrainingStopped.exit_status  # Ctrl-C or a stop signal: the main process says
    # what was kept
    except ConfigError as e: replies.send(('config_error', str(e)))
    except Exception: replies.send(('error', traceback.format_exc().rstrip()))
    return 1


if __name__ == '__main__':
    stop_on_signals()  # a worker ends as the sweep does, whichever of them a signal reaches
    sys.exit(worker_main(int(sys.argv[1]), int(sys.argv[2])))
