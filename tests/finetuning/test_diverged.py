"""A fine-tuning run whose loss becomes NaN or infinite stops at the end of that epoch with no score and no
checkpoint, alone, stacked or in a worker; the sweep's other runs go on and are kept, the summary names it, no test
prediction comes from it, the job ends with `TrainingDiverged` (status 2), and the same command tries it again."""
from __future__ import annotations

import math
import re
import sys
import warnings

import pandas as pd
import pytest
import torch

from electra.finetuning import learner, runs, stack
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.runtime.errors import TrainingDiverged
from tests.finetuning.test_stack import no_dropout
from tests.support.finetune import finetune_in_process, job

pytestmark = pytest.mark.usefixtures('one_thread')
CPU = torch.device('cpu')


def poison(step: int, run: int | None = None, what: str = 'weights'):
    """A callback that makes a run's loss NaN from the `step`-th step on (1-based; `run`: that run of a stack): its
    output layer's weights NaN ('weights'), or its regression targets at that step only ('targets')."""
    from fastai.callback.core import Callback

    class Poison(Callback):
        order = 1  # after the batch is on the device, before the forward

        def before_fit(self): self.steps = 0

        def before_batch(self):
            if not self.training: return
            self.steps += 1
            if self.steps != step: return
            if what == 'targets':
                y = self.learn.yb[0].clone()
                y[run] = float('nan')
                self.learn.yb = (y, *self.learn.yb[1:])
                return
            w = self.model.classifier.weight
            with torch.no_grad(): (w if run is None else w[run]).fill_(float('nan'))
    return Poison()


def rte(tmp_path, glue_dir, tok, **kw):
    cfg = job(tmp_path, glue_dir, **{'epochs': 2, 'batch_size': 8, 'dropout': 0.0, **kw})  # 4 steps an epoch
    return cfg, ClassificationTask(TASKS['RTE'], open_source(cfg.data)).prepare(cfg, tok, cfg.cache_dir, False)


def test_a_run_whose_loss_becomes_nan_stops_at_the_end_of_that_epoch_naming_the_step(tmp_path, glue_dir, tiny):
    cfg, data = rte(tmp_path, glue_dir, tiny[1])
    bad = poison(3)
    _, history = learner.train_run(data, cfg, tiny[0].electra, 0, CPU, None, 0, extra_cbs=(bad,))
    assert bad.steps == 4  # the first epoch's 4 steps, not the 8 of both
    assert len(history) == 1 and history[0]['diverged_at'] == 3 and math.isnan(history[0]['train_loss'])
    assert learner.diverged(history) == 3 and set(history[0]) == {'epoch', 'train_loss', 'diverged_at'}  # no score


def test_a_diverged_stacked_run_is_dropped_and_the_others_train_as_they_would_without_it(tmp_path, glue_dir, tiny):
    "Its NaN weights stay in its own slices: the other runs' weights and histories are bit for bit those of a clean stack."
    cfg, data = rte(tmp_path, glue_dir, tiny[1])
    body, seeds = no_dropout(tiny[0].electra), [3, 11, 5]
    clean, _, clean_histories = stack.train_stack(data, cfg, body, seeds, CPU, None, 0)
    stacked, _, histories = stack.train_stack(data, cfg, body, seeds, CPU, None, 0, extra_cbs=(poison(3, run=1),))
    assert [learner.diverged(h) for h in histories] == [None, 3, None] and len(histories[1]) == 1
    for r in (0, 2):
        assert histories[r] == clean_histories[r] and len(histories[r]) == 2
        for (name, p), q in zip(stacked.named_parameters(), clean.parameters()): assert torch.equal(p[r], q[r]), name


def test_with_fp16_s_shared_loss_scale_a_diverged_stacked_run_takes_no_step(tmp_path, glue_dir, tiny, monkeypatch):
    """fp16's scaler would skip every step of every run while one run's gradients are NaN; the stack's step zeroes them
    first (`finetuning_step` with `freeze_diverged`, on with fp16; here on the CPU in fp32, where without it the run's
    weights turn NaN)."""
    cfg = job(tmp_path, glue_dir, epochs=1, batch_size=16, dropout=0.0)
    data = ClassificationTask(TASKS['STS-B'], open_source(cfg.data)).prepare(cfg, tiny[1], cfg.cache_dir, True)
    body, seeds = no_dropout(tiny[0].electra), [3, 11]
    weights, real = {}, stack.finetuning_learner
    for freeze in (False, True):
        monkeypatch.setattr(stack, 'finetuning_learner', lambda *a, **k: real(*a, **{**k, 'freeze_diverged': freeze}))
        stacked, _, histories = stack.train_stack(data, cfg, body, seeds, CPU, None, 0,
                                                  extra_cbs=(poison(2, run=1, what='targets'),))
        assert [learner.diverged(h) for h in histories] == [None, 2]
        assert all(p[1].isfinite().all() for p in stacked.parameters()) == freeze
        weights[freeze] = [p.detach().clone() for p in stacked.parameters()]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(weights[False], weights[True]))  # run 0 untouched either way


def _poisoned(real_run, real_stack, seed: int):
    "`train_run` and `train_stack` whose run of `seed` gets NaN weights at its 3rd step."
    def run(data, cfg, body, s, *a, **k):
        return real_run(data, cfg, body, s, *a, **k, extra_cbs=(poison(3),) if s == seed else ())

    def stacked(data, cfg, body, seeds, *a, **k):
        return real_stack(data, cfg, body, seeds, *a, **k,
                          extra_cbs=(poison(3, run=seeds.index(seed)),) if seed in seeds else ())
    return run, stacked


@pytest.mark.parametrize('stacked', [False, True], ids=['alone', 'stacked'])
def test_a_sweep_keeps_its_other_runs_names_the_diverged_one_and_ends_with_it(tmp_path, glue_dir, tiny_dir, monkeypatch,
                                                                             capsys, stacked):
    argv = ['--model', str(tiny_dir), '--data', str(glue_dir), '--tasks', 'RTE', '--runs', '3', '--epochs', '2',
            '--batch_size', '8', '--device', 'cpu', '--group', 'g', '--output_dir', str(tmp_path / 'ckpt'),
            '--test_output_dir', str(tmp_path / 'out'), '--cache_dir', str(tmp_path / 'cache'),
            '--stack_runs', '3' if stacked else '1']
    real = runs.train_run, runs.train_stack
    monkeypatch.setattr(runs, 'train_run', _poisoned(*real, seed=1)[0])
    monkeypatch.setattr(runs, 'train_stack', _poisoned(*real, seed=1)[1])
    with pytest.raises(TrainingDiverged, match=r"^1 run\(s\) diverged, their loss NaN or infinite \(RTE run 1 \(seed 1\) "
                                               r"at step 3\): no score recorded, not in the summary nor the test "
                                               r"predictions; the 2 finished run\(s\) are kept in .*results.csv\. Try a "
                                               r"lower learning rate.*run the same command again to try it again\.$"):
        finetune_in_process(*argv)
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if 'NaN or infinite' in line]
    assert said == ['RTE run 1 (seed 1): the loss became NaN or infinite at step 3; the run stopped with no score and no '
                    'checkpoint. Try a lower learning rate (task_overrides.RTE.lr, now 0.001), check the task\'s labels '
                    'and inputs; the same command tries this run again.']
    table = pd.read_csv(tmp_path / 'ckpt/g/results.csv')
    assert table['run'].tolist() == [0, 2] and not (tmp_path / 'ckpt/g/RTE_1.pth').exists()
    assert '| RTE | accuracy | 2 |' in out and 'Diverged, no score (not summarised, never picked): RTE run 1 (seed 1) at ' \
                                                'step 3.' in (tmp_path / 'ckpt/g/summary.md').read_text()
    assert (tmp_path / 'out/g/RTE.tsv').is_file() and re.search(r'\nRTE\.tsv: \d+ predictions from RTE run [02] ', out)
    monkeypatch.setattr(runs, 'train_run', real[0])  # the same command again: the diverged run is tried again
    monkeypatch.setattr(runs, 'train_stack', real[1])
    finetune_in_process(*argv)
    assert pd.read_csv(tmp_path / 'ckpt/g/results.csv')['run'].tolist() == [0, 1, 2]
    assert '1 of 3 runs to do' in capsys.readouterr().out


def test_a_regression_label_too_large_for_float32_diverges_in_a_worker_and_the_job_ends_with_status_2(
        tmp_path, glue_dir, tiny_dir, capsys):
    """A finite label passes the data checks, but its squared error overflows float32: the loss is infinite from the first
    step. In a worker process as in the sweep's own; the job's one error line, its last, names the run (status 2)."""
    rows = [f'{w} film,{v}' for w, v in zip(['good', 'bad', 'fine', 'poor'] * 4, [1.0, 2.0, 1e30, 3.0] * 4)]
    (tmp_path / 'train.csv').write_text('sentence,score\n' + '\n'.join(rows) + '\n')
    (tmp_path / 'huge.yaml').write_text('kind: regression\ntrain: train.csv\ndev: train.csv\ntext: sentence\nlabel: score\n')
    argv = ['--model', str(tiny_dir), '--data', str(glue_dir), '--tasks', f"[{tmp_path / 'huge.yaml'}]",
            '--runs', '1', '--epochs', '1', '--device', 'cpu', '--parallel_runs', '2', '--threads', '2', '--group', 'g',
            '--output_dir', str(tmp_path / 'ckpt'), '--test_output_dir', str(tmp_path / 'out'),
            '--cache_dir', str(tmp_path / 'cache')]
    saved = sys.excepthook, warnings.showwarning
    try:
        with pytest.raises(TrainingDiverged) as e: finetune_in_process(*argv)  # sets the drivers' hook
        assert re.search(r'\[worker \d\] huge run 0 \(seed 0\): the loss became NaN or infinite at step 1;',
                         capsys.readouterr().out)
        with pytest.raises(SystemExit) as end: sys.excepthook(type(e.value), e.value, None)
    finally: sys.excepthook, warnings.showwarning = saved
    err = capsys.readouterr().err
    assert end.value.code == 2 and err.count('\n') == 1
    assert re.fullmatch(r"error: 1 run\(s\) diverged, their loss NaN or infinite \(huge run 0 \(seed 0\) at step 1\): .* "
                        r"the 0 finished run\(s\) are kept in .*\n", err)
    assert not (tmp_path / 'ckpt/g/results.csv').exists() and not list(tmp_path.rglob('*.pth'))
