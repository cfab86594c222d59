"""Statistics of a built pretraining dataset, to hold against what the official example builder predicts
(build_pretraining_dataset.py; spec section 6)."""
from __future__ import annotations

import numpy as np

__all__ = ['example_statistics']


def example_statistics(dataset, max_length: int, limit: int = 200_000) -> dict:
    """What the official example builder predicts about a built dataset, measured on its first `limit` examples
    (the last two need the `document` column):

    - `single_segment`: share of examples without segment B (about 0.1 by the official draw, more on corpora
      whose sentences are long, as a sentence longer than A's target may take the whole example);
    - `shorter`: share of examples under `max_length` tokens;
    - `document_ends`: share that are the last example of their document (the builder emits what is left there);
    - `short_targets`: share of the other examples that are under `max_length`: the 5% draw of a shorter target
      (times 1 - 1/(max_length - 4), as randint(5, max_length) may draw max_length itself).
    """
    table = dataset.with_format('arrow')[:min(limit, len(dataset))]
    lengths = table['input_ids'].combine_chunks().value_lengths().to_numpy()
    type_sums = _list_sums(table['token_type_ids'])
    out = {'examples': int(len(lengths)), 'mean_tokens': float(lengths.mean()) if len(lengths) else 0.0,
           'single_segment': float((type_sums == 0).mean()), 'shorter': float((lengths < max_length).mean())}
    if 'document' in table.column_names:
        doc = table['document'].to_numpy()
        last = np.append(doc[1:] != doc[:-1], True)
        out['document_ends'] = float(last.mean())
        out['short_targets'] = float((lengths[~last] < max_length).mean()) if (~last).any() else 0.0
    return out


def _list_sums(column) -> np.ndarray:
    "Sum of each list of an Arrow list column (the number of type-1 tokens per example)."
    arr = column.combine_chunks()
    offsets = arr.offsets.to_numpy()
    values = np.concatenate([[0], np.cumsum(arr.flatten().to_numpy(zero_copy_only=False).astype(np.int64))])
    return values[offsets[1:]] - values[offsets[:-1]]
