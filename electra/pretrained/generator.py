"""The existing masked language model that a run whose objective's generator is frozen samples its replacements from
(Fast-ELECTRA, Dong et al., ICLR 2024): never trained, read from the hub or a local `save_pretrained` directory as `load_discriminator` reads a
discriminator (electra/pretrained/export.py), and checked against the run's tokenizer and length."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, PreTrainedTokenizerBase

from electra.config.errors import ConfigError
from electra.config.pretrain import PretrainConfig
from electra.data.tokenizer import SavedTokenizer, has_tokenizer_files, vocabulary_mismatch
from electra.objective.model import FROZEN_GENERATORS
from electra.pretrained.export import load_saved

__all__ = ['FrozenGenerator', 'load_generator', 'generator_net_config', 'check_generator']

GENERATOR_LOCAL = 'a save_pretrained directory of the masked LM and its tokenizer (e.g. a run\'s exported generator/)'


@dataclass
class FrozenGenerator:
    "The existing masked LM a run of a frozen generator samples from, never trained, and its tokenizer."
    net: nn.Module
    tokenizer: PreTrainedTokenizerBase
    source: str


def generator_net_config(source: str):
    "The transformers config of the masked LM `generator` names (its sizes, for the FLOPs of a comparison's plan)."
    return load_saved(source, 'generator', GENERATOR_LOCAL, (AutoConfig, 'generator'))[0]


def load_generator(source: str) -> FrozenGenerator:
    """The masked LM `generator` names, a hub name or a local `save_pretrained` directory holding an
    `ElectraForMaskedLM` or `BertForMaskedLM` and its tokenizer, refused in one line otherwise."""
    if Path(source).is_dir() and not has_tokenizer_files(Path(source)):
        raise ConfigError(f"generator: {source} has no tokenizer files (neither tokenizer.json nor vocab.txt); without "
                          "them its ids mean nothing. Save its tokenizer beside it (save_pretrained writes both).")
    def holds(saved_as: list[str], loaded: str = '') -> None:  # else a fresh random head
        if not any(c.__name__ in saved_as and loaded in ('', c.__name__) for c in FROZEN_GENERATORS):
            raise ConfigError(f"generator: {source} holds a {' / '.join(saved_as)}, not one of "
                              f"{', '.join(c.__name__ for c in FROZEN_GENERATORS)}: give a masked LM such as "
                              "google/electra-small-generator or bert-base-uncased.")
    net, tokenizer = load_saved(source, 'generator', GENERATOR_LOCAL, (AutoModelForMaskedLM, 'generator'),
                                (SavedTokenizer, 'tokenizer of'), holds=holds)
    holds(getattr(net.config, 'architectures', None) or [type(net).__name__], type(net).__name__)
    return FrozenGenerator(net, tokenizer, source)


def check_generator(cfg: PretrainConfig, frozen: FrozenGenerator, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse a frozen generator whose vocabulary is not the run's tokenizer's (token by token), whose weights do not
    have one row per token, whose positions are fewer than `max_length`, or that reads one token type."""
    if differs := vocabulary_mismatch(frozen.tokenizer, tokenizer, "the run's tokenizer's"):
        raise ConfigError(f"generator: {frozen.source}'s vocabulary {differs}: its samples would be other words. "
                          "Leave --tokenizer empty, to tokenize with the generator's.")
    rows, positions = frozen.net.config.vocab_size, frozen.net.config.max_position_embeddings
    if rows != len(tokenizer):
        raise ConfigError(f"generator: {frozen.source} has {rows} vocabulary rows for {len(tokenizer)} tokens of its "
                          "tokenizer: they do not belong together. Save the model and its tokenizer together.")
    if positions < cfg.max_length:
        raise ConfigError(f"generator: {frozen.source} reads at most {positions} tokens, fewer than max_length "
                          f"{cfg.max_length}: set --max_length {positions} or less.")
    if frozen.net.config.type_vocab_size < 2:  # the examples are the official [CLS] A [SEP] B [SEP], B of type 1
        raise ConfigError(f"generator: {frozen.source} has one token type (type_vocab_size 1 in its config), but "
                          "every example is a sentence pair, segment B token type 1: give a masked LM with "
                          "type_vocab_size 2 (as google/electra-*-generator and bert-base-uncased have).")
