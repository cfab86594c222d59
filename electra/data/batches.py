"""Held-out examples and training batches: `held_out_split` sets aside a deterministic evaluation slice;
`pretraining_dataloader` serves full [batch_size, max_length] batches whose content depends only on (seed, step),
concatenating corpora or mixing them with weights, so a resumed run sees exactly the batches an uninterrupted one
would have.
"""
from __future__ import annotations

import warnings
from typing import Optional

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader

from electra.config.errors import ConfigError, RunWarning

__all__ = ['held_out_split', 'mixing_line', 'pad_examples', 'PretrainingBatches', 'pretraining_dataloader']


# ---------------------------------------------------------------- held-out examples

def _largest_remainder(total: int, weights: list[float]) -> list[int]:
    "`total` split in proportion to `weights` (integers summing to `total`)."
    exact = [total * w / sum(weights) for w in weights]
    out = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: out[i] - exact[i])[:total - sum(out)]: out[i] += 1
    return out


def mixing_line(sizes: list[int], weights: list[float], names: list[str], steps: int, batch_size: int) -> str:
    """What `corpus_weights` give each corpus, in one line: its share of the rows (the sampler's quotas, as
    `PretrainingBatches` draws them), about how many rows of the run's `steps` and how many passes over its examples
    that is (a small corpus weighted up is seen many times over)."""
    quotas = np.maximum(1, np.array(_largest_remainder(sum(sizes), weights), dtype=np.int64))
    rows = quotas / quotas.sum() * steps * batch_size
    return 'corpus_weights: ' + ', '.join(
        f"{name} {w:g} ({q / quotas.sum():.0%} of the rows, about {r:,.0f} in {steps:,} steps: {r / n:.2f} passes over "
        f"its {n:,} examples)" for name, w, q, r, n in zip(names, weights, quotas, rows, sizes))


def _fitting(parts: list[datasets.Dataset], n: int, weights: list[float]) -> int:
    "The largest number up to `n` whose shares (`_largest_remainder` by `weights`) hold at most a tenth of each part."
    caps = [len(p) // 10 for p in parts]
    m = min(n, int(min(c * sum(weights) / w for c, w in zip(caps, weights) if w)) + 1)  # an estimate from above
    while m > 0 and any(s > c for s, c in zip(_largest_remainder(m, weights), caps)): m -= 1
    return m


def held_out_split(parts: list[datasets.Dataset], n: int, seed: int, weights: Optional[list[float]] = None,
                   names: Optional[list[str]] = None) -> tuple[list[datasets.Dataset], Optional[datasets.Dataset]]:
    """Set aside about `n` examples for evaluation: (the training part of each of `parts`, the held-out examples).

    Each part gives its share of `n` (in proportion to `weights`, else to its size; at most a tenth of it),
    as 16 contiguous blocks (or fewer), one at a seeded place in each sixteenth of the part, so the slice
    spans the whole corpus and only the documents at block edges are shared with training. The same
    (parts, n, seed) always give the same split; the training parts never contain a held-out example. A part
    capped is said in one warning, naming it (`names`, e.g. the corpus entries) and the `n` that caps none; a weighted
    part with no example (de-duplication emptied it) is refused, naming it.
    """
    name = lambda k: names[k] if names else 'the corpus' if len(parts) == 1 else f'corpus {k + 1}'
    if empty := [k for k, part in enumerate(parts) if weights and not len(part)]:  # else a weight draws from nothing
        k = empty[0]
        raise ConfigError(f"corpus_weights: {name(k)} has no examples left (each of its documents repeats one of an "
                          f"earlier entry, or it holds none), so its weight {weights[k]} has nothing to draw from. Drop "
                          f"it from corpus and its weight from corpus_weights, or set deduplicate false to train on it "
                          f"again.")
    if n <= 0: return list(parts), None
    by = weights or [len(p) for p in parts]
    shares = _largest_remainder(n, by)
    train, held = [], []
    capped = [k for k, (part, want) in enumerate(zip(parts, shares)) if want > len(part) // 10]
    if capped:  # the held-out line of the log showed the smaller count, but nothing said eval_examples was cut
        got = sum(min(want, len(p) // 10) for p, want in zip(parts, shares))
        fits = _fitting(parts, n, by)
        share = lambda k: f' (its share by weight: {shares[k]})' if weights else ''
        which = ', '.join(f'{name(k)} has {len(parts[k])} examples{share(k)}' for k in capped)
        warnings.warn(f"eval_examples: {n} asked, {got} held out: at most a tenth of a corpus is held out, so that the "
                      f"rest trains, and {which}. Set eval_examples to {fits}{' (or 0)' if fits else ''} to be told no "
                      "more.", RunWarning, stacklevel=2)
    for k, (part, want) in enumerate(zip(parts, shares)):
        want = min(want, len(part) // 10)
        if want == 0:
            train.append(part)
            continue
        blocks = min(16, want)
        sizes = _largest_remainder(want, [1] * blocks)
        rng = np.random.default_rng([seed, k])
        bounds = np.linspace(0, len(part), blocks + 1).astype(int)
        spans = [(lo + int(rng.integers(0, hi - lo - size + 1)), size) for lo, hi, size in zip(bounds, bounds[1:], sizes)]
        pieces, at = [], 0
        for start, size in spans:
            if start > at: pieces.append(part.select(range(at, start)))  # contiguous: a slice, no index file
            held.append(part.select(range(start, start + size)))
            at = start + size
        if at < len(part): pieces.append(part.select(range(at, len(part))))
        train.append(datasets.concatenate_datasets(pieces))
    return train, datasets.concatenate_datasets(held) if held else None


# ---------------------------------------------------------------- batches

def pad_examples(table: pa.Table, max_length: int, pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    "Rows of an Arrow table of examples as int64 tensors [n, max_length]: input ids padded with `pad_token_id`, types with 0."
    return _pad(table['input_ids'], max_length, pad_token_id), _pad(table['token_type_ids'], max_length, 0)


def _pad(column, max_length: int, value: int) -> torch.Tensor:
    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    if len(lengths) and lengths.max() > max_length:
        raise ValueError(f'an example has {lengths.max()} tokens, more than max_length {max_length}: '
                         'the dataset was built for another max_length')
    out = np.full((len(lengths), max_length), value, dtype=np.int64)
    out[np.arange(max_length) < lengths[:, None]] = lists.flatten().to_numpy(zero_copy_only=False)
    return torch.from_numpy(out)


class PretrainingBatches(torch.utils.data.Dataset):
    """Batches `start_step`, ..., `total_steps - 1` of an endless, seeded stream of examples; item i is batch
    `start_step + i` as `(input_ids, token_type_ids)`, int64 tensors of shape [batch_size, max_length] padded
    with `pad_token_id` and 0.

    The stream is pass 0, pass 1, ... over the dataset, pass k in the order of a permutation seeded by
    `seed + k`, cut into consecutive batches. A batch is therefore a pure function of (seed, step): starting
    at `start_step` gives exactly the batches an uninterrupted run sees from that step on, and a dataset
    smaller than one batch still fills full batches.

    With `weights`, the dataset is the concatenation of corpora of sizes `parts` mixed in proportion to the
    weights: a pass still has len(dataset) slots, corpus c getting round(w_c * len(dataset)) of them (its
    quota); slot j of corpus c in pass k takes example k * quota + j of that corpus's own stream, which is
    pass after pass over the corpus, each pass a permutation seeded by (seed, c, corpus pass). So a corpus
    weighted above its size is repeated, one below it is sampled without repetition, and a batch is still
    a pure function of (seed, step).

    With `world_size` processes, process `rank` serves rows [rank * b, (rank + 1) * b) of each batch, b = batch_size /
    world_size: together the processes see the whole batch of that step, whatever their number.
    """

    def __init__(self, dataset: datasets.Dataset, batch_size: int, max_length: int, pad_token_id: int, seed: int,
                 total_steps: int, start_step: int = 0, parts: Optional[list[int]] = None,
                 weights: Optional[list[float]] = None, rank: int = 0, world_size: int = 1):
        if len(dataset) == 0: raise ValueError('the pretraining dataset is empty')
        if batch_size % world_size:
            raise ValueError(f'batch_size {batch_size} is the global batch: it must divide evenly over the '
                             f'{world_size} processes')
        self.rank, self.world_size = rank, world_size
        if not 0 <= start_step <= total_steps:
            raise ValueError(f'start_step {start_step} must be between 0 and total_steps {total_steps}')
        self.data = dataset.with_format('arrow')
        self.batch_size, self.max_length, self.pad_token_id = batch_size, max_length, pad_token_id
        self.seed, self.total_steps, self.start_step = seed, total_steps, start_step
        self._perms: dict = {}
        self.weights = weights
        if weights is not None:
            parts = list(parts or [len(dataset)])
            if len(parts) != len(weights) or sum(parts) != len(dataset) or min(parts) <= 0 or min(weights) <= 0:
                raise ValueError(f'parts {parts} must be positive sizes adding up to the dataset ({len(dataset)}), '
                                 f'one per weight, and weights {weights} must be positive')
            self.parts = np.array(parts, dtype=np.int64)
            self.starts = np.concatenate([[0], np.cumsum(self.parts)[:-1]])
            self.quotas = np.maximum(1, np.array(_largest_remainder(len(dataset), weights), dtype=np.int64))
            self.slot_starts = np.concatenate([[0], np.cumsum(self.quotas)[:-1]])
            self.slots = int(self.quotas.sum())

    def __len__(self) -> int:
        return self.total_steps - self.start_step

    def _perm(self, key: tuple, n: int, seed) -> np.ndarray:
        if key not in self._perms:
            g = torch.Generator().manual_seed(seed)
            self._perms[key] = torch.randperm(n, generator=g, dtype=torch.int32).numpy()
        return self._perms[key]

    def rows(self, step: int) -> np.ndarray:
        "The dataset rows of batch `step`."
        pos = np.arange(step * self.batch_size, (step + 1) * self.batch_size, dtype=np.int64)
        n = len(self.data) if self.weights is None else self.slots
        passes, offsets = np.divmod(pos, n)
        needed = {('pass', k) for k in np.unique(passes).tolist()}
        out = np.empty_like(pos)
        for _, k in needed:
            out[passes == k] = self._perm(('pass', k), n, self.seed + k)[offsets[passes == k]]
        if self.weights is not None:  # `out` holds slots: map each to its corpus's own stream
            slots = out
            corpus = np.searchsorted(self.slot_starts, slots, side='right') - 1
            q = passes * self.quotas[corpus] + slots - self.slot_starts[corpus]   # position in that corpus's stream
            cpass, r = np.divmod(q, self.parts[corpus])
            out = np.empty_like(pos)
            for c, p in sorted(set(zip(corpus.tolist(), cpass.tolist()))):
                at = (corpus == c) & (cpass == p)
                seed = int(np.random.SeedSequence([self.seed, c, p]).generate_state(1)[0])
                out[at] = self.starts[c] + self._perm(('corpus', c, p), int(self.parts[c]), seed)[r[at]]
                needed.add(('corpus', c, p))
        # keep only the permutations this batch touches (usually one or two per stream): each holds one int32
        # per example
        self._perms = {k: v for k, v in self._perms.items() if k in needed}
        return out

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < len(self): raise IndexError(i)
        b = self.batch_size // self.world_size
        rows = self.rows(self.start_step + i)[self.rank * b:(self.rank + 1) * b]  # [b] of the global batch's rows
        return pad_examples(self.data[rows], self.max_length, self.pad_token_id)


def pretraining_dataloader(dataset: datasets.Dataset, batch_size: int, max_length: int, pad_token_id: int,
                           seed: int, total_steps: int, start_step: int = 0, num_workers: int = 0,
                           parts: Optional[list[int]] = None, weights: Optional[list[float]] = None,
                           rank: int = 0, world_size: int = 1) -> DataLoader:
    """A DataLoader over `PretrainingBatches`: exactly `total_steps - start_step` full batches, in step order
    (corpora of sizes `parts` mixed by `weights` when given; this process's share of each with `world_size`)."""
    batches = PretrainingBatches(dataset, batch_size, max_length, pad_token_id, seed, total_steps, start_step,
                                 parts, weights, rank, world_size)
    # batch_size=None: each item already is a batch
    return DataLoader(batches, batch_size=None, shuffle=False, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available())
