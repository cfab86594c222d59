"""Generator + discriminator as HF `ElectraForMaskedLM` and `ElectraForPreTraining`, tied as in the paper (section 3.2).

The two networks stay plain transformers models, so each is exported with `save_pretrained` and loaded back with
`from_pretrained` unchanged. `ElectraPretrainingModel` wires one replaced-token-detection step:
masked input -> generator (vocab projection at the masked positions only) -> Gumbel sample -> discriminator.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

from electra.objective.masking import write_at_positions
from electra.objective.sampling import sample_tokens

if TYPE_CHECKING:
    from electra.config.pretrain import PretrainConfig

__all__ = ['discriminator_config', 'generator_config', 'padded_vocab_size', 'unpadded_copy', 'ElectraPretrainingModel',
           'official_init_', 'build_pretraining_model']


def padded_vocab_size(vocab_size: int, multiple: int) -> int:
    "`vocab_size` rounded up to a multiple of `multiple` (0: unchanged), e.g. 30522 -> 30528 for 64."
    return -(-vocab_size // multiple) * multiple if multiple > 0 else vocab_size


VOCAB_PARAMS = ('embeddings.word_embeddings.weight', 'generator_lm_head.weight', 'generator_lm_head.bias')


def unpadded_copy(net: ElectraForMaskedLM | ElectraForPreTraining, vocab_size: int):
    """`net` itself when its vocabulary has `vocab_size` rows; otherwise a copy with the padding rows
    (`pad_vocab_multiple`) cut off, so `save_pretrained` writes what a model of the tokenizer's size holds."""
    if net.config.vocab_size == vocab_size: return net
    config = copy.deepcopy(net.config)
    config.vocab_size = vocab_size
    out = type(net)(config)
    state = {k: v[:vocab_size] if k.endswith(VOCAB_PARAMS) else v for k, v in net.state_dict().items()}
    out.load_state_dict(state)
    return out.to(net.device)


def sdpa_mask(net, attention_mask: torch.Tensor) -> torch.Tensor:
    """The [B, L] padding mask as the [B, 1, 1, L] boolean mask SDPA broadcasts over heads and queries: the same mask
    transformers builds, but without its `padding_mask.all()` test, a device-to-host sync per forward."""
    if attention_mask.dim() != 2 or net.config._attn_implementation != 'sdpa': return attention_mask
    return attention_mask.bool()[:, None, None, :]


def _electra_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int, hidden: int, heads: int,
                    ffn: int) -> ElectraConfig:
    return ElectraConfig(
        vocab_size=vocab_size, embedding_size=cfg.embedding_size, hidden_size=hidden, num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=heads, intermediate_size=ffn, hidden_act='gelu', hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.dropout, max_position_embeddings=cfg.max_position_embeddings,
        type_vocab_size=2, pad_token_id=pad_token_id, attn_implementation='sdpa')


def discriminator_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int) -> ElectraConfig:
    return _electra_config(cfg, vocab_size, pad_token_id, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size)


def generator_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int) -> ElectraConfig:
    """The discriminator with its hidden size scaled by `generator_size`, FFN 4 x that and heads max(1, hidden // 64),
    same layers: google-research/electra run_pretraining.py `get_generator_config` (the presets' FFN is 4 x hidden,
    so scaling it gives the same)."""
    if cfg.generator_size == 1.0:  # a full-size generator keeps the discriminator's exact shape (small++)
        return discriminator_config(cfg, vocab_size, pad_token_id)
    hidden = round(cfg.hidden_size * cfg.generator_size)
    return _electra_config(cfg, vocab_size, pad_token_id, hidden, max(1, hidden // 64), 4 * hidden)


class ElectraPretrainingModel(nn.Module):
    "Generator and discriminator trained jointly by replaced-token detection."

    def __init__(self, generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining, tie_weights: str = 'embeddings',
                 temperature: float = 1.0, disallow_correct: bool = False, uniform_generator: bool = False,
                 vocab_size: int | None = None):
        super().__init__()
        self.generator, self.discriminator = generator, discriminator
        self.tie_weights, self.temperature = tie_weights, temperature
        self.disallow_correct, self.uniform_generator = disallow_correct, uniform_generator
        self.pad_token_id = discriminator.config.pad_token_id
        self.rng: torch.Generator | None = None  # set by `MaskingCallback`, so sampling is seeded and resumable
        # `vocab_size`: the tokenizer's; word-embedding rows past it are padding (`pad_vocab_multiple`): their logits
        # are -inf, so they are never predicted or sampled and the loss equals the unpadded model's.
        n_rows = generator.config.vocab_size
        self.vocab_size = n_rows if vocab_size is None else vocab_size
        if not 0 < self.vocab_size <= n_rows: raise ValueError(f'vocab_size {vocab_size} must be in [1, {n_rows}]')
        self.register_buffer('padded_ids', torch.arange(n_rows) >= self.vocab_size, persistent=False)
        if tie_weights == 'all':
            # The paper's "all weights tied": one encoder; only the two heads differ (same-size generator).
            generator.electra = discriminator.electra
        elif tie_weights == 'embeddings':
            # One embedding module: word, position and token-type embeddings AND their LayerNorm (official
            # `tie_embeddings`); `embeddings_project` stays per network.
            generator.electra.embeddings = discriminator.electra.embeddings
        elif tie_weights != 'none':
            raise ValueError(f"tie_weights must be 'none', 'embeddings' or 'all', got {tie_weights!r}")
        # The generator's output projection is its input word-embedding matrix (plus its own bias).
        generator.generator_lm_head.weight = generator.electra.embeddings.word_embeddings.weight

    def generator_logits(self, input_ids, attention_mask, token_type_ids, positions) -> torch.Tensor:
        "MLM logits [B, P, V] at `positions` [B, P] only: the vocab projection is ~15% of its full-length cost."
        hidden = self.generator.electra(input_ids, attention_mask=sdpa_mask(self.generator, attention_mask),
                                        token_type_ids=token_type_ids).last_hidden_state     # [B, L, Hg]
        hidden = hidden.gather(1, positions[..., None].expand(-1, -1, hidden.size(-1)))       # [B, P, Hg]
        logits = self.generator.generator_lm_head(self.generator.generator_predictions(hidden))  # [B, P, V]
        if self.vocab_size < logits.size(-1): logits = logits.masked_fill(self.padded_ids, float('-inf'))
        return logits

    def noise_shape(self, positions: torch.Tensor) -> tuple[int, int, int]:
        "Shape [B, P, V rows] of the sampling noise for masked `positions` [B, P]."
        return (*positions.shape, self.generator.config.vocab_size)

    def forward(self, input_ids, token_type_ids, positions, labels, noise_draws=None) -> dict[str, torch.Tensor]:
        """`input_ids` [B, L] masked input; `positions`, `labels` [B, P] from `mask_tokens`; `noise_draws` [B, P, V rows]
        the U(0, 1) draws of the Gumbel noise, or None to draw them here from `self.rng`. `MaskingCallback` draws them
        with the masks, so a compiled forward holds no random generator (a generator breaks the graph in pieces).
        Returns the generator logits [B, P, V], the discriminator logits [B, L], `is_replaced` [B, L] (bool)
        and `attention_mask` [B, L] (bool, real tokens)."""
        attention_mask = input_ids != self.pad_token_id
        gen_logits = self.generator_logits(input_ids, attention_mask, token_type_ids, positions)
        sampled = sample_tokens(gen_logits.detach(), labels, self.temperature, self.disallow_correct,
                                self.uniform_generator, self.rng, noise_draws)                         # [B, P]
        chosen = labels >= 0                                                                       # [B, P]
        # The samples written at the chosen positions; a position chosen twice ('with_replacement' masking) gets the
        # floor of the mean of its samples, as the official `scatter_update` computes it. A token equal to the
        # original there counts as original.
        disc_ids = write_at_positions(input_ids, positions, sampled, chosen)                       # [B, L]
        original = write_at_positions(input_ids, positions, labels, chosen)   # both hold input_ids where nothing is written
        is_replaced = disc_ids != original
        disc_logits = self.discriminator(disc_ids, attention_mask=sdpa_mask(self.discriminator, attention_mask),
                                         token_type_ids=token_type_ids).logits
        return {'gen_logits': gen_logits, 'disc_logits': disc_logits, 'is_replaced': is_replaced,
                'attention_mask': attention_mask, 'sampled': sampled}


@torch.no_grad()
def official_init_(model: ElectraPretrainingModel) -> ElectraPretrainingModel:
    """Re-initialise as the official code does (google-research/electra model/modeling.py `create_initializer`,
    run_pretraining.py): every dense kernel and embedding table truncated normal(0, 0.02) cut at 2 std (TF1's
    `truncated_normal_initializer`), biases zero, LayerNorm 1 and 0; but `embeddings_project` and the
    discriminator's output layer are plain `tf.layers.dense`, whose default kernel is glorot (xavier) uniform.
    transformers' own init (`init: hf`) is normal(0, 0.02) everywhere with a zeroed [PAD] embedding."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(module.weight, std=0.02, a=-0.04, b=0.04)
        if isinstance(module, nn.Linear) and module.bias is not None: nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm): nn.init.ones_(module.weight); nn.init.zeros_(module.bias)
    glorot = [model.discriminator.discriminator_predictions.dense_prediction.weight]
    glorot += [net.electra.embeddings_project.weight for net in (model.generator, model.discriminator)
               if hasattr(net.electra, 'embeddings_project')]
    for w in glorot: nn.init.xavier_uniform_(w)
    model.generator.generator_lm_head.bias.zero_()
    return model


def build_pretraining_model(cfg: PretrainConfig, vocab_size: int, pad_token_id: int) -> ElectraPretrainingModel:
    """The generator/discriminator pair of `cfg`'s size, freshly initialised (`cfg.init`: the official code's
    initialisers, `official_init_`, or transformers' own); with `cfg.pad_vocab_multiple` the embedding matrix has
    `padded_vocab_size(vocab_size, multiple)` rows."""
    rows = padded_vocab_size(vocab_size, cfg.pad_vocab_multiple)
    generator = ElectraForMaskedLM(generator_config(cfg, rows, pad_token_id))
    discriminator = ElectraForPreTraining(discriminator_config(cfg, rows, pad_token_id))
    model = ElectraPretrainingModel(generator, discriminator, cfg.tie_weights, cfg.temperature,
                                    cfg.disallow_correct, cfg.uniform_generator, vocab_size=vocab_size)
    return official_init_(model) if cfg.init == 'official' else model
