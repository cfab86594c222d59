"""The models fine-tuning loads: the pretrained discriminator a job starts from (`load_pretrained`), and a fine-tuned
run back from its checkpoint, of any task kind (`read_finetuned`, `finetuned_model`, `load_finetuned`): the head
model of each kind but classification is in `HEAD_MODELS`, which the kind's module fills when it is imported. A run
of a results table is read only when its checkpoint is that run (`run_mismatch`, `read_run`, `load_run`): a `.pth`
copied over another (a backup restored, files moved between groups) is never used under the other's name."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from electra.config.errors import ConfigError
from electra.data.tokenizer import tokenizer_difference, tokenizer_identity
from electra.finetuning.classifier import ElectraClassifier
from electra.finetuning.inputs import recorded_tokenizer
from electra.finetuning.tasks.metrics import scores_text
from electra.pretrained.export import load_discriminator, pretraining_progress
from electra.training.checkpoint import FINETUNED_FORMATS, checkpoint_kind

__all__ = ['load_pretrained', 'model_description', 'tokenizer_mismatch', 'read_finetuned', 'HEAD_MODELS', 'finetuned_model', 'load_finetuned',
           'FORMATS', 'run_mismatch', 'read_run', 'load_run']


def load_pretrained(source: str, device: str = 'cpu'):
    "The discriminator and tokenizer of `source` (a pretrain.py .pth, a save_pretrained directory or a hub name), checked."
    if source.endswith('.pth') and not Path(source).exists():
        raise ConfigError(f"model: {source} not found: run `python pretrain.py` first (the demo preset writes it), or set "
                          "--model to a .pth checkpoint, a save_pretrained directory or a hub name.")
    return load_discriminator(source, device=device)


def model_description(source: str, model, tokenizer) -> str:
    "The model line of a job: where it was read from (a pretrain.py checkpoint: the step its run was at), its size."
    at = pretraining_progress(source)
    return (f"{source}{f' ({at})' if at else ''}: {model.config.num_hidden_layers} layers, hidden size "
            f"{model.config.hidden_size}, {len(tokenizer)} tokens")


def tokenizer_mismatch(model, tokenizer, whose: str = "the model's tokenizer") -> str:
    """'' where `tokenizer` is the one `model` was trained with, whose tokens its ids mean; else what differs, for a
    refusal. A model of `load_pretrained` and a fine-tuned run of `finetuned_model` keep the identity of their own
    (`electra_tokenizer_identity`: the same vocabulary read otherwise, by transformers' AutoTokenizer or from another
    folder, is it), the first a copy of it too (`electra_tokenizer`), to say what differs; a model that keeps neither
    (built in memory) is held to its embedding rows, which a larger tokenizer's ids run past."""
    recorded = getattr(model, 'electra_tokenizer_identity', None)
    if recorded is None:
        rows = getattr(model, 'electra', model).embeddings.word_embeddings.num_embeddings
        if len(tokenizer) <= rows: return ''
        return f"it has {len(tokenizer)} tokens, more than the model's {rows} embedding rows"
    if (identity := tokenizer_identity(tokenizer)) == recorded: return ''
    own = getattr(model, 'electra_tokenizer', None)
    return (own is not None and tokenizer_difference(tokenizer, own, whose)) or \
        (f"its tokens, their ids or what it does to its input are not those of {whose} (its identity {identity}, that "
         f"of {whose} {recorded})")


FORMATS = FINETUNED_FORMATS  # (runs saved before the task kinds: 'electra-glue', a classifier)


def read_finetuned(path: str | Path, mmap: bool = False) -> dict:
    """The checkpoint of a fine-tuned run saved by `run_sweep` (weights, task, hyperparameters, the model it came from);
    `mmap`: its tensors mapped, not read, for a look at what it records."""
    if Path(path).is_dir(): raise ConfigError(_folder_given(Path(path)))
    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such fine-tuned run. Run `python finetune.py` first (the demo writes "
                          "checkpoints/glue/demo/<task>_<i>.pth), or give a run of yours.")
    try: ckpt = torch.load(path, map_location='cpu', weights_only=True, mmap=mmap)
    except Exception as e:  # torch raises many kinds for a damaged file (RuntimeError, UnpicklingError, OSError, ...)
        raise ConfigError(f"{path}: cannot read this fine-tuned run ({type(e).__name__}: {str(e).splitlines()[0]}). Delete "
                          "it and its row in results.csv, and run the same command again to redo the run.") from None
    if not isinstance(ckpt, dict) or ckpt.get('format') not in FORMATS:  # a healthy file of another kind: never "delete"
        if kind := checkpoint_kind(ckpt):
            raise ConfigError(f"{path}: {kind}, not a fine-tuned run of finetune.py: it is the model to fine-tune or "
                              "explore (finetune.py's --model, the Explore notebook's `model`); a fine-tuned run is "
                              "finetune.py's <output_dir>/<group>/<task>_<i>.pth.")
        raise ConfigError(f"{path}: not a fine-tuned run of finetune.py (a torch file of another kind): give a run of "
                          "finetune.py, <output_dir>/<group>/<task>_<i>.pth.")
    return ckpt


_AUTO_CLASSES = {'ElectraForSequenceClassification': 'AutoModelForSequenceClassification',
                 'ElectraForTokenClassification': 'AutoModelForTokenClassification'}


def _folder_given(folder: Path) -> str:
    "What a folder given as a fine-tuned run is, and what to give instead: a run's transformers folder, a group's, other."
    beside = folder.with_name(folder.name + '.pth')
    if (folder / 'config.json').is_file() and beside.is_file():
        try:
            record = torch.load(beside, map_location='cpu', weights_only=True, mmap=True)
            run = f" of {record['task']} run {record['run']}"
            saved = json.loads((folder / 'config.json').read_text(encoding='utf-8')).get('architectures') or ['']
        except Exception: run, saved = '', ['']  # (a damaged file is named when it is read)
        loads = _AUTO_CLASSES.get(saved[0], 'its AutoModel class')
        return (f"{folder}: the transformers folder{run}, not its .pth: load_finetuned reads {beside}; the folder loads "
                f"with transformers' {loads}.")
    if (folder / 'results.csv').is_file():
        runs = sorted(p.name for p in folder.glob('*.pth'))
        example = f" (e.g. {folder / runs[0]})" if runs else ''
        return (f"{folder}: a fine-tuning group's folder, not one of its runs: give a run's file in it, "
                f"<task>_<i>.pth{example}.")
    return f"{folder}: a folder, not a fine-tuned run: give finetune.py's <output_dir>/<group>/<task>_<i>.pth."


# the model class of each task kind but classification (`ElectraClassifier`), registered by the kind's module (above
# this one); its constructor takes the body and the checkpoint's `head` settings
HEAD_MODELS: dict[str, type[nn.Module]] = {}


def finetuned_model(ckpt: dict) -> nn.Module:
    """The model of a fine-tuned run's checkpoint (`read_finetuned`), of any task kind, on the CPU, in eval mode, with
    the identity of the tokenizer it was trained with (`electra_tokenizer_identity`) where the run records it. Its
    forward gives what the run's transformers folder gives: a classifier's logits, a regression's scores on the task's
    own scale (`ElectraClassifier.on_task_scale`), a tagger's logits per token, the QA head's dict of logits."""
    from transformers import ElectraConfig, ElectraModel
    body = ElectraModel(ElectraConfig.from_dict(ckpt['electra_config']))
    if ckpt['format'] == 'electra-glue':  # runs saved before the `target_scale` key learned raw targets
        model = ElectraClassifier(body, ckpt['n_outputs'], ckpt['dropout'], ckpt.get('target_scale', 1.0))
    else: model = HEAD_MODELS.get(ckpt['kind'], ElectraClassifier)(body, **ckpt['head'])
    model.load_state_dict(ckpt['model'])
    if isinstance(model, ElectraClassifier): model.on_task_scale()
    if identity := recorded_tokenizer(ckpt.get('settings')):  # a run of an earlier version records none
        model.electra_tokenizer_identity = identity
    return model.eval()


def load_finetuned(path: str | Path, device: torch.device | str = 'cpu') -> nn.Module:
    """A fine-tuned run saved by `run_sweep` (`<task>_<i>.pth`), of any task kind, in eval mode on `device`, called as
    `model(input_ids, attention_mask, token_type_ids)`: an `ElectraClassifier` gives logits [N, classes] (softmax: the
    probabilities; a multi-label task's sigmoid per label) or a regression's scores [N] on the task's own scale, as its
    transformers folder and test file; an `ElectraTagger` logits [N, T, tags] (a word's tag at its first piece); an
    `ElectraQA` the QA head's dict of logits (`tasks/qa/heads.py` `QAHead`). See `finetuned_model`."""
    return finetuned_model(read_finetuned(path)).to(device)


# what a run's checkpoint records of it (`runs._save_run`) and the column of its results row that records the same
_RECORDED = {'task': 'task', 'run': 'run', 'seed': 'seed', 'pretrained_fingerprint': 'model_fingerprint',
             'settings': 'settings'}


def _same_number(saved, written) -> bool:
    "A checkpoint's dev value and its row's, which results.csv keeps to 4 decimals; undefined (NaN) equals undefined."
    if pd.isna(saved) or pd.isna(written): return pd.isna(saved) and pd.isna(written)
    return abs(round(float(saved), 4) - float(written)) <= 1e-6


def _described(record: dict, dev: list[str]) -> str:
    "'RTE run 1 (seed 1, dev accuracy 81.25)': a run as a checkpoint or a results row records it."
    scores = scores_text(record, dev)
    return f"{record['task']} run {record['run']} (seed {record['seed']}, dev {scores})"


def run_mismatch(ckpt: dict, row: dict) -> str:
    """'' when the checkpoint `ckpt` (`read_finetuned`) is the run its results row `row` records; else what it holds,
    in words. Compared: what both record (task, run, seed, the model's fingerprint, the run's settings: a checkpoint of
    an earlier version records fewer) and the dev metrics, to the row's 4 decimals."""
    saved = {'task': None, 'run': None, 'seed': None, **{k: v for k, v in ckpt.get('dev', {}).items() if k != 'epoch'},
             **{k: ckpt[k] for k in _RECORDED if k in ckpt}}
    differs = [k for k, col in _RECORDED.items() if k in ckpt and not pd.isna(row.get(col)) and ckpt[k] != row[col]]
    numbers = [m for m in saved if m in row and m not in _RECORDED.values()]
    if not differs and all(_same_number(saved[m], row[m]) for m in numbers): return ''
    dev = [m for m in numbers if m != 'train_loss']
    same_run = not {'task', 'run', 'seed'} & set(differs)  # another run's settings differ at least by its seed
    of = (' of another model' if 'pretrained_fingerprint' in differs else '') + \
         (' of other settings' if same_run and 'settings' in differs else '')
    written = {**row, 'run': int(row['run']), 'seed': int(row['seed'])}
    return f"it holds {_described(saved, dev)}{of}, not {_described(written, dev)} as its row records"


def read_run(row: dict) -> dict:
    """The checkpoint of the finished run `row` (a row of its results table), checked to be that run (`run_mismatch`);
    a one-line ConfigError naming the file and what it holds where it is not."""
    path = Path(str(row['checkpoint']))
    ckpt = read_finetuned(path)
    if why := run_mismatch(ckpt, row):
        raise ConfigError(f"{path}: {why}; nothing predicted or written from it. Put that run's own file back, or run "
                          "the same command again: the sweep fine-tunes the run again.")
    return ckpt


def load_run(row: dict, device: torch.device | str = 'cpu') -> nn.Module:
    "The model of the finished run `row` (`read_run`: its checkpoint checked to be that run)."
    return finetuned_model(read_run(row)).to(device)
