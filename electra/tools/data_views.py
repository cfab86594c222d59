"""Looking at pretraining data: built examples decoded with their segment boundaries and token types, and the tokens a
batch's masking chose.

Everything returns strings or pandas DataFrames, for notebooks and for printing. Rendering:
`A: [CLS] the cow eats . [SEP] | B: it was hungry . [SEP]` (token type 0 after `A:`, type 1 after `B:`,
WordPiece continuations joined to their word); a position chosen by masking reads `«cow→[MASK]»` when replaced
by [MASK], `«cow»` when kept, `«cow→hen»` when replaced by a random token.
"""
from __future__ import annotations

import pandas as pd
import torch

__all__ = ['render_example', 'examples_frame', 'mask_batch', 'masked_frame']


def _ids(x) -> list[int]:
    return [int(i) for i in (x.tolist() if hasattr(x, 'tolist') else x)]


def _join(tokens: list[tuple[str, str]]) -> str:
    "(shown, token) pairs separated by spaces, WordPiece continuations ('##ing') glued to the word before."
    out = ''
    for shown, token in tokens:
        glue = token.startswith('##') and out
        if shown == token and glue: shown = shown[2:]
        out += shown if glue else (' ' + shown if out else shown)
    return out


def _render(tokenizer, ids: list[int], types: list[int], marks: dict[int, str]) -> str:
    "`A: ... | B: ...` with the token at each position of `marks` shown as its mark; padding dropped."
    segments: dict[int, list[tuple[str, str]]] = {0: [], 1: []}
    for i, (t, ty) in enumerate(zip(tokenizer.convert_ids_to_tokens(ids), types)):
        if ids[i] != tokenizer.pad_token_id: segments[ty].append((marks.get(i, t), t))
    return 'A: ' + _join(segments[0]) + (' | B: ' + _join(segments[1]) if segments[1] else '')


def _marks(tokenizer, ids: list[int], after: list[int], chosen) -> dict[int, str]:
    "«tok→[MASK]», «tok» (kept) or «tok→other» (random) for each chosen position."
    marks = {}
    for p in chosen:
        before, now = tokenizer.convert_ids_to_tokens([ids[p], after[p]])
        marks[p] = f'«{before}»' if ids[p] == after[p] else f'«{before}→{now}»'
    return marks


def render_example(tokenizer, input_ids, token_type_ids, masked_ids=None, chosen=None) -> str:
    """One example (padding dropped) as `A: [CLS] ... [SEP] | B: ... [SEP]`. With `masked_ids` (the same example
    after masking), the `chosen` positions (default: those that changed) are marked: «tok→[MASK]», «tok» (kept)
    or «tok→other» (random)."""
    ids, types = _ids(input_ids), _ids(token_type_ids)
    if masked_ids is None: return _render(tokenizer, ids, types, {})
    after = _ids(masked_ids)
    chosen = [i for i in range(len(ids)) if ids[i] != after[i]] if chosen is None else _ids(chosen)
    return _render(tokenizer, ids, types, _marks(tokenizer, ids, after, chosen))


def examples_frame(dataset, tokenizer, n: int = 5, start: int = 0) -> pd.DataFrame:
    """Examples `start`, ..., `start + n - 1` of a built dataset: document, length, segment lengths (without
    [CLS]/[SEP]) and the rendered example."""
    rows = []
    for i in range(start, min(start + n, len(dataset))):
        ex = dataset[i]
        ids, types = ex['input_ids'], ex['token_type_ids']
        n_b = sum(types)
        rows.append({'row': i, 'document': ex.get('document'), 'tokens': len(ids), 'len_a': len(ids) - n_b - 2,
                     'len_b': max(n_b - 1, 0), 'example': render_example(tokenizer, ids, types)})
    return pd.DataFrame(rows)


def mask_batch(input_ids: torch.Tensor, masking, seed: int = 0):
    """A padded batch masked as pretraining masks it (`masking`: a `MaskingSettings`), with its own seeded generator
    (no run's state touched)."""
    return masking(input_ids, torch.Generator(device=input_ids.device).manual_seed(seed))


def masked_frame(input_ids: torch.Tensor, token_type_ids: torch.Tensor, masked, tokenizer, n: int = 4) -> pd.DataFrame:
    """The first `n` examples of a batch with the positions masking chose marked (see the module docstring), and
    how many positions were chosen, replaced by [MASK], kept and replaced by a random token. `masked` is `mask_batch`'s
    (or `mask_tokens`') result for `input_ids`."""
    rows = []
    for r in range(min(n, input_ids.shape[0])):
        # positions, not slots: one drawn in several slots (`mask_mode: with_replacement`) is one token of the text
        chosen = masked.positions[r][masked.labels[r] >= 0].unique()
        before, after = input_ids[r, chosen], masked.input_ids[r, chosen]
        n_mask = int((after == tokenizer.mask_token_id).sum())
        n_kept = int((after == before).sum())
        rows.append({'example': r, 'chosen': len(chosen), 'masked': n_mask, 'kept': n_kept,
                     'random': len(chosen) - n_mask - n_kept,
                     'example_masked': render_example(tokenizer, input_ids[r], token_type_ids[r], masked.input_ids[r],
                                                      chosen)})
    return pd.DataFrame(rows)

