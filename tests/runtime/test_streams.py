"""electra/runtime/streams.py: the standard streams of a job, run for real. Output piped into a reader that stops early
(`| head -3`), stdout or stderr closed (`>&-`, `2>&-`), a stream into a full device (`>/dev/full`, `2>/dev/full`): the
job goes on to its end (checkpoints and export, the results table), status 0, no traceback, and what the stream missed
is in the run's log file with a line saying what happened to the stream."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from electra.data.demo import write_demo_corpus
from tests.support import forked
from tests.support.notebook_runs import tiny_pretraining

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, 'PYTHONPATH': str(REPO), 'HF_HUB_OFFLINE': '1', 'HF_DATASETS_OFFLINE': '1', 'OMP_NUM_THREADS': '1'}
TINY = ['--steps', '4', '--batch_size', '8', '--max_length', '32', '--hidden_size', '32', '--num_hidden_layers', '1',
        '--num_attention_heads', '1', '--intermediate_size', '64', '--embedding_size', '32', '--vocab_size', '300',
        '--log_every', '2', '--warmup_steps', '1', '--eval_examples', '0', '--checkpoint_at', '1.0', '--device', 'cpu',
        '--threads', '1']


def run(cmd: list[str], tmp: Path, stdout: str, stderr: str = 'captured', head: int = 3) -> tuple[int, str, list[str]]:
    """`cmd` from `tmp` with its stdout and stderr set up as named: 'head' (a pipe whose reader takes `head` lines
    and closes it, as `| head -3`), 'closed' (as the shell's `>&-`), 'full' (`>/dev/full`), 'captured'. Its status,
    stderr (when captured) and the lines the reader took."""
    err = tmp / 'stderr.txt'
    with open(err, 'w') as f, open('/dev/full', 'w') as full:
        streams = {'head': subprocess.PIPE, 'captured': subprocess.PIPE, 'full': full, 'closed': None}
        proc = forked.Popen(cmd, cwd=tmp, env=ENV, text=True, stdout=streams[stdout],
                            stderr=f if stderr == 'captured' else streams[stderr],
                            closed=tuple(fd for fd, how in ((1, stdout), (2, stderr)) if how == 'closed'))
        lines = []
        if stdout == 'head':
            lines = [proc.stdout.readline() for _ in range(head)]
            proc.stdout.close()  # the reader stops: the job's next writes find no reader (EPIPE)
        elif stdout == 'captured':
            proc.stdout.read()
        status = proc.wait(timeout=600)
    return status, err.read_text(), lines


def pretrain_cmd(tmp: Path, run_name: str) -> list[str]:
    "pretrain.py on the small corpus, with a data cache of its own: the build writes its progress bar to stderr."
    return [sys.executable, str(REPO / 'pretrain.py'), '--corpus', str(tmp.parent / 'corpus.txt'), '--run_name',
            run_name, '--output_dir', str(tmp / 'ckpt'), '--cache_dir', str(tmp / 'cache'), *TINY]


@pytest.fixture(scope='module')
def folder(tmp_path_factory) -> Path:
    "A small corpus (and, beside it, the comparison's data cache)."
    base = tmp_path_factory.mktemp('streams')
    write_demo_corpus(base / 'corpus.txt', n_docs=150)
    return base


def job_folder(folder: Path, name: str) -> Path:
    (folder / name).mkdir()
    return folder / name


def assert_no_traceback(text: str) -> None:
    assert 'Traceback' not in text and 'Exception ignored' not in text and 'BrokenPipeError' not in text, text
    assert 'not writable' not in text and 'cannot write' not in text and 'disk is full' not in text, text


def assert_pretraining_finished(tmp: Path, run_name: str) -> str:
    "The run's last checkpoint and its export are whole; the run's log file, which it returns, has its last lines."
    run_dir = tmp / 'ckpt' / f'{run_name}_11081'
    assert (tmp / 'ckpt' / f'{run_name}_11081_100%.pth').stat().st_size > 0
    assert (run_dir / 'discriminator' / 'config.json').is_file() and (run_dir / 'generator' / 'config.json').is_file()
    log = (run_dir / 'log.txt').read_text()
    assert f'discriminator: {run_dir}/discriminator' in log and f'run {run_dir} on cpu' in log, log
    return log


@pytest.mark.parametrize('stdout, stderr, note', [
    ('head', 'captured', 'stdout: its reader stopped reading (Broken pipe)'),
    ('closed', 'full', 'stdout: closed when the job started')])
def test_pretraining_goes_on_when_a_stream_closes_or_fills(folder, stdout, stderr, note):
    "`python pretrain.py | head -3`, `>&- 2>/dev/full`: the run ends as it would with a terminal."
    tmp = job_folder(folder, f'pretrain_{stdout}')
    status, err, lines = run(pretrain_cmd(tmp, stdout), tmp, stdout, stderr)
    assert status == 0, err
    assert_no_traceback(err)
    log = assert_pretraining_finished(tmp, stdout)
    assert f'{note}; the job goes on, its output only in this log from here on' in log, log
    assert_no_traceback(log)
    if stdout == 'head': assert len(lines) == 3 and all(line in log for line in lines), lines  # the reader's lines too
    if stderr == 'captured': assert note in err  # and one line on the stream still open says where the output goes
    if stderr == 'full': assert 'stderr: No space left on device; the job goes on' in log, log


def test_finetuning_goes_on_with_stdout_into_a_full_device(tmp_path, tmp_path_factory):
    """`python finetune.py >/dev/full`: every run trained, the results table written, the summary in the log. Before:
    `error: the disk is full ... point the job's folders (output_dir, ...) at another disk`, status 2."""
    model = tiny_pretraining(tmp_path_factory)['checkpoint']
    cmd = [sys.executable, str(REPO / 'finetune.py'), '--model', model, '--data', 'demo', '--tasks', 'STS-B',
           '--runs', '1', '--epochs', '1', '--max_length', '32', '--predict', 'false', '--task_overrides', '{}',
           '--output_dir', str(tmp_path / 'ft'), '--cache_dir', str(tmp_path / 'cache'), '--device', 'cpu']
    status, err, _ = run(cmd, tmp_path, 'full')
    assert status == 0, err
    assert_no_traceback(err)
    assert 'STS-B' in (tmp_path / 'ft' / 'demo' / 'results.csv').read_text()
    log = (tmp_path / 'ft' / 'demo' / 'log.txt').read_text()
    assert 'stdout: No space left on device; the job goes on, its output only in this log from here on' in log, log
    assert 'model: ' in log and '| STS-B' in log, log  # the lines the stream missed, the summary table among them
    assert_no_traceback(log)


def test_the_comparison_goes_on_when_its_reader_stops(folder):
    "`python -m electra.experiments.compare ... 2>&- | head -1`: the pretraining it launches runs on, the table is written."
    tmp = job_folder(folder, 'compare')
    tiny = dict(zip(TINY[::2], TINY[1::2]))
    pretrain = [x for key, value in tiny.items() if key not in ('--device', '--threads')
                for x in (f'--pretrain.{key[2:]}', value)]
    cmd = [sys.executable, '-m', 'electra.experiments.compare', '--name', 'c', '--output_dir', str(tmp / 'out'),
           '--variants', '{electra: {config: ""}}', '--finetune', 'false', '--threads', '1', '--pretrain_config', 'demo',
           '--pretrain.corpus', str(folder / 'corpus.txt'), '--pretrain.cache_dir', str(folder / 'cache'),
           '--pretrain.device', 'cpu', *pretrain]
    status, err, lines = run(cmd, tmp, 'head', 'closed', head=1)  # its next line, when the pretraining has ended
    assert status == 0, err
    assert (tmp / 'out' / 'c' / 'table.csv').is_file() and (tmp / 'out' / 'c' / 'table.md').is_file()
    log = (tmp / 'out' / 'c' / 'log.txt').read_text()
    assert 'stdout: its reader stopped reading (Broken pipe); the job goes on' in log, log
    assert 'stderr: closed when the job started; the job goes on' in log, log
    assert_no_traceback(log)
    assert 'table: ' in log and len(lines) == 1 and lines[0] in log, (lines, log)
