"""The console commands that `pip install` makes (pyproject.toml `[project.scripts]`), each the very program it names,
run as `python -m` runs it: its command line, its `error: ...` lines and exit status, its outputs under the current
folder.

    electra-pretrain   pretrain.py (a wheel's copy in electra/jobs/; in a checkout or an editable install, the root one)
    electra-finetune   finetune.py (the same)
    electra-compare    python -m electra.experiments.compare
    electra-convert    python -m electra.convert
"""
from __future__ import annotations

import runpy

from electra.runtime.errors import friendly_errors
from electra.runtime.processes import driver_path

__all__ = ['pretrain', 'finetune', 'compare', 'convert']


def _run(module: str) -> None:
    "Run `module` as `python -m module` does: as `__main__`, with this process's command line."
    runpy.run_module(module, run_name='__main__', alter_sys=True)


def _run_driver(name: str) -> None:
    """Run the driver `name` as `python name` does, with this process's command line: a wheel's copy (electra/jobs/),
    or in a checkout and an editable install the repository's own at its root (`driver_path`)."""
    friendly_errors()  # the driver's own first line, here for an installation without it
    runpy.run_path(str(driver_path(name)), run_name='__main__')


def pretrain() -> None:
    "`electra-pretrain`: the pretraining driver."
    _run_driver('pretrain.py')


def finetune() -> None:
    "`electra-finetune`: the fine-tuning driver."
    _run_driver('finetune.py')


def compare() -> None:
    "`electra-compare`: the comparison of pretraining objectives at equal compute."
    _run('electra.experiments.compare')


def convert() -> None:
    "`electra-convert`: models of other formats (official TensorFlow checkpoints) into save_pretrained directories."
    _run('electra.convert')
