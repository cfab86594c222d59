"""Checkpoints: atomic writes, naming, finding the latest one of a run (by the step each records), and checking that a
resume fits.

A pretraining checkpoint is one `.pth` dict holding everything needed to continue bit-for-bit:
`{'format', 'electra_version', 'step', 'config', 'model', 'opt', 'scaler', 'rng', 'tokenizer', 'corpus_digest',
'schedules', 'checksum'}` (`electra_version`: the library that wrote it; `schedules`: the learning-rate schedules the
run followed, more than one after a resume changed `steps` or `lr`); it loads with
`torch.load(..., weights_only=True)` (tensors, numbers, strings and containers only). `checksum` is the SHA-256 of
everything else (`state_checksum`): a file whose bytes were damaged but still unpickle fails it on load.
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import re
from pathlib import Path

import torch

from electra.config.errors import ConfigError
from electra.config.paths import made_absolute
from electra.config.pretrain import RESUME_SAID, RESUME_SAME, TOKENIZER_KEYS, PretrainConfig, percent
from electra.runtime.files import atomic_write_text, path_inside
from electra.runtime.processes import is_main_process

__all__ = ['FORMAT', 'FINETUNED_FORMATS', 'checkpoint_kind', 'state_checksum', 'checkpoint_name', 'checkpoint_step', 'checkpoint_steps', 'overwrite_marker', 'remove_old_run', 'remove_partial_checkpoints', 'find_checkpoints', 'by_step', 'recorded', 'name_by_total', 'refuse_past', 'load_checkpoint', 'latest_checkpoint',
           'check_resume_compatible', 'check_resume_corpus']


FORMAT = 'electra-pretrain'
# the formats of finetune.py's runs ('electra-glue': runs saved before the task kinds, classifiers), named here, below
# both jobs, so that a reader of either kind can say what a file of the other kind is (`checkpoint_kind`)
FINETUNED_FORMATS = ('electra-finetuned', 'electra-glue')


def checkpoint_kind(ckpt) -> str:
    """What a loaded `.pth` is, told by its content (its `format`), in words for the line that refuses it where the
    other kind was wanted: 'a pretraining checkpoint of pretrain.py (step N)', 'a fine-tuned run of finetune.py (task
    T)', or '' for anything else (what to do then depends on the reader)."""
    fmt = ckpt.get('format') if isinstance(ckpt, dict) else None
    if fmt == FORMAT: return f"a pretraining checkpoint of pretrain.py (step {ckpt.get('step', '?')})"
    if fmt in FINETUNED_FORMATS: return f"a fine-tuned run of finetune.py (task {ckpt.get('task', '?')})"
    return ''


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


def checkpoint_name(run_name: str, seed: int, fraction: float, of: int | None = None) -> str:
    """`vanilla_11081_12.5%.pth` for fraction 0.125 of the run's steps; `vanilla_11081_12.5%_of_1000.pth` for
    fraction 0.125 of 1000 steps, the name a checkpoint takes when its run is extended past the steps it was written
    under (`name_by_total`), so that no name claims a fraction of the new total that it does not hold."""
    return f"{run_name}_{seed}_{percent(fraction)}%{f'_of_{of}' if of else ''}.pth"


def _name_pattern(run_name: str, seed: int) -> re.Pattern:
    "A checkpoint name of the run: (percent, the total it is of when it is not the run's steps now)."
    return re.compile(rf'^{re.escape(run_name)}_{seed}_([0-9.]+)%(?:_of_(\d+))?\.pth$')


def recorded(path: Path) -> dict | None:
    """`{'step', 'steps', 'init_from', 'init_max_length', 'tracking_group', 'tracking_tags', 'source'}` a checkpoint
    records (read memory-mapped: not its tensors; `source`: what a conversion's step-0 checkpoint holds the weights of),
    None when it cannot be read; the step orders a run's checkpoints, never the percent in a name."""
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
        saved = ckpt.get('config') or {}
        return {'step': int(ckpt['step']), 'steps': saved.get('steps'), 'init_from': saved.get('init_from', ''),
                'init_max_length': saved.get('init_max_length', 0),
                'tracking_group': saved.get('tracking_group', ''), 'tracking_tags': saved.get('tracking_tags') or [],
                'source': ckpt.get('source', '')}
    except Exception:
        return None


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
    "This run's checkpoints, by increasing percent in their names (those of another total last); `by_step` orders by step."
    pattern = _name_pattern(run_name, seed)
    found = [((int(m.group(2) or 0), float(m.group(1))), p) for p in Path(output_dir).glob('*.pth')
             if (m := pattern.match(p.name))]
    return [p for _, p in sorted(found)]


def by_step(paths: list[Path]) -> list[tuple[int | None, Path]]:
    "`paths` with the step each records (None: unreadable, first), by increasing step."
    steps = [((r or {}).get('step'), p) for p in paths for r in [recorded(p)]]
    return sorted(steps, key=lambda sp: (-1 if sp[0] is None else sp[0], sp[1].name))


def name_by_total(output_dir: str | Path, run_name: str, seed: int, total: int) -> list[tuple[Path, Path]]:
    """Rename the run's checkpoints written under another number of steps than `total` (a run extended with
    `--resume --steps`) to `checkpoint_name(..., of=<their steps>)`: a percent of the new total would be false.
    Returns (old, new) for each renamed."""
    pattern, renamed = _name_pattern(run_name, seed), []
    for p in find_checkpoints(output_dir, run_name, seed):
        m, r = pattern.match(p.name), recorded(p)
        if m.group(2) or r is None or r['steps'] in (None, total): continue
        new = p.with_name(checkpoint_name(run_name, seed, float(m.group(1)) / 100, of=r['steps']))
        p.replace(new)
        renamed.append((p, new))
    return renamed


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
    if isinstance(ckpt, dict) and ckpt.get('format') in FINETUNED_FORMATS:  # the model it started from was meant
        raise ConfigError(f"{path}: {checkpoint_kind(ckpt)}, not a pretraining checkpoint of pretrain.py: the Explore "
                          "notebook's `finetuned` reads it; the pretrained model it was fine-tuned from is "
                          f"{ckpt.get('pretrained', 'recorded in it')}.")
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
    m = re.match(r'^(.*)_(\d+)_[0-9.]+%(?:_of_\d+)?\.pth$', path.name)
    if not m: return ''
    at = (recorded(path) or {}).get('step')
    readable = [p for step, p in by_step(find_checkpoints(path.parent, m.group(1), int(m.group(2))))
                if step is not None and p.name != path.name and (at is None or step < at)]
    return f" The run's previous checkpoint is {readable[-1]}." if readable else ''


def refuse_past(path: Path, name: str, step: int, steps: int) -> None:
    "A resume whose checkpoint (at `path`, of run `name`) is at `step`, past the `steps` asked for, is refused."
    if step > steps:
        raise ConfigError(f"{path}: run {name} is at step {step}, past --steps {steps}: nothing to resume. Give "
                          f"--steps {step} (the run is finished) or more to continue it, or start another run with "
                          "--run_name NAME.")


def latest_checkpoint(output_dir: str | Path, run_name: str, seed: int) -> Path | None:
    """The run's checkpoint of the highest step it records (not of the highest percent in its name: after a run was
    extended, an old end named `100%` holds fewer steps than a later stop). One that cannot be read is refused, naming
    it: its step is unknown."""
    found = by_step(find_checkpoints(output_dir, run_name, seed))
    for step, p in found:
        if step is None: load_checkpoint(p)  # raises, saying what it is and what to do
    return found[-1][1] if found else None


def _saved_value(saved: dict, key: str):
    "A key's value in a checkpoint's config; the key's default for a checkpoint older than the key (what it ran with)."
    if key in saved: return saved[key]
    f = next(f for f in dataclasses.fields(PretrainConfig) if f.name == key)
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _differs(then, now) -> bool:
    "Whether a checkpoint's value differs from the config's now (a path an earlier version kept relative: by what it names)."
    return then != now and not made_absolute(then, now)


def _fix(refused: list[tuple]) -> str:
    "How to go on after a refused resume: the checkpoint's values, another run, or this run over."
    flag = lambda v: (','.join(map(str, v)) or "''") if isinstance(v, list) else v  # as the command line takes a list
    given = ' '.join(f'--{key} {flag(old)}' for key, old, _ in refused)
    return (f"Give {given} to continue the run, start another with --run_name NAME, or start this one over with "
            "--overwrite true.")


def _vocabulary(state: dict[str, str]) -> list[str]:
    "A tokenizer's entries in id order, read off the `tokenizer.json` (or `vocab.txt`) of its saved files."
    if 'tokenizer.json' not in state: return state.get('vocab.txt', '').splitlines()
    vocab = json.loads(state['tokenizer.json'])['model'].get('vocab') or {}
    return sorted(vocab, key=vocab.get) if isinstance(vocab, dict) else [entry for entry, *_ in vocab]


def _tokenizer_difference(then: dict[str, str], now: dict[str, str]) -> str:
    "Where two saved tokenizers differ, for the user to find it: the first entry that differs, or the other settings."
    old, new = _vocabulary(then), _vocabulary(now)
    if len(old) != len(new): return f"{len(new)} entries now, {len(old)} then"
    differ = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    if not differ: return "the same entries; its other settings (normalizer, special tokens) differ"
    first = differ[0]
    return (f"{len(differ)} entr{'ies differ' if len(differ) > 1 else 'y differs'}, the first at id {first}: "
            f"{new[first]!r} now, {old[first]!r} then")


# the keys that give a run a tokenizer it does not train: without any of them it trains its own at its start
_TOKENIZER_GIVEN_BY = ('tokenizer', 'init_from', 'generator')


def _tokenizer_refusal(ckpt: dict, given: str | None, now: dict[str, str], own: Path) -> str:
    """Why a resume's tokenizer is refused and the fix: the file the run began with edited since (restore it), the
    run's own tokenizer folder `own` edited since (restore or remove it), another one given (give that one), or one
    given to a run that trained its own at its start (drop it)."""
    began, difference = _saved_value(ckpt['config'], 'tokenizer'), _tokenizer_difference(ckpt['tokenizer'], now)
    if began and given == began:
        return (f"the tokenizer {given} has changed since this run began ({difference}). Restore that file to continue "
                "the run, or start another with --run_name NAME.")
    trained = not any(_saved_value(ckpt['config'], k) for k in _TOKENIZER_GIVEN_BY)
    if trained and not given:  # the tokenizer/ it trained at its start, read again from its run folder
        return (f"the run's own tokenizer {own}, trained at its start, has changed since ({difference}). Restore it, "
                "or remove that folder for the run to train it again from its corpus (the same, with the corpus "
                "unchanged), or start another run with --run_name NAME.")
    # the fix is how the run began (its tokenizer/ lies in the output folder, which no input may)
    fix = (f"Give --tokenizer {began}, the one the run began with" if began else
           "Drop --tokenizer: the run goes on with the tokenizer it trained at its start (its tokenizer/)")
    return f"the tokenizer differs from the one this checkpoint was trained with ({difference}). {fix}."


def check_resume_compatible(ckpt: dict, cfg_dict: dict, tokenizer_state: dict[str, str], path: Path) -> None:
    """Refuse a resume whose settings that change training (`RESUME_SAME`) or tokenizer differ from the checkpoint's,
    naming the key, both values and the fix; say in one line which of `RESUME_SAID` changed. The corpus is compared
    once its examples are built (`check_resume_corpus`)."""
    saved = ckpt['config']
    # the run's own tokenizer, trained at its start, is reused whatever these say now: changed, the saved config (and
    # the model card) would describe a tokenizer the run does not have. A tokenizer the run did not train (given, or
    # init_from's or the frozen generator's) is compared by its files below.
    trained = not any(cfg_dict.get(k) for k in _TOKENIZER_GIVEN_BY)
    shaped = TOKENIZER_KEYS if trained else ()
    refused = [(k, _saved_value(saved, k), cfg_dict.get(k)) for k in (*RESUME_SAME, *shaped)
               if _differs(_saved_value(saved, k), cfg_dict.get(k))]
    if refused:
        raise ConfigError(f"{path}: cannot resume: " + '; '.join(f"'{k}' was {a!r} in the checkpoint but is {b!r} now"
                                                                 for k, a, b in refused) + f'. {_fix(refused)}')
    if ckpt['tokenizer'] != tokenizer_state:
        own = Path(cfg_dict['output_dir']) / f"{cfg_dict['run_name']}_{cfg_dict['seed']}" / 'tokenizer'
        raise ConfigError(f"{path}: cannot resume: "
                          f"{_tokenizer_refusal(ckpt, cfg_dict.get('tokenizer'), tokenizer_state, own)}")
    said = [f'{k} was {_saved_value(saved, k)!r} in the checkpoint and is {cfg_dict.get(k)!r} now' for k in RESUME_SAID
            if _differs(_saved_value(saved, k), cfg_dict.get(k))]
    if said and is_main_process():
        print(f"resume: {'; '.join(said)}: the run goes on from step {ckpt['step']} with the new "
              f"value{'s' if len(said) > 1 else ''}.")


def check_resume_corpus(ckpt: dict, corpus: list[str], digest: str, path: Path) -> None:
    """Refuse a resume whose corpus is not the checkpoint's by content (`digest`: `electra.data.cache.examples_digest`
    of the examples built from it), whatever its paths; a corpus moved, or a checkpoint older than the record, is said
    in one line."""
    saved = ckpt.get('corpus_digest')
    if saved is None:
        if is_main_process(): print(f"resume: {path} does not record its corpus (a checkpoint of an earlier version): "
                                    "the corpus is not checked.")
        return
    was = _saved_value(ckpt['config'], 'corpus')
    if saved != digest:
        raise ConfigError(f"{path}: cannot resume: the corpus {corpus} is not the one this run was trained on (the "
                          f"examples built from it differ from the checkpoint's, from {was}: a file edited, added or "
                          "removed, or `deduplicate` other than the run's). Restore that corpus to continue the run, start another with --run_name NAME, or "
                          "start this one over with --overwrite true.")
    if was != corpus and is_main_process():
        print(f"resume: corpus was {was} in the checkpoint and is {corpus} now: the same examples, so the run goes on.")
