"""Dynamic masking, a new pattern for every batch, computed on the device (the paper, section 2).

The official code (google-research/electra, pretrain/pretrain_helpers.py `mask`) chooses a FIXED number of
positions per sequence, round(n_real_tokens * mask_prob), at least 1 and at most
`max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length)` (of the config's length, not the batch's width:
`max_length`), and returns them as a static
[B, P] block of positions with weights: only those P hidden states reach the generator's vocabulary
projection. It draws the P positions with replacement (`tf.random.categorical`), so a row can choose one position
twice: 19 draws among ~125 candidates repeat one in about three rows out of four (`repeat_probability`). Modes:
  - 'fixed' (default): the official count, P DISTINCT positions: every chosen token is predicted once, as the paper
    describes masking 15% of the tokens;
  - 'with_replacement': the official draw exactly, repeats included. A repeated slot is predicted (and counted in
    the generator's loss) once per draw, and the discriminator's input takes the official `scatter_update` rule
    at that position: the floor of the mean of the ids sampled for it (`write_at_positions`);
  - 'bernoulli': the replication's independent per-token draw (then P = L).
Of the chosen positions 85% become [MASK] and 15% keep their token; none become a random token (not BERT's 80/10/10,
which `random_token_prob` gives: a random draw of a special id keeps the original token instead).
The random numbers come from a source (objective/draws.py): the run's torch.Generator, or counter draws computed from
the seed and the step, which run inside a compiled graph; the masking is the same code for both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from electra.objective.draws import STREAMS, CounterDraws, as_draws

__all__ = ['MaskedInputs', 'MaskingSettings', 'max_predictions', 'mask_tokens', 'write_at_positions', 'positions_mask',
           'repeat_probability', 'candidates_mask']


class MaskedInputs(NamedTuple):
    input_ids: torch.Tensor     # [B, L] the input with [MASK] (or kept / random tokens) at the chosen positions
    positions: torch.Tensor     # [B, P] int64 positions; slots past a row's count point at unchosen positions
    labels: torch.Tensor        # [B, P] the original ids at chosen positions, -100 in unused slots


def max_predictions(mask_prob: float, max_length: int) -> int:
    "The official cap `max_predictions_per_seq`: 19 for mask_prob 0.15 at length 128."
    return int((mask_prob + 0.005) * max_length)


def repeat_probability(draws: int, candidates: int) -> float:
    "Chance that `draws` uniform draws with replacement among `candidates` positions repeat one (the birthday bound)."
    p_distinct = 1.0
    for i in range(draws): p_distinct *= max(candidates - i, 0) / candidates
    return 1.0 - p_distinct


def write_at_positions(input_ids: torch.Tensor, positions: torch.Tensor, values: torch.Tensor,
                       write: torch.Tensor) -> torch.Tensor:
    """`input_ids` [B, L] with `values` [B, P] written at `positions` [B, P] where `write` [B, P] is True. A position
    named by several written slots gets the floor of the mean of their values, as the official `scatter_update`
    computes it (sum of the updates, floor-divided by their count); with distinct positions that is the value itself."""
    total = torch.zeros_like(input_ids).scatter_add(1, positions, torch.where(write, values, 0))
    count = torch.zeros_like(input_ids).scatter_add(1, positions, write.long())
    return torch.where(count > 0, torch.div(total, count.clamp(min=1), rounding_mode='floor'), input_ids)


def positions_mask(input_ids: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    "[B, L] True at every position of `input_ids` [B, L] that a True slot of `slots` [B, P] names in `positions` [B, P]."
    return torch.zeros_like(input_ids).scatter_add(1, positions, slots.long()) > 0


def candidates_mask(input_ids: torch.Tensor, special_ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """[B, L] True at the tokens of `input_ids` [B, L] that masking may choose: real tokens whose id is not in
    `special_ids` (official pretrain_helpers.py `get_candidates_mask`)."""
    return (input_ids != pad_id) & ~torch.isin(input_ids, special_ids)


def mask_tokens(input_ids: torch.Tensor, special_ids: torch.Tensor, pad_id: int, mask_id: int, vocab_size: int,
                mask_prob: float = 0.15, mode: str = 'fixed', mask_token_prob: float = 0.85,
                random_token_prob: float = 0.0, draws: torch.Generator | CounterDraws | None = None,
                max_length: int | None = None) -> MaskedInputs:
    """Choose positions of `input_ids` [B, L] to predict, and corrupt them.
    `special_ids`: 1-D tensor of ids never chosen ([CLS], [SEP], [MASK], [PAD], and [UNK] if excluded).
    `draws`: where the random numbers come from (objective/draws.py): a torch.Generator (None: torch's global one),
    drawn in turn, or counter draws, pure functions of the seed and the step (they trace into a compiled graph).
    `max_length`: the config's, whose `max_predictions` caps the count, as the official N = max_predictions_per_seq
    whatever the batch's width; None: the width L of `input_ids`, so a batch padded short of max_length masks fewer.
    Either way the cap is at least 1, so that every row with a candidate masks at least one token."""
    B, L = input_ids.shape
    device, draws = input_ids.device, as_draws(draws)
    real = input_ids != pad_id                                        # [B, L]
    candidates = candidates_mask(input_ids, special_ids, pad_id)      # [B, L]
    if mode in ('fixed', 'bernoulli'):
        scores = draws.uniform((B, L), device, STREAMS['mask_positions'])  # random priorities, one per position
    if mode in ('fixed', 'with_replacement'):
        P = max(max_predictions(mask_prob, max_length or L), 1)
        # The official count counts every real token, [CLS] and [SEP] included (input_mask).
        count = (real.sum(1).float() * mask_prob).round().long().clamp(min=1, max=P)   # [B]
    if mode == 'fixed':
        # Top-P random scores among candidates is a uniform sample of distinct positions, static shape [B, P]
        # (the official draw, with replacement, is `with_replacement`); distinct positions are at most L.
        P = min(P, L)
        top, positions = scores.masked_fill(~candidates, -1.0).topk(P, dim=1)
        chosen = (torch.arange(P, device=device) < count[:, None]) & (top >= 0)         # [B, P]
    elif mode == 'with_replacement':
        # official: P independent uniform draws among the candidates (`tf.random.categorical` of log(1/n)). Slot j
        # takes the k-th candidate, k = floor(u * n): the first position whose running candidate count reaches k + 1.
        n = candidates.sum(1, keepdim=True)                                                 # [B, 1]
        u = draws.uniform((B, P), device, STREAMS['mask_positions'])
        k = (u * n).long().clamp(max=(n - 1).clamp(min=0))                                 # [B, P]
        positions = torch.searchsorted(candidates.long().cumsum(1), k + 1).clamp(max=L - 1)  # [B, P]
        chosen = (torch.arange(P, device=device) < count[:, None]) & (n > 0)
    elif mode == 'bernoulli':
        chosen_full = candidates & (scores < mask_prob)                                # [B, L]
        # Chosen positions first (stable), so slots line up with a [B, L] gather.
        positions = torch.argsort((~chosen_full).to(torch.int8), dim=1, stable=True)   # [B, L]
        chosen = chosen_full.gather(1, positions)
    else:
        raise ValueError(f"mask_mode must be 'fixed', 'with_replacement' or 'bernoulli', got {mode!r}")
    originals = input_ids.gather(1, positions)                                          # [B, P]
    labels = originals.masked_fill(~chosen, -100)
    action = draws.uniform(positions.shape, device, STREAMS['mask_actions'])
    to_mask = chosen & (action < mask_token_prob)
    to_random = chosen & (action >= mask_token_prob) & (action < mask_token_prob + random_token_prob)
    replacement = torch.where(to_mask, torch.full_like(originals, mask_id), originals)
    if random_token_prob > 0:
        random_ids = draws.integers(vocab_size, positions.shape, device, STREAMS['mask_tokens'])
        # a special id drawn keeps the original token: a random [PAD] would hide the position from attention
        to_random = to_random & ~torch.isin(random_ids, special_ids)
        replacement = torch.where(to_random, random_ids, replacement)
    if mode != 'with_replacement':
        # positions within a row are distinct: unchosen slots write their own original back, a no-op
        return MaskedInputs(input_ids.scatter(1, positions, replacement), positions, labels)
    # A repeated position is [MASK] if any of its slots masks it: the official kept slots write nothing (their position
    # is zeroed, and `scatter_update` ignores position 0). Random tokens (not official) go where no slot masks.
    masked = positions_mask(input_ids, positions, chosen & to_mask)                                   # [B, L]
    out = write_at_positions(input_ids, positions, replacement, chosen & to_random)
    return MaskedInputs(torch.where(masked, mask_id, out), positions, labels)


@dataclass(frozen=True)
class MaskingSettings:
    """How every batch is masked, in one object for the training callback, the held-out evaluation and the notebooks:
    the ids never chosen, the ids masking writes, and the config's `mask_*` keys."""
    special_ids: tuple[int, ...]   # never chosen: [CLS] [SEP] [MASK] [PAD], and [UNK] unless mask_unk
    pad_id: int
    mask_id: int
    vocab_size: int
    mask_prob: float = 0.15
    mode: str = 'fixed'
    mask_token_prob: float = 0.85
    random_token_prob: float = 0.0
    max_length: int | None = None  # the config's: its `max_predictions` is the cap (None: each batch's width)
    _special: dict = field(default_factory=dict, init=False, compare=False, repr=False)  # device -> special_ids

    @classmethod
    def for_tokenizer(cls, tokenizer, mask_unk: bool = True, **keys) -> 'MaskingSettings':
        "The settings of `tokenizer`'s special ids; official: [UNK] may be masked (`mask_unk`)."
        ids = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id, tokenizer.pad_token_id]
        if not mask_unk and tokenizer.unk_token_id is not None: ids.append(tokenizer.unk_token_id)
        return cls(tuple(ids), tokenizer.pad_token_id, tokenizer.mask_token_id, len(tokenizer), **keys)

    @classmethod
    def from_config(cls, cfg, tokenizer) -> 'MaskingSettings':
        "The settings of a `PretrainConfig` and its tokenizer."
        return cls.for_tokenizer(tokenizer, cfg.mask_unk, mask_prob=cfg.mask_prob, mode=cfg.mask_mode,
                                 mask_token_prob=cfg.mask_token_prob, random_token_prob=cfg.random_token_prob,
                                 max_length=cfg.max_length)

    def special_tensor(self, device: torch.device) -> torch.Tensor:
        "`special_ids` as a tensor on `device`, made once per device: no host-to-device copy per batch."
        if device not in self._special: self._special[device] = torch.tensor(self.special_ids, device=device)
        return self._special[device]

    def __call__(self, input_ids: torch.Tensor, draws: torch.Generator | CounterDraws | None = None) -> MaskedInputs:
        "`mask_tokens` of `input_ids` [B, L] with these settings, its random numbers from `draws`."
        return mask_tokens(input_ids, self.special_tensor(input_ids.device), self.pad_id, self.mask_id, self.vocab_size,
                           self.mask_prob, self.mode, self.mask_token_prob, self.random_token_prob, draws,
                           self.max_length)
