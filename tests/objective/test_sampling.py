"""electra/objective/sampling.py: Gumbel-max sampling and the replaced labels."""
import math

import torch

from electra.objective.sampling import gumbel_noise, sample_tokens


def test_gumbel_sampler_matches_softmax_with_temperature():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5])
    n, T = 200_000, 1.5
    s = sample_tokens(logits.expand(n, -1), temperature=T, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(s, minlength=5).float() / n
    expected = torch.softmax(logits / T, -1)
    assert torch.allclose(freq, expected, atol=4 * math.sqrt(0.25 / n))


def test_gumbel_noise_formula():
    g1 = gumbel_noise((1000,), 'cpu', torch.Generator().manual_seed(3))
    u = torch.rand(1000, generator=torch.Generator().manual_seed(3))
    assert torch.allclose(g1, -torch.log(-torch.log(u + 1e-9) + 1e-9))


def test_disallow_correct_and_uniform():
    logits = torch.zeros(50_000, 4)
    logits[:, 2] = 10.0
    labels = torch.full((50_000,), 2)
    g = torch.Generator().manual_seed(0)
    assert (sample_tokens(logits, labels, generator=g) == 2).float().mean() > 0.99
    assert not (sample_tokens(logits, labels, disallow_correct=True, generator=g) == 2).any()
    freq = torch.bincount(sample_tokens(logits, labels, uniform=True, generator=g), minlength=4).float() / 50_000
    assert torch.allclose(freq, torch.full((4,), 0.25), atol=0.01)


def test_counter_draws_sample_the_softmax_and_are_their_uniforms_handed_in():
    """The noise of counter draws (`random_draws: counter`), computed inside the sampling, samples softmax(logits / T);
    the same draws made beforehand and handed in as a tensor give the same samples (one Gumbel-max, two sources)."""
    from electra.objective.draws import STREAMS, CounterDraws
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5])
    n, T, draws = 200_000, 1.5, CounterDraws(11081, 12, 1)
    s = sample_tokens(logits.expand(n, -1), temperature=T, noise_draws=draws)
    freq = torch.bincount(s, minlength=5).float() / n
    assert torch.allclose(freq, torch.softmax(logits / T, -1), atol=4 * math.sqrt(0.25 / n))
    u = draws.uniform((n, 5), 'cpu', STREAMS['sampling_noise'])
    assert torch.equal(s, sample_tokens(logits.expand(n, -1), temperature=T, noise_draws=u))
