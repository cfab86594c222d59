"""A pretraining config loaded from command-line arguments, with the presets in configs/pretrain."""
from electra.config.cli import load_config
from electra.config.pretrain import PretrainConfig


def load(*argv, **kw):
    return load_config(PretrainConfig, list(argv), preset_dir='configs/pretrain', **kw)
