"""electra/objective/draws.py: the counter-based random source against Random123's published Philox answers, a pure
function of (seed, step, stream, part, index), its U(0, 1) and integer statistics (compiled: tests/pretraining/
test_random_draws.py)."""
import math

import pytest
import torch

from electra.objective.draws import STREAMS, CounterDraws, philox4x32
from electra.objective.sampling import gumbel_noise

N = 1_000_000


# Random123's known-answer vectors of Philox4x32-10 (its tests/kat_vectors: counter words, key words, output)
PHILOX_KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
              ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
              ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
               (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize('counter, key, expected', PHILOX_KAT)
def test_philox_gives_random123s_known_answers_on_ints_and_on_tensors(counter, key, expected):
    "The key derivation is Philox4x32-10 exactly, whether its words are Python ints (eager) or 0-d tensors (a graph)."
    assert philox4x32(counter, key) == expected
    assert [int(w) for w in philox4x32([torch.tensor(c) for c in counter], key)] == list(expected)


def draws(seed=11081, step=7, part=0, stream='sampling_noise', n=N):
    return CounterDraws(seed, step, part).uniform((n,), 'cpu', STREAMS[stream])


def test_counter_draws_are_a_pure_function_of_seed_step_stream_part_and_index():
    u = draws()
    assert torch.equal(u, draws())                                        # the same inputs: the same bits
    assert torch.equal(u, CounterDraws(11081, torch.tensor(7), 0).uniform((N,), 'cpu', STREAMS['sampling_noise']))
    assert torch.equal(u[:1000], draws(n=1000))                           # element i depends on i alone, not the shape
    assert torch.equal(u[:12].view(3, 4), CounterDraws(11081, 7, 0).uniform((3, 4), 'cpu', STREAMS['sampling_noise']))
    others = [draws(step=8), draws(seed=11082), draws(part=1), draws(stream='mask_positions'), draws(step=7 + 2**32)]
    for other in others:  # anything else changed: other draws, unrelated to these (no shared or shifted run)
        assert (other == u).float().mean() < 1e-3
        assert abs(torch.corrcoef(torch.stack([u, other]))[0, 1]) < 5 / math.sqrt(N)


def test_counter_uniform_statistics():
    """1e6 draws in (0, 1), never 0 or 1 (a log follows): mean 1/2 and variance 1/12 within 5 standard errors, the
    1000-bin histogram within 5 sd of its chi-square, neighbours uncorrelated."""
    u = draws().double()
    assert 0 < u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / N)   # sd of the sample variance of U(0, 1)
    counts = torch.bincount((u * 1000).long(), minlength=1000).double()
    chi2 = ((counts - N / 1000) ** 2 / (N / 1000)).sum()
    assert abs(chi2 - 999) < 5 * math.sqrt(2 * 999)
    assert abs(torch.corrcoef(torch.stack([u[:-1], u[1:]]))[0, 1]) < 5 / math.sqrt(N)


def test_counter_integers_are_uniform_below_their_bound():
    high = 30522
    k = CounterDraws(3, 1, 0).integers(high, (N,), 'cpu', STREAMS['mask_tokens'])
    assert k.dtype == torch.int64 and 0 <= k.min() and k.max() < high
    counts = torch.bincount(k * 100 // high, minlength=100).double()   # 100 equal bins of ids
    chi2 = ((counts - N / 100) ** 2 / (N / 100)).sum()
    assert abs(chi2 - 99) < 5 * math.sqrt(2 * 99)


def test_gumbel_noise_of_counter_draws_has_the_gumbel_moments():
    "-log(-log(u)) of the counter's draws: finite, mean the Euler-Mascheroni constant, variance pi^2 / 6."
    g = gumbel_noise((N,), 'cpu', draws=draws()).double()
    assert torch.isfinite(g).all()
    assert abs(g.mean() - 0.5772156649) < 5 * math.sqrt(math.pi ** 2 / 6 / N)
    # the sample variance's sd: sqrt((mu4 - sigma^4) / n), mu4 = 5.4 sigma^4 (the Gumbel's excess kurtosis is 12/5)
    assert abs(g.var() - math.pi ** 2 / 6) < 5 * math.sqrt(4.4 * (math.pi ** 2 / 6) ** 2 / N)

