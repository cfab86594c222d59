"""The models fine-tuning loads: the pretrained discriminator a job starts from (`load_pretrained`), and a fine-tuned
run back from its checkpoint, of any task kind (`read_finetuned`, `finetuned_model`, `load_finetuned`): the head
model of each kind but classification is in `HEAD_MODELS`, which the kind's module fills when it is imported."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from electra.config.errors import ConfigError
from electra.finetuning.classifier import ElectraClassifier
from electra.pretrained.export import load_discriminator

__all__ = ['load_pretrained', 'read_finetuned', 'HEAD_MODELS', 'finetuned_model', 'load_finetuned', 'FORMATS']


def load_pretrained(source: str, device: str = 'cpu'):
    "The discriminator and tokenizer of `source` (a pretrain.py .pth, a save_pretrained directory or a hub name), checked."
    if source.endswith('.pth') and not Path(source).exists():
        raise ConfigError(f"model: {source} not found: run `python pretrain.py` first (the demo preset writes it), or set "
                          "--model to a .pth checkpoint, a save_pretrained directory or a hub name.")
    return load_discriminator(source, device=device)


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
