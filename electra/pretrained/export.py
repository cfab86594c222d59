"""From a pretraining run to plain transformers models, and back: `export_pretrained` writes the discriminator and the
generator with `save_pretrained` (tokenizer included) so `from_pretrained` loads them, and Electric's two-tower cloze
model, which no transformers class holds, in files of its own (`save_cloze`, read back by `load_cloze`);
`load_discriminator` reads any of the three sources fine-tuning accepts (a pretrain `.pth`, a `save_pretrained`
directory, a hub name). Both sides read a pretraining model's weights as the plain networks hold them:
`discriminator_state` (the discriminator's own, its embedding tables made whole under 'gdes' sharing) and
`unpadded_copy` (the vocabulary's padding rows cut off)."""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import warnings
from pathlib import Path
from typing import Callable

import torch
from huggingface_hub import try_to_load_from_cache
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining, PreTrainedTokenizerBase
from transformers.utils import logging as transformers_logging

from electra.config.errors import ConfigError, RunWarning, need
from electra.config.pretrain import saved_config
from electra.config.text_files import load_json
from electra.config.version import __version__
from electra.data.hub import hub_unreachable
from electra.data.tokenizer import (
    SavedTokenizer,
    capitals_unknown,
    has_tokenizer_files,
    save_exported_tokenizer,
    tokenizer_from_state,
    tokenizer_identity,
    unreachable,
    upper_entries,
)
from electra.objective.model import (
    EMBEDDING_TABLES,
    ElectraGeneratorDiscriminator,
    TwoTowerClozeGenerator,
    discriminator_config,
    padded_vocab_size,
)
from electra.pretrained.card import CARD, write_pretrained_card
from electra.runtime.files import atomic_write_text, file_sha256, saved_by_torch
from electra.runtime.processes import is_main_process
from electra.training.checkpoint import load_checkpoint, recorded

__all__ = ['saved_model_type', 'load_saved', 'EXPORTS', 'export_pretrained', 'save_model', 'with_model_length',
           'export_holds', 'load_discriminator', 'model_files', 'model_fingerprint', 'model_source',
           'quiet_transformers', 'unpadded_copy', 'discriminator_state', 'CLOZE_CONFIG', 'CLOZE_WEIGHTS', 'cloze_state',
           'save_cloze', 'load_cloze']

EXPORTS = ('discriminator', 'generator', 'cloze')  # the folders of a run's exported models, in its run directory
# the files of `cloze/`, Electric's two-tower cloze model: no transformers class holds it, so no config.json that
# `from_pretrained` would load as another model
CLOZE_CONFIG, CLOZE_WEIGHTS = 'cloze_config.json', 'cloze.safetensors'


@contextlib.contextmanager
def quiet_transformers():
    """transformers' progress bars off while the block runs (and as they were after): reading or writing a model's
    weights on disk takes a moment, and a bar per model is noise in a job's log. (Also the hub's download bars: only
    for local files.)"""
    was = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try: yield
    finally:
        if was: transformers_logging.enable_progress_bar()


def _net_names(model: ElectraGeneratorDiscriminator) -> tuple[str, ...]:
    """The networks exported: the discriminator; the generator where the objective's row exports one
    (`exports_generator`) and the run has it (not the uniform generator); Electric's cloze model, which its
    discriminator's score needs (`exports_cloze`)."""
    row = model.objective
    kept = {'discriminator': True, 'generator': row.exports_generator and model.generator is not None,
            'cloze': row.exports_cloze}
    return tuple(name for name in EXPORTS if kept[name])


def _exported_nets(model: ElectraGeneratorDiscriminator, run_dir: str | Path) -> dict[Path, nn.Module]:
    """Where each network of `model` is exported and what is written there: cut back to the model's vocabulary size,
    the discriminator's tables made whole under gradient-disentangled sharing (the generator's + its residual);
    Electric's cloze model a copy of the tokenizer's vocabulary (`cloze_state`)."""
    out = {}
    for name in _net_names(model):
        if name == 'cloze':
            config, shared = copy.deepcopy(model.generator.config), _shared(model.generator)
            config.vocab_size = model.vocab_size
            out[Path(run_dir) / name] = _cloze_net(config, shared, cloze_state(model.generator, model.vocab_size))
            continue
        net = getattr(model, name)
        state = discriminator_state(model.state_dict(), model.tie_weights) if net is model.discriminator and \
            model.tie_weights == 'gdes' else None
        out[Path(run_dir) / name] = unpadded_copy(net, model.vocab_size, state)
    return out


def export_pretrained(model: ElectraGeneratorDiscriminator, tokenizer: PreTrainedTokenizerBase, run_dir: str | Path) -> dict[str, Path]:
    """Save `run_dir/discriminator` and `run_dir/generator` (none without a generator network: BERT, the uniform
    generator), each with the tokenizer, and for Electric `run_dir/cloze` (`save_cloze`: its discriminator's score
    needs it); returns the paths. The discriminator is the model to fine-tune, also for the MLM objectives, whose
    encoder it holds (its replaced-token-detection head is then the copy gate or untrained; its card says what the head
    gives). A padded vocabulary (`pad_vocab_multiple`) is cut back to the tokenizer's size."""
    if not is_main_process(): return {name: Path(run_dir) / name for name in _net_names(model)}
    nets = _exported_nets(model, run_dir)
    for path, net in nets.items():  # the discriminator first: the cloze model records what it was written beside
        if isinstance(net, TwoTowerClozeGenerator):
            save_cloze(net, model.mask_prob, path, Path(run_dir) / EXPORTS[0])
            note = ''  # it reads the discriminator's tokenizer
        else:
            save_model(net, path)
            note = save_exported_tokenizer(with_model_length(copy.deepcopy(tokenizer), net.config), path)
        # README.md: what it is, how it was made and does
        write_pretrained_card(path, path.name, net, run_dir, model.objective, tokenizer_note=note)
    return {path.name: path for path in nets}


def save_model(net: nn.Module, path: str | Path) -> Path:
    """`net.save_pretrained(path)`, quietly, its `config.json` naming the library that wrote it (`electra_version`,
    beside transformers' own `transformers_version`); every model this library writes goes through here."""
    net.config.electra_version = __version__
    with quiet_transformers(): net.save_pretrained(path)
    return Path(path)


def with_model_length(tokenizer: PreTrainedTokenizerBase, config) -> PreTrainedTokenizerBase:
    """`tokenizer` cutting inputs at the model's position table (`model_max_length`), where transformers' Auto classes
    and pipelines truncate. A tokenizer read from a vocab.txt or trained has no length of its own (1e30): with it
    `truncation=True` kept every token, and a long input failed inside the model."""
    tokenizer.model_max_length = min(tokenizer.model_max_length, config.max_position_embeddings)
    return tokenizer


def export_holds(model: ElectraGeneratorDiscriminator, tokenizer: PreTrainedTokenizerBase, run_dir: str | Path) -> bool:
    """Whether `run_dir` holds the whole export of `model` and `tokenizer` (`export_pretrained`): each network's
    config, `model`'s weights exactly, and `tokenizer`'s vocabulary. False for an export cut short by a kill, or one
    of other weights."""
    for path, net in _exported_nets(model, run_dir).items():
        if isinstance(net, TwoTowerClozeGenerator):
            if not _cloze_holds(net, model.mask_prob, path, Path(run_dir) / EXPORTS[0]): return False
            continue
        try:
            config = json.loads((path / 'config.json').read_text(encoding='utf-8'))
            saved = load_file(path / 'model.safetensors')
            vocab = SavedTokenizer.from_pretrained(path).get_vocab()
        except (OSError, ValueError, SafetensorError):  # missing, cut short
            return False
        if config.get('model_type') != 'electra' or vocab != tokenizer.get_vocab() or \
                not _same_weights(saved, net.state_dict()) or not (path / CARD).is_file():  # the card is written last
            return False
    return True


def _same_weights(saved: dict[str, torch.Tensor], ours: dict[str, torch.Tensor]) -> bool:
    "Whether `saved` (a `save_pretrained` file) holds exactly `ours`; a tied tensor is saved once, under one name."
    if not saved.keys() <= ours.keys() or any(not torch.equal(saved[k], ours[k].detach().cpu()) for k in saved):
        return False
    kept = {ours[k].data_ptr() for k in saved}
    return all(ours[k].data_ptr() in kept for k in ours.keys() - saved.keys())


def _shared(generator: TwoTowerClozeGenerator) -> bool:
    "Whether both towers read one embedding module (`tie_weights` 'embeddings', official `electra/embeddings`)."
    return generator.rtl.embeddings is generator.ltr.embeddings


def cloze_state(generator: TwoTowerClozeGenerator, vocab_size: int) -> dict[str, torch.Tensor]:
    """What `cloze/` holds of Electric's two-tower generator: its weights on the CPU, the vocabulary's padding rows
    (`pad_vocab_multiple`) cut off; the embeddings both towers read once, as `ltr`'s."""
    shared = _shared(generator)
    return {k: (v[:vocab_size] if k.endswith(('embeddings.word_embeddings.weight', 'output_bias')) else v).detach().cpu()
            .clone() for k, v in generator.state_dict().items() if not (shared and k.startswith('rtl.embeddings.'))}


def _cloze_net(config: ElectraConfig, shared: bool, state: dict[str, torch.Tensor]) -> TwoTowerClozeGenerator:
    "A two-tower cloze model of the towers' `config` holding `state` (as `cloze_state` gives it), in eval mode."
    with torch.random.fork_rng(devices=[]):  # its initial weights are replaced: their draws leave torch's stream alone
        net = TwoTowerClozeGenerator(config)
    if shared:  # one embedding module for both towers, as in the run
        net.rtl.embeddings = net.ltr.embeddings
        state = {**state, **{'rtl' + k[3:]: v for k, v in state.items() if k.startswith('ltr.embeddings.')}}
    net.load_state_dict(state)
    return net.eval()


def _cloze_config(generator: TwoTowerClozeGenerator, mask_prob: float, discriminator: Path) -> dict:
    """`cloze_config.json`: a tower's config, whether the towers share their embeddings, the run's `mask_prob` (the
    score's constant log(mask_prob / (1 - mask_prob))) and the fingerprint of the discriminator it was exported with."""
    return {'electra_version': __version__, 'mask_prob': mask_prob, 'shared_embeddings': _shared(generator),
            'discriminator_fingerprint': model_fingerprint(discriminator), 'tower': generator.config.to_dict()}


def save_cloze(generator: TwoTowerClozeGenerator, mask_prob: float, path: str | Path, discriminator: str | Path) -> Path:
    """Write Electric's two-tower cloze model (of the tokenizer's vocabulary) to the folder `path` (`cloze_state` in
    `CLOZE_WEIGHTS`, `_cloze_config` in `CLOZE_CONFIG`), beside the discriminator already written to `discriminator`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_file(cloze_state(generator, generator.config.vocab_size), path / CLOZE_WEIGHTS)
    config = _cloze_config(generator, mask_prob, Path(discriminator))
    atomic_write_text(json.dumps(config, indent=1) + '\n', path / CLOZE_CONFIG)
    return path


def _cloze_holds(generator: TwoTowerClozeGenerator, mask_prob: float, path: Path, discriminator: Path) -> bool:
    "Whether `path` holds `save_cloze`'s files of `generator` exactly, written beside `discriminator`, and its card."
    try:
        config = json.loads((path / CLOZE_CONFIG).read_text(encoding='utf-8'))
        saved = load_file(path / CLOZE_WEIGHTS)
    except (OSError, ValueError, SafetensorError):
        return False
    ours, expected = cloze_state(generator, generator.config.vocab_size), _cloze_config(generator, mask_prob, discriminator)
    kept = ('mask_prob', 'shared_embeddings', 'discriminator_fingerprint')  # not the versions of what wrote it
    return (all(config.get(k) == expected[k] for k in kept) and saved.keys() == ours.keys()
            and all(torch.equal(saved[k], ours[k]) for k in ours) and (path / CARD).is_file())


def load_cloze(path: str | Path, discriminator: str | Path) -> tuple[TwoTowerClozeGenerator, float]:
    """Electric's cloze model that `save_cloze` wrote to the folder `path`, in eval mode, and its run's `mask_prob`;
    refused in one line (key `cloze`) unless it was exported beside the discriminator in the folder `discriminator`."""
    path, discriminator = Path(path), Path(discriminator)
    if not (path / CLOZE_CONFIG).is_file():
        raise ConfigError(f"cloze: {path} holds no Electric cloze model (no {CLOZE_CONFIG}). Give the cloze/ folder "
                          f"that an Electric run exported beside its discriminator/; a run exported without it writes "
                          "it again with pretrain.py --resume true and its config, while its checkpoints are kept.")
    config = load_json((path / CLOZE_CONFIG).read_text(encoding='utf-8'), str(path / CLOZE_CONFIG))
    if not isinstance(config, dict) or config.get('discriminator_fingerprint') != model_fingerprint(discriminator):
        raise ConfigError(f"cloze: {path} was exported beside another discriminator than {discriminator} (its files "
                          f"differ from those {CLOZE_CONFIG} records): give the discriminator/ folder exported with it.")
    try:
        net = _cloze_net(ElectraConfig.from_dict(config['tower']), config['shared_embeddings'],
                         load_file(path / CLOZE_WEIGHTS))
        return net, float(config['mask_prob'])
    except (OSError, KeyError, TypeError, ValueError, RuntimeError, SafetensorError) as e:  # cut short, edited
        raise ConfigError(f"cloze: {path}: its files are cut short or edited ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:120]}). Export it again: pretrain.py --resume true with the run's "
                          "config writes it from the last checkpoint.") from None


def _from_checkpoint(path: Path) -> tuple[ElectraForPreTraining, PreTrainedTokenizerBase]:
    ckpt = load_checkpoint(path)
    tokenizer = tokenizer_from_state(ckpt['tokenizer'])
    cfg = saved_config(ckpt['config'], str(path))
    disc = ElectraForPreTraining(discriminator_config(cfg, len(tokenizer), tokenizer.pad_token_id))
    state = discriminator_state(ckpt['model'], cfg.tie_weights)
    rows, words = padded_vocab_size(len(tokenizer), cfg.pad_vocab_multiple), 'electra.embeddings.word_embeddings.weight'
    if rows > len(tokenizer) and words in state and len(state[words]) == rows:
        state[words] = state[words][:len(tokenizer)]  # trained with pad_vocab_multiple: drop the padding rows
    missing, unexpected = disc.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ConfigError(f"{path}: the discriminator weights do not match its config "
                          f"(missing {missing[:3]}, unexpected {unexpected[:3]}). Was the file edited by hand?")
    return disc, tokenizer


def saved_model_type(path: Path) -> str | None:
    """The `model_type` of a local `save_pretrained` directory's config.json; a ConfigError when it has none or it is
    unreadable."""
    config = path / 'config.json'
    if not config.is_file():
        raise ConfigError(f"{path}: no config.json, so not a save_pretrained directory. Give the directory the model "
                          "was exported to (e.g. checkpoints/pretrain/<run>_<seed>/discriminator) or a pretraining .pth.")
    try: return json.loads(config.read_text(encoding='utf-8')).get('model_type')
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError(f"{config}: unreadable ({e}). Export the model again with save_pretrained.") from None


def saved_architectures(path: Path) -> list[str]:
    "The classes a local `save_pretrained` directory's config.json says it holds (`architectures`; [] when unsaid)."
    saved_model_type(path)  # a config.json that is there and reads
    return json.loads((path / 'config.json').read_text(encoding='utf-8')).get('architectures') or []


def load_saved(name: str, key: str, instead: str, *loads: tuple[type, str],
               holds: Callable[[list[str]], None] | None = None) -> list:
    """Each `cls.from_pretrained(name)` of `loads`, (cls, what) pairs (e.g. a model and its tokenizer), from a hub name
    or a local `save_pretrained` directory, the hub asked once whether it can be reached; offline, unknown or
    unreadable, one message naming the setting `key`, the `what` and the local alternatives (`instead`). `holds`: the
    caller's check of the classes a local directory's config.json names, before any weights load (transformers would
    first print its report of a head it initialises afresh); a hub name's are checked by the caller once loaded."""
    local = Path(name).is_dir()
    if local:
        try: saved = saved_architectures(Path(name))  # a folder without config.json would load as something else
        except ConfigError as e: raise ConfigError(f'{key}: {e}') from None
        if holds and saved: holds(saved)
    unreachable = None if local else hub_unreachable()  # then only the local cache can hold it: no retries
    out = []
    for cls, what in loads:
        try:
            with quiet_transformers() if local else contextlib.nullcontext():  # a download's progress is worth seeing
                out.append(cls.from_pretrained(name, local_files_only=bool(unreachable)))
        except ConfigError as e: raise ConfigError(f'{key}: {e}') from None  # the library's own check of a tokenizer
        except RuntimeError:  # transformers: weights of other sizes than the config's (its report is logged, not raised)
            raise ConfigError(f"{key}: cannot load the {what} '{name}' (its weights do not fit its config.json: a "
                              "size was edited, or the weights are another model's). Export the model again with "
                              "save_pretrained.") from None
        except (OSError, ValueError) as e:
            if local:
                raise ConfigError(f"{key}: {name} is not a save_pretrained directory of the {what} "
                                  f"({str(e).splitlines()[0]}). Export it again with save_pretrained.") from None
            why = (f'the hub cannot be reached ({unreachable}) and it is not in the local cache' if unreachable
                   else f'offline, or no such model: {str(e).splitlines()[0]}')
            raise ConfigError(f"{key}: cannot load the {what} '{name}' ({why}). Use local copies instead: "
                              f"{instead}.") from None
    return out


def _check_model_dir(path: Path) -> None:
    "A local `save_pretrained` directory: its config names an ELECTRA model and its tokenizer files are there."
    config, model_type = path / 'config.json', saved_model_type(path)
    if model_type != 'electra':
        raise ConfigError(f"{config}: a {model_type} model, not ELECTRA. Give an ELECTRA discriminator: a pretrain.py "
                          ".pth checkpoint, its exported discriminator directory, or a hub name such as "
                          "google/electra-small-discriminator.")
    if not has_tokenizer_files(path):
        raise ConfigError(f"{path}: the model has no tokenizer files (neither tokenizer.json nor vocab.txt); without "
                          "them its ids mean nothing. Copy the tokenizer it was trained with into the directory "
                          "(save_pretrained writes both), or give the pretraining .pth, which carries its tokenizer.")


MODEL_LOCAL = ('a save_pretrained directory (e.g. checkpoints/pretrain/<run>_<seed>/discriminator) or a pretraining '
               '.pth checkpoint')


def _from_pretrained(source: str) -> tuple[ElectraForPreTraining, PreTrainedTokenizerBase]:
    if Path(source).is_dir(): _check_model_dir(Path(source))

    def holds(saved_as: list[str], model_type: str = 'electra') -> None:
        # save_pretrained records the class; a generator directory would otherwise load with a fresh random head
        if model_type != 'electra' or 'ElectraForPreTraining' not in saved_as:
            raise ConfigError(f"{source} holds a {' / '.join(saved_as)} ({model_type}), not an ELECTRA discriminator "
                              "(ElectraForPreTraining). Give the discriminator: a pretrain.py .pth checkpoint, its "
                              "exported discriminator directory, or a hub name such as google/electra-small-discriminator.")
    disc, tokenizer = load_saved(source, 'model', MODEL_LOCAL, (ElectraForPreTraining, 'discriminator'),
                                 (SavedTokenizer, 'tokenizer of'), holds=holds)
    holds(getattr(disc.config, 'architectures', None) or ['ElectraForPreTraining'], disc.config.model_type)
    return disc, tokenizer


def load_discriminator(source: str | Path, device='cpu') -> tuple[ElectraForPreTraining, PreTrainedTokenizerBase]:
    """An `ElectraForPreTraining` and its tokenizer from a pretrain `.pth`, a `save_pretrained` directory or a hub name,
    told apart by what `source` is (a file torch.save wrote, a folder, neither), not by its name; in eval mode whatever
    the source (dropout off, as transformers' `from_pretrained` returns a model: a training job sets its own mode, as
    fastai's `Learner.fit` does). The model keeps where it was read from (`electra_source`), a copy of its tokenizer
    (`electra_tokenizer`) and its identity (`electra_tokenizer_identity`)."""
    source = str(source)
    if Path(source).is_file():  # by content, not name: a folder named x.pth is a save_pretrained folder
        need(saved_by_torch(source), 'model', f"{source} is a file but not a checkpoint of pretrain.py (torch.save "
                                              f"writes a zip archive): give a pretrain.py checkpoint (any name), a "
                                              f"save_pretrained folder (here perhaps {Path(source).parent}) or a hub "
                                              "name.")
        disc, tokenizer = _from_checkpoint(Path(source))
    else:
        disc, tokenizer = _from_pretrained(source)
    with_model_length(tokenizer, disc.config)
    if upper := unreachable(tokenizer):  # kept: the model was pretrained with it (`data.tokenizer.check_case`)
        warnings.warn(f"model {source}: its tokenizer lower-cases the text, but its vocabulary holds "
                      f"{upper_entries(upper)} that no input reaches. Fine-tuning uses the tokenizer as saved, the one "
                      "the model was pretrained with; if it read cased text in pretraining, save its cased tokenizer "
                      "(do_lower_case: false) with it.", RunWarning, stacklevel=2)
    elif capitals_unknown(tokenizer):
        warnings.warn(f"model {source}: its tokenizer keeps case (do_lower_case: false), but no entry of its "
                      "vocabulary is upper case: a word with a capital letter is [UNK]. Fine-tuning uses the tokenizer "
                      "as saved, the one the model was pretrained with; if its pretraining text was lower-cased, save "
                      "its tokenizer lower-casing (do_lower_case: true) with it.", RunWarning, stacklevel=2)
    if disc.config.vocab_size < len(tokenizer):
        raise ConfigError(f"{source}: the tokenizer has {len(tokenizer)} tokens but the model's vocabulary only "
                          f"{disc.config.vocab_size}: they do not belong together. Use the tokenizer saved with the model.")
    disc.electra_source = model_source(source)  # what fine-tuning's rows record it as (`finetuning.sweep.run_sweep`)
    # the tokenizer saved with it, whose tokens its ids mean, which fine-tuning must be given: its identity, and a copy
    # for a refusal to say what another's does otherwise (`finetuning.loading.tokenizer_mismatch`)
    disc.electra_tokenizer, disc.electra_tokenizer_identity = copy.deepcopy(tokenizer), tokenizer_identity(tokenizer)
    return disc.to(device).eval(), tokenizer


def pretraining_progress(source: str | Path) -> str:
    """Where in its run a pretrain.py checkpoint was saved, for fine-tuning's model line and card ('pretrained to step 5
    of 20, a checkpoint of pretrain.py'), the step and steps it records: its name's percent may be of another total
    (an extended run) or renamed. A conversion's checkpoint (`save_init_checkpoint`, step 0) names the weights it
    holds; '' for a folder, a hub name or a file that is no pretraining checkpoint."""
    at = recorded(Path(source)) if Path(source).is_file() and saved_by_torch(source) else None
    if not at: return ''
    if at['source'] and not at['step']: return f"the weights of {at['source']}, a checkpoint of pretrain.py at step 0"
    of = f" of {at['steps']}" if at['steps'] else ''
    start = f" from {at['init_from']}" if at['init_from'] else ''
    return f"pretrained to step {at['step']}{of}{start}, a checkpoint of pretrain.py"


def model_source(source: str | Path) -> str:
    """Where a model was read from, as two names of it are compared: a path resolved (links followed), a hub name as it
    is. `load_discriminator` keeps it on the model (`electra_source`), so that a sweep given the model of one path
    and told (`model`) another is refused rather than recording one model's runs under the other's fingerprint."""
    return str(Path(source).resolve()) if Path(source).exists() else str(source)


def _hub_revision(name: str) -> str:
    "The commit of a hub model in the local cache (its files' content, as git names it), or '' when not cached."
    try: cached = try_to_load_from_cache(name, 'config.json')
    except ValueError: return ''  # not a hub name at all (huggingface_hub's HFValidationError)
    return Path(cached).parent.name if isinstance(cached, str) else ''


def model_files(source: str | Path) -> dict[str, str]:
    """The files `model_fingerprint` reads of a model, each by the SHA-256 of its bytes (hex): a `.pth` (or any file)
    under the name '', every file of a `save_pretrained` directory by its name (not hidden files, its model card or
    subfolders, which `from_pretrained` does not read); none for a hub name. A fine-tuning row records them, so that a
    model changed since can be said to have changed in which file (`finetuning.inputs.what_changed`)."""
    path = Path(source)
    if path.is_file(): files = {'': path}
    elif path.is_dir():
        files = {p.name: p for p in sorted(path.iterdir()) if p.is_file() and not p.name.startswith('.') and p.name != CARD}
    else: files = {}
    return {name: file_sha256(f).hex() for name, f in files.items()}


def model_fingerprint(source: str | Path, files: dict[str, str] | None = None) -> str:
    """What a model is, by content, not by where it lies: a hash of its files (`files`, default `model_files(source)`:
    names and bytes), or of a hub name and the commit of its files in the local cache (the name alone when not cached).
    Fine-tuning results are kept by it, so a model written again at the same path is fine-tuned again, and one whose
    card alone was edited is not."""
    path, digest = Path(source), hashlib.sha256()
    files = model_files(source) if files is None else files
    if not (path.is_file() or path.is_dir()): digest.update(f'hub:{source}@{_hub_revision(str(source))}'.encode())
    for name, hexdigest in files.items():
        digest.update(f'{name}\0'.encode())
        digest.update(bytes.fromhex(hexdigest))
    return digest.hexdigest()[:16]


VOCAB_PARAMS = ('embeddings.word_embeddings.weight', 'generator_lm_head.weight', 'generator_lm_head.bias')


def unpadded_copy(net: ElectraForMaskedLM | ElectraForPreTraining, vocab_size: int, state: dict | None = None):
    """`net` itself when its vocabulary has `vocab_size` rows and `state` is not given; otherwise a plain copy holding
    `state` (default: `net`'s own), with the padding rows (`pad_vocab_multiple`) cut off, so `save_pretrained` writes
    what a model of the tokenizer's size holds."""
    if net.config.vocab_size == vocab_size and state is None: return net
    config = copy.deepcopy(net.config)
    config.vocab_size = vocab_size
    out = type(net)(config)
    state = net.state_dict() if state is None else state
    out.load_state_dict({k: v[:vocab_size] if k.endswith(VOCAB_PARAMS) else v for k, v in state.items()})
    return out.to(net.device)


def discriminator_state(model_state: dict[str, torch.Tensor], tie_weights: str) -> dict[str, torch.Tensor]:
    """The plain `ElectraForPreTraining` weights in a pretraining model's `state_dict`: its `discriminator.` entries,
    with the tables of gradient-disentangled sharing ('gdes') made whole, the generator's + the residual."""
    state = {k[len('discriminator.'):]: v for k, v in model_state.items() if k.startswith('discriminator.')}
    if tie_weights == 'gdes':
        for name in EMBEDDING_TABLES:
            key = f'electra.embeddings.{name}.weight'
            state[key] = model_state[f'generator.{key}'] + state[key]
    return state
