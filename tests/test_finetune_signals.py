"""finetune.py stopped by the signals of a scheduler, for real: the job alone, the process group of a sweep on worker
processes, one worker alone; the printed command then ends with the weights of an uninterrupted sweep. Apart from
tests/test_finetune.py so that the suite's two workers (pytest.ini: a file each at a time) run these processes
beside that file's."""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.support import forked
from tests.support.finetune import finetune_in_process
from tests.support.processes import alive, children

pytestmark = pytest.mark.usefixtures('one_thread')

REPO = Path(__file__).resolve().parents[1]


RUNS = 10  # enough that each of three stops (each once one more run is in) lands before the sweep's end


def sweep_preset(tmp_path: Path, glue_dir: Path, tiny_dir: Path) -> Path:
    "RTE, ten runs of 10 epochs of the tiny model: a fraction of a second a run, enough for a signal to land mid-sweep."
    preset = tmp_path / 'sweep.yaml'
    preset.write_text(f'model: {tiny_dir}\ndata: {glue_dir}\ntasks: [RTE]\nruns: {RUNS}\nepochs: 10\nbatch_size: 8\n'
                      f'task_overrides: {{}}\npredict: false\ncache_dir: {tmp_path / "cache"}\nthreads: 1\ndevice: cpu\n'
                      f'output_dir: {tmp_path / "ckpt"}\n')
    return preset


def stop_sweep(cmd: list[str], sig: signal.Signals, results: Path, to: str = 'job') -> tuple[str, list[str], list[int]]:
    """`cmd` (finetune.py, in a session of its own) sent `sig` once a run more than `results` held is in it: `to` the
    job alone, its whole process group ('group') or its first worker process ('worker'). Its `stopped:` line, the
    command that line gives, and the PIDs of its children while it ran."""
    rows = lambda: len(results.read_text().splitlines()) if results.exists() else 0  # noqa: E731
    before = max(rows(), 1)
    proc = forked.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True, env={**os.environ, 'HF_HUB_OFFLINE': '1', 'OMP_NUM_THREADS': '1'})
    while proc.poll() is None and rows() <= before: time.sleep(0.01)
    kids = sorted(children(proc.pid))
    if to == 'group': os.killpg(proc.pid, sig)
    else: os.kill(kids[0] if to == 'worker' else proc.pid, sig)
    err = proc.communicate(timeout=120)[1]
    said = [line for line in err.splitlines() if line.startswith('stopped: ')]
    assert proc.returncode == 130 and len(said) == 1 and 'Traceback' not in err, err[-3000:]
    m = re.search(r'Run the same command again to do the rest: (python .*finetune\.py .*)$', said[0])
    assert m, said[0]
    return said[0], [sys.executable, *shlex.split(m[1])[1:]], kids


def assert_same_weights(a: Path, b: Path) -> None:
    "Every run's saved weights in folder `a` equal those in `b`, bit for bit."
    names = sorted(p.name for p in a.glob('*.pth'))
    assert names == sorted(p.name for p in b.glob('*.pth')) and len(names) == RUNS, names
    for name in names:
        x, y = (torch.load(d / name, map_location='cpu', weights_only=False)['model'] for d in (a, b))
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x), name


def test_sigterm_then_the_printed_command_and_a_signal_to_the_group_of_workers_end_with_the_weights_of_one_sweep(
        tmp_path, glue_dir, tiny_dir):
    """SIGTERM (a scheduler's) to a fine-tuning mid-sweep ends it as Ctrl-C does: status 130, one line naming the
    signal, the finished runs kept and the exact command that does the rest. The same sweep on two worker processes:
    SIGUSR1 to its process group (every worker gets it too) ends the same way, one line and no process left; so does
    SIGTERM to one of its workers alone, each line giving that sweep's own command. The first command printed, run
    (its arguments, in this process), then ends with every run's weights equal to an uninterrupted sweep's. Before:
    SIGTERM killed the job (status -15). One chain of one sweep's folder: each job starts processes that cost far
    more than its runs."""
    preset = sweep_preset(tmp_path, glue_dir, tiny_dir)
    finetune_in_process('--config', str(preset), '--group', 'straight')
    straight = tmp_path / 'ckpt' / 'straight'

    driver = [sys.executable, str(REPO / 'finetune.py'), '--config', str(preset), '--group', 'cut']
    results = tmp_path / 'ckpt' / 'cut' / 'results.csv'
    said, again, _ = stop_sweep(driver, signal.SIGTERM, results)
    assert re.match(r'stopped: by SIGTERM( during RTE run \d)?; the \d+ finished run\(s\) are kept in '
                    rf'{re.escape(str(results))}\. ', said), said
    assert again == driver, again  # the same command

    workers = [*driver, '--parallel_runs', '2']
    said, again_workers, kids = stop_sweep(workers, signal.SIGUSR1, results, to='group')
    assert len(kids) == 2 and said.startswith('stopped: by SIGUSR1; '), (kids, said)
    assert not [pid for pid in kids if alive(pid)] and again_workers == workers  # the workers ended with the sweep
    # SIGTERM to one worker alone (its run lost): the sweep stops as on Ctrl-C, the other worker too
    said, again_workers, kids = stop_sweep(again_workers, signal.SIGTERM, results, to='worker')
    assert re.match(r'stopped: fine-tuning worker \d \(cpu\) was stopped by a signal( during RTE run \d)?; ', said)
    assert len(kids) == 2 and not [pid for pid in kids if alive(pid)] and again_workers == workers, said
    assert len(results.read_text().splitlines()) - 1 < RUNS  # runs were left to do

    # `again` is `driver` (asserted above): its arguments run in this process, since starting one costs more than the
    # runs left; an error or an exit other than 0 raises here
    finetune_in_process(*again[2:])
    assert_same_weights(tmp_path / 'ckpt' / 'cut', straight)
