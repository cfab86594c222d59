"""electra/data/batches.py: pretraining batches, resume, mixing weights, the held-out split."""
import random
import warnings

import datasets
import numpy as np
import pytest
import torch

from electra.config.errors import RunWarning
from electra.data.batches import PretrainingBatches, held_out_split, pretraining_dataloader
from tests.support.data import build_pretraining_dataset


@pytest.fixture(scope='module')
def small_dataset():
    rng = random.Random(0)
    rows = [[rng.randrange(1000, 2000) for _ in range(rng.randint(3, 16))] for _ in range(37)]
    types = [[0] * (len(r) // 2) + [1] * (len(r) - len(r) // 2) for r in rows]
    return datasets.Dataset.from_dict({'input_ids': rows, 'token_type_ids': types})


def test_batches_shapes_padding_and_content(small_dataset):
    loader = pretraining_dataloader(small_dataset, batch_size=8, max_length=20, pad_token_id=7, seed=3, total_steps=6)
    batches = list(loader)
    assert len(loader) == len(batches) == 6
    rows = loader.dataset.rows
    for step, (ids, types) in enumerate(batches):
        assert ids.shape == types.shape == (8, 20) and ids.dtype == types.dtype == torch.int64
        for j, r in enumerate(rows(step)):
            want = small_dataset[int(r)]
            n = len(want['input_ids'])
            assert ids[j, :n].tolist() == want['input_ids'] and (ids[j, n:] == 7).all()
            assert types[j, :n].tolist() == want['token_type_ids'] and (types[j, n:] == 0).all()
    # the stream is pass after pass over the data, each pass a different permutation
    order = [int(r) for step in range(6) for r in rows(step)]
    assert sorted(order[:37]) == list(range(37)) and order[:37] != list(range(37))
    assert order[37:] != order[:11]


def test_resume_gives_the_tail_of_an_uninterrupted_run(small_dataset):
    full = list(pretraining_dataloader(small_dataset, 8, 16, 0, seed=11, total_steps=12))
    tail = pretraining_dataloader(small_dataset, 8, 16, 0, seed=11, total_steps=12, start_step=7)
    assert len(tail) == 5
    for (a, b), (c, d) in zip(full[7:], tail, strict=True):
        assert torch.equal(a, c) and torch.equal(b, d)
    other_seed = next(iter(pretraining_dataloader(small_dataset, 8, 16, 0, seed=12, total_steps=1)))
    assert not torch.equal(other_seed[0], full[0][0])
    assert len(pretraining_dataloader(small_dataset, 8, 16, 0, seed=11, total_steps=12, start_step=12)) == 0


def test_dataset_smaller_than_a_batch_and_worker_processes(small_dataset):
    tiny = small_dataset.select(range(3))
    ids, _ = next(iter(pretraining_dataloader(tiny, 8, 16, 0, seed=0, total_steps=1)))
    assert ids.shape == (8, 16) and {tuple(r[:3].tolist()) for r in ids} <= {tuple(r[:3]) for r in tiny['input_ids']}
    serial = list(pretraining_dataloader(small_dataset, 4, 16, 0, seed=2, total_steps=4))
    parallel = list(pretraining_dataloader(small_dataset, 4, 16, 0, seed=2, total_steps=4, num_workers=2))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(serial, parallel, strict=True))


def test_batches_reject_bad_settings(small_dataset):
    with pytest.raises(ValueError, match='start_step'):
        PretrainingBatches(small_dataset, 8, 16, 0, seed=0, total_steps=3, start_step=4)
    with pytest.raises(ValueError, match='max_length'):
        PretrainingBatches(small_dataset, 8, 8, 0, seed=0, total_steps=3)[0]
    with pytest.raises(ValueError, match='empty'):
        PretrainingBatches(small_dataset.select([]), 8, 16, 0, seed=0, total_steps=3)


def test_built_dataset_feeds_the_loader(demo, tmp_path):
    corpus, tok = demo
    ds = build_pretraining_dataset([corpus], tok, 64, tmp_path, seed=0)
    ids, types = next(iter(pretraining_dataloader(ds, 16, 64, tok.pad_token_id, seed=0, total_steps=1)))
    assert ids.shape == (16, 64) and (ids[:, 0] == tok.cls_token_id).all()
    lengths = (ids != tok.pad_token_id).sum(1)
    assert (ids[torch.arange(16), lengths - 1] == tok.sep_token_id).all()
    assert (types == 1).any() and not ((types == 1) & (ids == tok.pad_token_id)).any()


def numbered(n: int, offset: int = 0) -> datasets.Dataset:
    "Examples whose single token is their row number (+ offset), so a batch tells which rows it holds."
    return datasets.Dataset.from_dict({'input_ids': [[offset + i] for i in range(n)], 'token_type_ids': [[0]] * n})


def test_mixing_weights_set_the_share_of_each_corpus():
    a, b = numbered(60), numbered(540, offset=60)
    data = datasets.concatenate_datasets([a, b])
    mixed = PretrainingBatches(data, 32, 4, 0, seed=1, total_steps=300, parts=[60, 540], weights=[1, 1])
    rows = np.concatenate([mixed.rows(s) for s in range(300)])
    share = (rows < 60).mean()
    assert abs(share - 0.5) < 0.01  # equal weights: half of the stream from the 10x smaller corpus
    counts = np.bincount(rows[rows < 60], minlength=60)
    assert counts.max() - counts.min() <= 1  # repeated pass after pass, not drawn with replacement
    plain = np.concatenate([PretrainingBatches(data, 32, 4, 0, seed=1, total_steps=300).rows(s) for s in range(300)])
    assert abs((plain < 60).mean() - 0.1) < 0.01  # concatenated: in proportion to size
    tilted = PretrainingBatches(data, 32, 4, 0, seed=1, total_steps=100, parts=[60, 540], weights=[1, 3])
    assert abs((np.concatenate([tilted.rows(s) for s in range(100)]) < 60).mean() - 0.25) < 0.015
    # still a pure function of (seed, step): a resumed loader gives the tail of the uninterrupted one
    full = list(pretraining_dataloader(data, 8, 4, 0, seed=3, total_steps=10, parts=[60, 540], weights=[2, 1]))
    tail = list(pretraining_dataloader(data, 8, 4, 0, seed=3, total_steps=10, start_step=6, parts=[60, 540], weights=[2, 1]))
    assert all(torch.equal(x[0], y[0]) for x, y in zip(full[6:], tail, strict=True))
    with pytest.raises(ValueError, match='parts'):
        PretrainingBatches(data, 8, 4, 0, seed=0, total_steps=1, parts=[60, 500], weights=[1, 1])


def test_held_out_split_is_deterministic_disjoint_and_spread():
    parts = [numbered(1000), numbered(3000, offset=1000)]
    train, held = held_out_split(parts, 200, seed=7)
    ids = lambda ds: [r[0] for r in ds['input_ids']]
    held_ids, train_ids = ids(held), [i for t in train for i in ids(t)]
    assert len(held_ids) == 200 and not set(held_ids) & set(train_ids)
    assert sorted(held_ids + train_ids) == list(range(4000))
    assert sum(i < 1000 for i in held_ids) == 50  # shares in proportion to size
    assert min(held_ids) < 400 and max(held_ids) > 3600  # spread over the whole corpus
    assert ids(held_out_split(parts, 200, seed=7)[1]) == held_ids
    assert ids(held_out_split(parts, 200, seed=8)[1]) != held_ids
    weighted = ids(held_out_split(parts, 200, seed=7, weights=[1, 1])[1])
    assert sum(i < 1000 for i in weighted) == 100
    assert held_out_split(parts, 0, seed=7) == (parts, None)
    assert len(held_out_split([numbered(30)], 200, seed=7)[1]) == 3  # at most a tenth of a corpus


def test_more_eval_examples_than_a_tenth_of_the_corpus_are_cut_and_said():
    "--eval_examples 100000 on a small corpus held out a tenth of it without a word (P33 of the sweep)."
    with pytest.warns(RunWarning, match=r"eval_examples: 200 asked, 3 held out: at most a tenth of a corpus is held out, "
                                        r"so that the rest trains, and the corpus has 30 examples\. Set eval_examples to 3"):
        assert len(held_out_split([numbered(30)], 200, seed=7)[1]) == 3
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert len(held_out_split([numbered(30)], 3, seed=7)[1]) == 3  # what fits is not warned about



def test_the_eval_examples_a_capped_weighted_split_offers_end_the_warning_and_name_the_corpus():
    """R25b-5: with corpus_weights 1,3 over corpora of 126 and 2,261 examples, 225 asked held 12 + 169 = 181 and the
    warning offered 181, which held 12 + 136 = 148 and warned again, four times over, naming no corpus. The number
    offered now is the largest that caps no corpus (by hand: corpus a's share of n is n / 4 by largest remainder,
    at most 12: 49 gives 12.25 -> 12, 50 gives 12.5 -> 13), and the capped corpus is named."""
    parts = [numbered(126), numbered(2261, offset=126)]
    with pytest.warns(RunWarning) as seen:
        held = held_out_split(parts, 225, seed=7, weights=[1, 3], names=['corp/c/', 'demo'])[1]
    assert len(held) == 181 and [str(w.message) for w in seen] == [
        "eval_examples: 225 asked, 181 held out: at most a tenth of a corpus is held out, so that the rest trains, and "
        "corp/c/ has 126 examples (its share by weight: 56). Set eval_examples to 49 (or 0) to be told no more."]
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert len(held_out_split(parts, 49, seed=7, weights=[1, 3])[1]) == 49
    with pytest.warns(RunWarning):
        held_out_split(parts, 50, seed=7, weights=[1, 3])
