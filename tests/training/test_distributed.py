"""Data-parallel training on torchrun (electra/training/distributed.py, the step's average of the processes'
gradients, electra/training/step.py), on the CPU with gloo: every step runs through `pretraining_step`, and any split
of the global batch over processes and micro-batches takes the step of the whole batch, which is the plain reference
step; a missing process stops the job with a message; a batch the processes cannot share is refused. A torchrun
pretraining killed or stopped by a signal and resumed: tests/training/test_distributed_resume.py."""
import csv
import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tests.support import forked
from tests.support.distributed import ENV, free_port, max_diff, run, torchrun, torchrun_pretrain

WORKER = Path(__file__).with_name('ddp_worker.py')
def rows(metrics: str) -> list[dict]:
    return [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in csv.DictReader(metrics.splitlines())]


# every fit of these tests in two jobs, one process and a torchrun job of two: starting a job costs more than its fits
ONE_PROCESS = {'whole': '8,global,1', 'micro': '8,global,2', 'mlm': '8,global,1,replace_mlm',
               'two_stage': '8,global,1,electra,0.5'}
TWO_PROCESSES = {'split': '8,global,1', 'split_micro': '8,global,2', 'mlm_split_micro': '8,global,2,replace_mlm',
                 'per_process': '8,per_process,1', 'two_stage_split': '8,global,1,electra,0.5'}


def fits(d: Path, specs: dict[str, str], procs: int) -> dict[str, dict]:
    """The fits of `specs` by a torchrun job of `procs` processes, or (one) by the worker's `main` in this process, on
    one thread as a job's processes are, its step patched as in the worker process and restored after: a process to
    start costs more than the fits."""
    from tests.training import ddp_worker
    args = [f'{d / name}.pt,{spec}' for name, spec in specs.items()]
    if procs > 1: run(torchrun(WORKER, *args, n=procs), d)
    else:
        threads = torch.get_num_threads()
        with pytest.MonkeyPatch.context() as m:
            for name in ('pretraining_step', 'sampling_noise'):  # what `patch_step` replaces, put back on leaving
                m.setattr(ddp_worker.step_module, name, getattr(ddp_worker.step_module, name))
            torch.set_num_threads(1)
            try:
                ddp_worker.patch_step()
                ddp_worker.main(args)
            finally:
                torch.set_num_threads(threads)
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
    from tests.support.baseline import BenchTokenizer, LoopAdam, unique_named_parameters
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


def test_two_stage_training_splits_over_processes_as_the_whole_batch(one_process, two_processes):
    """Two-stage training (2 steps of the generator alone, then 2 of the discriminator from its weights, the generator
    frozen) over two gloo processes: the one-process run's weights and metrics."""
    one, split = one_process['two_stage'], two_processes['two_stage_split']
    assert max_diff(one['model'], split['model']) < 2e-6 and rows(split['metrics']) == rows(one['metrics'])
    # both stages ran: the generator's loss alone in the first row, the discriminator's in the second (NaN: not there)
    first, second = rows(one['metrics'])
    assert first['disc_loss'] == second['gen_loss'] == ''  # NaN written empty (CsvLog)
    assert float(second['disc_loss']) > 0


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
    return [forked.Popen([sys.executable, str(script), str(tmp_path / 'mark')], cwd=tmp_path, text=True,
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


@pytest.mark.parametrize('argv, message', [
    (['--batch_size', '5'], 'batch_size: 5 cannot be split over 2 processes; use 4 or 6 (a multiple of 2: every '
                            'process takes the same number of rows of the global batch).'),
    (['--batch_size', '1'], 'batch_size: 1 cannot be split over 2 processes; use 2 (a multiple of 2: every process '
                            'takes the same number of rows of the global batch).'),
    # batch 12 divides by 4 micro-batches, but each process's 6 rows do not: torch.chunk made 3 micro-batches of 2
    # and the last one was run twice, a wrong step without a word
    (['--batch_size', '12', '--grad_accum_steps', '4'],
     'batch_size: 12 cannot be split over 2 processes x 4 micro-batches (grad_accum_steps); use 8 or 16 (a multiple '
     'of 8: every process takes the same number of rows of the global batch, in equal micro-batches).'),
    # a resume keeps its checkpoint's batch_size, which another size would be refused for: the counts that work
    (['--batch_size', '33', '--resume', 'true'],
     'batch_size: 33 cannot be split over 2 processes; use 32 or 34 (a multiple of 2: every process takes the same '
     "number of rows of the global batch). A resumed run keeps its checkpoint's batch_size: resume it on a number of "
     'processes that divides it (1, 3, 11 or 33).'),
    (['--batch_size', '12', '--grad_accum_steps', '4', '--resume', 'true'],
     'batch_size: 12 cannot be split over 2 processes x 4 micro-batches (grad_accum_steps); use 8 or 16 (a multiple '
     'of 8: every process takes the same number of rows of the global batch, in equal micro-batches). A resumed run '
     "keeps its checkpoint's batch_size: resume it on a number of processes that divides it over 4 micro-batches "
     '(1 or 3).')])
def test_a_batch_the_processes_cannot_share_is_refused_before_anything_is_read(tmp_path, monkeypatch, argv, message):
    "Checked as the job starts, before joining the process group (the environment of rank 0 of a two-process job)."
    from electra.config.errors import ConfigError
    from tests.support.pretrain import TINY, pretrain as pretrain_in_process
    monkeypatch.setenv('WORLD_SIZE', '2')
    monkeypatch.setenv('RANK', '0')
    monkeypatch.setenv('LOCAL_RANK', '0')
    with pytest.raises(ConfigError) as e:
        pretrain_in_process(tmp_path, *TINY, *argv)
    assert str(e.value) == message
    assert not (tmp_path / 'cache').exists() and not (tmp_path / 'ckpt').exists()


def test_a_batch_two_processes_cannot_share_stops_the_torchrun_job_with_one_line_each(tmp_path):
    res = forked.run(torchrun_pretrain(tmp_path, '--batch_size', '5'), cwd=tmp_path, env=ENV, capture_output=True,
                     text=True, timeout=300)
    # each process says it, unless torchrun stopped it first, on seeing the other one's end
    ours = [line.split('] ', 1)[1] for line in res.stderr.splitlines() if 'batch_size' in line]
    assert res.returncode != 0 and ours and set(ours) == {
        'error: batch_size: 5 cannot be split over 2 processes; use 4 or 6 (a multiple of 2: every process takes the '
        'same number of rows of the global batch).'}, res.stderr[-3000:]
    assert 'electra/' not in res.stderr and res.stdout == ''  # no traceback of ours; stopped before any work
