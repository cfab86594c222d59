"""The console commands that `pip install` makes (pyproject.toml `[project.scripts]`), each the very program it names,
run as `python -m` runs it: its command line, its `error: ...` lines and exit status, its outputs under the current
folder.

    electra-pretrain   pretrain.py (its copy in electra/jobs/)
    electra-finetune   finetune.py (its copy in electra/jobs/)
    electra-compare    python -m electra.experiments.compare
    electra-convert    python -m electra.convert
"""
from __future__ import annotations

import runpy

__all__ = ['pretrain', 'finetune', 'compare', 'convert']


def _run(module: str) -> None:
    "Run `module` as `python -m module` does: as `__main__`, with this process's command line."
    runpy.run_module(module, run_name='__main__', alter_sys=True)


def pretrain() -> None:
    "`electra-pretrain`: the pretraining driver."
    _run('electra.jobs.pretrain')


def finetune() -> None:
    "`electra-finetune`: the fine-tuning driver."
    _run('electra.jobs.finetune')


def compare() -> None:
    "`electra-compare`: the comparison of pretraining objectives at equal compute."
    _run('electra.experiments.compare')


def convert() -> None:
    "`electra-convert`: models of other formats (official TensorFlow checkpoints) into save_pretrained directories."
    _run('electra.convert')
