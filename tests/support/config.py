"""A pretraining config loaded from command-line arguments, with the presets in configs/pretrain; a config's
one-line refusal (`refused`); the three jobs' shipped presets loaded from Python in a fresh interpreter
(`from_python`), for a checkout and an installed package."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from electra.config.cli import load_config
from electra.config.errors import ConfigError
from electra.config.pretrain import PretrainConfig


def load(*argv, **kw):
    return load_config(PretrainConfig, list(argv), preset_dir='configs/pretrain', **kw)


def refused(make, *parts) -> str:
    "The one-line ConfigError `make()` raises, checked to hold each of `parts` (the keys, files and fixes it names)."
    with pytest.raises(ConfigError) as e:
        make()
    message = str(e.value)
    assert '\n' not in message and all(p in message for p in parts), message
    return message


# from Python, as a notebook's user types it: no preset folder named, electra.finetuning not imported by hand
FROM_PYTHON = '''
import electra
from electra.config.values import value_sources
p = electra.load_config(electra.PretrainConfig, argv=['--config', 'small'])
f = electra.load_config(electra.FinetuneConfig, argv=['--config', 'small', '--tasks', 'RTE'])
c = electra.load_config(electra.CompareConfig, argv=['--config', 'electric'])
print(p.steps, value_sources(p)['steps'])
print(f.lr, f.group, value_sources(f)['lr'])
print(c.name, value_sources(c)['name'])
'''


def from_python(cwd: Path, **env) -> list[str]:
    "The lines FROM_PYTHON prints, run in a fresh interpreter in `cwd` with `env` (PYTHONPATH: which electra)."
    out = subprocess.run([sys.executable, '-c', FROM_PYTHON], capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, 'HF_HUB_OFFLINE': '1', **env})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def expected_from_python(configs: Path) -> list[str]:
    "What FROM_PYTHON prints when the shipped presets are those of `configs` (a checkout's or an installed package's)."
    return [f'1000000 {configs}/pretrain/small.yaml: line 10', f'0.0003 small {configs}/finetune/small.yaml: line 7',
            f'electric {configs}/compare/electric.yaml: line 7']
