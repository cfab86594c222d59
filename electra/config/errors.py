"""How the config machinery refuses a value: `ConfigError` (one line naming where the value came from, the key and the
fix; the drivers print it after `error: `), `RunWarning` (the job goes on), and the helpers every check uses (`need`,
`did_you_mean`)."""
from __future__ import annotations

import difflib
import warnings
from typing import Sequence

__all__ = ['ConfigError', 'UnknownTask', 'RunWarning', 'format_warning', 'need', 'did_you_mean']


# the characters str.splitlines breaks a line at: a message that quotes a file's text may hold any of them
_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in '\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'})


class ConfigError(ValueError):
    """A bad config key or value; the message names where it came from and how to fix it, always on one line (the
    drivers print it after `error: `): a line break it quotes from a file or a value is shown escaped."""
    def __init__(self, message: object = '', *args):
        super().__init__(str(message).translate(_LINE_BREAKS), *args)


class UnknownTask(ConfigError):
    """A task name `key` gives that the job has not (`name`; `files`: the names of the job's task files): its reader
    names where the value came from, when it knows."""
    def __init__(self, message: object, key: str, name: str, files: Sequence[str] = ()):
        super().__init__(message)
        self.key, self.name, self.files = key, name, tuple(files)


class RunWarning(UserWarning):
    "Something in a job's settings or environment the user should know about; the job goes on."


_format_others = warnings.formatwarning


def format_warning(message, category, filename, lineno, line=None) -> str:
    """`warnings.formatwarning` that shows a `RunWarning` as the drivers print it, one `warning: ...` line: the file
    and line Python would name are the library's, never the user's code, and its source line reads as a traceback in
    a notebook. Other warnings as Python shows them (`electra/__init__.py` installs it)."""
    if issubclass(category, RunWarning): return f'warning: {message}\n'
    return _format_others(message, category, filename, lineno, line)


# the names other code gives keys of ours (google-research/electra configure_pretraining.py and configure_finetuning.py,
# HF's TrainingArguments): not close in spelling, so difflib alone would not find them
NAMES_ELSEWHERE = {'learning_rate': 'lr', 'num_train_steps': 'steps', 'max_steps': 'steps',
                   'num_warmup_steps': 'warmup_steps', 'train_batch_size': 'batch_size',
                   'per_device_train_batch_size': 'batch_size',
                   'max_seq_length': 'max_length', 'num_train_epochs': 'epochs', 'warmup_proportion': 'warmup_fraction',
                   'warmup_ratio': 'warmup_fraction', 'gen_weight': 'gen_loss_weight', 'disc_weight': 'disc_loss_weight',
                   'layerwise_lr_decay': 'layer_lr_decay', 'max_grad_norm': 'clip_grad'}


def did_you_mean(name: str, valid: Sequence[str]) -> str:
    "\" Did you mean 'x'?\" for the closest of `valid` to a misspelt `name` (or its name elsewhere), or ''."
    if NAMES_ELSEWHERE.get(name) in valid: return f" Did you mean '{NAMES_ELSEWHERE[name]}'?"
    close = difflib.get_close_matches(name, valid, n=1)
    return f" Did you mean '{close[0]}'?" if close else ''


def need(ok: bool, key: str, msg: str) -> None:
    "A config check: `ConfigError('<key>: <msg>')` unless `ok`."
    if not ok: raise ConfigError(f"{key}: {msg}")
