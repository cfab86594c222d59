"""electra/objective/masking.py: masking against hand computations, statistics and the official draw."""
import math

import pytest
import torch

from electra.objective.masking import mask_tokens, max_predictions

PAD, UNK, CLS, SEP, MASK, VOCAB = 0, 1, 2, 3, 4, 1000


def batch(B=512, L=128, seed=0, min_len=10):
    "Random [CLS] tokens [SEP] rows with random lengths and padding, some [UNK]s sprinkled in."
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (B, L), generator=g)
    lengths = torch.randint(min_len, L + 1, (B,), generator=g)
    ids[torch.rand(B, L, generator=g) < 0.02] = UNK
    ids[:, 0] = CLS
    ar = torch.arange(L)
    ids[ar >= lengths[:, None]] = PAD
    ids[ar[None] == (lengths - 1)[:, None]] = SEP
    return ids, lengths


def run_mask(ids, mode='fixed', special=(PAD, CLS, SEP, MASK), mask_prob=0.15, seed=1, **kw):
    return mask_tokens(ids, torch.tensor(special), PAD, MASK, VOCAB, mask_prob, mode,
                       draws=torch.Generator().manual_seed(seed), **kw)


def test_max_predictions_official_cap():
    assert max_predictions(0.15, 128) == 19
    assert max_predictions(0.25, 512) == 130


def test_fixed_count_is_rounded_rate_capped():
    ids, lengths = batch()
    m = run_mask(ids)
    assert m.positions.shape == (512, 19) and m.labels.shape == (512, 19)
    count = (m.labels >= 0).sum(1)
    # round(n_real * 0.15), at least 1, at most 19; torch.round and tf.round both round half to even
    expected = torch.clamp(torch.round(lengths.float() * 0.15), 1, 19).long()
    assert torch.equal(count, expected)
    assert count.max() == 19  # long rows hit the cap


@pytest.mark.parametrize('mode', ['fixed', 'with_replacement'])
def test_the_cap_is_the_settings_not_the_batch_s_padded_width(mode):
    """Official `mask`: N = max_predictions_per_seq from the config, whatever width the batch has. Rows of 10 real
    tokens mask round(1.5) = 2 whether padded to 10 or 64, and 8 rows of 6 tokens padded to 6 mask round(0.9) = 1
    each, under the cap of max_length 128 (19); the settings take it from a config's max_length."""
    from types import SimpleNamespace
    from electra.objective.masking import MaskingSettings
    from tests.support.baseline import BenchTokenizer
    row = torch.tensor([CLS, *range(10, 18), SEP])
    for width in (10, 64):
        ids = torch.cat([row, torch.full((width - 10,), PAD)])[None].repeat(4, 1)
        assert ((run_mask(ids, mode, max_length=128).labels >= 0).sum(1) == 2).all()
    six = torch.tensor([[CLS, 10, 11, 12, 13, SEP]] * 8)
    m = run_mask(six, mode, max_length=128)
    assert ((m.labels >= 0).sum(1) == 1).all() and ((m.input_ids == MASK).sum(1) <= 1).all()
    tok = BenchTokenizer(120)
    cfg = SimpleNamespace(mask_unk=True, mask_prob=0.15, mask_mode=mode, mask_token_prob=0.85, random_token_prob=0.0,
                          max_length=128)
    masking = MaskingSettings.from_config(cfg, tok)
    assert masking.max_length == 128
    short = torch.tensor([[tok.cls_token_id, 10, 11, 12, 13, tok.sep_token_id]] * 8)
    assert ((masking(short, torch.Generator().manual_seed(0)).labels >= 0).sum(1) == 1).all()


def test_without_a_max_length_the_cap_is_the_width_and_at_least_one_position():
    "No max_length: the cap follows the width (pad batches to max_length for the official count), never 0 slots."
    six = torch.tensor([[CLS, 10, 11, 12, 13, SEP]] * 8)
    m = run_mask(six)
    assert m.positions.shape == (8, 1) and ((m.labels >= 0).sum(1) == 1).all()
    ten = torch.tensor([[CLS, *range(10, 18), SEP]] * 4)
    assert run_mask(ten).positions.shape == (4, 1)  # int(0.155 * 10) = 1: a batch padded short masks fewer


def test_fixed_mode_chooses_distinct_candidates_only():
    ids, _ = batch()
    m = run_mask(ids)
    chosen = m.labels >= 0
    picked = ids.gather(1, m.positions)
    assert not torch.isin(picked[chosen], torch.tensor([PAD, CLS, SEP, MASK])).any()
    assert torch.equal(picked[chosen], m.labels[chosen])          # labels are the original ids
    for row in m.positions:                                       # distinct positions per row
        assert len(set(row.tolist())) == row.numel()


def test_unchosen_positions_untouched_and_split_85_15_0():
    ids, _ = batch(B=2048)
    m = run_mask(ids)
    chosen_full = torch.zeros_like(ids, dtype=torch.bool).scatter(1, m.positions, m.labels >= 0)
    assert torch.equal(m.input_ids[~chosen_full], ids[~chosen_full])
    new = m.input_ids[chosen_full]
    n = new.numel()
    frac_mask = (new == MASK).float().mean().item()
    frac_kept = (new == ids[chosen_full]).float().mean().item()
    sd = math.sqrt(0.85 * 0.15 / n)
    assert abs(frac_mask - 0.85) < 5 * sd
    assert abs(frac_kept - 0.15) < 5 * sd
    assert frac_mask + frac_kept == pytest.approx(1.0)            # 0% random tokens


def test_random_token_option():
    ids, _ = batch(B=2048)
    m = run_mask(ids, mask_token_prob=0.8, random_token_prob=0.1)
    chosen_full = torch.zeros_like(ids, dtype=torch.bool).scatter(1, m.positions, m.labels >= 0)
    new, old = m.input_ids[chosen_full], ids[chosen_full]
    frac_random = ((new != MASK) & (new != old)).float().mean().item()
    assert abs(frac_random - 0.1 * (1 - 1 / VOCAB)) < 0.01


def test_unk_excluded_when_asked():
    ids, _ = batch()
    with_unk = run_mask(ids)
    without = run_mask(ids, special=(PAD, CLS, SEP, MASK, UNK))
    assert (with_unk.labels == UNK).any()                          # official: [UNK] may be masked
    assert not (without.labels == UNK).any()                       # replication: never


def test_bernoulli_rate_and_specials():
    ids, _ = batch(B=1024)
    m = run_mask(ids, mode='bernoulli')
    assert m.positions.shape == ids.shape
    chosen = m.labels >= 0
    candidates = (ids != PAD) & ~torch.isin(ids, torch.tensor([CLS, SEP, MASK]))
    rate = chosen.sum().item() / candidates.sum().item()
    assert abs(rate - 0.15) < 0.005
    assert not torch.isin(m.labels[chosen], torch.tensor([PAD, CLS, SEP, MASK])).any()


def test_short_row_without_candidates_masks_nothing():
    ids = torch.tensor([[CLS, SEP, PAD, PAD, PAD, PAD, PAD, PAD] * 4])
    m = run_mask(ids)
    assert (m.labels < 0).all() and torch.equal(m.input_ids, ids)


def official_with_replacement(ids, special, seed, mask_prob=0.15, mask_token_prob=0.85):
    """The official `mask` (google-research/electra pretrain/pretrain_helpers.py) written out row by row in Python,
    fed the same uniform draws as `mask_tokens`: slot j takes the floor(u * n)-th candidate, [MASK] if its action draw
    is below 0.85; kept slots write nothing. Returns the masked ids and, per row, the (position, label) of each slot."""
    B, L = ids.shape
    P = max_predictions(mask_prob, L)
    g = torch.Generator().manual_seed(seed)
    u, action = torch.rand(B, P, generator=g), torch.rand(B, P, generator=g)
    out, slots = ids.clone(), []
    for b in range(B):
        row = ids[b].tolist()
        cands = [i for i, t in enumerate(row) if t != PAD and t not in special]
        count = max(1, min(P, round(sum(t != PAD for t in row) * mask_prob)))
        slots.append([])
        for j in range(count):
            pos = cands[min(int(float(u[b, j]) * len(cands)), len(cands) - 1)]
            slots[-1].append((pos, row[pos]))
            if float(action[b, j]) < mask_token_prob: out[b, pos] = MASK
    return out, slots


def test_with_replacement_is_the_official_draw_repeats_included():
    ids, _ = batch(B=256)
    m = run_mask(ids, mode='with_replacement', seed=7)
    ref, slots = official_with_replacement(ids, (PAD, CLS, SEP, MASK), seed=7)
    assert torch.equal(m.input_ids, ref)
    for b, row in enumerate(slots):
        chosen = m.labels[b] >= 0
        assert list(zip(m.positions[b][chosen].tolist(), m.labels[b][chosen].tolist())) == row
    repeated = sum(len({p for p, _ in row}) < len(row) for row in slots)
    assert repeated > 0  # the batch does exercise repeats


def test_with_replacement_repeats_as_often_as_the_birthday_bound():
    "19 draws among 126 candidates (full rows of 128): the share of rows that repeat a position, within 4 SE."
    from electra.objective.masking import repeat_probability
    assert repeat_probability(2, 2) == 0.5 and repeat_probability(3, 3) == pytest.approx(1 - 2 / 9)
    assert repeat_probability(1, 5) == 0.0 and repeat_probability(6, 5) == 1.0
    ids, _ = batch(B=4096, min_len=128)
    m = run_mask(ids, mode='with_replacement', seed=3)
    rows = [len(set(r.tolist())) < 19 for r in m.positions]
    p = repeat_probability(19, 126)  # 0.760
    assert abs(sum(rows) / len(rows) - p) < 4 * math.sqrt(p * (1 - p) / len(rows))


def test_write_at_positions_takes_the_floor_of_the_mean_of_repeats():
    from electra.objective.masking import write_at_positions
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    positions = torch.tensor([[2, 2, 5, 6]])
    values = torch.tensor([[10, 13, 7, 99]])
    write = torch.tensor([[True, True, True, False]])  # the last slot is unused: it writes nothing
    assert write_at_positions(ids, positions, values, write).tolist() == [[1, 2, 11, 4, 5, 7, 7]]


def test_random_tokens_never_write_a_special_id():
    "BERT's random replacements (random_token_prob): a draw of [PAD], [CLS], [SEP] or [MASK] keeps the original."
    special = torch.tensor([0, 1, 2, 3])
    ids = torch.randint(4, 8, (400, 32), generator=torch.Generator().manual_seed(0))  # ids 4..7; vocabulary of 8
    m = mask_tokens(ids, special, 0, 3, 8, mask_prob=0.5, mask_token_prob=0.0, random_token_prob=1.0,
                    draws=torch.Generator().manual_seed(1))
    chosen = m.labels >= 0
    written = m.input_ids.gather(1, m.positions)[chosen]
    assert not torch.isin(written, special).any()
    # half of the 8 ids are special: about half the chosen positions keep their token, the rest get a random word
    changed = float((written != m.labels[chosen]).float().mean())
    assert changed == pytest.approx(0.5 * 3 / 4, abs=0.02)  # a random word 4..7 differs from the original 3 times in 4


class Replay:
    "A random source that hands out given draws, one tensor per stream: what the masking reads, and nothing else."

    def __init__(self, by_stream: dict): self.by_stream = by_stream

    def uniform(self, shape, device, stream):
        assert self.by_stream[stream].shape == shape
        return self.by_stream[stream]

    def integers(self, high, shape, device, stream): return self.uniform(shape, device, stream)


@pytest.mark.parametrize('mode', ['fixed', 'with_replacement', 'bernoulli'])
def test_the_masking_of_a_generator_is_the_masking_of_its_draws_handed_in(mode):
    """One masking, whatever the source: the run's generator gives the masking of the draws it makes in the order the
    masking has always drawn them (the positions' [B, L] or [B, P] U(0, 1), the actions' [B, P], the random ids' [B, P])
    handed in as a source; the counter's draws, handed in, give the counter's masking."""
    from electra.objective.draws import STREAMS, CounterDraws
    ids, _ = batch(B=256)
    B, L = ids.shape
    P = L if mode == 'bernoulli' else max_predictions(0.15, L)
    kw = dict(mask_token_prob=0.8, random_token_prob=0.1)
    g = torch.Generator().manual_seed(4)
    drawn = {STREAMS['mask_positions']: torch.rand((B, L) if mode != 'with_replacement' else (B, P), generator=g),
             STREAMS['mask_actions']: torch.rand(B, P, generator=g), STREAMS['mask_tokens']: torch.randint(VOCAB, (B, P), generator=g)}
    assert all(torch.equal(a, b) for a, b in zip(run_mask(ids, mode, seed=4, **kw), run_mask_of(ids, mode, Replay(drawn), **kw)))
    counter = CounterDraws(11081, 5)
    shapes = {s: (B, P) for s in drawn} | ({} if mode == 'with_replacement' else {STREAMS['mask_positions']: (B, L)})
    drawn = {s: counter.integers(VOCAB, shape, 'cpu', s) if s == STREAMS['mask_tokens'] else counter.uniform(shape, 'cpu', s)
             for s, shape in shapes.items()}
    assert all(torch.equal(a, b) for a, b in zip(run_mask_of(ids, mode, counter, **kw), run_mask_of(ids, mode, Replay(drawn), **kw)))


def run_mask_of(ids, mode, draws, **kw):
    return mask_tokens(ids, torch.tensor((PAD, CLS, SEP, MASK)), PAD, MASK, VOCAB, 0.15, mode, draws=draws, **kw)


def test_counter_masking_chooses_the_official_count_and_splits_85_10_5():
    """With the counter's draws: every row's official count round(n * 0.15) (at least 1, at most 19) of distinct
    candidates, and of the chosen positions 85% [MASK], 10% a random id (seen as changed unless it drew a special id or
    the original: 10% x (1 - 5 / 1000)), the rest kept, each within 5 binomial standard deviations."""
    from electra.objective.draws import CounterDraws
    ids, lengths = batch(B=4096)
    m = run_mask_of(ids, 'fixed', CounterDraws(11081, 3), mask_token_prob=0.85, random_token_prob=0.10)
    chosen = m.labels >= 0
    assert torch.equal(chosen.sum(1), torch.clamp(torch.round(lengths.float() * 0.15), 1, 19).long())
    assert all(len(set(row[c].tolist())) == int(c.sum()) for row, c in zip(m.positions, chosen))
    assert not torch.isin(ids.gather(1, m.positions)[chosen], torch.tensor([PAD, CLS, SEP, MASK])).any()
    new, old = m.input_ids.gather(1, m.positions)[chosen], m.labels[chosen]
    n = new.numel()
    rates = {'mask': 0.85, 'random': 0.10 * (1 - 5 / VOCAB)}
    rates['keep'] = 1 - rates['mask'] - rates['random']
    seen = {'mask': (new == MASK).float().mean(), 'random': ((new != MASK) & (new != old)).float().mean(),
            'keep': (new == old).float().mean()}
    for k, p in rates.items(): assert abs(seen[k] - p) < 5 * math.sqrt(p * (1 - p) / n), (k, seen[k], p)
