"""Pretraining compute, counted from the shapes: matmul FLOPs of one step of every objective variant, so that runs of
different objectives can be matched by FLOPs rather than by steps (the paper, section 3.2 and Table 5, compares its
variants at equal pretraining compute)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from electra.config.objectives import OBJECTIVES
from electra.objective.masking import max_predictions
from electra.objective.model import discriminator_config, generator_config

if TYPE_CHECKING:
    from electra.config.pretrain import PretrainConfig

__all__ = ['encoder_flops', 'mlm_head_flops', 'pretrain_flops', 'pretrain_step_flops', 'pretrain_flops_to_step']


def encoder_flops(batch: int, length: int, hidden: int, layers: int, ffn: int, embedding: int) -> float:
    """Forward matmul FLOPs of one ELECTRA encoder over [batch, length] tokens (a multiply-add counts 2).
    T = batch * length tokens, H hidden, F FFN, E embedding size:
      embeddings_project (only when E != H)  2 T E H
      per layer: Q, K, V projections        2 T H 3H
                 attention output           2 T H H
                 scores Q K^T               2 batch L L H   (all heads together)
                 weighted sum P V           2 batch L L H
                 FFN in and out             2 T H F * 2
    Embedding lookups, LayerNorm, softmax, GELU and dropout are not matmuls and are not counted."""
    T = batch * length
    project = 2 * T * embedding * hidden if embedding != hidden else 0
    per_layer = 2 * T * hidden * 3 * hidden + 2 * T * hidden * hidden + 2 * 2 * batch * length * length * hidden \
        + 2 * 2 * T * hidden * ffn
    return float(project + layers * per_layer)


def mlm_head_flops(n: int, hidden: int, embedding: int, vocab: int) -> float:
    "An MLM head at `n` positions: dense H -> E (then GELU, LayerNorm), vocabulary projection E -> V."
    return float(2 * n * hidden * embedding + 2 * n * embedding * vocab)


def _rtd_head(n: int, T: int, d, vocab: int) -> float:
    "Replaced-token detection's head at every token: dense H -> H, GELU, dense H -> 1."
    return float(2 * T * d.hidden_size * d.hidden_size + 2 * T * d.hidden_size)


# the FLOPs of each loss head of the registry (config/objectives.py HEADS) over n masked slots and T tokens
HEAD_FLOPS = {
    'rtd': _rtd_head,
    'mlm': lambda n, T, d, vocab: mlm_head_flops(n, d.hidden_size, d.embedding_size, vocab),  # at the chosen slots
    'copy': lambda n, T, d, vocab: mlm_head_flops(T, d.hidden_size, d.embedding_size, vocab) + _rtd_head(n, T, d, vocab),
}


def _masked_lm(batch: int, length: int, n: int, g, vocab: int) -> tuple[float, float]:
    "A masked LM: its encoder over every token, its MLM head at the n masked slots."
    embedding = getattr(g, 'embedding_size', g.hidden_size)  # BERT has none: its MLM head is H -> H -> V
    return (encoder_flops(batch, length, g.hidden_size, g.num_hidden_layers, g.intermediate_size, embedding),
            mlm_head_flops(n, g.hidden_size, embedding, vocab))


def _two_tower(batch: int, length: int, n: int, g, vocab: int) -> tuple[float, float]:
    """Electric's cloze model: two encoders over the whole input (causal masks computing every score all the same),
    its cloze head from both towers' outputs, 2 Hg wide, at every position."""
    encoder, _ = _masked_lm(batch, length, n, g, vocab)
    return 2 * encoder, mlm_head_flops(batch * length, 2 * g.hidden_size, g.embedding_size, vocab)


# the (encoder, head) FLOPs of a forward of each generator kind of the registry (config/objectives.py GENERATOR_KINDS)
GENERATOR_FLOPS = {'masked_lm': _masked_lm, 'two_tower': _two_tower, 'frozen': _masked_lm,
                   'none': lambda batch, length, n, g, vocab: (0.0, 0.0)}


def pretrain_flops(cfg: PretrainConfig, batch: int, length: int, vocab: int, head_positions: int,
                   generator=None) -> dict[str, float]:
    """Matmul FLOPs of one pretraining step of `cfg`'s objective. `head_positions`: positions per sequence at which an
    MLM head runs on the masked positions (P = max_predictions, 19 at length 128; `length` for a full-length head).
    Parts: the generator's encoder and head, by its kind (`GENERATOR_FLOPS`; none with `uniform_generator`), the main
    network's encoder and its loss head (`HEAD_FLOPS`). Training = forward + backward = 3 x forward; with
    `two_stage`, the generator-only steps cost 3 x the generator and the later ones 1 x the (frozen) generator + 3 x
    the discriminator: `train_step` is the mean over the run. A frozen generator (kind 'frozen') runs forward only,
    1 x; `generator` is its transformers config (its own sizes)."""
    row, d = OBJECTIVES[cfg.objective], discriminator_config(cfg, vocab, 0)
    g = generator_config(cfg, vocab, 0) if generator is None else generator
    n, T = batch * head_positions, batch * length
    kind = 'none' if cfg.uniform_generator else row.generator
    gen_encoder, gen_head = GENERATOR_FLOPS[kind](batch, length, n, g, vocab)
    disc_head = HEAD_FLOPS[row.head](n, T, d, vocab)
    out = {
        'generator_encoder': gen_encoder,
        'generator_head': gen_head,
        'discriminator_encoder': encoder_flops(batch, length, d.hidden_size, d.num_hidden_layers, d.intermediate_size,
                                               d.embedding_size),
        'discriminator_head': disc_head,
    }
    out['forward'] = sum(out.values())
    generator, main = out['generator_encoder'] + out['generator_head'], out['discriminator_encoder'] + disc_head
    f = cfg.two_stage
    out['train_step'] = generator + 3 * main if kind == 'frozen' else \
        3 * out['forward'] if f == 0 else f * 3 * generator + (1 - f) * (generator + 3 * main)
    return out


def _head_positions(cfg: PretrainConfig) -> int:
    "Positions per sequence where an MLM head runs: `max_predictions`, or every position with 'bernoulli' masking."
    if cfg.mask_mode == 'bernoulli': return cfg.max_length
    return min(max_predictions(cfg.mask_prob, cfg.max_length), cfg.max_length)


def pretrain_step_flops(cfg: PretrainConfig, vocab_size: int, generator=None) -> float:
    """Training FLOPs of one optimizer step of `cfg` (its batch, length and objective; MLM heads at the
    `max_predictions` masked positions, or every position with 'bernoulli' masking), the mean over the run.
    `generator`: a frozen generator's transformers config (generator kind 'frozen')."""
    return pretrain_flops(cfg, cfg.batch_size, cfg.max_length, vocab_size, _head_positions(cfg), generator)['train_step']


def pretrain_flops_to_step(cfg: PretrainConfig, vocab_size: int, step: int, generator=None) -> float:
    """Training FLOPs of a run's first `step` steps: `step` x `pretrain_step_flops`, except for two-stage training,
    whose first `two_stage_switch` steps train the generator alone (3 x its
    forward) and whose later ones run it frozen (1 x) beside the discriminator (3 x)."""
    if not cfg.two_stage: return step * pretrain_step_flops(cfg, vocab_size, generator)
    parts = pretrain_flops(cfg, cfg.batch_size, cfg.max_length, vocab_size, _head_positions(cfg))
    generator = parts['generator_encoder'] + parts['generator_head']
    main = parts['discriminator_encoder'] + parts['discriminator_head']
    first = min(step, cfg.two_stage_switch)
    return first * 3 * generator + (step - first) * (generator + 3 * main)
