"""Continued pretraining: a run that starts from weights that exist (`init_from`) instead of a fresh initialisation:
Google's released generator and discriminator on the hub, a converted official TensorFlow checkpoint
(`python -m electra.convert tf`), a run exported by `pretrain.py`, or one of its `.pth` checkpoints.

The weights are loaded into the model the run's config describes, so the config must have their sizes (a mismatch
is refused, naming each differing key); the tokenizer is the source's (a different `tokenizer` is refused); the
embedding tying of `tie_weights` is re-established and checked against the weights. The optimizer state and the
step start fresh: the run's warm-up and decay apply from step 0, as in the official code, which restores only
the model variables from `init_checkpoint` (google-research/electra, run_pretraining.py `model_fn_builder`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from transformers import ElectraForMaskedLM, ElectraForPreTraining, PreTrainedTokenizerBase

from electra.config.errors import ConfigError
from electra.config.objectives import OBJECTIVES
from electra.config.pretrain import PretrainConfig, saved_config
from electra.config.values import config_from_dict, config_to_dict
from electra.config.version import __version__
from electra.data.tokenizer import (SavedTokenizer, applied_case, has_tokenizer_files, load_tokenizer,
                                    tokenizer_difference, tokenizer_from_state, tokenizer_state, vocabulary_mismatch)
from electra.pretrained.export import load_saved
from electra.objective.model import ElectraGeneratorDiscriminator, discriminator_config, generator_config
from electra.runtime.files import atomic_save, saved_by_torch
from electra.training.checkpoint import FORMAT, load_checkpoint, state_checksum

__all__ = ['InitWeights', 'init_sources', 'load_init', 'check_init_config', 'init_model_', 'init_tokenizer',
           'shared_weights', 'save_init_checkpoint']

# Every field of transformers' ElectraConfig, by what a run continuing from weights does with it
# (tests/pretraining/test_init_from.py checks that none is left out).
# The sizes the run's config sets, as HF names them: a mismatch is refused with the flags that fit.
SIZE_KEYS = ('embedding_size', 'hidden_size', 'num_hidden_layers', 'num_attention_heads', 'intermediate_size',
             'max_position_embeddings')
# What no key of the run's config sets: its networks have two token types, GELU, LayerNorm epsilon 1e-12 and no
# decoder's attention, as the official code's (objective/model.py `_electra_config`; google-research/electra
# model/modeling.py `BertConfig`): weights of other values would be trained and exported as another function, refused.
FIXED_KEYS = ('type_vocab_size', 'hidden_act', 'layer_norm_eps', 'is_decoder', 'add_cross_attention')
# The run's own: the tokenizer's (vocab_size, checked against the rows; pad_token_id), its `dropout`, its tying
# (checked against the weights), its initialisation (padded rows only); and what pretraining's networks never read
# (fine-tuning's heads: summary_*, classifier_dropout; generation; a model's outputs and metadata).
RUN_OWN_KEYS = ('vocab_size', 'pad_token_id', 'hidden_dropout_prob', 'attention_probs_dropout_prob',
                'tie_word_embeddings', 'initializer_range', 'summary_type', 'summary_use_proj', 'summary_activation',
                'summary_last_dropout', 'classifier_dropout', 'use_cache', 'bos_token_id', 'eos_token_id',
                'is_encoder_decoder', 'chunk_size_feed_forward', 'output_hidden_states', 'output_attentions',
                'return_dict', 'dtype', 'id2label', 'label2id', 'problem_type', 'architectures', 'transformers_version',
                '_name_or_path', 'model_type')


@dataclass
class InitWeights:
    "The networks and tokenizer a run starts from, and where they came from."
    generator: ElectraForMaskedLM
    discriminator: ElectraForPreTraining
    tokenizer: PreTrainedTokenizerBase
    source: str


def init_sources(source: str) -> tuple[str, str] | Path:
    """Where `init_from` points: a `.pth` checkpoint, or the (generator, discriminator) pair: `DIR` holding
    `generator/` and `discriminator/` (an export, a conversion), `GEN,DISC`, or a hub name ending in
    `-discriminator` or `-generator` (the other named alike, as Google's releases are)."""
    if Path(source).is_file():  # by content, not name: a folder named x.pth is an export, a checkpoint may be named x
        if not saved_by_torch(source):
            raise ConfigError(f"init_from: {source} is a file but not a checkpoint of pretrain.py (torch.save writes a "
                              f"zip archive): give {INIT_LOCAL}, or a hub name.")
        return Path(source)
    if source.endswith('.pth') and not Path(source).exists():
        raise ConfigError(f"init_from: {source}: no such checkpoint.")
    if ',' in source:
        gen, disc = (s.strip() for s in source.split(',', 1))
        return gen, disc
    if Path(source).is_dir():
        pair = Path(source) / 'generator', Path(source) / 'discriminator'
        if not all(p.is_dir() for p in pair):
            raise ConfigError(f"init_from: {source} has no generator/ and discriminator/ folders. Give a run's export "
                              f"directory (checkpoints/pretrain/<run>_<seed>), the output of `python -m electra.convert "
                              f"tf`, a pretrain.py .pth, or GENERATOR,DISCRIMINATOR.")
        return str(pair[0]), str(pair[1])
    for own, other in (('-discriminator', '-generator'), ('-generator', '-discriminator')):
        if source.endswith(own):
            pair = source[:-len(own)] + '-generator', source[:-len(own)] + '-discriminator'
            return pair
    raise ConfigError(f"init_from: {source!r} is neither a .pth, a directory with generator/ and discriminator/, a "
                      f"GENERATOR,DISCRIMINATOR pair nor a hub name ending in -discriminator or -generator.")


INIT_LOCAL = ('a directory with generator/ and discriminator/ save_pretrained folders, GENERATOR_DIR,DISCRIMINATOR_DIR, '
              'the output of `python -m electra.convert tf`, or a pretrain.py .pth')


def _from_checkpoint(path: Path) -> InitWeights:
    "The networks of one of `pretrain.py`'s checkpoints, built from the config it was written with."
    ckpt = load_checkpoint(path)
    tokenizer = tokenizer_from_state(ckpt['tokenizer'])
    cfg = saved_config(ckpt['config'], str(path))
    if not OBJECTIVES[cfg.objective].exports_generator or cfg.uniform_generator:  # no masked LM of its own to continue
        what = f'is the existing {cfg.generator}' if cfg.generator else 'is not a masked LM it trained'
        raise ConfigError(f"init_from: {path} is a {cfg.objective} run's{' (uniform_generator)' * cfg.uniform_generator}"
                          f", whose generator {what}: continuing from it is not supported. Fine-tune its "
                          "discriminator, or start a new run.")
    rows = ckpt['model']['discriminator.electra.embeddings.word_embeddings.weight'].shape[0]
    gen = ElectraForMaskedLM(generator_config(cfg, rows, tokenizer.pad_token_id))
    disc = ElectraForPreTraining(discriminator_config(cfg, rows, tokenizer.pad_token_id))
    for name, net in (('generator.', gen), ('discriminator.', disc)):
        net.load_state_dict({k[len(name):]: v for k, v in ckpt['model'].items() if k.startswith(name)})
    return InitWeights(gen, disc, tokenizer, str(path))


def load_init(source: str) -> InitWeights:
    """The generator, discriminator and tokenizer `init_from` names (see `init_sources`), the networks in eval mode
    whatever the source (as transformers' `from_pretrained` returns them; the run's model takes their weights and
    `Learner.fit` sets its mode)."""
    where = init_sources(source)
    if isinstance(where, Path):
        init = _from_checkpoint(where)
        init.generator.eval(), init.discriminator.eval()
        return init
    gen_src, disc_src = where
    for src in where:
        if Path(src).is_dir() and not has_tokenizer_files(Path(src)):
            raise ConfigError(f"init_from: {src} has no tokenizer files (neither tokenizer.json nor vocab.txt); "
                              "without them its ids mean nothing. Save its tokenizer beside it (save_pretrained writes "
                              "both).")
    (gen, gen_tokenizer), (disc, tokenizer) = [
        load_saved(src, 'init_from', INIT_LOCAL, (cls, role), (SavedTokenizer, 'tokenizer of'),
                   holds=_holds(src, cls.__name__, role))
        for src, cls, role in ((gen_src, ElectraForMaskedLM, 'generator'), (disc_src, ElectraForPreTraining, 'discriminator'))]
    # the run tokenizes with the discriminator's: a generator of another vocabulary would read other tokens' ids
    if differs := vocabulary_mismatch(gen_tokenizer, tokenizer, "the discriminator's tokenizer's"):
        raise ConfigError(f"init_from: {gen_src}'s vocabulary {differs}: it would read ids that mean other tokens to "
                          "it. Give a generator and a discriminator trained together (one tokenizer).")
    for net, src, role in ((gen, gen_src, 'generator'), (disc, disc_src, 'discriminator')):  # a hub name's, loaded
        _holds(src, type(net).__name__, role)(getattr(net.config, 'architectures', None) or [type(net).__name__])
    return InitWeights(gen, disc, tokenizer, source)


def _holds(src: str, cls: str, role: str) -> Callable[[list[str]], None]:
    "The check that `src`'s saved classes include `cls`: from_pretrained would give another class a fresh random head."
    def check(saved_as: list[str]) -> None:
        if cls not in saved_as:
            raise ConfigError(f"init_from: {src} holds a {' / '.join(saved_as)}, not an {cls}; give the {role} there.")
    return check


def _mismatches(cfg: PretrainConfig, init: InitWeights, keys: tuple[str, ...], said: str) -> list[str]:
    """Each of `keys` the run's config gives the networks that the weights do not have, `said` with `what` (the
    network), `k`, `mine` (the run's value) and `theirs` in it."""
    rows, pad = init.discriminator.config.vocab_size, init.tokenizer.pad_token_id
    out = []
    for what, mine, theirs in (('discriminator', discriminator_config(cfg, rows, pad), init.discriminator.config),
                               ('generator', generator_config(cfg, rows, pad), init.generator.config)):
        out += [said.format(what=what, k=k, mine=getattr(mine, k), theirs=getattr(theirs, k, None)) for k in keys
                if getattr(mine, k) != getattr(theirs, k, None)]
    return out


def check_init_config(cfg: PretrainConfig, init: InitWeights) -> None:
    """Refuse a run whose config does not fit the weights it starts from (their architecture, sizes, tying, tokenizer),
    naming what differs, before any data is built: an architecture no setting gives with no flags to try (a generator
    shape among them), sizes with the flags that fit. The generator's size follows `generator_size` (hidden and FFN)
    and its heads max(1, hidden // 64). A config that fits records the length the weights were pretrained at
    (`PretrainConfig.follow_init_length`): their position rows past the run's max_length were trained."""
    if fixed := _mismatches(cfg, init, FIXED_KEYS, '{what} {k}: {theirs} (this run: {mine})'):
        raise ConfigError(f"init_from: {init.source}: {'; '.join(fixed)}: no setting of this run gives these (it "
                          "builds the official architecture: two token types, GELU, LayerNorm epsilon 1e-12, an "
                          "encoder), so it cannot continue from these weights. Fine-tuning reads a model's config as "
                          "it is: fine-tune its discriminator (--model).")
    bad = _mismatches(cfg, init, SIZE_KEYS, '{what} {k}: config {mine}, weights {theirs}')
    if bad:
        fit = _fitting(cfg, init)
        if left := _unfittable(cfg, init, fit):
            raise ConfigError(f"init_from: {init.source}: {'; '.join(left)}: no setting of this run gives these (its "
                              "generator is its discriminator scaled by generator_size, the same layers, an FFN 4 x its "
                              "hidden size and max(1, hidden // 64) heads, as google-research/electra "
                              "run_pretraining.py get_generator_config), so it cannot continue from these weights. "
                              "Fine-tuning reads a model's config as it is: fine-tune its discriminator (--model).")
        hint = ' '.join(f'--{k} {v:g}' if isinstance(v, float) else f'--{k} {v}' for k, v in fit.items())
        raise ConfigError(f"init_from: {init.source} does not fit this run's config: {'; '.join(bad)}. Choose the "
                          f"preset of those weights (e.g. --config small for google/electra-small-*) or set: {hint}")
    _check_tying(init, cfg.tie_weights if _has_generator(cfg) else 'none')
    if len(init.tokenizer) > init.discriminator.config.vocab_size:
        raise ConfigError(f"init_from: {init.source}: its tokenizer has {len(init.tokenizer)} tokens, its weights "
                          f"{init.discriminator.config.vocab_size} rows: they do not belong together.")
    if cfg.tokenizer:
        given = load_tokenizer(cfg.tokenizer, cfg.lowercase, strip_accents=cfg.strip_accents)
        if differs := tokenizer_difference(given, init.tokenizer, "the weights' tokenizer"):
            raise ConfigError(f"tokenizer: {cfg.tokenizer} is not the tokenizer {init.source} was trained with: "
                              f"{differs}; a run that continues from weights tokenizes with theirs. Leave --tokenizer "
                              "empty.")
    cfg.follow_init_length(getattr(init.discriminator.config, 'pretraining_max_length', None), init.source)


def _unfittable(cfg: PretrainConfig, init: InitWeights, fit: dict) -> list[str]:
    "The sizes of `init` the run's config still does not give with the values `fit` set: no setting gives them."
    try: fitted = config_from_dict(PretrainConfig, fit, 'the sizes that fit', base=cfg)
    except ConfigError: return []  # (their flags are then offered, and the config's own check names what it refuses)
    return _mismatches(fitted, init, SIZE_KEYS,
                       '{what} {k}: {theirs} (with the sizes that fit the rest, this run builds {mine})')


def _has_generator(cfg: PretrainConfig) -> bool:
    "Whether the run builds a generator network, which takes the source's generator (not BERT, not the uniform one)."
    return OBJECTIVES[cfg.objective].exports_generator and not cfg.uniform_generator


def _fitting(cfg: PretrainConfig, init: InitWeights) -> dict[str, int | float | str]:
    """The config keys and values that fit the weights of `init`: their sizes, and what the checks that follow then
    ask too: a `max_length` within their position embeddings (`PretrainConfig.validate`), a `tie_weights` their
    tying holds and the objective allows ('all' only with a generator as large as the discriminator)."""
    d, g = init.discriminator.config, init.generator.config
    out = {k: getattr(d, k) for k in ('hidden_size', 'num_hidden_layers', 'num_attention_heads', 'intermediate_size',
                                      'embedding_size', 'max_position_embeddings')}
    out['generator_size'] = g.hidden_size / d.hidden_size
    if cfg.max_length > d.max_position_embeddings: out['max_length'] = d.max_position_embeddings
    if not _has_generator(cfg): return out
    allowed = [t for t in OBJECTIVES[cfg.objective].tie_weights if t != 'all' or out['generator_size'] == 1]
    if cfg.tie_weights not in allowed or not _tie_fits(init, cfg.tie_weights):
        out['tie_weights'] = next((t for t in (shared_weights(init), 'embeddings', 'none')
                                   if t in allowed and _tie_fits(init, t)), cfg.tie_weights)
    return out


def _max_diff(a: dict, b: dict, keys) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in keys)


def _same_weights(init: InitWeights, prefix: str) -> bool:
    "Whether the generator holds every discriminator weight under `prefix`, equal."
    gen, disc = init.generator.state_dict(), init.discriminator.state_dict()
    keys = [k for k in disc if k.startswith(prefix)]
    return all(k in gen and gen[k].shape == disc[k].shape for k in keys) and (not keys or _max_diff(gen, disc, keys) == 0)


def _tied_part(tie_weights: str) -> str:
    "The prefix of the weights `tie_weights` keeps one copy of for both networks ('all', 'embeddings')."
    return 'electra.' if tie_weights == 'all' else 'electra.embeddings.'


def _tie_fits(init: InitWeights, tie_weights: str) -> bool:
    "Whether the source holds the weights `tie_weights` shares equal in both networks: one tensor is kept for both."
    if tie_weights == 'none': return True
    if tie_weights == 'gdes': return False  # released weights do not hold the shared tables and the residual apart
    part = _tied_part(tie_weights)
    return not any(k.startswith(part) for k in init.discriminator.state_dict()) or _same_weights(init, part)


def _check_tying(init: InitWeights, tie_weights: str) -> None:
    "The weights `tie_weights` shares must be equal in the source: one tensor is kept for both networks."
    if tie_weights == 'gdes':
        raise ConfigError(f"init_from: {init.source}: tie_weights 'gdes' keeps the discriminator's embeddings as the "
                          "generator's plus a residual, which released weights do not hold apart. Continue with "
                          "--tie_weights embeddings or none.")
    part = _tied_part(tie_weights)
    if tie_weights == 'none' or not any(k.startswith(part) for k in init.discriminator.state_dict()): return
    if not _tie_fits(init, tie_weights):
        raise ConfigError(f"init_from: {init.source}: the generator's and the discriminator's {part[:-1]} weights "
                          f"differ, but tie_weights '{tie_weights}' keeps one copy for both. Set --tie_weights none to "
                          f"continue training them apart.")
    gen, words = init.generator.state_dict(), 'electra.embeddings.word_embeddings.weight'
    if _max_diff(gen, {words: gen['generator_lm_head.weight']}, [words]) > 0:
        raise ConfigError(f"init_from: {init.source}: the generator's output layer is not its word-embedding matrix, "
                          f"which this library ties (as the official code does).")


def init_model_(model: ElectraGeneratorDiscriminator, init: InitWeights) -> ElectraGeneratorDiscriminator:
    """Copy the weights of `init` into `model` (built from a config checked by `check_init_config`), re-establishing
    and checking its tying (a model without a generator network takes the discriminator's only); rows of a padded vocabulary (`pad_vocab_multiple`) past the source's keep their init."""
    _check_tying(init, model.tie_weights if model.generator is not None else 'none')
    for net, src in ((model.generator, init.generator), (model.discriminator, init.discriminator)):
        if net is None: continue  # BERT and the uniform generator: the discriminator alone
        own = net.state_dict()  # tensors sharing the parameters' storage: copy_ writes the model
        for k, v in src.state_dict().items():
            fits = k in own and v.shape[1:] == own[k].shape[1:] and len(v) <= len(own[k])  # (padded rows: more)
            if not fits: raise ConfigError(f"init_from: {init.source}: its weight {k} {tuple(v.shape)} has no place in "
                                           f"this run's model ({tuple(own[k].shape) if k in own else 'no such weight'}).")
            own[k][:len(v)].copy_(v)
    return model


def init_tokenizer(init: InitWeights | None, ckpt: dict | None) -> PreTrainedTokenizerBase:
    "The tokenizer of a run continuing from weights: the source's; when it resumes, the one its checkpoints carry."
    if init is not None: return init.tokenizer
    return tokenizer_from_state(ckpt['tokenizer'])


def shared_weights(init: InitWeights) -> str:
    "The `tie_weights` the pair was trained with, read off its weights: 'all', 'embeddings' or 'none'."
    return 'all' if _same_weights(init, 'electra.') else 'embeddings' if _same_weights(init, 'electra.embeddings.') \
        else 'none'


def save_init_checkpoint(init: InitWeights, path: str | Path) -> Path:
    """A `.pth` of the pair in `pretrain.py`'s checkpoint format, with a config of its sizes and its tying, at step 0
    with no optimizer state: `--init_from` starts from it, fine-tuning reads its discriminator."""
    import dataclasses

    d, g = init.discriminator.config, init.generator.config
    # the length its positions were pretrained at, where it says (a conversion's max_seq_length): read back from the
    # .pth, the discriminator's pretraining_max_length is theirs, not the default max_length
    length = getattr(d, 'pretraining_max_length', None) or PretrainConfig.max_length
    cfg = dataclasses.replace(PretrainConfig(), hidden_size=d.hidden_size, num_hidden_layers=d.num_hidden_layers,
                              num_attention_heads=d.num_attention_heads, intermediate_size=d.intermediate_size,
                              embedding_size=d.embedding_size, max_position_embeddings=d.max_position_embeddings,
                              max_length=min(length, d.max_position_embeddings),
                              generator_size=g.hidden_size / d.hidden_size, tie_weights=shared_weights(init),
                              **applied_case(init.tokenizer))  # what its tokenizer does, as a run records it
    model = ElectraGeneratorDiscriminator(init.generator, init.discriminator, cfg.tie_weights)
    state = {'format': FORMAT, 'electra_version': __version__, 'step': 0, 'config': config_to_dict(cfg),
             'tokenizer': tokenizer_state(init.tokenizer), 'model': model.state_dict(), 'source': init.source}
    state['checksum'] = state_checksum(state)
    return atomic_save(state, Path(path))
