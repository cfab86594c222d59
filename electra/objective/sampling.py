"""Sampling the generator's replacements (run_pretraining.py `_get_fake_data`): Gumbel-max at the masked positions only, in float32.

Official (google-research/electra, pretrain/pretrain_helpers.py `sample_from_softmax`):
argmax(logits / T + g), g = -log(-log(u + 1e-9) + 1e-9), u ~ U(0, 1); `disallow_correct` subtracts 1000 from the
original token's logit first. A token sampled equal to the original counts as ORIGINAL for the discriminator.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from electra.objective.draws import STREAMS, CounterDraws

if TYPE_CHECKING:
    from electra.config.pretrain import PretrainConfig

__all__ = ['gumbel_noise', 'sample_tokens', 'TemperatureSchedule']


def gumbel_noise(shape, device, generator: torch.Generator | None = None,
                 draws: torch.Tensor | CounterDraws | None = None):
    """-log(-log(u + 1e-9) + 1e-9) of U(0, 1) draws u [shape] (float32): `draws` made beforehand, or counter draws
    (objective/draws.py: computed here, inside a compiled graph when this runs in one), or fresh ones from `generator`."""
    if draws is None:
        u = torch.rand(shape, device=device, dtype=torch.float32, generator=generator)
        return u.add_(1e-9).log_().neg_().add_(1e-9).log_().neg_()  # in place: one buffer, no copies
    u = draws if isinstance(draws, torch.Tensor) else draws.uniform(shape, device, STREAMS['sampling_noise'])
    return -torch.log(-torch.log(u + 1e-9) + 1e-9)


@torch.no_grad()
def sample_tokens(logits: torch.Tensor, labels: torch.Tensor | None = None, temperature: float | torch.Tensor = 1.0,
                  disallow_correct: bool = False, uniform: bool = False,
                  generator: torch.Generator | None = None,
                  noise_draws: torch.Tensor | CounterDraws | None = None) -> torch.Tensor:
    """Sample one token per row of `logits` [..., V] from softmax(logits / T). `labels` [...] are the originals,
    needed for `disallow_correct` (entries < 0 are ignored). No gradient flows through the sample.
    Tokens whose logit is -inf (padded vocabulary rows) are never sampled, also by the uniform generator.
    `noise_draws` [..., V]: the noise's U(0, 1) draws made beforehand (see `ElectraGeneratorDiscriminator.forward`), or
    counter draws that compute them here (`random_draws: counter`), else drawn here from `generator`; the same draws give
    the same samples either way. `temperature` may be a 0-d tensor (an
    annealed one, `TemperatureSchedule`), so that a compiled step reads it where it is rather than compiling anew."""
    logits = logits.float()
    if uniform:  # the paper's uniform-generator ablation: uniform over the tokens the model can predict
        logits = torch.zeros_like(logits).masked_fill_(logits == float('-inf'), float('-inf'))
    if disallow_correct and labels is not None:
        hit = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, labels.clamp(min=0)[..., None], True)
        logits = logits - 1000.0 * (hit & (labels[..., None] >= 0))
    noise = gumbel_noise(logits.shape, logits.device, generator, noise_draws)
    scaled = logits / temperature if isinstance(temperature, torch.Tensor) or temperature != 1 else logits
    return noise.add_(scaled).argmax(-1)


@dataclass(frozen=True)
class TemperatureSchedule:
    """The sampling temperature at each step: `start` at the first step, descending to `end` at the run's end (Fast-
    ELECTRA, Dong et al., ICLR 2024: the auxiliary model's softmax smoothed by a high temperature early, a curriculum
    from easy replacements to hard ones). With p = step / steps (step: the steps taken before this one):
      linear       end + (start - end) (1 - p)
      cosine       end + (start - end) (1 + cos(pi p)) / 2
      exponential  end (start / end)^(1 - p)     (equal factors of T in equal numbers of steps)
    `start` 0: no annealing, `end` at every step. The paper's own shape is not confirmed here (docs/objectives.md)."""
    start: float
    end: float
    shape: str
    steps: int

    @classmethod
    def from_config(cls, cfg: PretrainConfig) -> TemperatureSchedule:
        return cls(cfg.temperature_start, cfg.temperature, cfg.temperature_schedule, cfg.steps)

    @property
    def annealed(self) -> bool: return self.start > 0

    def __call__(self, step: int) -> float:
        if not self.annealed: return self.end
        p = min(step / self.steps, 1.0)
        if self.shape == 'exponential': return self.end * (self.start / self.end) ** (1 - p)
        if self.shape == 'linear': return self.end + (self.start - self.end) * (1 - p)
        if self.shape == 'cosine': return self.end + (self.start - self.end) * (1 + math.cos(math.pi * p)) / 2
        raise ValueError(f'temperature_schedule must be linear, cosine or exponential, got {self.shape!r}')
