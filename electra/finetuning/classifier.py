"""The fine-tuning model: the ELECTRA body with the official classification/regression head, the STS-B
target scaling, layer-wise learning rates, and loading a fine-tuned run back.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from electra.config.errors import ConfigError
from electra.finetuning.loss import FinetuningLoss
from electra.pretrained.export import load_discriminator
from electra.training.optim import param_groups

__all__ = ['load_pretrained', 'tf_dense', 'ElectraClassifier', 'ClassifierLoss', 'layer_lrs', 'layer_groups', 'optimizer_groups', 'load_finetuned', 'read_finetuned',
           'finetuned_model']


# -- the pretrained model

def load_pretrained(source: str, device: str = 'cpu'):
    "The discriminator and tokenizer of `source` (a pretrain.py .pth, a save_pretrained directory or a hub name), checked."
    if source.endswith('.pth') and not Path(source).exists():
        raise ConfigError(f"model: {source} not found: run `python pretrain.py` first (the demo preset writes it), or set "
                          "--model to a .pth checkpoint, a save_pretrained directory or a hub name.")
    return load_discriminator(source, device=device)


def tf_dense(n_in: int, n_out: int) -> nn.Linear:
    "A linear layer initialised as TF1's `tf.layers.dense` default, the official heads': xavier-uniform weights, zero bias."
    lin = nn.Linear(n_in, n_out)
    nn.init.xavier_uniform_(lin.weight)
    nn.init.zeros_(lin.bias)
    return lin


class ElectraClassifier(nn.Module):
    """The ELECTRA body and the official GLUE head: the final hidden state of [CLS] -> dropout -> linear, no pooler
    and no tanh. The output layer starts as TF1's default initialisation: xavier-uniform weights, zero bias.
    `target_scale`: a regression head learns targets divided by it (official STS-B: 5, so [0, 1]); `predict_outputs`
    multiplies its outputs back, so scores stay on the task's own scale."""

    def __init__(self, electra: nn.Module, n_outputs: int, dropout: float = 0.1, target_scale: float = 1.0):
        super().__init__()
        self.electra, self.n_outputs, self.target_scale = electra, n_outputs, target_scale
        self.dropout = nn.Dropout(dropout)
        self.classifier = tf_dense(electra.config.hidden_size, n_outputs)

    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.electra(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        out = self.classifier(self.dropout(h[:, 0]))
        return out.squeeze(-1) if self.n_outputs == 1 else out


class ClassifierLoss(FinetuningLoss):
    """The loss of a classification, regression or multi-label run: each example's cross-entropy over classes, squared
    error against the target / `scale` (official STS-B: scores 0-5 learned as 0-1), or mean binary cross-entropy over
    labels, reduced over the batch as `FinetuningLoss` describes (`reduction`: 'sum', the official, or 'mean')."""

    def __init__(self, regression: bool, scale: float = 1.0, multilabel: bool = False, reduction: str = 'sum'):
        super().__init__(reduction)
        self.regression, self.scale, self.multilabel = regression, scale, multilabel

    def per_example(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        "Each example's float32 loss [b]; multi-label: the mean over labels of the binary cross-entropy of out [b, labels]."
        if self.regression: return (out.float() - target / self.scale) ** 2
        if self.multilabel: return F.binary_cross_entropy_with_logits(out.float(), target.float(), reduction='none').mean(-1)
        return F.cross_entropy(out.float(), target, reduction='none')

    def __call__(self, out: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        return self.reduce(self.per_example(out, target), weight)


# -- layer-wise learning rates

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


def layer_groups(model: ElectraClassifier) -> list[list[str]]:
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


def optimizer_groups(model: ElectraClassifier, lr: float, decay: float, mode: str) -> tuple[list[dict], np.ndarray]:
    "`electra.optim.param_groups` per layer (each split into decayed and no-decay parameters) and each group's peak lr."
    names = layer_groups(model)
    rates = layer_lrs(lr, decay, len(names) - 2, mode)
    layer_of = {n: g for g, ns in enumerate(names) for n in ns}
    groups = param_groups(model, names)
    return groups, np.array([rates[layer_of[g['names'][0]]] for g in groups])


# -- fine-tuned runs

FORMATS = ('electra-finetuned', 'electra-glue')  # (runs saved before the task kinds: 'electra-glue', a classifier)


def read_finetuned(path: str | Path) -> dict:
    "The checkpoint of a fine-tuned run saved by `run_sweep` (weights, task, hyperparameters, the model it came from)."
    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such fine-tuned run. Run `python finetune.py` first (the demo writes "
                          "checkpoints/glue/demo/<task>_<i>.pth), or give a run of yours.")
    try: ckpt = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as e:  # torch raises many kinds for a damaged file (RuntimeError, UnpicklingError, OSError, ...)
        raise ConfigError(f"{path}: cannot read this fine-tuned run ({type(e).__name__}: {str(e).splitlines()[0]}). Delete "
                          "it and its row in results.csv, and run the same command again to redo the run.") from None
    if not isinstance(ckpt, dict) or ckpt.get('format') not in FORMATS:
        raise ConfigError(f"{path}: not a fine-tuned checkpoint of finetune.py; delete it and its results row to redo the run.")
    return ckpt


# the model class of each task kind but classification (`ElectraClassifier`), registered by the kind's module (above
# this one); its constructor takes the body and the checkpoint's `head` settings
HEAD_MODELS: dict[str, type[nn.Module]] = {}


def finetuned_model(ckpt: dict) -> nn.Module:
    "The model of a fine-tuned run's checkpoint (`read_finetuned`), of any task kind, on the CPU, in eval mode."
    from transformers import ElectraConfig, ElectraModel
    body = ElectraModel(ElectraConfig.from_dict(ckpt['electra_config']))
    if ckpt['format'] == 'electra-glue':  # runs saved before the `target_scale` key learned raw targets
        model = ElectraClassifier(body, ckpt['n_outputs'], ckpt['dropout'], ckpt.get('target_scale', 1.0))
    else: model = HEAD_MODELS.get(ckpt['kind'], ElectraClassifier)(body, **ckpt['head'])
    model.load_state_dict(ckpt['model'])
    return model.eval()


def load_finetuned(path: str | Path, device: torch.device | str = 'cpu') -> nn.Module:
    "A fine-tuned model saved by `run_sweep`, of any task kind (`ElectraClassifier`, `ElectraTagger`, `ElectraQA`)."
    return finetuned_model(read_finetuned(path)).to(device)
