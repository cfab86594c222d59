"""Dynamic masking, a new pattern for every batch, computed on the device (spec section 2).

The official code (google-research/electra, pretrain/pretrain_helpers.py `mask`) chooses a FIXED number of
positions per sequence, round(n_real_tokens * mask_prob), at least 1 and at most
`max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length)`, and returns them as a static
[B, P] block of positions with weights: only those P hidden states reach the generator's vocabulary
projection. The replication's per-token Bernoulli draw is offered as `mode='bernoulli'` (then P = L).
Of the chosen positions 85% become [MASK] and 15% keep their token; none become a random token (not BERT's 80/10/10).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ['MaskedInputs', 'max_predictions', 'mask_tokens']


class MaskedInputs(NamedTuple):
    input_ids: torch.Tensor     # [B, L] the input with [MASK] (or kept / random tokens) at the chosen positions
    positions: torch.Tensor     # [B, P] int64 positions; slots past a row's count point at unchosen positions
    labels: torch.Tensor        # [B, P] the original ids at chosen positions, -100 in unused slots


def max_predictions(mask_prob: float, max_length: int) -> int:
    "The official cap `max_predictions_per_seq`: 19 for mask_prob 0.15 at length 128."
    return int((mask_prob + 0.005) * max_length)


def mask_tokens(input_ids: torch.Tensor, special_ids: torch.Tensor, pad_id: int, mask_id: int, vocab_size: int,
                mask_prob: float = 0.15, mode: str = 'fixed', mask_token_prob: float = 0.85,
                random_token_prob: float = 0.0, generator: torch.Generator | None = None) -> MaskedInputs:
    """Choose positions of `input_ids` [B, L] to predict, and corrupt them.
    `special_ids`: 1-D tensor of ids never chosen ([CLS], [SEP], [MASK], [PAD], and [UNK] if excluded)."""
    B, L = input_ids.shape
    device = input_ids.device
    real = input_ids != pad_id                                        # [B, L]
    candidates = real & ~torch.isin(input_ids, special_ids)           # [B, L]
    scores = torch.rand(B, L, device=device, generator=generator)     # random priorities, one per position
    if mode == 'fixed':
        P = min(max_predictions(mask_prob, L), L)
        # The official count counts every real token, [CLS] and [SEP] included (input_mask).
        count = (real.sum(1).float() * mask_prob).round().long().clamp(min=1, max=P)   # [B]
        # Top-P random scores among candidates is a uniform sample of distinct positions, static shape [B, P].
        # (The official code draws positions with replacement, which rarely repeats one; distinct is the intent.)
        top, positions = scores.masked_fill(~candidates, -1.0).topk(P, dim=1)
        chosen = (torch.arange(P, device=device) < count[:, None]) & (top >= 0)         # [B, P]
    elif mode == 'bernoulli':
        chosen_full = candidates & (scores < mask_prob)                                # [B, L]
        # Chosen positions first (stable), so slots line up with a [B, L] gather.
        positions = torch.argsort((~chosen_full).to(torch.int8), dim=1, stable=True)   # [B, L]
        chosen = chosen_full.gather(1, positions)
    else:
        raise ValueError(f"mask_mode must be 'fixed' or 'bernoulli', got {mode!r}")
    originals = input_ids.gather(1, positions)                                          # [B, P]
    labels = originals.masked_fill(~chosen, -100)
    action = torch.rand(positions.shape, device=device, generator=generator)
    to_mask = chosen & (action < mask_token_prob)
    to_random = chosen & (action >= mask_token_prob) & (action < mask_token_prob + random_token_prob)
    replacement = torch.where(to_mask, torch.full_like(originals, mask_id), originals)
    if random_token_prob > 0:
        random_ids = torch.randint(vocab_size, positions.shape, device=device, generator=generator)
        replacement = torch.where(to_random, random_ids, replacement)
    # Unchosen slots write their own original back: positions within a row are distinct, so this is a no-op there.
    return MaskedInputs(input_ids.scatter(1, positions, replacement), positions, labels)
