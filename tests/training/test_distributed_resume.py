"""A two-process torchrun pretraining killed or stopped and resumed (docs/preemption.md): killed (SIGKILL) after a
checkpoint, stopped by Ctrl-C and by a scheduler's SIGTERM, each resume goes on to the end of an uninterrupted run;
only rank 0 writes; and torchrun told to pass SIGUSR1 on (--signals_to_handle) hands it to every process as a stop.
Apart from tests/training/test_distributed.py so that the suite's two workers (pytest.ini: a file each at a time) run
these jobs beside that file's."""
import csv
import os
import re
import signal
import subprocess
import time

import torch

from tests.support import forked
from tests.support.distributed import ENV, run, torchrun, torchrun_pretrain as pretrain
from tests.support.processes import alive, children


def test_killed_or_ctrl_c_two_process_run_resumes_to_the_uninterrupted_end_and_only_rank_0_writes(tmp_path):
    run(pretrain(tmp_path, '--run_name', 'whole'), tmp_path)
    whole = tmp_path / 'ckpt' / 'whole_11081_100%.pth'
    # files: those of a one-process run, written once (no second tokenizer, config or metrics from rank 1)
    written = sorted(p.relative_to(tmp_path / 'ckpt').as_posix() for p in (tmp_path / 'ckpt').rglob('*') if p.is_file())
    assert [p for p in written if not p.startswith('whole_11081/discriminator/') and
            not p.startswith('whole_11081/generator/') and not p.startswith('whole_11081/tokenizer/')] == [
        'whole_11081/config.yaml', 'whole_11081/eval_metrics.csv', 'whole_11081/log.txt', 'whole_11081/losses.png',
        'whole_11081/metrics.csv', 'whole_11081/schedules.yaml', 'whole_11081_100%.pth', 'whole_11081_50%.pth']
    assert len(list(csv.DictReader((tmp_path / 'ckpt' / 'whole_11081' / 'metrics.csv').open()))) == 12
    ckpt = torch.load(whole, map_location='cpu', weights_only=False)
    assert len(ckpt['rng_ranks']) == 2 and not torch.equal(ckpt['rng_ranks'][0]['masking'], ckpt['rng_ranks'][1]['masking'])

    # the same run killed (SIGKILL to torchrun and both workers) once its 50% checkpoint exists
    job = forked.Popen(pretrain(tmp_path, '--run_name', 'cut'), cwd=tmp_path, env=ENV, start_new_session=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    half, end = tmp_path / 'ckpt' / 'cut_11081_50%.pth', tmp_path / 'ckpt' / 'cut_11081_100%.pth'
    deadline = time.time() + 240
    while not half.exists() and job.poll() is None and time.time() < deadline: time.sleep(0.02)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert half.exists() and not end.exists(), 'the run ended before it could be killed after its 50% checkpoint'

    # resumed, then Ctrl-C in the terminal (SIGINT to torchrun and its processes; torchrun passes it on to them once
    # more) once it logged a step past its start: the step ends, rank 0 checkpoints it and says how to go on
    job = forked.Popen(pretrain(tmp_path, '--run_name', 'cut', '--resume'), cwd=tmp_path, env=ENV,
                       start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / 'ckpt' / 'cut_11081' / 'metrics.csv'
    while job.poll() is None and not any(int(r['step']) > 60 for r in csv.DictReader(metrics.open())): time.sleep(0.02)
    os.killpg(job.pid, signal.SIGINT)
    err = job.communicate(timeout=120)[1]
    said = [line for line in err.splitlines() if line.startswith('stopped: ')]
    assert len(said) == 1 and 'Continue the run with: torchrun <the same options> ' in said[0], err[-3000:]
    step = int(said[0].split('at step ')[1].split()[0])
    path = tmp_path / 'ckpt' / said[0].split('checkpoint ')[1].split(' written')[0].split('/')[-1]
    assert 70 <= step < 120 and torch.load(path, map_location='cpu', weights_only=False)['step'] == step

    # resumed, then what a scheduler sends: SIGTERM to torchrun's process group (its workers, each in a session of its
    # own, get it from torchrun): it ends as Ctrl-C does, rank 0 checkpoints the step (the other stop signals take
    # the same way in each process: tests/runtime/test_errors.py; torchrun passing on SIGUSR1: the test below)
    job = forked.Popen(pretrain(tmp_path, '--run_name', 'cut', '--resume'), cwd=tmp_path, env=ENV,
                       start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while job.poll() is None and not any(int(r['step']) > step for r in csv.DictReader(metrics.open())):
        time.sleep(0.02)
    workers = children(job.pid)
    os.killpg(job.pid, signal.SIGTERM)
    err = job.communicate(timeout=120)[1]
    said = [line for line in err.splitlines() if line.startswith('stopped: ')]
    assert len(said) == 1 and ' by SIGTERM; checkpoint ' in said[0], err[-3000:]
    assert 'Continue the run with: torchrun <the same options> ' in said[0] and len(workers) == 2
    assert not [pid for pid in workers if alive(pid)] and '[rank1]' not in err, err[-3000:]
    at = int(said[0].split('at step ')[1].split()[0])
    path = tmp_path / 'ckpt' / said[0].split('checkpoint ')[1].split(' written')[0].split('/')[-1]
    assert step < at < 120 and torch.load(path, map_location='cpu', weights_only=False)['step'] == at

    # resumed once more, the run ends where the uninterrupted one did: weights and every process's random state
    run(pretrain(tmp_path, '--run_name', 'cut', '--resume'), tmp_path)
    resumed = torch.load(end, map_location='cpu', weights_only=False)
    assert all(torch.equal(ckpt['model'][k], resumed['model'][k]) for k in ckpt['model'])
    for a, b in zip(ckpt['rng_ranks'], resumed['rng_ranks']):
        assert torch.equal(a['masking'], b['masking']) and torch.equal(a['torch'], b['torch'])


# the signals torchrun passes on to its workers when told to (its default: SIGTERM, SIGINT, SIGHUP, SIGQUIT)
TORCHRUN_SIGNALS = 'SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2'
# a process of a job with the drivers' stop handlers, waiting: what a stop signal that reaches it does
WAITING = """
import os, sys, time
from pathlib import Path
from electra.runtime.errors import StopSignal, stop_on_signals, stopped_by
stop_on_signals()
Path(sys.argv[1], 'ready' + os.environ['RANK']).write_text('')
try: time.sleep(120)
except StopSignal as e:
    print(f"rank {os.environ['RANK']} stopped by {stopped_by(e)}", flush=True)
    sys.exit(130)
"""


def test_sigusr1_to_torchrun_told_to_pass_it_on_reaches_every_process_as_a_stop(tmp_path):
    """SIGUSR1 to the process group of torchrun started with --signals_to_handle naming it (docs/preemption.md's batch
    script): torchrun passes it on, and every process takes it as the stop signal it is (then as SIGTERM above: the
    step ends, rank 0 checkpoints); no process is left. Without the option it would end the agent at once."""
    (tmp_path / 'waiting.py').write_text(WAITING)
    cmd = torchrun('waiting.py', tmp_path)
    cmd[4:4] = ['--signals_to_handle', TORCHRUN_SIGNALS]  # a torchrun option: before the script
    job = forked.Popen(cmd, cwd=tmp_path, env=ENV, start_new_session=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while len(list(tmp_path.glob('ready*'))) < 2 and job.poll() is None and time.time() < deadline: time.sleep(0.02)
    workers = children(job.pid)
    os.killpg(job.pid, signal.SIGUSR1)
    out, err = job.communicate(timeout=120)
    # findall, not lines: under `python -u` (torchrun's) a print is two writes, which two ranks at once may interleave
    # (one rank's line then runs into the next: 'SIGUSR1rank 1 ...'), so the signal's name is matched, not \w+
    assert sorted(re.findall(r'rank (\d) stopped by (SIG(?:USR[12]|[A-Z]+))', out)) == [('0', 'SIGUSR1'), ('1', 'SIGUSR1')], \
        out[-3000:] + err[-3000:]
    assert len(workers) == 2 and not [pid for pid in workers if alive(pid)] and job.returncode != 0, err[-3000:]
