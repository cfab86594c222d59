"""Processes bound to their parent (electra/runtime/processes.py), with real processes and real `kill -9`: a job the
comparison command started, and the workers of a torchrun job, stop within seconds of their parent's death, leaving
their last checkpoint whole and their run's lock free; a job started from a shell outlives the shell."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from electra.runtime.files import lock_run_dir, release_run_dir
from electra.runtime.processes import PARENT_VAR
from electra.training.checkpoint import checkpoint_name, load_checkpoint
from tests.support import forked
from tests.support.distributed import ENV, REPO, torchrun
from tests.support.processes import alive, children, group_members

# a tiny model trained for far longer than a test waits: it is always mid-run when its parent is killed, with its first
# checkpoint (at 0.00001 of the run: step 1) written
LONG = {'hidden_size': 32, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'intermediate_size': 64,
        'embedding_size': 32, 'vocab_size': 500, 'max_length': 32, 'batch_size': 8, 'steps': 100_000,
        'warmup_steps': 10, 'log_every': 1000, 'eval_examples': 0, 'checkpoint_at': [0.00001, 1.0], 'device': 'cpu'}


@pytest.fixture(scope='module')
def long_run(tmp_path_factory) -> dict:
    "LONG's settings with a tokenizer and a data cache made beforehand: the jobs below start training at once."
    from tests.support.pretrain import pretrain
    tmp = tmp_path_factory.mktemp('prepared')
    args = [a for k, v in {**LONG, 'steps': 1}.items() for a in (f'--{k}', ','.join(map(str, v)) if isinstance(v, list)
                                                                  else str(v))]
    pretrain(tmp, '--config', 'demo', *args, '--run_name', 'prepared')
    return {**LONG, 'tokenizer': str(tmp / 'ckpt' / 'prepared_11081' / 'tokenizer'), 'cache_dir': str(tmp / 'cache')}


def wait_for(condition, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f'waited {timeout}s for {what}'
        assert proc is None or proc.poll() is None, f'the job ended (status {proc.returncode}) before {what}'
        time.sleep(0.02)


def kill_9_and_watch(parent: subprocess.Popen, orphans: list[int]) -> float:
    "`kill -9` of `parent`; the seconds until every one of `orphans` is gone (at most 10)."
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    start = time.monotonic()
    wait_for(lambda: not any(alive(pid) for pid in orphans), 10, f'{orphans} to stop after their parent was killed')
    return time.monotonic() - start


def assert_left_whole(run_dir: Path, first: Path) -> None:
    "The run's checkpoint reads back (checksum included) and another process can take its lock."
    assert load_checkpoint(first)['step'] == 1
    assert lock_run_dir(run_dir) == run_dir / '.lock'
    release_run_dir(run_dir)


def test_a_comparison_killed_takes_its_pretraining_job_with_it(tmp_path, long_run):
    config = {'name': 'kill', 'output_dir': str(tmp_path / 'out'), 'pretrain_config': 'demo', 'finetune': False,
              'pretrain_overrides': long_run, 'variants': {'electra': {}}, 'seeds': [11081], 'threads': 1}
    (tmp_path / 'kill.yaml').write_text(yaml.safe_dump(config))
    parent = forked.Popen([sys.executable, '-m', 'electra.experiments.compare', '--config', str(tmp_path / 'kill.yaml')],
                          cwd=REPO, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    run_dir = tmp_path / 'out' / 'kill' / 'pretrain' / 'kill_electra_11081'
    first = run_dir.parent / checkpoint_name('kill_electra', 11081, 0.00001)
    try:
        wait_for(first.exists, 240, f'{first.name}', parent)
        job = int((run_dir / '.lock').read_text().split()[0])  # pretrain.py, the comparison's child, holds the lock
        assert job in children(parent.pid)
        assert kill_9_and_watch(parent, [job]) < 5
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # whatever is left of the parent's process group
    assert_left_whole(run_dir, first)


@pytest.mark.parametrize('sig, group', [(signal.SIGTERM, False), (signal.SIGUSR2, True)], ids=['SIGTERM', 'SIGUSR2-group'])
def test_a_stop_signal_to_the_comparison_or_its_group_stops_its_job_with_a_checkpoint(tmp_path, long_run, sig, group):
    """SIGTERM to the comparison alone reaches its pretraining job (the comparison passes it on); SIGUSR2 to the
    comparison's process group reaches both at once (one stop each, not two). Either way the job checkpoints the step
    it reached and says so in its log, the comparison ends with status 130 and one line naming the signal and the
    command that goes on, and no process is left. Before: SIGTERM killed the comparison and its job with it."""
    config = {'name': 'stop', 'output_dir': str(tmp_path / 'out'), 'pretrain_config': 'demo', 'finetune': False,
              'pretrain_overrides': long_run, 'variants': {'electra': {}}, 'seeds': [11081], 'threads': 1}
    (tmp_path / 'stop.yaml').write_text(yaml.safe_dump(config))
    parent = forked.Popen([sys.executable, '-m', 'electra.experiments.compare', '--config', str(tmp_path / 'stop.yaml')],
                          cwd=REPO, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    run_dir = tmp_path / 'out' / 'stop' / 'pretrain' / 'stop_electra_11081'
    first = run_dir.parent / checkpoint_name('stop_electra', 11081, 0.00001)
    try:
        wait_for(first.exists, 240, f'{first.name}', parent)
        job = int((run_dir / '.lock').read_text().split()[0])  # pretrain.py, the comparison's child, holds the lock
        os.killpg(parent.pid, sig) if group else parent.send_signal(sig)
        err = parent.communicate(timeout=120)[1]
        said = [line for line in err.splitlines() if line.startswith('stopped: ')]
        assert parent.returncode == 130 and len(said) == 1 and 'Traceback' not in err, err[-3000:]
        assert said[0].startswith(f'stopped: by {sig.name} during electra (seed 11081); ') and said[0].endswith(
            f"Run the same command again to go on from there: python -m electra.experiments.compare --config "
            f"{tmp_path / 'stop.yaml'}"), said[0]
        assert not alive(job) and not group_members(parent.pid)  # nothing left of the comparison's process group
    finally:
        for pid in group_members(parent.pid): os.kill(pid, signal.SIGKILL)
    log = (run_dir / 'pretrain.log').read_text()
    job_said = [line for line in log.splitlines() if line.startswith('stopped: ')]
    assert len(job_said) == 1 and f' by {sig.name}; checkpoint ' in job_said[0], log[-3000:]
    step = int(job_said[0].split('at step ')[1].split()[0])
    assert step >= 1 and load_checkpoint(job_said[0].split('checkpoint ')[1].split(' written')[0])['step'] == step


def test_a_torchrun_job_whose_agent_is_killed_stops_its_workers(tmp_path, long_run):
    args = [a for k, v in long_run.items() for a in (f'--{k}', ','.join(map(str, v)) if isinstance(v, list) else v)]
    agent = forked.Popen(torchrun(REPO / 'pretrain.py', '--config', 'demo', *args, '--output_dir', tmp_path / 'ckpt'),
                         cwd=tmp_path, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    run_dir, first = tmp_path / 'ckpt' / 'demo_11081', tmp_path / 'ckpt' / checkpoint_name('demo', 11081, 0.00001)
    workers = []
    try:
        wait_for(first.exists, 240, f'{first.name}', agent)
        workers = children(agent.pid)  # torchrun's workers: each in a session of its own, out of reach of killpg
        assert len(workers) == 2
        assert kill_9_and_watch(agent, workers) < 5
    finally:
        for pid in [agent.pid, *workers]:
            if alive(pid): os.kill(pid, signal.SIGKILL)
    assert_left_whole(run_dir, first)


CHILD = """
import sys, time
from pathlib import Path
from electra.runtime.processes import PARENT_VAR, end_with_parent
end_with_parent()
import os
Path(sys.argv[1]).write_text(repr(os.environ.get(PARENT_VAR)))
time.sleep(1.5)
Path(sys.argv[1]).with_suffix('.after').write_text('alive')
"""


@pytest.mark.parametrize('bound', [True, False])
def test_only_a_job_started_by_a_parent_that_waits_for_it_ends_with_that_parent(tmp_path, bound):
    """A child named by its parent in ELECTRA_PARENT_PID (the comparison's way) stops when that parent is killed; one
    started from a shell (`nohup python pretrain.py &`) goes on. The variable is not handed down to grandchildren."""
    mark = tmp_path / 'armed'
    parent = subprocess.Popen([sys.executable, '-c', textwrap.dedent(f"""
        import os, subprocess, sys, time
        env = {{**os.environ, {PARENT_VAR!r}: str(os.getpid())}} if {bound} else os.environ
        subprocess.Popen([sys.executable, '-c', {CHILD!r}, {str(mark)!r}], env=env)
        time.sleep(60)""")], cwd=REPO, env=ENV)
    try:
        # the file's content, not its name: write_text creates the file before it writes, and a read between sees ''
        wait_for(lambda: mark.exists() and mark.read_text(), 60, 'the child to start', parent)
        assert mark.read_text() == 'None'
        child, = children(parent.pid)
        kill_9_and_watch(parent, [child]) if bound else os.kill(parent.pid, signal.SIGKILL)
        time.sleep(2.5)
        assert mark.with_suffix('.after').exists() != bound
    finally:
        parent.kill()
        parent.wait()


def test_a_parent_gone_before_the_child_could_watch_it_stops_the_child_at_once(tmp_path):
    "The parent died between starting the child and the child's first line: the child must not run on unseen."
    gone = subprocess.Popen([sys.executable, '-c', 'pass'])
    gone.wait()
    res = subprocess.run([sys.executable, '-c', 'from electra.runtime.processes import end_with_parent\n'
                          'end_with_parent()\nprint("went on")'], cwd=REPO, env={**ENV, PARENT_VAR: str(gone.pid)},
                         capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (1, '')
    assert res.stderr == f'stopped: the process that started this one (PID {gone.pid}) is gone.\n'


def test_the_lock_of_a_killed_process_not_yet_reaped_is_taken_over(tmp_path):
    "A process killed with -9 is a zombie until its parent (or whoever inherits it) collects it: dead, lock free."
    holder = subprocess.Popen([sys.executable, '-c', 'import sys, time; from electra.runtime.files import lock_run_dir; '
                               f'lock_run_dir({str(tmp_path)!r}); print("locked", flush=True); time.sleep(120)'],
                              cwd=REPO, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        os.kill(holder.pid, signal.SIGKILL)  # not waited for: a zombie of this process
        wait_for(lambda: not alive(holder.pid), 10, 'the holder to die')
        assert Path(f'/proc/{holder.pid}').exists()  # still there, as a zombie
        assert lock_run_dir(tmp_path) == tmp_path / '.lock'
        release_run_dir(tmp_path)
    finally:
        holder.kill()
        holder.wait()
