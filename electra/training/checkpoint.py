"""Checkpoints: atomic writes, naming, finding the latest one of a run, and checking that a resume fits.

A pretraining checkpoint is one `.pth` dict holding everything needed to continue bit-for-bit:
`{'format', 'step', 'config', 'model', 'opt', 'scaler', 'rng', 'tokenizer', 'checksum'}`; it loads with
`torch.load(..., weights_only=True)` (tensors, numbers, strings and containers only). `checksum` is the SHA-256 of
everything else (`state_checksum`): a file whose bytes were damaged but still unpickle fails it on load.
"""
from __future__ import annotations

import glob
import hashlib
import re
from pathlib import Path

import torch

from electra.config.base import ConfigError
from electra.runtime.files import atomic_write_text, is_main_process, path_inside

__all__ = ['FORMAT', 'state_checksum', 'checkpoint_name', 'checkpoint_step', 'checkpoint_steps', 'overwrite_marker', 'remove_old_run', 'remove_partial_checkpoints', 'find_checkpoints', 'load_checkpoint', 'latest_checkpoint', 'check_resume_compatible']


FORMAT = 'electra-pretrain'


def _feed(h, obj) -> None:
    "Hash `obj` (nested dicts, lists and tuples of tensors, numbers and strings) in a fixed order."
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous().reshape(-1)
        h.update(f'T{t.dtype}{tuple(obj.shape)}'.encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b'')
    elif isinstance(obj, dict):
        h.update(b'D%d' % len(obj))
        for k in sorted(obj, key=repr):
            h.update(repr(k).encode())
            _feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(b'L%d' % len(obj))
        for o in obj: _feed(h, o)
    else:
        h.update(repr(obj).encode())


def state_checksum(state: dict) -> str:
    "SHA-256 of a checkpoint's contents, its own 'checksum' entry left out."
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != 'checksum'})
    return h.hexdigest()


def checkpoint_name(run_name: str, seed: int, fraction: float) -> str:
    "`vanilla_11081_12.5%.pth` for fraction 0.125."
    return f'{run_name}_{seed}_{fraction * 100:g}%.pth'


def checkpoint_step(total_steps: int, fraction: float) -> int:
    "The step after which the checkpoint of `fraction` of a run of `total_steps` is saved (at least the first)."
    return max(1, round(fraction * total_steps))


def checkpoint_steps(total_steps: int, fractions: list[float]) -> dict[int, list[float]]:
    "Step -> the fractions saved at it (several short-run fractions can round to one step)."
    out: dict[int, list[float]] = {}
    for f in sorted(fractions):
        out.setdefault(checkpoint_step(total_steps, f), []).append(f)
    return out


def overwrite_marker(output_dir: str | Path, run_name: str, seed: int) -> Path:
    """`<output_dir>/.<run_name>_<seed>.overwriting`: present from the moment an --overwrite run starts removing the
    old run's checkpoints until it writes its own first one. While it exists, every checkpoint of that name is old."""
    return path_inside(output_dir, f'.{run_name}_{seed}.overwriting', key='output_dir')


def remove_old_run(output_dir: str | Path, run_name: str, seed: int) -> list[Path]:
    "Remove a run's checkpoints for an --overwrite, behind the marker, so a kill midway leaves no mixed state."
    found = find_checkpoints(output_dir, run_name, seed)
    marker = overwrite_marker(output_dir, run_name, seed)
    if found and is_main_process():
        atomic_write_text(f'removing {len(found)} checkpoint(s) of the old run\n', marker)
        for p in found: p.unlink(missing_ok=True)
    return found


def remove_partial_checkpoints(output_dir: str | Path, run_name: str, seed: int) -> None:
    "Remove what killed writes of this run's checkpoints left (`atomic_save`'s `.<name>.*.tmp`, as large as a checkpoint)."
    for partial in Path(output_dir).glob(f'.{glob.escape(run_name)}_{seed}_*%.pth.*.tmp'): partial.unlink()


def find_checkpoints(output_dir: str | Path, run_name: str, seed: int) -> list[Path]:
    "This run's checkpoints, by increasing fraction."
    pattern = re.compile(rf'^{re.escape(run_name)}_{seed}_([0-9.]+)%\.pth$')
    found = [(float(m.group(1)), p) for p in Path(output_dir).glob('*.pth') if (m := pattern.match(p.name))]
    return [p for _, p in sorted(found)]


def load_checkpoint(path: str | Path, map_location='cpu') -> dict:
    path = Path(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such checkpoint.") from None
    except Exception as e:
        # (torch's own message is long and its advice, weights_only=False, is unsafe and no help for a cut-short file)
        raise ConfigError(f"{path}: cannot read this checkpoint: it is cut short or damaged, or not a file written by "
                          f"pretrain.py ({type(e).__name__}).{_previous_hint(path)}") from None
    if not isinstance(ckpt, dict) or ckpt.get('format') != FORMAT:
        raise ConfigError(f"{path}: not an ELECTRA pretraining checkpoint written by pretrain.py "
                          f"(expected a dict with format '{FORMAT}').")
    if 'checksum' in ckpt and state_checksum(ckpt) != ckpt['checksum']:  # checkpoints older than checksums have none
        raise ConfigError(f"{path}: damaged: its contents do not match the checksum written with it. Move it aside "
                          "and resume from the run's previous checkpoint (--resume takes the latest one left)."
                          f"{_previous_hint(path)}")
    return ckpt


def _previous_hint(path: Path) -> str:
    "' The run's previous checkpoint is ...' when `path` is one of a run's checkpoints and an earlier one exists."
    m = re.match(r'^(.*)_(\d+)_[0-9.]+%\.pth$', path.name)
    if not m: return ''
    names = [p.name for p in find_checkpoints(path.parent, m.group(1), int(m.group(2)))]
    earlier = names[:names.index(path.name)] if path.name in names else names
    return f" The run's previous checkpoint is {path.parent / earlier[-1]}." if earlier else ''


def latest_checkpoint(output_dir: str | Path, run_name: str, seed: int) -> Path | None:
    found = find_checkpoints(output_dir, run_name, seed)
    return found[-1] if found else None


# Keys that must agree between a checkpoint and the run resuming it: anything that changes parameter shapes,
# the data stream or the objective. (steps, log_every, logger, device... may change on resume.)
RESUME_KEYS = ('hidden_size', 'num_hidden_layers', 'num_attention_heads', 'intermediate_size', 'embedding_size',
               'generator_size', 'max_position_embeddings', 'tie_weights', 'max_length', 'batch_size', 'seed',
               'mask_prob', 'mask_mode', 'corpus', 'pad_vocab_multiple',
               # what shapes the training examples: a change would change the batches after the resume
               'corpus_format', 'sentence_split', 'min_line_chars', 'max_sentence_chars', 'remove_empty_parens',
               'text_column', 'hub_split', 'corpus_weights', 'eval_examples')
# keys newer than some checkpoints: their value before the key existed. (The data-building keys take today's
# defaults: checkpoints older than them used example builder version 1, whose batches differ from today's anyway.)
RESUME_DEFAULTS = {'pad_vocab_multiple': 0,
                   'corpus_format': 'auto', 'sentence_split': 'auto', 'min_line_chars': 0, 'max_sentence_chars': 10_000,
                   'remove_empty_parens': False, 'text_column': 'text', 'hub_split': 'train', 'corpus_weights': [],
                   'eval_examples': 256}


def check_resume_compatible(ckpt: dict, cfg_dict: dict, tokenizer_state: dict[str, str], path: Path) -> None:
    "Refuse a resume whose model shape, data or tokenizer differs from the checkpoint's, naming the key."
    saved = ckpt['config']
    for key in RESUME_KEYS:
        if saved.get(key, RESUME_DEFAULTS.get(key)) != cfg_dict.get(key):
            raise ConfigError(f"{path}: cannot resume: '{key}' was {saved.get(key)!r} in the checkpoint but is "
                              f"{cfg_dict.get(key)!r} now. Use the checkpoint's value, or start a new run "
                              f"(another --run_name) without --resume.")
    if ckpt['tokenizer'] != tokenizer_state:
        raise ConfigError(f"{path}: cannot resume: the tokenizer differs from the one this checkpoint was trained "
                          f"with. Pass the run's own tokenizer (its run directory's tokenizer/) with --tokenizer.")
