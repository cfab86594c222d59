"""electra/finetuning/workers.py: a sweep's runs over worker processes from a shared queue: the same results table as
one process, Ctrl-C and a dead worker keep the finished runs, and the sweep resumes."""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
from collections import deque
from multiprocessing.connection import Connection
from pathlib import Path

import pandas as pd
import pytest
import torch

from electra.config.errors import ConfigError
from electra.finetuning import sweep, workers
from electra.finetuning.runs import RunJob
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.tasks import TASKS as GLUE_TASKS
from electra.runtime.errors import TrainingStopped
from tests.support import forked, processes
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')

TASKS = [n for n, t in GLUE_TASKS.items() if not t.predicted_by]  # every task with runs of its own (not AX)
VARYING = ['seconds', 'finished_at', 'checkpoint']  # when and where a run ended, not what it learned


def table(cfg) -> pd.DataFrame:
    return pd.read_csv(Path(cfg.output_dir) / cfg.group / 'results.csv')


def finished(cfg) -> int:
    "Rows in the results table (0 before the first run ends)."
    return len(table(cfg)) if (Path(cfg.output_dir) / cfg.group / 'results.csv').is_file() else 0


def sweep_job(tmp_path, glue_dir, where: str, **kw):
    return job(tmp_path / where, glue_dir, tasks=TASKS, runs=2, **{'threads': 1, **kw})


@pytest.fixture(scope='module')
def sequential(tmp_path_factory, glue_dir, tiny):
    "The sequential sweep the parallel ones must equal: its config and its results table."
    cfg, threads = sweep_job(tmp_path_factory.mktemp('seq'), glue_dir, 'seq', parallel_runs=1), torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker (`threads: 1`); float sums depend on the thread count
    try: sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=lambda s: None)
    finally: torch.set_num_threads(threads)
    return cfg, table(cfg)


def assert_same_runs(cfg, seq_cfg, seq: pd.DataFrame):
    got = table(cfg)
    assert len(got) == len(TASKS) * 2
    pd.testing.assert_frame_equal(got.drop(columns=VARYING), seq.drop(columns=VARYING))
    for name in got['checkpoint']:  # the weights too, not only the rounded metrics (named relative to the group)
        mine = torch.load(Path(cfg.output_dir) / cfg.group / name, weights_only=False)
        theirs = torch.load(Path(seq_cfg.output_dir) / 't' / name, weights_only=False)
        for k, v in theirs['model'].items(): assert torch.equal(mine['model'][k], v), (name, k)


def test_two_workers_write_the_sequential_table(tmp_path, glue_dir, tiny, sequential, capfd):
    cfg, lines = sweep_job(tmp_path, glue_dir, 'par', parallel_runs=2, threads=2), []
    capfd.readouterr()
    results = sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=lines.append)
    assert_same_runs(cfg, *sequential)
    assert ('18 runs on 2 worker processes: worker 0 on cpu, worker 1 on cpu; 1 CPU thread (threads 2, shared by 2 '
            'processes) each') in lines  # the job's 2 threads shared out: one per worker
    # which worker takes which runs is the machine's timing (on a busy one, a worker slow to start may find the
    # queue empty); the runs reported came from the two workers started
    reported = {l.split(']')[0] for l in lines if l.startswith('[worker')}
    assert reported and reported <= {'[worker 0', '[worker 1'}
    assert list(results.df['task']) == [n for n in TASKS for _ in range(2)] and list(results.df['run']) == [0, 1] * 9
    assert not list((tmp_path / 'par/ckpt/t').glob('.pretrained-*'))  # the model handed to the workers is removed
    # a worker is a fresh `python -m electra.finetuning.workers` (its stderr is this process's), outside the driver's
    # `friendly_errors`: starting and training, it prints nothing (fastai scripts a few activations with
    # torch.jit.script, which torch deprecates, when imported)
    assert capfd.readouterr().err == ''


def _worker_pids() -> list[int]:
    """This process's worker children (Linux /proc): by their command line, or, forked (tests/support/forked.py), as
    the children that run and are no fork server."""
    pids = []
    for pid in processes.children(os.getpid()):
        try: cmd = Path(f'/proc/{pid}/cmdline').read_bytes()
        except OSError: continue
        forked_job = b'fork_server.py' in cmd and pid not in forked.server_pids()
        if processes.alive(pid) and (b'electra.finetuning.workers' in cmd or forked_job): pids.append(pid)
    return pids


@pytest.mark.skipif(not Path('/proc/self/stat').is_file(), reason='finds the worker processes in /proc')
def test_a_dead_worker_or_ctrl_c_stop_the_sweep_keeping_finished_runs_and_it_resumes(tmp_path, glue_dir, tiny, sequential):
    cfg, killed = sweep_job(tmp_path, glue_dir, 'stop', parallel_runs=2), []

    def kill_a_worker(line):  # kill -9 the first worker to report a run, between its report and its row
        if line.startswith('[worker') and not killed:
            killed.append((int(line[8]), sorted(_worker_pids())[int(line[8])]))  # workers start in index order
            os.kill(killed[0][1], signal.SIGKILL)
    with pytest.raises(TrainingStopped, match=r'fine-tuning worker (\d) \(cpu\) died \(exit status -9\) during \S+ run \d; '
                                              r'the \d+ run\(s\) finished in this sweep are kept') as e:
        sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=kill_a_worker)
    assert str(e.value).startswith(f'fine-tuning worker {killed[0][0]} ')  # the worker killed is the one named
    assert e.value.exit_status == 1 and killed and not _worker_pids()  # the other worker was stopped too
    before = finished(cfg)

    at = []

    def ctrl_c(line):  # Ctrl-C in the main process once more runs have finished (one or more: rows may come together)
        if line.startswith('[worker') and finished(cfg) > before:
            at.append(finished(cfg))
            raise KeyboardInterrupt
    with pytest.raises(TrainingStopped, match=r'by Ctrl-C; the (\d+) finished run\(s\) are kept in .*results.csv') as e:
        sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=ctrl_c)
    assert f'the {at[0]} finished' in str(e.value) and finished(cfg) == at[0] > before and not _worker_pids()
    lines, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # resumed in this process (no workers to start), with the workers' one thread
    try: sweep.run_sweep(dataclasses.replace(cfg, parallel_runs=1), *tiny, open_source(cfg.data), log=lines.append)
    finally: torch.set_num_threads(threads)
    todo = [int(m) for m in re.findall(r'(\d) of 2 runs to do', ' '.join(lines))]
    assert sum(todo) == 18 - at[0] and all(todo)  # only the runs still to do (tasks with none are skipped)
    assert_same_runs(cfg, *sequential)


def test_devices_and_counts(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 3)
    assert workers.worker_devices('auto', 4) == ['cuda:0', 'cuda:1', 'cuda:2', 'cuda:0']
    assert workers.worker_devices('cuda', 2) == ['cuda:0', 'cuda:1']
    assert workers.worker_devices('cuda:2', 2) == ['cuda:2', 'cuda:2']  # several runs share one GPU
    assert workers.worker_devices('cpu', 2) == ['cpu', 'cpu']
    count = lambda **kw: workers.parallel_runs(job(tmp_path, 'demo', **kw))  # noqa: E731
    assert (count(device='auto'), count(device='cuda:1'), count(device='cpu'), count(parallel_runs=5)) == (3, 1, 1, 5)
    monkeypatch.setenv('RANK', '0'), monkeypatch.setenv('WORLD_SIZE', '2')  # under torchrun: data-parallel runs instead
    assert count(device='auto') == 1
    with pytest.raises(ConfigError, match='parallel_runs: 2 under torchrun'): count(parallel_runs=2)


def _gone_worker(ends: str) -> workers._Worker:
    """A worker that said 'ready' and then ended (`ends`: Python code run after its 'ready') before the main process
    answered it: the race of a stop signal reaching a worker and the sweep at once. It has ended before `_serve` sends."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    code = ("import os, signal, sys; from multiprocessing.connection import Connection; "
            f"Connection({from_w}, readable=False).send(('ready',)); {ends}")
    proc = subprocess.Popen([sys.executable, '-c', code], pass_fds=(to_r, from_w))
    os.close(to_r), os.close(from_w)
    proc.wait()  # gone: its end of the jobs pipe is closed, so sending to it raises BrokenPipeError
    return workers._Worker(0, 'cpu', proc, Connection(to_w, readable=False), Connection(from_r, writable=False))


@pytest.mark.parametrize('queue', [[('data', [RunJob('cola', 3, 0, '', '', Path('w.pt'))])], []],
                         ids=['a-run-to-send', 'stop-to-send'])
@pytest.mark.parametrize('ends, stopped', [('os.kill(os.getpid(), signal.SIGTERM)', True), ('sys.exit(130)', True),
                                           ('sys.exit(3)', False)], ids=['sigterm', 'status-130', 'died'])
def test_a_worker_gone_before_it_is_answered_ends_the_sweep_as_a_stop_or_a_death(queue, ends, stopped):
    w = _gone_worker(ends)
    try:
        with pytest.raises(TrainingStopped) as e: list(workers._serve([w], deque(queue), lambda s: None))
    finally: workers._stop_all([w])  # as `run_on_workers` does on the way out: the worker is gone already
    assert e.value.exit_status == (130 if stopped else 1)
    during = ' during cola run 3' if queue else ''  # the run it was sent, which it never began
    assert str(e.value).startswith('fine-tuning worker 0 (cpu) ' +
                                   ('was stopped by a signal' if stopped else 'died (exit status 3)') + during + '; ')


def test_a_model_copy_left_by_a_killed_job_is_removed_by_the_next_job_on_the_group(tmp_path, glue_dir, tiny):
    """A `kill -9` of a job on workers leaves the model copy it handed them (`.pretrained-<pid>.<host>.<random>/`)
    in the group folder: the next job on the group removes it, in one line, since its process has ended; a live
    job's copy (this process's) and one of another host (whose process cannot be checked from here) stay."""
    import socket
    host = socket.gethostname()
    pid = int(subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True,
                             text=True, check=True).stdout)  # a process that has ended
    group = tmp_path / 'ckpt/t'
    owners = ((pid, host, 'ab_12cd3'), (os.getpid(), host, 'ef56gh78'), (pid, 'other.host', 'ij90kl12'))
    left, live, elsewhere = (group / f'.pretrained-{p}.{h}.{r}' for p, h, r in owners)
    for d in (left, live, elsewhere):
        d.mkdir(parents=True)
        (d / 'config.json').write_text('{}')
    cfg, lines = job(tmp_path, glue_dir, tasks=['RTE'], save_pretrained='none'), []
    sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=lines.append)
    assert not left.exists() and live.is_dir() and elsewhere.is_dir()
    assert (f"{left.name} removed from {group}: the model copy a job on workers handed them, left when that job was "
            f"killed (its process {pid} has ended)") in lines
