"""A pretraining config loaded from command-line arguments, with the presets in configs/pretrain; a config's
one-line refusal (`refused`)."""
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
