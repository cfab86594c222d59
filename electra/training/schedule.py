"""Learning-rate schedules as fastai schedulers (functions of the training fraction `pos` in [0, 1]).

The official schedule applies warm-up and polynomial decay TOGETHER (google-research/electra,
model/optimization.py): lr(t) = peak * min(1, t / W) * (1 - min(t, T) / T) ** power, t counted from 0.
So at t = W the rate is peak * (1 - W / T), not the peak. 'warmup_then_decay' is the usual BERT-style
alternative, offered as an option.
"""
from __future__ import annotations

import numpy as np

__all__ = ['lr_at_step', 'warmup_decay_sched']


def lr_at_step(t: float, peak, warmup_steps: float, total_steps: float, power: float = 1.0, mode: str = 'together'):
    "The learning rate at step `t` (0-based); `peak` may be an array of per-group rates."
    t, W, T = float(t), float(warmup_steps), float(total_steps)
    if not (t >= 0 and T > 0):  # a negative step would give a negative rate, silently (the optimizer climbs the loss)
        raise ValueError(f"schedule: step {t:g} of a run of {T:g} steps: steps count from 0, and a run has at least one.")
    warm = min(1.0, t / W) if W > 0 else 1.0
    if mode == 'together':
        decay = (1.0 - min(t, T) / T) ** power
    elif mode == 'warmup_then_decay':
        decay = 1.0 if t < W else (1.0 - min(t - W, T - W) / max(T - W, 1.0)) ** power
    else:
        raise ValueError(f"schedule: unknown mode {mode!r}; use 'together' or 'warmup_then_decay'.")
    return np.asarray(peak, dtype=np.float64) * warm * decay if np.ndim(peak) else peak * warm * decay


def warmup_decay_sched(peak, warmup_steps: float, total_steps: int, power: float = 1.0, mode: str = 'together',
                       restart_at: int = 0):
    """A fastai scheduler for `ParamScheduler({'lr': ...})`: fastai calls it with `pos = train_iter / total_steps`
    before each step, so it returns `lr_at_step(pos * total_steps, ...)`. `restart_at` S > 0 schedules steps [0, S)
    and [S, total) as two runs of their own, each with its warm-up and its decay to 0 (two-stage training's
    'per_stage')."""
    def _sched(pos: float):
        t = round(pos * total_steps, 6)
        if restart_at and t >= restart_at:
            return lr_at_step(t - restart_at, peak, warmup_steps, total_steps - restart_at, power, mode)
        return lr_at_step(t, peak, warmup_steps, restart_at or total_steps, power, mode)
    _sched.__name__ = f'warmup_decay_{mode}'
    return _sched
