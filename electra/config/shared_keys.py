"""The keys several jobs share, declared once: the optimizer's (`optimizer_keys`, pretraining and fine-tuning), `threads`
and `logger` (every job: pretraining, fine-tuning, the comparison)."""
from __future__ import annotations

from electra.config.errors import ConfigError, need
from electra.config.fields import choice_field, field

__all__ = ['optimizer_keys', 'THREADS_HELP', 'threads_field', 'threads_setting', 'TRACKERS', 'LOGGER_HELP',
           'check_logger']


def optimizer_keys(after: str, weight_decay: float, weight_decay_help: str):
    """Class decorator, under `@dataclass`: the optimizer's keys, the same in both jobs (model/optimization.py
    `create_optimizer`), inserted right after the key `after` (so `--help` lists them there); only weight decay's
    default and help differ between the jobs."""
    keys = {'schedule': choice_field('together', ['together', 'warmup_then_decay'],
                                     "'together' is the official schedule: warm-up and linear decay applied at once"),
            'decay_power': field(1.0, 'power of the polynomial decay', gt=0),
            'weight_decay': field(weight_decay, weight_decay_help, ge=0),
            'adam_beta1': field(0.9, 'Adam beta1', ge=0, lt=1), 'adam_beta2': field(0.999, 'Adam beta2', ge=0, lt=1),
            'adam_eps': field(1e-6, 'Adam epsilon', gt=0),
            'clip_grad': field(1.0, 'gradient clipping by global norm', ge=0, zero='no clipping')}

    def add(cls):
        annotations = {}
        for name, tp in cls.__annotations__.items():
            annotations[name] = tp
            if name == after:
                for key, value in keys.items():
                    annotations[key] = 'str' if key == 'schedule' else 'float'
                    setattr(cls, key, value)
        cls.__annotations__ = annotations
        return cls
    return add


# the `threads` key of every job (pretraining, fine-tuning, comparison); chosen by electra.training.device.cpu_threads
THREADS_HELP = ("CPU threads of the job on this machine, shared out among its processes (fine-tuning workers, a "
                "torchrun job's); auto (or 0): OMP_NUM_THREADS when set, else the cores this process may run on less "
                "those other processes keep busy (measured for a quarter of a second at the start), at least 1. "
                "A thread on a core another process keeps busy stalls every step: all cores with one of them busy run "
                "many times slower than one thread (BENCHMARKS.md)")


# the `logger` key of every job: trackers beside the CSV files, as transformers' `report_to`
# (electra.training.trackers); 'none' alone: the CSV files only, as before the key was a list
TRACKERS = ('tensorboard', 'mlflow', 'wandb', 'neptune')


LOGGER_HELP = ("experiment trackers beside the CSV files, e.g. mlflow,tensorboard: tensorboard (event files in the "
               "run's tensorboard/ folder), mlflow (MLFLOW_TRACKING_URI, else MLflow's default store), wandb "
               "(WANDB_PROJECT; WANDB_MODE=offline works without an account), neptune (NEPTUNE_MODE=offline; its "
               "hosted service closed on 2026-03-05: offline mode and self-hosted installations remain); each needs "
               "its extra, e.g. pip install 'electra[mlflow]'")


def check_logger(logger: list[str]) -> None:
    "A `logger` list names each tracker once, and 'none' only alone."
    need('none' not in logger or logger == ['none'], 'logger', f"'none' means the CSV files only: give it alone, or the "
                                                                f"trackers alone, got {','.join(logger)}.")
    need(len(set(logger)) == len(logger), 'logger', f"a tracker is listed twice: {','.join(logger)}.")


def threads_setting(value: int | str) -> int:
    "A `threads` value as a number, 0 for auto; a ConfigError for anything else that is not a whole number >= 0."
    if isinstance(value, str) and value.strip().lower() == 'auto': return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0: return value
    raise ConfigError(f"threads: {value!r} is not auto (or 0) or a number of threads.")


def threads_field(help: str = THREADS_HELP):
    "The `threads` key of a job: auto, or a number of threads (0 is auto too)."
    return field('auto', help, ge=0, choices=('auto',), zero='auto')
