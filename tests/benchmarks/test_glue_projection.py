"""benchmarks/glue_projection.py: the GLUE sweep's cost projected from one task's stacked log, checked by hand."""
import json
import math

import pytest

from benchmarks import glue_projection as gp

LOG = """epoch lines of two stacked runs and of another task
  STS-B run 0 (seed 1) epoch 1/3: train loss 1.2, dev pearson 0.1, spearman 0.1 [30.0s]
  STS-B run 1 (seed 2) epoch 1/3: train loss 1.3, dev pearson 0.1, spearman 0.1 [30.0s]
  RTE run 0 (seed 1) epoch 1/3: train loss 0.7, dev accuracy 0.5 [99.0s]
  STS-B run 0 (seed 1) epoch 2/3: train loss 1.0, dev pearson 0.2, spearman 0.2 [33.6s]
  STS-B run 0 (seed 1) epoch 3/3: train loss 0.9, dev pearson 0.3, spearman 0.3 [37.0s]
"""


def test_the_steady_epoch_and_the_sweep_are_the_hand_computed_ones(tmp_path, capsys):
    assert gp.epoch_ends(LOG, 'STS-B') == [30.0, 33.6, 37.0]
    out = tmp_path / 'p.json'
    (tmp_path / 'log').write_text(LOG)
    gp.main(['--log', str(tmp_path / 'log'), '--json', str(out)])
    p = json.loads(out.read_text())
    steady = ((33.6 - 30.0) + (37.0 - 33.6)) / 2          # 3.5 s: the first epoch (compilation) left out
    assert p['steady_epoch_s'] == pytest.approx(steady)
    assert p['steps_per_epoch'] == 180                      # 5,749 examples / 32, rounded up
    per_step = steady / 180
    mnli = next(r for r in p['tasks'] if r['task'] == 'MNLI')
    assert mnli['steps'] == 12272 * 3 and mnli['minutes'] == pytest.approx(12272 * 3 * per_step / 60)
    steps = sum(math.ceil(n / 32) * (10 if t in ('RTE', 'STS-B') else 3) for t, n in gp.TRAIN_EXAMPLES.items())
    assert steps == 90795
    assert p['total_minutes'] == pytest.approx(steps * per_step / 60)
    assert f"projected sweep: {steps * per_step / 60:.1f} minutes (target 30)" in capsys.readouterr().out


def test_a_log_of_one_epoch_is_refused_naming_what_to_do():
    with pytest.raises(SystemExit, match='needs 2 epochs or more in the log \\(found 1\\)'):
        gp.projection(gp.epoch_ends(LOG, 'RTE'), 'RTE', 2490, 32, 30)


def test_the_steps_of_the_data_it_ran_on_come_from_its_results(tmp_path, capsys):
    (tmp_path / 'log').write_text(LOG)
    (tmp_path / 'results.csv').write_text('task,run,steps\nRTE,0,99\nSTS-B,0,75\nSTS-B,1,75\n')  # 25 steps an epoch
    gp.main(['--log', str(tmp_path / 'log'), '--results', str(tmp_path / 'results.csv')])
    assert 'steady epoch 3.50 s / 25 steps = 140.00 ms a step of the stack' in capsys.readouterr().out
