"""Layer-wise learning rates of fine-tuning (the official `_get_layer_lrs`, google-research/electra,
model/optimization.py): each layer's peak rate (`layer_lrs`), the parameters of each layer (`layer_groups`) and the
optimizer's parameter groups with their rates (`optimizer_groups`), for the model of any task kind."""
from __future__ import annotations

import re

import numpy as np
from torch import nn

from electra.training.optim import param_groups

__all__ = ['layer_lrs', 'layer_groups', 'optimizer_groups']


def layer_lrs(lr: float, decay: float, n_layers: int, mode: str = 'official') -> np.ndarray:
    """Peak learning rates of [embeddings, layer 0, ..., layer L-1, head].

    Official `_get_layer_lrs` (google-research/electra, model/optimization.py) gives depth 0 to the embeddings (and
    embeddings_project), i + 1 to layer i and L + 2 to the head, and the rate lr * d^(L + 2 - depth): the top layer
    gets d^2 and no parameter d^1 (a known quirk of the official code). 'intended' puts the head at depth L + 1, so the
    top layer gets d and the embeddings d^(L + 1), as the paper describes."""
    if mode not in ('official', 'intended'): raise ValueError(f"layer_lr_mode: {mode!r} is not 'official' or 'intended'")
    head = n_layers + 2 if mode == 'official' else n_layers + 1
    depths = np.array([0, *range(1, n_layers + 1), head], dtype=np.float64)
    return lr * decay ** (head - depths)


def layer_groups(model: nn.Module) -> list[list[str]]:
    "Parameter names of [embeddings (+ embeddings_project), layer 0, ..., layer L-1, head], matching `layer_lrs`."
    n = model.electra.config.num_hidden_layers
    groups: list[list[str]] = [[] for _ in range(n + 2)]
    for name, _ in model.named_parameters():
        if name.startswith('electra.embeddings'): g = 0
        elif m := re.match(r'electra\.encoder\.layer\.(\d+)\.', name): g = int(m[1]) + 1
        elif name.startswith('classifier.'): g = n + 1
        else: raise ValueError(f'no layer-wise learning rate for parameter {name}')
        groups[g].append(name)
    return groups


def optimizer_groups(model: nn.Module, lr: float, decay: float, mode: str) -> tuple[list[dict], np.ndarray]:
    "`electra.training.optim.param_groups` per layer (each split into decayed and no-decay parameters) and each group's peak lr."
    names = layer_groups(model)
    rates = layer_lrs(lr, decay, len(names) - 2, mode)
    layer_of = {n: g for g, ns in enumerate(names) for n in ns}
    groups = param_groups(model, names)
    return groups, np.array([rates[layer_of[g['names'][0]]] for g in groups])
