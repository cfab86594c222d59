"""The registries config defines and a job above it fills (docs/architecture.md), filled on first use: the package
(`electra/__init__.py`, the floor above every job, which every import of electra runs first) names the module whose
import fills each, so that config names no job and a config checked from Python (a notebook, a script) needs no job
imported by hand before it."""
from __future__ import annotations

import importlib

__all__ = ['filled_by', 'fill', 'TASK_CATALOGUE']

# the registries, by name
TASK_CATALOGUE = 'task catalogue'  # config/finetune.py's TaskCatalogue: the task kinds `tasks` is checked with

_FILLED_BY: dict[str, str] = {}  # registry -> the module whose import fills it


def filled_by(registry: str, module: str) -> None:
    "Name `module` as the one whose import fills `registry` (the package does, for each registry a job fills)."
    _FILLED_BY[registry] = module


def fill(registry: str) -> None:
    "Import the module named for `registry`, which fills it (nothing more when it is imported already)."
    importlib.import_module(_FILLED_BY[registry])
