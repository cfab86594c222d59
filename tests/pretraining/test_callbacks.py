"""electra/pretraining/callbacks.py: divergence, fp16 overflow steps, compilation and its fallback."""
import math
import csv
import warnings

import pytest
import torch

from tests.support import runners
from tests.support.tiny import batches, tiny_cfg, tiny_model, token_ids


def test_nan_loss_stops_the_run_and_keeps_the_good_checkpoints(tmp_path):
    "A NaN at step 5 (a weight poisoned after step 4): the run stops, the 25% checkpoint stays, none after it."
    from fastai.callback.core import Callback

    from electra.config.pretrain import PretrainConfig
    from electra.objective.model import build_pretraining_model
    from electra.runtime.errors import TrainingDiverged
    from tests.support import runners
    from tests.support import baseline
    cfg = PretrainConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=1, intermediate_size=32,
                         embedding_size=16, generator_size=1.0, batch_size=2, max_length=16, steps=16, log_every=8,
                         warmup_steps=2, checkpoint_at=[0.25, 0.5, 1.0], output_dir=str(tmp_path), run_name='nan')
    model = build_pretraining_model(cfg, token_ids(120))
    runner = runners.LearnerRunner('t', cfg, model, baseline.synthetic_batches(2, 2, 16, 120), torch.device('cpu'), 'fp32')

    class Poison(Callback):
        "Sets one weight to NaN after the 4th step."
        order = 100

        def after_batch(self):
            if self.train_iter == 4:
                with torch.no_grad(): self.model.discriminator.discriminator_predictions.dense.weight[0, 0] = float('nan')
    runner.learn.add_cb(Poison())
    runner.loader.n = 16
    with pytest.raises(TrainingDiverged, match=r'NaN or infinite at step 5 \(found at step 8\).*nan_11081_25%\.pth'
                                                r'.*--resume --lr 0\.00025'):
        runner.learn.fit(1)
    assert sorted(p.name for p in tmp_path.glob('*.pth')) == ['nan_11081_25%.pth']
    from electra.training.checkpoint import state_checksum
    good = torch.load(tmp_path / 'nan_11081_25%.pth', weights_only=True)
    assert good['step'] == 4 and good['checksum'] == state_checksum(good)
    assert all(torch.isfinite(v).all() for v in good['model'].values())


def test_fp16_overflow_steps_are_counted_not_treated_as_divergence(tmp_path):
    """Under fp16 a step whose scaled gradients overflow updates nothing and halves the loss scale; the metrics count
    those steps per row and the run goes on (torch autocasts fp16 on the CPU too, so the real step runs here)."""
    from electra.config.pretrain import PretrainConfig
    from electra.objective.model import build_pretraining_model
    from tests.support import runners
    from tests.support import baseline
    cfg = PretrainConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=1, intermediate_size=32,
                         embedding_size=16, generator_size=1.0, batch_size=2, max_length=16, steps=8, log_every=4,
                         warmup_steps=2, checkpoint_at=[], output_dir=str(tmp_path))
    runner = runners.LearnerRunner('t', cfg, build_pretraining_model(cfg, token_ids(120)), baseline.synthetic_batches(2, 2, 16, 120),
                                   torch.device('cpu'), 'fp16')
    step = runner.learn.pretraining_step
    step.scaler = torch.amp.GradScaler('cpu', init_scale=2.0 ** 12)  # overflows until halved enough
    rows = []
    runner.learn.metrics_logger.sinks = [rows.append]
    runner.loader.n = 8
    runner.learn.fit(1)
    skipped = [r['skipped_steps'] for r in rows]  # each skip halves the scale (no growth within 2000 steps)
    assert [r['step'] for r in rows] == [4, 8] and 0 < sum(skipped) < 8
    assert step.scaler.get_scale() == 2.0 ** (12 - sum(skipped))
    logged = list(csv.DictReader((runner.run_dir / 'metrics.csv').open()))
    assert [int(r['skipped_steps']) for r in logged] == skipped
    line = __import__('io').StringIO()
    from contextlib import redirect_stdout

    from electra.config.objectives import OBJECTIVES
    from electra.training.sinks import print_sink
    with redirect_stdout(line): print_sink(OBJECTIVES[cfg.objective])(rows[0])
    assert f'({skipped[0]} fp16 overflow steps skipped)' in line.getvalue()


def _trained_params(cfg, backend=None, steps=2):
    "Parameters after `steps` steps of the real Learner; `backend`: the compiler's backend (cfg.compile on)."
    model = tiny_model(cfg)
    runner = runners.LearnerRunner('t', cfg, model, batches(cfg), torch.device('cpu'), 'fp32')
    if backend is not None: runner.learn.pretraining_step.backend = backend
    torch.manual_seed(0)
    runner.loader.n = steps
    runner.learn.fit(1)
    return runner, {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.usefixtures('one_thread')
def test_compile_failure_falls_back_to_identical_eager_training():
    def broken_backend(gm, example_inputs): raise RuntimeError('simulated compiler failure')
    _, eager = _trained_params(tiny_cfg(num_hidden_layers=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        runner, fallback = _trained_params(tiny_cfg(num_hidden_layers=1, compile=True, compile_scope='model'),
                                          backend=broken_backend)
    msgs = [str(w.message) for w in caught if 'compile:' in str(w.message)]
    assert len(msgs) == 1 and 'simulated compiler failure' in msgs[0] and 'running eagerly' in msgs[0]
    assert '\n' not in msgs[0]
    assert runner.compiled is False and runner.learn.model._compiled_call_impl is None
    for k in eager: assert torch.equal(eager[k], fallback[k]), k  # the failed trial step left no trace


@pytest.mark.usefixtures('one_thread')
def test_compile_success_keeps_state_dict_and_training():
    _, eager = _trained_params(tiny_cfg(num_hidden_layers=1, dropout=0.0))
    runner, compiled = _trained_params(tiny_cfg(num_hidden_layers=1, compile=True, compile_scope='model', dropout=0.0),
                                       backend='eager')
    assert runner.compiled is True and runner.learn.model._compiled_call_impl is not None
    assert compiled.keys() == eager.keys()                       # no `_orig_mod.` prefixes in checkpoints
    for k in eager: assert torch.allclose(eager[k], compiled[k], atol=1e-6), k


@pytest.mark.usefixtures('one_thread')
def test_cuda_graph_mode_marks_every_step_and_trains_as_eager(monkeypatch):
    "compile_mode reduce-overhead: each training step tells cudagraph trees a new step begins; the math is unchanged."
    marks = []
    monkeypatch.setattr(torch.compiler, 'cudagraph_mark_step_begin', lambda: marks.append(1))
    _, eager = _trained_params(tiny_cfg(num_hidden_layers=1, dropout=0.0), steps=3)
    runner, graphed = _trained_params(tiny_cfg(num_hidden_layers=1, compile=True, compile_scope='model',
                                               compile_mode='reduce-overhead', dropout=0.0), backend='eager', steps=3)
    assert runner.learn.pretraining_step.mode == 'reduce-overhead' and runner.compiled is True and len(marks) == 3
    for k in eager: assert torch.allclose(eager[k], graphed[k], atol=1e-6), k


@pytest.mark.parametrize('saved_by, world_size, rank, expected', [
    (1, 1, 0, 'rng'),        # a one-process checkpoint resumed by one process: its states
    (2, 2, 1, 'rank1'),      # as many processes as wrote it: each takes its own
    (2, 2, 0, 'rank0'),
    (2, 1, 0, None),         # another number of processes: fresh streams
    (2, 4, 3, None),
    (1, 2, 0, None)])
def test_each_process_resumes_its_own_random_states_or_fresh_ones(monkeypatch, saved_by, world_size, rank, expected):
    from electra.pretraining.callbacks import own_random_states
    ckpt = {'rng': 'rng', **({'rng_ranks': [f'rank{r}' for r in range(saved_by)]} if saved_by > 1 else {})}
    if saved_by > 1: ckpt['rng'] = 'rank0'  # the main process's own, as Checkpointer writes it
    monkeypatch.setenv('WORLD_SIZE', str(world_size))
    monkeypatch.setenv('RANK', str(rank))
    assert own_random_states(ckpt) == expected


def test_a_two_stage_row_spanning_the_switch_averages_each_column_over_the_steps_it_exists(tmp_path):
    """Two-stage training, 12 steps switching after step 6, rows every 4 steps (the row of step 8 spans the switch):
    each loss column is the mean of the log_every 1 run's per-step values over the steps of its network (the
    generator's through the switch, the discriminator's after), as gen_accuracy already was over its positions."""
    from tests.support.pretrain import TINY, pretrain
    argv = [*TINY, '--steps', '12', '--eval_examples', '0', '--config', 'demo', '--two_stage', '0.5',
            '--generator_size', '1.0', '--tie_weights', 'none', '--seed', '1']
    rows = {}
    for every in (1, 4):
        out = pretrain(tmp_path / str(every), *argv, '--log_every', str(every), '--run_name', 'ts')
        switch = out['learn'].pretraining_step.switch_step  # the discriminator's first step is switch + 1
        rows[every] = {int(r['step']): {k: float(v or 'nan') for k, v in r.items()}  # NaN is written empty
                       for r in csv.DictReader((out['run_dir'] / 'metrics.csv').open())}
    assert switch == 6 and sorted(rows[4]) == [4, 8, 12]
    steps = {'gen_loss': lambda t: t <= switch, 'disc_loss': lambda t: t > switch, 'loss': lambda t: True}
    for end in (4, 8, 12):
        window = range(end - 3, end + 1)
        for col, exists in steps.items():
            measured = [rows[1][t][col] for t in window if exists(t)]
            expected = sum(measured) / len(measured) if measured else math.nan
            assert rows[4][end][col] == pytest.approx(expected, rel=1e-5, nan_ok=True), (end, col)  # the CSV: 6 digits


def test_a_window_checkpointed_before_the_steps_were_counted_counts_each_loss_it_holds_on_all_its_batches():
    "An older checkpoint's 13 sums: a loss with a sum (the generator's here) existed on each of the window's 4 batches."
    from electra.pretraining.callbacks import MetricsLogger
    from electra.pretraining.step import STEP_SUMS
    old = torch.arange(1.0, 14.0, dtype=torch.float64)
    old[STEP_SUMS.index('disc_loss')] = 0  # two-stage training's first stage: no discriminator loss
    sums = MetricsLogger._steps_counted(old, 4)
    counted = dict(zip(STEP_SUMS[13:], sums[13:].tolist()))
    assert torch.equal(sums[:13], old) and counted == {'gen_steps': 4, 'disc_steps': 0}


def test_steps_per_s_times_the_steps_of_its_row_not_a_fit_s_start_nor_the_work_between_rows(tmp_path, monkeypatch):
    """R24a-6: the first row of a run (of a resume most) had steps_per_s 8-25x below the rest: its clock started at the
    fit's start, before what runs ahead of the first step (a resume's checks, the first evaluation), and every row's
    included what ran after the row before (the held-out evaluation, checkpoints). On a clock that moves 1 s a step,
    1000 s before the first step and 100 s after each row, every row is now 1 step/s."""
    import types

    from fastai.callback.core import Callback

    from electra.config.pretrain import PretrainConfig
    from electra.objective.model import build_pretraining_model
    from electra.pretraining import callbacks
    from tests.support import baseline
    clock = [0.0]
    monkeypatch.setattr(callbacks, 'time', types.SimpleNamespace(perf_counter=lambda: clock[0], monotonic=lambda: clock[0]))
    cfg = PretrainConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=1, intermediate_size=32,
                         embedding_size=16, batch_size=2, max_length=16, steps=12, log_every=4, warmup_steps=2,
                         checkpoint_at=[1.0], output_dir=str(tmp_path), run_name='rate')
    model = build_pretraining_model(cfg, token_ids(120))
    runner = runners.LearnerRunner('t', cfg, model, baseline.synthetic_batches(2, 2, 16, 120), torch.device('cpu'), 'fp32')

    class Clock(Callback):
        "1 s of training a step, counted before the logger reads the time."
        order = 62

        def after_batch(self): clock[0] += 1

    class Between(Callback):
        "1000 s of start after the logger's (a resume's checks, the first evaluation), 100 s after each row."
        order = 90

        def before_fit(self): clock[0] += 1000

        def after_batch(self):
            if self.train_iter % 4 == 0: clock[0] += 100
    runner.learn.add_cbs([Clock(), Between()])
    runner.loader.n = 12
    runner.learn.fit(1)
    with open(runner.run_dir / 'metrics.csv') as f: rows = list(csv.DictReader(f))
    assert [(int(r['step']), float(r['steps_per_s'])) for r in rows] == [(4, 1.0), (8, 1.0), (12, 1.0)]


@pytest.mark.parametrize('saved_by, world_size', [(1, 1), (2, 2), (2, 1), (1, 2)])
def test_a_resume_keeps_its_threads_only_where_it_goes_on_bit_for_bit_and_says_a_change_of_processes(
        monkeypatch, saved_by, world_size):
    """R25a-2: a two-process run resumed in one process kept "the 1 the run used before, so it resumes bit for bit":
    another number of processes starts fresh streams (`own_random_states`), so nothing resumes bit for bit, and the
    thread count was torchrun's share of the cores. The threads are kept only where the random states are, and the
    start line says the change of processes and what it means."""
    from electra.pretraining.callbacks import resume_note, resume_threads
    ckpt = {'threads': 3, 'rng': 'rank0', **({'rng_ranks': [f'rank{r}' for r in range(saved_by)]} if saved_by > 1 else {})}
    monkeypatch.setenv('WORLD_SIZE', str(world_size))
    monkeypatch.setenv('RANK', '0')
    same = saved_by == world_size
    assert resume_threads(ckpt) == (3 if same else None) and resume_threads(None) is None
    assert resume_note(ckpt) == ('' if same else
                                 f'; resumed from a run of {saved_by} process(es) in {world_size}: its masks, samples '
                                 'and dropout start afresh from the seed, step and rank, so it goes on as another draw '
                                 'of the run, not bit for bit')
    assert resume_note(None) == ''


def test_fractions_of_checkpoint_at_that_fall_on_one_step_are_said(tmp_path):
    """R25b-7: in a 5-step run the 6.25%, 12.5% and 25% checkpoints all held step 1, three names of one state, nothing
    said. One warning names the fractions, their step and the run's steps; fractions on steps of their own say
    nothing."""
    import warnings as w

    from electra.config.errors import RunWarning
    from electra.pretraining.callbacks import Checkpointer
    logger = type('L', (), {'saved': []})()
    with pytest.warns(RunWarning) as seen:
        Checkpointer(tmp_path, 'r', 0, 5, [0.0625, 0.125, 0.25, 0.5, 1.0], dict, None, logger)
    assert [str(x.message) for x in seen] == [
        "checkpoint_at: at 5 steps, 6.25%, 12.5% and 25% fall on one step (1): their checkpoints are one state under "
        "3 names. Give fewer fractions, or more steps."]
    with w.catch_warnings():
        w.simplefilter('error')
        Checkpointer(tmp_path, 'r', 0, 200, [0.0625, 0.125, 0.25, 0.5, 1.0], dict, None, logger)
