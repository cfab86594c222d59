"""pretrain.py stopped for real and continued, each job a process of its own: Ctrl-C in a terminal, kill -9, and the
stop signals of a scheduler or a closed terminal (with docs/preemption.md's SLURM script); every chain ends with the
weights of an uninterrupted run, bit for bit. Apart from tests/test_pretrain.py so that the suite's two workers
(pytest.ini: a file each at a time) run these processes beside that file's in-process runs."""
import csv
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

from electra.training.checkpoint import load_checkpoint
from tests.support import forked
from tests.support.pretrain import ROOT, TINY, flags, pretrain


class Terminal:
    """pretrain.py on a pseudo-terminal that is its controlling terminal, as when typed in a shell: its output is a
    tty (the live progress bar runs) and a Ctrl-C typed there reaches the job's whole process group."""

    def __init__(self, tmp: Path, *argv: str):
        import threading
        self.leader, follower = os.openpty()
        self.proc = forked.Popen(
            [sys.executable, 'pretrain.py', '--output_dir', str(tmp / 'ckpt'), '--cache_dir', str(tmp / 'cache'), *argv],
            cwd=ROOT, stdin=follower, stdout=follower, stderr=follower, start_new_session=True, controlling_tty=True,
            env={**os.environ, 'HF_HUB_OFFLINE': '1'})
        os.close(follower)
        self.out = b''
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try: chunk = os.read(self.leader, 65536)
            except OSError: return  # the job closed the terminal
            if not chunk: return
            self.out += chunk

    def wait_for(self, path: Path, timeout: float = 300) -> None:
        "Poll for `path` every 10 ms: the job is acted on as soon as it has written that checkpoint."
        import time
        end = time.time() + timeout
        while not path.exists():
            assert time.time() < end and self.proc.poll() is None, self.text()[-3000:]
            time.sleep(0.01)

    def ctrl_c(self): os.write(self.leader, b'\x03')  # the terminal turns it into SIGINT

    def finish(self, timeout: float = 300) -> int:
        status = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        os.close(self.leader)
        return status

    def text(self) -> str: return self.out.decode('utf-8', 'replace')


def assert_held_out_lines(text: str, steps: list[int]) -> None:
    """Each held-out evaluation of `steps` is a line of the output (in a terminal, above the live bar), each number
    beside what a model that learnt nothing scores."""
    number = r'(\d\.\d{3})'
    for step in steps:
        line = re.search(rf'step {step} held-out: AUC {number} over every token \(chance 0\.5\), {number} on random '
                         rf'replacements over every token; gen acc {number} at the masked positions \(most frequent '
                         rf'token {number}\); disc acc {number} over every token \(always "original" {number}\); '
                         rf'(\d+\.\d)% of the tokens replaced; loss gen \d+\.\d{{3}} disc \d\.\d{{3}} *\r?\n', text)
        assert line, text[-3000:]
        assert float(line[6]) == pytest.approx(1 - float(line[7]) / 100, abs=1.5e-3)


@pytest.fixture(scope='module')
def straight_120(tmp_path_factory):
    """The state after 120 uninterrupted steps, for the interruption tests to end equal to; and its data cache, which
    their runs reuse rather than build again (the same corpus and tokenizer)."""
    tmp = tmp_path_factory.mktemp('straight_120')
    pretrain(tmp, *TINY, '--steps', '120', '--run_name', 'long', '--checkpoint_at', '1.0')
    return tmp / 'cache', load_checkpoint(tmp / 'ckpt' / 'long_11081_100%.pth')


def test_ctrl_c_then_kill_9_then_resume_in_a_terminal_ends_bit_identical(straight_120, tmp_path):
    """In a terminal: Ctrl-C stops after the current step with a checkpoint there (status 130, one line naming the
    step and the command to continue); the resumed run is killed with -9 after its 50% checkpoint; a second resume
    finishes, its live bar running and its held-out lines printed above it. Every model and optimizer tensor then
    equals the uninterrupted run's exactly."""
    argv = flags(*TINY, '--steps', '120', '--run_name', 'long', '--checkpoint_at', '0.1,0.5,1.0')
    ckpt = tmp_path / 'ckpt'
    first = Terminal(tmp_path, *argv)
    first.wait_for(ckpt / 'long_11081_10%.pth')
    first.ctrl_c()
    assert first.finish() == 130, first.text()[-3000:]
    m = re.search(r'stopped: at step (\d+) of 120 by Ctrl-C; checkpoint (\S+) written\. Continue the run with: '
                  r'python pretrain\.py .* --resume', first.text())
    assert m and 'Traceback' not in first.text(), first.text()[-3000:]
    step = int(m[1])
    assert 12 <= step < 60 and load_checkpoint(m[2])['step'] == step

    second = Terminal(tmp_path, *argv, '--resume')
    second.wait_for(ckpt / 'long_11081_50%.pth')
    second.proc.kill()  # kill -9: no clean-up at all
    assert second.finish() == -9 and f'starting at step {step} of 120' in second.text()
    assert not (ckpt / 'long_11081_100%.pth').exists()  # killed mid-run, not after it

    third = Terminal(tmp_path, *argv, '--resume')
    assert third.finish() == 0, third.text()[-3000:]
    assert 'starting at step 60 of 120' in third.text() and '[60/60' in third.text()  # the live bar ran
    assert re.search(r'\[60/60 [^\n]*\]\r?\n', third.text()), third.text()[-3000:]  # what follows is below the bar
    assert_held_out_lines(third.text(), [66, 120])
    assert 'warning' not in third.text().lower() and 'Writing model shards' not in third.text()  # nothing but the run
    final = load_checkpoint(ckpt / 'long_11081_100%.pth')
    assert final['threads'] == 1  # the threads it ran with, which a resume under `threads: auto` keeps
    for part in ('model', 'opt'):
        a, b = torch.utils._pytree.tree_leaves(final[part]), torch.utils._pytree.tree_leaves(straight_120[1][part])
        assert len(a) == len(b) and all(torch.equal(x, y) if torch.is_tensor(x) else x == y for x, y in zip(a, b)), part


def stop_by_signal(cmd: list[str], sig: signal.Signals, metrics: Path, past: int) -> tuple[int, str, list[str]]:
    """`cmd` (pretrain.py, output not a terminal) sent `sig` once it logged a step past `past`: the step it stopped
    at, the checkpoint its one `stopped:` line names, and the command that line gives to continue."""
    proc = forked.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                        env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    rows = lambda: ([r for r in csv.DictReader(metrics.open()) if (r.get('step') or '').isdigit()]  # noqa: E731
                    if metrics.exists() else [])
    while proc.poll() is None and not any(int(r['step']) > past for r in rows()): time.sleep(0.01)
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    said = [line for line in err.splitlines() if line.startswith('stopped: ')]
    assert proc.returncode == 130 and len(said) == 1 and 'Traceback' not in err, err[-3000:]
    m = re.fullmatch(rf'stopped: at step (\d+) of 120 by {sig.name}; checkpoint (\S+) written\. Continue the run '
                     r'with: (python pretrain\.py .* --resume)', said[0])
    assert m and f'\n{sig.name}: stopping after this step, with a checkpoint' in err, err[-3000:]
    again = shlex.split(m[3])
    return int(m[1]), m[2], [sys.executable, *again[1:]]


def slurm_script(tmp: Path, argv: list[str]) -> Path:
    """The batch script of docs/preemption.md, its job's flags replaced by `argv` (the tests' tiny run), beside a
    stand-in `scontrol` that records what it is asked."""
    text = (ROOT / 'docs' / 'preemption.md').read_text()
    script = text.split('```bash\n#!/bin/bash\n', 1)[1].split('```', 1)[0]
    job = re.search(r'^python pretrain\.py .* --resume &$', script, re.M)
    script = script.replace(job[0], shlex.join([sys.executable, 'pretrain.py', *argv, '--resume']) + ' &')
    (tmp / 'bin').mkdir()
    (tmp / 'bin' / 'scontrol').write_text(f'#!/bin/sh\necho "$@" >> {tmp / "scontrol.txt"}\n')
    (tmp / 'bin' / 'scontrol').chmod(0o755)
    (tmp / 'job.sh').write_text('#!/bin/bash\n' + script)
    return tmp / 'job.sh'


def test_sigterm_sighup_and_the_slurm_script_s_sigusr1_stop_as_ctrl_c_and_the_printed_commands_end_bit_identical(
        straight_120, tmp_path):
    """What a batch scheduler sends before it preempts or ends a job (SIGTERM, SIGUSR1) and what a closed terminal
    sends (SIGHUP) end a run as Ctrl-C does: the step finishes and is checkpointed (read back, checksum included),
    status 130, one line naming the signal, the checkpoint and the command that continues; that command, stopped
    again by the next signal, goes on. Before: SIGTERM killed the job (status -15), nothing saved since the last
    checkpoint. The last printed command is the job of docs/preemption.md's batch script, run by bash as SLURM runs
    it, sent SIGUSR1 as `--signal=B:USR1@...` sends it (to the batch shell alone): the shell passes it on, the job
    checkpoints and ends with 130, the script asks `scontrol requeue` for its job and ends with 130. Run again, as the
    requeued job, it continues from that checkpoint to the end (status 0, no requeue), with every model and optimizer
    tensor equal to the uninterrupted run's. (Each stop signal's handling in-process: tests/runtime/test_errors.py.)"""
    argv = [*TINY, '--steps', '120', '--run_name', 'long', '--checkpoint_at', '1.0']
    ckpt = tmp_path / 'ckpt'
    metrics = ckpt / 'long_11081' / 'metrics.csv'
    cmd = [sys.executable, 'pretrain.py', '--output_dir', str(ckpt), '--cache_dir', str(straight_120[0]), *argv]
    step = 0
    for sig in (signal.SIGTERM, signal.SIGHUP):
        at, path, cmd = stop_by_signal(cmd, sig, metrics, step)
        assert step < at < 120 and load_checkpoint(path)['step'] == at, (sig, step, at)
        step = at

    # the script's job is the printed command: the same options, then --resume
    assert cmd[1] == 'pretrain.py' and cmd[-1] == '--resume', cmd
    script = slurm_script(tmp_path, cmd[2:-1])
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'SLURM_JOB_ID': '4242', 'SLURM_SUBMIT_DIR': str(ROOT),
           'PATH': f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    shell = subprocess.Popen(['bash', str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    # rows with a step: the resumed job rewrites the file, which a read can catch half-written
    rows = lambda: [r for r in csv.DictReader(metrics.open()) if (r.get('step') or '').isdigit()]  # noqa: E731
    while shell.poll() is None and not any(int(r['step']) > step for r in rows()): time.sleep(0.01)
    shell.send_signal(signal.SIGUSR1)
    out = shell.communicate(timeout=120)[0]
    assert shell.returncode == 130 and (tmp_path / 'scontrol.txt').read_text() == 'requeue 4242\n', out[-3000:]
    m = re.search(r'stopped: at step (\d+) of 120 by SIGUSR1; checkpoint (\S+) written\. Continue the run with: '
                  r'(python pretrain\.py .* --resume)\n', out)
    assert m and out.count('stopped: ') == 1 and '\nSIGUSR1: stopping after this step, with a checkpoint' in out, out[-3000:]
    assert step < int(m[1]) < 120 and load_checkpoint(m[2])['step'] == int(m[1]) and 'Traceback' not in out, out[-3000:]
    assert shlex.split(m[3])[1:] == cmd[1:]  # the same command again

    again = subprocess.run(['bash', str(script)], capture_output=True, text=True, env=env)
    assert again.returncode == 0 and f'starting at step {m[1]} of 120' in again.stdout, again.stdout[-3000:]
    assert (tmp_path / 'scontrol.txt').read_text() == 'requeue 4242\n'  # finished: not requeued again
    final = load_checkpoint(ckpt / 'long_11081_100%.pth')
    for part in ('model', 'opt'):
        a, b = torch.utils._pytree.tree_leaves(final[part]), torch.utils._pytree.tree_leaves(straight_120[1][part])
        assert len(a) == len(b) and all(torch.equal(x, y) if torch.is_tensor(x) else x == y for x, y in zip(a, b)), part


def test_a_stop_signal_during_the_last_step_says_the_run_ends_as_finished(tmp_path, monkeypatch, capsys):
    """R29b-4: a SIGTERM in the last step printed 'stopping after this step, with a checkpoint', then the run exported
    and ended with status 0 and no word of why it did not stop. Now one line says the run is complete and ends as a
    finished run does (the signal's request set as the fit starts: a run of one step is in its last step)."""
    import contextlib
    import signal
    from electra.pretraining.callbacks import StopOnInterrupt
    plain = StopOnInterrupt.handling_sigint

    @contextlib.contextmanager
    def asked(self):
        with plain(self):
            self._request(signal.SIGTERM, None)
            yield
    monkeypatch.setattr(StopOnInterrupt, 'handling_sigint', asked)
    g = pretrain(tmp_path, *TINY, '--steps', '1', '--eval_examples', '0')
    err = capsys.readouterr().err
    assert 'SIGTERM: stopping after this step, with a checkpoint' in err
    assert ('SIGTERM came during the last step (1 of 1): the run is complete, so it ends as a finished run does '
            '(its export, then status 0; nothing to resume).') in err
    assert (g['run_dir'] / 'discriminator' / 'model.safetensors').is_file()
