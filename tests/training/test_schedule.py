"""electra/training/schedule.py: the learning-rate schedule against its formula."""
import numpy as np
import pytest
from fastai.callback.schedule import ParamScheduler

from electra.training.optim import electra_opt_func, param_groups
from electra.training.schedule import lr_at_step, warmup_decay_sched
from tests.support.optim import Tiny


@pytest.mark.parametrize('W,T', [(10_000, 1_000_000), (10, 100), (0, 50)])
def test_schedule_formula(W, T):
    peak = 5e-4
    formula = lambda t: peak * (min(1, t / W) if W else 1) * (1 - min(t, T) / T)
    for t in [0, W // 2, W, T // 2, T - 1]:
        assert lr_at_step(t, peak, W, T) == pytest.approx(formula(t), rel=1e-12, abs=1e-15)
    sched = warmup_decay_sched(peak, W, T)
    for t in [0, W // 2, W, T // 2, T - 1]:
        assert sched(t / T) == pytest.approx(formula(t), rel=1e-9, abs=1e-15)
    if W: assert lr_at_step(W, peak, W, T) == pytest.approx(peak * (1 - W / T))  # not the peak: applied together


def test_warmup_then_decay_option_and_per_group_peaks():
    assert lr_at_step(10, 1.0, 10, 110, mode='warmup_then_decay') == pytest.approx(1.0)
    assert lr_at_step(60, 1.0, 10, 110, mode='warmup_then_decay') == pytest.approx(0.5)
    np.testing.assert_allclose(lr_at_step(5, np.array([1.0, 0.5]), 10, 100), [0.5 * 0.95, 0.25 * 0.95])


def test_schedule_runs_as_fastai_param_scheduler():
    opt = electra_opt_func()(param_groups(Tiny()), lr=1.0)
    cb = ParamScheduler({'lr': warmup_decay_sched(1.0, 10, 100)})
    cb.learn = type('L', (), {'opt': opt, 'pct_train': 0.3})()
    cb.before_batch()
    assert opt.hypers[0]['lr'] == pytest.approx(1.0 * 0.7)


def test_a_step_before_the_first_or_a_run_without_steps_is_refused_not_a_negative_rate():
    "lr_at_step(-5, ...) was -5.25e-4 (a negative rate: the optimizer would climb the loss); total_steps 0 divided by 0."
    for t, total in ((-5, 100), (-0.5, 100), (0, 0), (3, -10)):
        with pytest.raises(ValueError, match=r'^schedule: '):
            lr_at_step(t, 1e-3, 10, total)
    assert lr_at_step(0, 1e-3, 0, 1) == 1e-3 and lr_at_step(1, 1e-3, 0, 1) == 0.0
