"""Sampling the generator's replacements (run_pretraining.py `_get_fake_data`): Gumbel-max at the masked positions only, in float32.

Official (google-research/electra, pretrain/pretrain_helpers.py `sample_from_softmax`):
argmax(logits / T + g), g = -log(-log(u + 1e-9) + 1e-9), u ~ U(0, 1); `disallow_correct` subtracts 1000 from the
original token's logit first. A token sampled equal to the original counts as ORIGINAL for the discriminator.
"""
from __future__ import annotations

import torch

__all__ = ['gumbel_noise', 'sample_tokens', 'replaced_labels']


def gumbel_noise(shape, device, generator: torch.Generator | None = None, draws: torch.Tensor | None = None):
    "-log(-log(u + 1e-9) + 1e-9) of `draws` u [..., V] (float32 U(0, 1)), or of fresh draws from `generator`."
    if draws is None:
        u = torch.rand(shape, device=device, dtype=torch.float32, generator=generator)
        return u.add_(1e-9).log_().neg_().add_(1e-9).log_().neg_()  # in place: one buffer, no copies
    return -torch.log(-torch.log(draws + 1e-9) + 1e-9)


@torch.no_grad()
def sample_tokens(logits: torch.Tensor, labels: torch.Tensor | None = None, temperature: float = 1.0,
                  disallow_correct: bool = False, uniform: bool = False,
                  generator: torch.Generator | None = None, noise_draws: torch.Tensor | None = None) -> torch.Tensor:
    """Sample one token per row of `logits` [..., V] from softmax(logits / T). `labels` [...] are the originals,
    needed for `disallow_correct` (entries < 0 are ignored). No gradient flows through the sample.
    Tokens whose logit is -inf (padded vocabulary rows) are never sampled, also by the uniform generator.
    `noise_draws` [..., V]: the noise's U(0, 1) draws made beforehand (see `ElectraGeneratorDiscriminator.forward`), else drawn
    here from `generator`; the same draws give the same samples either way."""
    logits = logits.float()
    if uniform:  # the paper's uniform-generator ablation: uniform over the tokens the model can predict
        logits = torch.zeros_like(logits).masked_fill_(logits == float('-inf'), float('-inf'))
    if disallow_correct and labels is not None:
        hit = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, labels.clamp(min=0)[..., None], True)
        logits = logits - 1000.0 * (hit & (labels[..., None] >= 0))
    noise = gumbel_noise(logits.shape, logits.device, generator, noise_draws)
    return noise.add_(logits if temperature == 1 else logits / temperature).argmax(-1)


def replaced_labels(sampled: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    "True where a chosen position (label >= 0) got a token other than its original."
    return (labels >= 0) & (sampled != labels)
