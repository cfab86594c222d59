"""Data-parallel training on torchrun (electra/training/distributed.py, the step's average of the processes'
gradients, electra/training/step.py), on the CPU with gloo: every step runs through `pretraining_step`, and any split
of the global batch over processes and micro-batches takes the step of the whole batch, which is the plain reference
step; only rank 0 writes; a run killed after a checkpoint resumes to the end of an uninterrupted one; a
missing process stops the job with a message."""
import csv
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tests.support.distributed import ENV, REPO, free_port, max_diff, run, torchrun
from tests.support.processes import alive, children

WORKER = Path(__file__).with_name('ddp_worker.py')
def rows(metrics: str) -> list[dict]:
    return [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in csv.DictReader(metrics.splitlines())]


# every fit of these tests in two jobs, one process and a torchrun job of two: starting a job costs more than its fits
ONE_PROCESS = {'whole': '8,global,1', 'micro': '8,global,2', 'mlm': '8,global,1,replace_mlm'}
TWO_PROCESSES = {'split': '8,global,1', 'split_micro': '8,global,2', 'mlm_split_micro': '8,global,2,replace_mlm',
                 'per_process': '8,per_process,1'}


def fits(d: Path, specs: dict[str, str], procs: int) -> dict[str, dict]:
    args = [f'{d / name}.pt,{spec}' for name, spec in specs.items()]
    run(torchrun(WORKER, *args, n=procs) if procs > 1 else [sys.executable, str(WORKER), *args], d)
    return {name: torch.load(d / f'{name}.pt', weights_only=False) for name in specs}


@pytest.fixture(scope='module')
def one_process(tmp_path_factory):
    "Four steps of batch 8 in one process: the whole batch, two micro-batches, and the replace-MLM objective."
    return fits(tmp_path_factory.mktemp('one'), ONE_PROCESS, 1)


@pytest.fixture(scope='module')
def two_processes(tmp_path_factory):
    "The same fits split over two gloo processes (and micro-batches), and the official per-process loss means."
    return fits(tmp_path_factory.mktemp('two'), TWO_PROCESSES, 2)


@pytest.mark.parametrize('procs, micro', [(2, 1), (1, 2), (2, 2)])
def test_any_split_of_the_batch_takes_the_step_of_the_whole_batch(one_process, two_processes, procs, micro):
    # processes x micro-batches of batch 8 / (procs x micro): the examples hold 6 to 32 tokens, so the parts of a batch
    # hold unequal numbers of tokens and only a loss normalised over the whole batch gives one process's step; the
    # metrics are summed over the micro-batches and reduced over the processes
    split = {(2, 1): two_processes['split'], (1, 2): one_process['micro'], (2, 2): two_processes['split_micro']}
    whole = one_process['whole']
    assert max_diff(whole['model'], split[procs, micro]['model']) < 2e-6
    assert rows(split[procs, micro]['metrics']) == rows(whole['metrics']) and len(rows(whole['metrics'])) == 2


def test_under_torchrun_the_step_function_ran_and_its_steps_are_the_plain_reference_steps(one_process, two_processes):
    """The 4 steps of two gloo processes each ran through `pretraining_step`, and their weights are those of 4 plain
    reference steps on the whole global batches (the same masks and noise: `reference_losses`, `.backward()`, torch's
    clipping, a Python loop of the official Adam at the schedule's rate)."""
    from benchmarks.bench.baseline import BenchTokenizer, LoopAdam, unique_named_parameters
    from electra.data.batches import pretraining_dataloader
    from electra.objective.masking import MaskingSettings
    from electra.objective.reference import reference_losses
    from electra.training.schedule import lr_at_step
    from tests.training import ddp_worker as w
    assert two_processes['split']['step_calls'] == 4 and one_process['whole']['step_calls'] == 4
    cfg = w.config(8)
    model = w.initial_model(cfg)
    masking = w.PerExample(MaskingSettings.from_config(cfg, BenchTokenizer(w.VOCAB)))
    named = unique_named_parameters(model)
    adam = LoopAdam(named, cfg.lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps)
    for t, (ids, tt) in enumerate(pretraining_dataloader(w.examples(), 8, w.LENGTH, 0, 0, cfg.steps)):
        m = masking(ids, None)
        noise = torch.full(model.noise_shape(m.positions), 0.5)
        total, _, _ = reference_losses(model.generator, model.discriminator, m.input_ids, tt, m.positions, m.labels,
                                       noise, 0, cfg.gen_loss_weight, cfg.disc_loss_weight)
        total.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in named], cfg.clip_grad)
        adam.lr = lr_at_step(t, cfg.lr, cfg.warmup_steps, cfg.steps, cfg.decay_power)
        adam.step()
        adam.zero_grad()
    assert max_diff(two_processes['split']['model'], model.state_dict()) < 1e-5


def test_an_mlm_objective_splits_over_processes_and_micro_batches_as_the_whole_batch(one_process, two_processes):
    "Replace MLM: its unused RTD head holds no gradient DDP waits for, and its loss divides by the masked positions."
    one, split = one_process['mlm'], two_processes['mlm_split_micro']
    assert max_diff(one['model'], split['model']) < 2e-6 and rows(split['metrics']) == rows(one['metrics'])
    assert 'mlm_head.projection.bias' in one['model'] and float(rows(one['metrics'])[0]['disc_loss']) > 0


def test_per_process_means_differ_from_the_global_mean_on_uneven_tokens(one_process, two_processes):
    # the official TPU averaging of per-core means: the same step only when every process holds equal token counts
    whole, two = one_process['whole'], two_processes['per_process']
    assert max_diff(whole['model'], two['model']) > 1e-3
    assert rows(two['metrics'])[0]['loss'] != rows(whole['metrics'])[0]['loss']


RANKS = """
import os, sys, time
from pathlib import Path
import torch
from electra.runtime.errors import friendly_errors
from electra.training.distributed import init_distributed, main_process_first, wait_for_all
friendly_errors()  # as the drivers: an error is one line, which joining the process group must not lose
init_distributed(torch.device('cpu'), timeout_s=30)
rank, mark = int(os.environ['RANK']), Path(sys.argv[1])
{body}
"""


def start_ranks(body: str, tmp_path: Path, n: int = 2) -> list[subprocess.Popen]:
    "`n` processes joined in one gloo group (the environment torchrun would give them), each running `body`."
    port, script = free_port(), tmp_path / 'ranks.py'
    script.write_text(RANKS.format(body=textwrap.dedent(body)))
    return [subprocess.Popen([sys.executable, str(script), str(tmp_path / 'mark')], cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env={**ENV, 'RANK': str(r), 'LOCAL_RANK': str(r), 'WORLD_SIZE': str(n),
                                  'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': str(port)}) for r in range(n)]


def test_the_main_process_makes_the_cache_before_the_others_read_it(tmp_path):
    procs = start_ranks("""
        with main_process_first('the cache', timeout_s=30):
            if rank == 0:
                time.sleep(2)                       # a slow build: the others must not look before it is done
                mark.write_text('built')
            print(f'rank {rank} sees', mark.read_text() if mark.exists() else 'nothing')
    """, tmp_path)
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert 'rank 0 sees built' in outs[0] and 'rank 1 sees built' in outs[1]


def test_a_missing_process_stops_the_others_with_a_message_not_a_hang(tmp_path):
    procs = start_ranks("""
        if rank == 1: time.sleep(60)                # never comes to the barrier in time
        wait_for_all('the data cache', timeout_s=3)
    """, tmp_path)
    t = time.perf_counter()
    out = procs[0].communicate(timeout=120)[0]
    procs[1].kill()
    assert procs[0].returncode == 2 and time.perf_counter() - t < 50, out
    assert out.splitlines()[-1].startswith("[rank0] error: distributed: rank 0 waited 3s for the other processes at "
                                           "'the data cache'")  # (after gloo's own log line)
    assert 'Traceback' not in out
    assert '1' in out.split("'the data cache'")[1]  # gloo names the missing rank


# the demo's corpus with the tests' tiny model (tests/support/pretrain.py): a step takes milliseconds, so what these
# jobs cost is mostly starting the processes
TINY_MODEL = ['--max_length', 32, '--hidden_size', 32, '--num_hidden_layers', 2, '--num_attention_heads', 2,
              '--intermediate_size', 64, '--embedding_size', 32, '--generator_size', 0.5, '--vocab_size', 500,
              '--batch_size', 8, '--warmup_steps', 4, '--lr', '5e-4', '--eval_examples', 16]


def pretrain(tmp_path: Path, *args) -> list[str]:
    return torchrun(REPO / 'pretrain.py', '--config', 'demo', *TINY_MODEL, '--device', 'cpu', '--steps', 120,
                    '--log_every', 10, '--checkpoint_at', '0.5,1.0', '--output_dir', tmp_path / 'ckpt',
                    '--cache_dir', tmp_path / 'cache', *args)


# the signals torchrun passes on to its workers when told to (its default: SIGTERM, SIGINT, SIGHUP, SIGQUIT)
TORCHRUN_SIGNALS = 'SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2'


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
    job = subprocess.Popen(pretrain(tmp_path, '--run_name', 'cut'), cwd=tmp_path, env=ENV, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    half, end = tmp_path / 'ckpt' / 'cut_11081_50%.pth', tmp_path / 'ckpt' / 'cut_11081_100%.pth'
    deadline = time.time() + 240
    while not half.exists() and job.poll() is None and time.time() < deadline: time.sleep(0.02)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert half.exists() and not end.exists(), 'the run ended before it could be killed after its 50% checkpoint'

    # resumed, then Ctrl-C in the terminal (SIGINT to torchrun and its processes; torchrun passes it on to them once
    # more) once it logged a step past its start: the step ends, rank 0 checkpoints it and says how to go on
    job = subprocess.Popen(pretrain(tmp_path, '--run_name', 'cut', '--resume'), cwd=tmp_path, env=ENV,
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
    # own, get it from torchrun), then SIGUSR1, which torchrun passes on when told to (--signals_to_handle, as
    # docs/preemption.md's batch script does): each ends as Ctrl-C does, rank 0 checkpoints the step
    for sig, told in [(signal.SIGTERM, []), (signal.SIGUSR1, ['--signals_to_handle', TORCHRUN_SIGNALS])]:
        cmd = pretrain(tmp_path, '--run_name', 'cut', '--resume')
        cmd[4:4] = told  # a torchrun option: before the script
        job = subprocess.Popen(cmd, cwd=tmp_path, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        while job.poll() is None and not any(int(r['step']) > step for r in csv.DictReader(metrics.open())):
            time.sleep(0.02)
        workers = children(job.pid)
        os.killpg(job.pid, sig)
        err = job.communicate(timeout=120)[1]
        said = [line for line in err.splitlines() if line.startswith('stopped: ')]
        assert len(said) == 1 and f' by {sig.name}; checkpoint ' in said[0], err[-3000:]
        assert 'Continue the run with: torchrun <the same options> ' in said[0] and len(workers) == 2
        assert not [pid for pid in workers if alive(pid)] and '[rank1]' not in err, err[-3000:]
        at = int(said[0].split('at step ')[1].split()[0])
        path = tmp_path / 'ckpt' / said[0].split('checkpoint ')[1].split(' written')[0].split('/')[-1]
        assert step < at < 120 and torch.load(path, map_location='cpu', weights_only=False)['step'] == at
        step = at

    # resumed once more, the run ends where the uninterrupted one did: weights and every process's random state
    run(pretrain(tmp_path, '--run_name', 'cut', '--resume'), tmp_path)
    resumed = torch.load(end, map_location='cpu', weights_only=False)
    assert all(torch.equal(ckpt['model'][k], resumed['model'][k]) for k in ckpt['model'])
    for a, b in zip(ckpt['rng_ranks'], resumed['rng_ranks']):
        assert torch.equal(a['masking'], b['masking']) and torch.equal(a['torch'], b['torch'])


@pytest.mark.parametrize('argv, message', [
    (['--batch_size', '5'], 'batch_size: 5 cannot be split over 2 processes; use 4 or 6 (a multiple of 2: every '
                            'process takes the same number of rows of the global batch).'),
    (['--batch_size', '1'], 'batch_size: 1 cannot be split over 2 processes; use 2 (a multiple of 2: every process '
                            'takes the same number of rows of the global batch).'),
    # batch 12 divides by 4 micro-batches, but each process's 6 rows do not: torch.chunk made 3 micro-batches of 2
    # and the last one was run twice, a wrong step without a word
    (['--batch_size', '12', '--grad_accum_steps', '4'],
     'batch_size: 12 cannot be split over 2 processes x 4 micro-batches (grad_accum_steps); use 8 or 16 (a multiple '
     'of 8: every process takes the same number of rows of the global batch, in equal micro-batches).')])
def test_a_batch_the_processes_cannot_share_is_refused_before_anything_is_read(tmp_path, monkeypatch, argv, message):
    "Checked as the job starts, before joining the process group (the environment of rank 0 of a two-process job)."
    from electra.config.base import ConfigError
    from tests.support.pretrain import TINY, pretrain as pretrain_in_process
    monkeypatch.setenv('WORLD_SIZE', '2')
    monkeypatch.setenv('RANK', '0')
    monkeypatch.setenv('LOCAL_RANK', '0')
    with pytest.raises(ConfigError) as e:
        pretrain_in_process(tmp_path, *TINY, *argv)
    assert str(e.value) == message
    assert not (tmp_path / 'cache').exists() and not (tmp_path / 'ckpt').exists()


def test_a_batch_two_processes_cannot_share_stops_the_torchrun_job_with_one_line_each(tmp_path):
    res = subprocess.run(pretrain(tmp_path, '--batch_size', '5'), cwd=tmp_path, env=ENV, capture_output=True,
                         text=True, timeout=300)
    # each process says it, unless torchrun stopped it first, on seeing the other one's end
    ours = [line.split('] ', 1)[1] for line in res.stderr.splitlines() if 'batch_size' in line]
    assert res.returncode != 0 and ours and set(ours) == {
        'error: batch_size: 5 cannot be split over 2 processes; use 4 or 6 (a multiple of 2: every process takes the '
        'same number of rows of the global batch).'}, res.stderr[-3000:]
    assert 'electra/' not in res.stderr and res.stdout == ''  # no traceback of ours; stopped before any work
