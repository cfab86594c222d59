"""Generator + discriminator as HF `ElectraForMaskedLM` and `ElectraForPreTraining`, tied as in the paper (section 3.2).

The two networks stay plain transformers models, so each is exported with `save_pretrained` and loaded back with
`from_pretrained` unchanged. `ElectraGeneratorDiscriminator` wires one replaced-token-detection step:
masked input -> generator (vocab projection at the masked positions only) -> Gumbel sample -> discriminator.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertForMaskedLM, ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining, ElectraModel
from transformers.models.electra.modeling_electra import ElectraGeneratorPredictions
from transformers.utils import ModelOutput

from electra.config.errors import ConfigError
from electra.config.objectives import OBJECTIVES
from electra.config.pretrain import generator_shape
from electra.objective.masking import MaskingSettings, candidates_mask, positions_mask, write_at_positions
from electra.objective.sampling import sample_tokens

if TYPE_CHECKING:
    from electra.config.pretrain import PretrainConfig

__all__ = ['past_pretraining', 'discriminator_config', 'generator_config', 'padded_vocab_size', 'ElectraGeneratorDiscriminator',
           'MaskedLMHead', 'DisentangledEmbedding', 'official_init_', 'build_pretraining_model',
           'TwoTowerClozeGenerator', 'electric_logits', 'cloze_log_prob', 'FROZEN_GENERATORS', 'mlm_head',
           'ElectraGeneratorDiscriminatorOutput', 'fp32', 'parameter_line']


@dataclass
class ElectraGeneratorDiscriminatorOutput(ModelOutput):
    """What `ElectraGeneratorDiscriminator.forward` computes (transformers' `ModelOutput`: fields by name, None where
    the objective or the stage has no such tensor). B rows, L positions, P chosen slots, V vocabulary rows."""
    attention_mask: torch.Tensor | None = None  # [B, L] bool, the real tokens
    gen_logits: torch.Tensor | None = None   # the trained generator's logits: [B, P, V] at the chosen slots, or the
                                             # two-tower cloze model's [B, L, V] at every position; None when no
                                             # generator trains (none, uniform, frozen, two-stage's second stage)
    gen_targets: torch.Tensor | None = None  # what `gen_logits` predict: the labels [B, P], or the cloze targets [B, L]
                                             # (the input's ids where masking may choose, -100 elsewhere)
    gen_preds: torch.Tensor | None = None    # [B, P] its most probable token at the chosen slots (official
                                             # `masked_lm_preds`, which `masked_lm_accuracy` counts); a frozen
                                             # generator's too
    sampled: torch.Tensor | None = None      # [B, P] the samples written at the chosen slots
    is_replaced: torch.Tensor | None = None  # [B, L] bool, the tokens the discriminator is to call fake
    disc_mask: torch.Tensor | None = None    # where the discriminator's loss is taken: [B, L] or [B, P] bool; None when
                                             # it did not run (two-stage's first stage)
    disc_logits: torch.Tensor | None = None  # [B, L] replaced-token detection's logits (head 'rtd')
    mlm_logits: torch.Tensor | None = None   # the discriminator's MLM head (heads 'mlm', 'copy'): [B, P, V] or [B, L, V]
    mlm_targets: torch.Tensor | None = None  # their targets: the labels [B, P] (-100 unused), or the original ids [B, L]
    copy_logits: torch.Tensor | None = None  # [B, L] the copy gate's logits (head 'copy')
    mlm_inputs: torch.Tensor | None = None   # [B, L] the ids the discriminator read (head 'copy': what it may copy)


def fp32(pred: ElectraGeneratorDiscriminatorOutput) -> ElectraGeneratorDiscriminatorOutput:
    "`pred` with its floating-point tensors in float32 (the losses read fp32 under autocast)."
    return type(pred)(**{k: v.float() if v.is_floating_point() else v for k, v in pred.items()})


def padded_vocab_size(vocab_size: int, multiple: int) -> int:
    "`vocab_size` rounded up to a multiple of `multiple` (0: unchanged), e.g. 30522 -> 30528 for 64."
    return -(-vocab_size // multiple) * multiple if multiple > 0 else vocab_size


FROZEN_GENERATORS = (ElectraForMaskedLM, BertForMaskedLM)  # the masked LMs a frozen generator (kind 'frozen') may be


def mlm_head(net: ElectraForMaskedLM | BertForMaskedLM):
    """The MLM head of a masked LM, hidden states [..., H] -> logits [..., V]: ELECTRA's generator's (dense H -> E, GELU,
    LayerNorm, projection E -> V) or BERT's `cls` (dense H -> H, GELU, LayerNorm, decoder H -> V)."""
    if isinstance(net, ElectraForMaskedLM): return lambda hidden: net.generator_lm_head(net.generator_predictions(hidden))
    if isinstance(net, BertForMaskedLM): return net.cls
    raise TypeError(f'a generator must be one of {[c.__name__ for c in FROZEN_GENERATORS]}, got {type(net).__name__}')


def sdpa_mask(net, attention_mask: torch.Tensor) -> torch.Tensor:
    """The [B, L] padding mask as the [B, 1, 1, L] boolean mask SDPA broadcasts over heads and queries: the same mask
    transformers builds, but without its `padding_mask.all()` test, a device-to-host sync per forward."""
    if attention_mask.dim() != 2 or net.config._attn_implementation != 'sdpa': return attention_mask
    return attention_mask.bool()[:, None, None, :]


def _electra_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int, hidden: int, heads: int,
                    ffn: int) -> ElectraConfig:
    trained = cfg.trained_length()
    return ElectraConfig(
        vocab_size=vocab_size, embedding_size=cfg.embedding_size, hidden_size=hidden, num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=heads, intermediate_size=ffn, hidden_act='gelu', hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.dropout, max_position_embeddings=cfg.max_position_embeddings,
        type_vocab_size=2, pad_token_id=pad_token_id, attn_implementation='sdpa',
        # the length its positions are pretrained at (the weights it continues included): rows past it stay at their
        # initial values (fine-tuning says so); unknown (weights that do not say), not written
        **({} if trained is None else {'pretraining_max_length': trained}))


def past_pretraining(config, length: int, model: str) -> str:
    """'' when inputs of `length` tokens lie within the length the model of `config` was pretrained at (or it is not
    recorded); else why that matters, the clause that fine-tuning's warning (a max_length past it) and the Explore
    views' (a text past it) share: 'past the N tokens <model> was pretrained at: positions N to length-1 were never
    trained'. The length is `pretraining_max_length` in its config, which `_electra_config` writes (the run's
    `PretrainConfig.trained_length`) and the TF conversion reads from the official run's max_seq_length."""
    trained = getattr(config, 'pretraining_max_length', None)
    if not trained or length <= trained: return ''
    return f"past the {trained} tokens {model} was pretrained at: positions {trained} to {length - 1} were never trained"


def discriminator_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int) -> ElectraConfig:
    """The discriminator's config, recording the objective it is trained with (`electra_objective`, kept in every
    export's and checkpoint's config.json): what its replaced-token-detection head gives read alone depends on it
    (`Objective.head_alone`), which a reader of an exported model otherwise cannot tell."""
    config = _electra_config(cfg, vocab_size, pad_token_id, cfg.hidden_size, cfg.num_attention_heads,
                             cfg.intermediate_size)
    config.electra_objective = cfg.objective
    return config


def generator_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int) -> ElectraConfig:
    """The discriminator with its hidden size scaled by `generator_size`, FFN 4 x that and heads max(1, hidden // 64),
    same layers: google-research/electra run_pretraining.py `get_generator_config` (the presets' FFN is 4 x hidden,
    so scaling it gives the same)."""
    if cfg.generator_size == 1.0:  # a full-size generator keeps the discriminator's exact shape (small++)
        return _electra_config(cfg, vocab_size, pad_token_id, cfg.hidden_size, cfg.num_attention_heads,
                               cfg.intermediate_size)
    hidden, heads = generator_shape(cfg.hidden_size, cfg.num_attention_heads, cfg.generator_size)
    return _electra_config(cfg, vocab_size, pad_token_id, hidden, heads, 4 * hidden)


class MaskedLMHead(nn.Module):
    """The discriminator's MLM head of the objectives whose loss head predicts tokens ('mlm', 'copy'): transformers'
    `ElectraGeneratorPredictions` (dense H -> E, GELU, LayerNorm) and a vocabulary projection tied to the network's word
    embeddings, as the generator's head and BERT's."""

    def __init__(self, net: ElectraForPreTraining):
        super().__init__()
        self.predictions = ElectraGeneratorPredictions(net.config)
        self.projection = nn.Linear(net.config.embedding_size, net.config.vocab_size)
        self.projection.weight = net.electra.embeddings.word_embeddings.weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # [B, n, H] -> [B, n, V rows]
        return self.projection(self.predictions(hidden))


class DisentangledEmbedding(nn.Embedding):
    """DeBERTaV3's gradient-disentangled embedding sharing (He et al., 2021, section 3.2): the table in use is the shared
    one without its gradient plus this module's own residual `weight` (zero at the start), so the discriminator's loss
    trains the residual only and the shared table learns from the generator's MLM loss alone."""

    def __init__(self, shared: nn.Embedding):
        super().__init__(shared.num_embeddings, shared.embedding_dim, padding_idx=shared.padding_idx)
        self.shared = [shared]  # in a list: not a submodule, so the shared table is saved once, under the generator

    def reset_parameters(self) -> None: nn.init.zeros_(self.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.shared[0].weight.detach() + self.weight, self.padding_idx)


class TwoTowerClozeGenerator(nn.Module):
    """Electric's generator (Clark et al., 2020; official run_pretraining.py `TwoTowerClozeTransformer` and
    `_get_cloze_outputs`): two transformers of the generator's size over the UNmasked input, `ltr` attending to the
    left only and `rtl` to the right only (modeling.py `BertModel(ltr=True / rtl=True)`); the representation of
    position i is [ltr's at i - 1, rtl's at i + 1], so it never sees its own token, and the MLM head (`cloze_predictions`:
    dense 2 Hg -> E, GELU, LayerNorm, then the word-embedding table of `ltr` and a bias) gives the cloze logits of every
    position. Neither tower nor the whole has a transformers class: the export writes its own files (`cloze/`,
    pretrained/export.py `save_cloze`), and the pretraining checkpoint holds it with the rest. `config`: a tower's."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.config = config
        self.ltr, self.rtl = ElectraModel(config), ElectraModel(config)
        self.cloze_predictions = ElectraGeneratorPredictions(ElectraConfig(**{**config.to_dict(),
                                                                             'hidden_size': 2 * config.hidden_size}))
        self.cloze_predictions.apply(self.ltr._init_weights)
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        "Cloze logits [B, L, V rows] of `input_ids` [B, L] (the unmasked input), `attention_mask` [B, L] bool."
        L = input_ids.size(1)
        causal = torch.ones(L, L, dtype=torch.bool, device=input_ids.device).tril()                 # [L, L]: j <= i
        out = []
        for tower, allowed in ((self.ltr, causal), (self.rtl, causal.T)):
            # The official additive mask, -10000 on every key a query may not see (modeling.py `attention_layer`):
            # in a padded row the rtl tower's padding queries see no key at all and so attend, as there, to the
            # whole row with their unmasked scores; a boolean mask would give them NaN.
            keep = attention_mask[:, None, None, :] & allowed                                   # [B, 1, L, L]
            mask = (~keep).to(tower.embeddings.word_embeddings.weight.dtype) * -10000.0
            out.append(tower(input_ids, attention_mask=mask, token_type_ids=token_type_ids).last_hidden_state)
        # the official `roll(ltr, -1)` and `roll(rtl, 1)`: they wrap at the ends, so position 0 reads ltr's last
        # position and position L - 1 rtl's first (both outside the cloze loss, inside the discriminator's logits)
        hidden = torch.cat([out[0].roll(1, dims=1), out[1].roll(-1, dims=1)], -1)                  # [B, L, 2 Hg]
        table = self.ltr.embeddings.word_embeddings.weight                                          # [V rows, E]
        return F.linear(self.cloze_predictions(hidden), table, self.output_bias)


def cloze_log_prob(cloze_logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    "log q(x_i | context) [B, L]: the cloze model's log-probability of each token of `ids` [B, L], without its gradient."
    return cloze_logits.detach().float().log_softmax(-1).gather(-1, ids[..., None])[..., 0]


def electric_logits(disc_logits: torch.Tensor, cloze_logits: torch.Tensor, ids: torch.Tensor,
                    mask_prob: float) -> torch.Tensor:
    """Electric's discriminator logit [B, L] (official `_get_discriminator_output` with `electric_objective`): the
    head's logit + log q(x_i | context) (`cloze_log_prob`) + log(mask_prob / (1 - mask_prob)). Its sigmoid is then
    k q / (k q + (1 - k) exp(-E)) of noise-contrastive estimation, k = mask_prob: the probability that the token is
    noise, with the head's logit as the energy E(x)_i, exp(-E) the model's unnormalised p(x_i | context) (the paper,
    section 2: a low energy, a likely token)."""
    return disc_logits + cloze_log_prob(cloze_logits, ids) + math.log(mask_prob / (1 - mask_prob))


EMBEDDING_TABLES = ('word_embeddings', 'position_embeddings', 'token_type_embeddings')


def _tie(generator: ElectraForMaskedLM | TwoTowerClozeGenerator, discriminator: ElectraForPreTraining,
         tie_weights: str) -> None:
    if isinstance(generator, TwoTowerClozeGenerator):
        if tie_weights not in ('embeddings', 'none'):
            raise ValueError(f"the two-tower generator ties 'embeddings' or 'none', got {tie_weights!r}")
        if tie_weights == 'embeddings':  # both towers read the discriminator's embeddings (official `electra/embeddings`)
            generator.ltr.embeddings = generator.rtl.embeddings = discriminator.electra.embeddings
        return
    if tie_weights == 'all':
        # The paper's "all weights tied": one encoder; only the two heads differ (same-size generator).
        generator.electra = discriminator.electra
    elif tie_weights == 'embeddings':
        # One embedding module: word, position and token-type embeddings AND their LayerNorm (official
        # `tie_embeddings`); `embeddings_project` stays per network.
        generator.electra.embeddings = discriminator.electra.embeddings
    elif tie_weights == 'gdes':
        # the three tables disentangled; LayerNorm and `embeddings_project` stay per network, as in DeBERTaV3
        for name in EMBEDDING_TABLES:
            setattr(discriminator.electra.embeddings, name,
                    DisentangledEmbedding(getattr(generator.electra.embeddings, name)))
    elif tie_weights != 'none':
        raise ValueError(f"tie_weights must be 'none', 'embeddings', 'all' or 'gdes', got {tie_weights!r}")
    # The generator's output projection is its input word-embedding matrix (plus its own bias).
    generator.generator_lm_head.weight = generator.electra.embeddings.word_embeddings.weight


class ElectraGeneratorDiscriminator(nn.Module):
    """Generator and discriminator trained by replaced-token detection, or another objective (`objective`, the name of
    its row in config/objectives.py, held as `self.objective`; docs/objectives.md). `generator` is None for an objective
    without one (generator kind 'none', BERT) and for the uniform generator, whose replacements are drawn uniformly
    from the vocabulary (official `uniform_generator`: no network, no generator loss).
    `stage`: 0 joint training; with two-stage training 1 (the generator alone), then 2 (the discriminator alone, the
    generator frozen; the `PretrainingStep` callback switches)."""

    def __init__(self, generator: ElectraForMaskedLM | None, discriminator: ElectraForPreTraining,
                 tie_weights: str = 'embeddings', temperature: float = 1.0, disallow_correct: bool = False,
                 vocab_size: int | None = None, objective: str = 'electra', mask_token_id: int | None = None,
                 special_ids: tuple[int, ...] | None = None, mask_prob: float = 0.15):
        super().__init__()
        self.generator, self.discriminator = generator, discriminator
        self.tie_weights, self.temperature, self.disallow_correct = tie_weights, temperature, disallow_correct
        self.stage, self.mask_token_id = 0, mask_token_id
        self.objective = OBJECTIVES[objective]  # its row: what the objective changes of replaced-token detection
        self.pad_token_id = discriminator.config.pad_token_id
        self.rng: torch.Generator | None = None  # draws the noise of a forward given none (None: torch's own stream)
        # `vocab_size`: the tokenizer's; word-embedding rows past it are padding (`pad_vocab_multiple`): their logits
        # are -inf, so they are never predicted or sampled and the loss equals the unpadded model's.
        n_rows = discriminator.config.vocab_size
        self.vocab_size = n_rows if vocab_size is None else vocab_size
        if not 0 < self.vocab_size <= n_rows: raise ValueError(f'vocab_size {vocab_size} must be in [1, {n_rows}]')
        self.register_buffer('padded_ids', torch.arange(n_rows) >= self.vocab_size, persistent=False)
        if self.objective.generator == 'frozen':  # an existing model, never trained: no gradient, no optimizer state,
            generator.requires_grad_(False).eval()  # no dropout (`train`); it shares nothing, so nothing is tied
        elif generator is not None: _tie(generator, discriminator, tie_weights)
        self.mlm_head = MaskedLMHead(discriminator) if self.objective.mlm else None
        if self.objective.head == 'mlm':  # the RTD head has no part in the loss: no gradient, no update
            discriminator.discriminator_predictions.requires_grad_(False)
        if self.objective.no_mask_samples and mask_token_id is None:
            raise ValueError(f"objective '{objective}' never samples [MASK]: give the model its mask_token_id")
        # the two-tower generator's cloze loss skips these ids (official `get_candidates_mask`: [CLS], [SEP], [MASK])
        self.special_ids, self.mask_prob = special_ids, mask_prob
        if self.objective.generator == 'two_tower':
            if special_ids is None:
                raise ValueError(f"objective '{objective}' takes its cloze loss at the tokens masking may choose: give "
                                 "the model the masking's special_ids")
            self.register_buffer('special_id_tensor', torch.tensor(special_ids), persistent=False)

    @property
    def uniform_generator(self) -> bool:
        return self.generator is None and self.objective.samples

    def train(self, mode: bool = True):
        "As `nn.Module.train`, but a frozen generator (generator kind 'frozen') stays in eval mode: it only infers."
        super().train(mode)
        if self.objective.generator == 'frozen': self.generator.eval()
        return self

    def _vocab_logits(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.masked_fill(self.padded_ids, float('-inf')) if self.vocab_size < logits.size(-1) else logits

    def generator_logits(self, input_ids, attention_mask, token_type_ids, positions) -> torch.Tensor:
        """MLM logits [B, P, V rows] at `positions` [B, P] only: the vocab projection is ~15% of its full-length cost.
        A frozen generator's vocabulary may lack the discriminator's padding rows (`pad_vocab_multiple`): -inf there."""
        net = self.generator
        hidden = net.base_model(input_ids, attention_mask=sdpa_mask(net, attention_mask),
                                token_type_ids=token_type_ids).last_hidden_state             # [B, L, Hg]
        hidden = hidden.gather(1, positions[..., None].expand(-1, -1, hidden.size(-1)))       # [B, P, Hg]
        logits = mlm_head(net)(hidden)
        rows = self.padded_ids.numel()
        if logits.size(-1) < rows: logits = F.pad(logits, (0, rows - logits.size(-1)), value=float('-inf'))
        return self._vocab_logits(logits)

    def noise_shape(self, positions: torch.Tensor) -> tuple[int, int, int] | None:
        """Shape [B, P, V] of the sampling noise for masked `positions` [B, P], V the tokenizer's vocabulary (not the
        padded rows: their logits are -inf, and draws over them would move every later draw of the stream, so padding
        would change the masks and samples of the same weights); None when nothing is sampled."""
        if not self.objective.samples: return None
        return (*positions.shape, self.vocab_size)

    def forward(self, input_ids, token_type_ids, positions, labels, noise_draws=None,
                temperature: torch.Tensor | None = None) -> ElectraGeneratorDiscriminatorOutput:
        """`input_ids` [B, L] masked input; `positions`, `labels` [B, P] from `mask_tokens`; `noise_draws` [B, P, V rows]
        the U(0, 1) draws of the Gumbel noise, or counter draws that compute them here (objective/draws.py), or None to
        draw them here from `self.rng`. The training step draws them with the masks, or hands in counter draws, so a
        compiled forward holds no random generator (a generator breaks the graph in pieces).
        `temperature`: this step's sampling temperature (0-d, `TemperatureSchedule`), else the constant `self.temperature`.
        A frozen generator runs without gradient and gives no `gen_logits`: it has no loss, only its `gen_preds`."""
        attention_mask = input_ids != self.pad_token_id
        kind, gen = self.objective.generator, {}  # gen: the trained generator's outputs
        if kind == 'none':  # BERT: the discriminator reads the masked input itself
            return self.discriminator_outputs(input_ids, token_type_ids, attention_mask, input_ids, positions, labels)
        if self.generator is None:  # uniform over the tokens the model can predict, no network
            gen_logits = self._uniform_logits(positions)
        elif kind == 'two_tower':  # Electric: cloze logits at every position of the unmasked input
            cloze, targets = self.cloze_outputs(input_ids, attention_mask, token_type_ids, positions, labels)
            gen_logits = cloze.gather(1, positions[..., None].expand(-1, -1, cloze.size(-1)))          # [B, P, V]
            gen = dict(gen_logits=cloze, gen_targets=targets, gen_preds=gen_logits.detach().argmax(-1))
        else:
            trained = self.stage != 2 and kind != 'frozen'  # two-stage's second stage: frozen too
            with contextlib.nullcontext() if trained else torch.no_grad():
                gen_logits = self.generator_logits(input_ids, attention_mask, token_type_ids, positions)
            gen = dict(gen_preds=gen_logits.detach().argmax(-1))  # a frozen generator predicts too: its accuracy
            if trained: gen.update(gen_logits=gen_logits, gen_targets=labels)
        if self.stage == 1:  # two-stage, first stage: the generator's MLM alone
            return ElectraGeneratorDiscriminatorOutput(attention_mask=attention_mask, **gen)
        if self.objective.no_mask_samples:  # the input is to hold no [MASK]: never sample it
            gen_logits = gen_logits.detach().index_fill(-1, torch.tensor([self.mask_token_id], device=input_ids.device),
                                                        float('-inf'))
        sampled, corrupted, original = self._replace(input_ids, positions, labels, gen_logits.detach(), self.rng,
                                                     noise_draws, temperature)
        # the discriminator's fake tokens: where the sample differs, or (Electric) every masked position
        fake = corrupted != original if self.objective.fake == 'replaced' else positions_mask(input_ids, positions, labels >= 0)
        cloze = gen['gen_logits'] if self.objective.noise_log_prob else None  # Electric's correction reads it
        disc = self.discriminator_outputs(corrupted, token_type_ids, attention_mask, original, positions, labels, cloze)
        return ElectraGeneratorDiscriminatorOutput(**disc, **gen, sampled=sampled, is_replaced=fake)

    def cloze_outputs(self, input_ids, attention_mask, token_type_ids, positions,
                      labels) -> tuple[torch.Tensor, torch.Tensor]:
        """The two-tower generator on the unmasked input: its cloze logits [B, L, V] and their targets [B, L], the
        input's ids at the positions masking may choose (its candidates), -100 elsewhere."""
        original = write_at_positions(input_ids, positions, labels, labels >= 0)                    # [B, L]
        logits = self._vocab_logits(self.generator(original, attention_mask, token_type_ids))      # [B, L, V rows]
        candidates = candidates_mask(original, self.special_id_tensor, self.pad_token_id)
        return logits, original.masked_fill(~candidates, -100)

    def _uniform_logits(self, positions: torch.Tensor) -> torch.Tensor:
        "The uniform generator's logits [B, P, V] over the tokenizer's vocabulary: equal for every token."
        return torch.zeros(self.noise_shape(positions), device=positions.device)

    def _replace(self, input_ids, positions, labels, gen_logits, rng, noise_draws, temperature=None):
        """(samples [B, P], the input with them written at the chosen positions [B, L], the original [B, L]). A position
        chosen twice ('with_replacement' masking) gets the floor of the mean of its samples, as the official
        `scatter_update` computes it; a sample equal to the original there counts as original."""
        temperature = self.temperature if temperature is None else temperature
        # over the tokenizer's vocabulary, as the noise (`noise_shape`): the padded rows (-inf) are never sampled
        sampled = sample_tokens(gen_logits[..., :self.vocab_size], labels, temperature, self.disallow_correct, False, rng, noise_draws)
        chosen = labels >= 0                                                                    # [B, P]
        corrupted = write_at_positions(input_ids, positions, sampled, chosen)                   # [B, L]
        original = write_at_positions(input_ids, positions, labels, chosen)  # both hold input_ids where nothing is written
        return sampled, corrupted, original

    @torch.no_grad()
    def detect_uniform_replacements(self, input_ids, token_type_ids, positions, labels,
                                    rng: torch.Generator) -> ElectraGeneratorDiscriminatorOutput:
        """The discriminator on `input_ids` whose chosen positions hold tokens drawn uniformly from the vocabulary
        (from `rng`), as the uniform generator replaces them: a probe of replaced-token detection whose difficulty
        does not depend on the generator, so runs of any setting compare on it. `disc_logits`, `is_replaced` and
        `disc_mask` as `forward` gives them; only for replaced-token detection (a discriminator without an MLM head)."""
        _, corrupted, original = self._replace(input_ids, positions, labels, self._uniform_logits(positions), rng, None)
        disc = self.discriminator_outputs(corrupted, token_type_ids, input_ids != self.pad_token_id, original,
                                          positions, labels)
        return ElectraGeneratorDiscriminatorOutput(**disc, is_replaced=corrupted != original)

    def discriminator_outputs(self, ids, token_type_ids, attention_mask, original, positions, labels,
                              cloze: torch.Tensor | None = None) -> ElectraGeneratorDiscriminatorOutput:
        """The discriminator (the model to fine-tune) on `ids` [B, L], and its loss's mask `disc_mask` (the row's
        `positions`): every real token [B, L], the chosen positions as [B, L] or as slots [B, P]. Head 'rtd' gives
        `disc_logits` [B, L] (with `cloze`, the cloze logits [B, L, V], corrected by `electric_logits`); head 'mlm'
        `mlm_logits` [B, P, V] with `mlm_targets` [B, P] (-100 unused); head 'copy' [B, L, V] and [B, L] (the original
        ids) with the copy gate's `copy_logits` [B, L] and its `mlm_inputs`."""
        net, out = self.discriminator, dict(attention_mask=attention_mask)
        if self.mlm_head is None:  # replaced-token detection
            logits = net(ids, attention_mask=sdpa_mask(net, attention_mask), token_type_ids=token_type_ids).logits
            if cloze is not None: logits = electric_logits(logits, cloze, ids, self.mask_prob)
            mask = attention_mask
            if self.objective.positions == 'chosen':  # as [B, L]; a position chosen twice counts once
                mask = positions_mask(ids, positions, labels >= 0)
            return ElectraGeneratorDiscriminatorOutput(**out, disc_logits=logits, disc_mask=mask)
        hidden = net.electra(ids, attention_mask=sdpa_mask(net, attention_mask),
                             token_type_ids=token_type_ids).last_hidden_state                  # [B, L, H]
        if self.objective.head == 'mlm':
            hidden = hidden.gather(1, positions[..., None].expand(-1, -1, hidden.size(-1)))   # [B, P, H]
            return ElectraGeneratorDiscriminatorOutput(**out, mlm_logits=self._vocab_logits(self.mlm_head(hidden)),
                                                       mlm_targets=labels, disc_mask=labels >= 0)
        # the paper's copy mechanism: p(x) = D 1[x = input] + (1 - D) softmax(x), D = sigmoid of the RTD head's logit
        return ElectraGeneratorDiscriminatorOutput(**out, mlm_logits=self._vocab_logits(self.mlm_head(hidden)),
                                                   mlm_targets=original, copy_logits=net.discriminator_predictions(hidden),
                                                   mlm_inputs=ids, disc_mask=attention_mask)


@torch.no_grad()
def official_init_(model: ElectraGeneratorDiscriminator) -> ElectraGeneratorDiscriminator:
    """Re-initialise as the official code does (google-research/electra model/modeling.py `create_initializer`,
    run_pretraining.py): every dense kernel and embedding table truncated normal(0, 0.02) cut at 2 std (TF1's
    `truncated_normal_initializer`), biases zero, LayerNorm 1 and 0; but `embeddings_project` and the
    discriminator's output layer are plain `tf.layers.dense`, whose default kernel is glorot (xavier) uniform.
    transformers' own init (`init: hf`) is normal(0, 0.02) everywhere with a zeroed [PAD] embedding."""
    frozen = set(model.generator.modules()) if model.objective.generator == 'frozen' else set()  # an existing model's own
    for module in (m for m in model.modules() if m not in frozen):
        if isinstance(module, DisentangledEmbedding): module.reset_parameters()  # the residual starts at zero
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(module.weight, std=0.02, a=-0.04, b=0.04)
        if isinstance(module, nn.Linear) and module.bias is not None: nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm): nn.init.ones_(module.weight); nn.init.zeros_(module.bias)
    glorot = [model.discriminator.discriminator_predictions.dense_prediction.weight]
    glorot += [m.embeddings_project.weight for m in model.modules()
               if isinstance(m, ElectraModel) and hasattr(m, 'embeddings_project') and m not in frozen]
    for w in glorot: nn.init.xavier_uniform_(w)
    if isinstance(model.generator, ElectraForMaskedLM) and not frozen: model.generator.generator_lm_head.bias.zero_()
    return model


# the generator network of each kind the objective builds (config/objectives.py GENERATOR_KINDS; 'frozen' is given,
# 'none' has none)
GENERATOR_CLASSES = {'masked_lm': ElectraForMaskedLM, 'two_tower': TwoTowerClozeGenerator}


def build_pretraining_model(cfg: PretrainConfig, masking: MaskingSettings,
                            generator: ElectraForMaskedLM | BertForMaskedLM | None = None) -> ElectraGeneratorDiscriminator:
    """The generator/discriminator pair of `cfg`'s size, freshly initialised (`cfg.init`: the official code's
    initialisers, `official_init_`, or transformers' own), for the tokenizer `masking` describes (its size
    `vocab_size`, its [PAD] and [MASK] ids, the ids masking never chooses); with `cfg.pad_vocab_multiple` the
    embedding matrix has `padded_vocab_size(vocab_size, multiple)` rows. `generator`: the existing masked LM of an
    objective whose generator kind is 'frozen' (pretrained/generator.py `load_generator`), used as it is.
    A padded model holds the unpadded model's weights, its padding rows zero (never read: their logits are -inf), and
    leaves torch's random stream where the unpadded build leaves it: initialising the padding rows drew from it, so
    every weight initialised after them and the dropout of every step were other numbers. Padding changes the speed
    alone; the price is a second build (the base preset's takes 21 s on one CPU thread, 45 s padded)."""
    rows = padded_vocab_size(masking.vocab_size, cfg.pad_vocab_multiple)
    if rows == masking.vocab_size: return _built(cfg, masking, generator, rows)
    with torch.random.fork_rng(devices=[]):  # the padded shapes, their draws forgotten
        padded = _built(cfg, masking, generator, rows)
    state = padded.state_dict()
    with torch.no_grad():
        for k, v in _built(cfg, masking, generator, masking.vocab_size).state_dict().items():
            if state[k].shape != v.shape: state[k].zero_()  # the rows (or columns) past the tokenizer's
            state[k][tuple(slice(0, n) for n in v.shape)] = v
    return padded


def _built(cfg: PretrainConfig, masking: MaskingSettings, generator, rows: int) -> ElectraGeneratorDiscriminator:
    "`build_pretraining_model`'s model with `rows` word-embedding rows, initialised in its shapes' order."
    vocab_size, pad_token_id = masking.vocab_size, masking.pad_id
    kind = OBJECTIVES[cfg.objective].generator
    if (kind == 'frozen') != (generator is not None):
        raise ValueError(f"objective '{cfg.objective}' " + ('needs its existing generator' if kind == 'frozen'
                                                            else 'builds its own generator: give none'))
    try:
        if kind in GENERATOR_CLASSES and not cfg.uniform_generator:
            generator = GENERATOR_CLASSES[kind](generator_config(cfg, rows, pad_token_id))
        discriminator = ElectraForPreTraining(discriminator_config(cfg, rows, pad_token_id))
    except (MemoryError, RuntimeError) as e:  # sizes each in their domain, together more than the memory holds
        if not isinstance(e, MemoryError) and "can't allocate memory" not in str(e): raise
        raise ConfigError(f"hidden_size {cfg.hidden_size}, intermediate_size {cfg.intermediate_size}, embedding_size "
                          f"{cfg.embedding_size} and {cfg.num_hidden_layers} layers over {rows} tokens make a model "
                          f"that this machine's memory cannot hold ({str(e).splitlines()[0][:120]}). Choose smaller "
                          "sizes, e.g. a preset's (configs/pretrain/).") from None
    model = ElectraGeneratorDiscriminator(generator, discriminator, cfg.tie_weights, cfg.temperature, cfg.disallow_correct,
                                    vocab_size=vocab_size, objective=cfg.objective, mask_token_id=masking.mask_id,
                                    special_ids=masking.special_ids, mask_prob=cfg.mask_prob)
    if cfg.init == 'official': return official_init_(model)
    if model.mlm_head is not None:  # transformers initialised the networks when it built them, not this head
        model.mlm_head.predictions.apply(discriminator._init_weights)
        nn.init.zeros_(model.mlm_head.projection.bias)
    return model


def parameter_line(model: ElectraGeneratorDiscriminator) -> str:
    """The model's size in millions of parameters, its parts named as its objective's row says (`reported`): the
    discriminator and generator + discriminator, or one network and the network with its MLM head (BERT)."""
    main, whole = model.objective.reported.parameters
    n_main = sum(p.numel() for p in model.discriminator.parameters())
    n_all = sum(p.numel() for p in model.parameters())  # a tied weight once
    return f'{main} {n_main / 1e6:.2f}M parameters, {whole} {n_all / 1e6:.2f}M'
