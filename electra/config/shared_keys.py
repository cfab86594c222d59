"""The keys several jobs share, declared once: the optimizer's (`optimizer_keys`, pretraining and fine-tuning), `threads`
and `logger` (every job: pretraining, fine-tuning, the comparison)."""
from __future__ import annotations

from typing import Any

from electra.config.errors import ConfigError, need
from electra.config.fields import choice_field, field

__all__ = ['optimizer_keys', 'THREADS_HELP', 'threads_field', 'threads_setting', 'TRACKERS', 'TRACKER_KEYS',
           'tracker_keys', 'check_logger']


def _keys_after(after: str, keys: dict[str, tuple[str, Any]]):
    "Class decorator, under `@dataclass`: `keys` (name -> (type, field)) inserted right after the key `after`."
    def add(cls):
        annotations = {}
        for name, tp in cls.__annotations__.items():
            annotations[name] = tp
            if name == after:
                for key, (key_type, value) in keys.items():
                    annotations[key] = key_type
                    setattr(cls, key, value)
        cls.__annotations__ = annotations
        return cls
    return add


def optimizer_keys(after: str, weight_decay: float, weight_decay_help: str):
    """Class decorator, under `@dataclass`: the optimizer's keys, the same in both jobs (model/optimization.py
    `create_optimizer`), inserted right after the key `after` (so `--help` lists them there); only weight decay's
    default and help differ between the jobs."""
    return _keys_after(after, {
        'schedule': ('str', choice_field('together', ['together', 'warmup_then_decay'], "'together' is the official "
                                         'schedule: warm-up and linear decay applied at once')),
        'decay_power': ('float', field(1.0, 'power of the polynomial decay', gt=0)),
        'weight_decay': ('float', field(weight_decay, weight_decay_help, ge=0)),
        'adam_beta1': ('float', field(0.9, 'Adam beta1', ge=0, lt=1)),
        'adam_beta2': ('float', field(0.999, 'Adam beta2', ge=0, lt=1)),
        'adam_eps': ('float', field(1e-6, 'Adam epsilon', gt=0)),
        'clip_grad': ('float', field(1.0, 'gradient clipping by global norm', ge=0, zero='no clipping'))})


# the `threads` key of every job (pretraining, fine-tuning, comparison); chosen by electra.training.device.cpu_threads
THREADS_HELP = ("CPU threads of the job on this machine, shared out among its processes (fine-tuning workers, a "
                "torchrun job's); auto (or 0): OMP_NUM_THREADS when set, else the cores this process may run on less "
                "those other processes keep busy (measured for a quarter of a second at the start), at least 1. "
                "A thread on a core another process keeps busy stalls every step: all cores with one of them busy run "
                "many times slower than one thread (BENCHMARKS.md)")


# the `logger` key of every job: trackers beside the CSV files, as transformers' `report_to`
# (electra.training.trackers); 'none' alone: the CSV files only, as before the key was a list
TRACKERS = ('tensorboard', 'mlflow', 'wandb', 'neptune')
TRACKER_KEYS = ('logger', 'neptune_project', 'tracking_group', 'tracking_tags', 'tracking_artifacts')


def tracker_keys(after: str, tensorboard: str, runs: str, group: str, tags: str, artifacts: str):
    """Class decorator, under `@dataclass`: the trackers' keys (`TRACKER_KEYS`), the same in every job, inserted right
    after the key `after` (so `--help` lists them there). Each job says what it tracks: `tensorboard` (where its event
    files go), `runs` (its tracked runs, '' for one), `group` (the group when tracking_group is empty), `tags` (the
    tags it adds to the user's) and `artifacts` (the files tracking_artifacts sends)."""
    logger = ("experiment trackers beside the CSV files, e.g. mlflow,tensorboard: tensorboard (event files in "
              f"{tensorboard}), mlflow (MLFLOW_TRACKING_URI, else MLflow's default store), wandb (WANDB_PROJECT; "
              "WANDB_MODE=offline works without an account), neptune (NEPTUNE_MODE=offline; its hosted service closed "
              "on 2026-03-05: offline mode and self-hosted installations remain); each needs its extra, e.g. pip "
              "install 'electra[mlflow]'" + (f'; {runs}' if runs else ''))
    return _keys_after(after, {
        'logger': ('list[str]', field([], logger, choices=('none', *TRACKERS), empty='the CSV files only')),
        'neptune_project': ('str', field('', 'Neptune project, e.g. me/electra (read from NEPTUNE_PROJECT when '
                                             'empty)')),
        'tracking_group': ('str', field('', f"the trackers' group (MLflow's experiment, W&B's group); empty: {group}")),
        'tracking_tags': ('list[str]', field([], f"the trackers' tags{tags}; MLflow's as key=value pairs (a bare tag: "
                                                 'tag=true)', empty='none')),
        'tracking_artifacts': ('bool', field(False, f'also send {artifacts} to the trackers that keep files (mlflow, '
                                                    'wandb, neptune)'))})


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
