"""electra/finetuning/tasks/tagging/encoding.py: first-piece labels, windows, predictions back to words."""
from __future__ import annotations

import random
import re

import numpy as np
import pytest
import torch

from electra.config.errors import ConfigError
from electra.finetuning.tasks.tagging.encoding import (IGNORE_INDEX, encode_tagging, make_tagging_loader, plan_windows,
                                                       word_pieces, word_predictions)
from tests.finetuning.tasks.tagging.conftest import random_iob2, random_word

LABELS = ['B-LOC', 'B-ORG', 'B-PER', 'I-LOC', 'I-ORG', 'I-PER', 'O']


def pieces_one_by_one(tokenizer, word: str) -> list[int]:
    "A word's pieces, tokenized alone (not through word ids)."
    return tokenizer(word, add_special_tokens=False)['input_ids']


def random_corpus(seed: int, n: int, max_words: int):
    rng = random.Random(seed)
    words = [[random_word(rng) for _ in range(rng.randint(1, max_words))] for _ in range(n)]
    return words, [random_iob2(rng, len(w)) for w in words]


def test_words_are_split_into_several_pieces(tokenizer):
    got = word_pieces([['Berlin', 'Stadt', 'zoë', '中文', "o'neil"], []], tokenizer)
    ids = tokenizer.convert_ids_to_tokens
    assert [ids(p) for p in got[0]] == [['berlin'], ['st', '##a', '##d', '##t'], ['z', '##o', '##e'], ['中', '文'],
                                        ['o', "'", 'n', '##e', '##i', '##l']] and got[1] == []


@pytest.mark.parametrize('word', ['', ' ', '\u200b', '\u00ad', '\x00'])
def test_a_word_without_word_pieces_is_refused_naming_where_it_is(tokenizer, word):
    """Such a word was fed to the model as [UNK], changing the other words' tags; transformers' tokenizer (and the
    official `tokenize_and_align`) give it no piece at all, so the model's input has nothing of it to tag."""
    words = ['Olga', word, 'Keller']
    enc = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
    assert enc['input_ids'] == tokenizer(['Olga', 'Keller'], is_split_into_words=True, add_special_tokens=False)['input_ids']
    assert 1 not in enc.word_ids()  # the reference: no piece of word 2
    with pytest.raises(ConfigError, match=rf"here 0/1: the word {re.escape(repr(word))} has no word piece"):
        encode_tagging([['a'], words], None, tokenizer, LABELS, where=lambda i, k: f'here {i - 1}/{k}')


def test_one_window_is_cls_pieces_sep_with_labels_on_first_pieces(tokenizer):
    words, tags = random_corpus(1, 50, 12)
    enc = encode_tagging(words, tags, tokenizer, LABELS, max_length=512)
    assert len(enc) == 50 and list(enc.sentence) == list(range(50))
    for i, (ws, ts) in enumerate(zip(words, tags)):
        per_word = [pieces_one_by_one(tokenizer, w) for w in ws]
        expect = [tokenizer.cls_token_id, *(p for ps in per_word for p in ps), tokenizer.sep_token_id]
        firsts = 1 + np.concatenate([[0], np.cumsum([len(p) for p in per_word])[:-1]])
        labels = np.full(len(expect), IGNORE_INDEX)
        labels[firsts] = [LABELS.index(t) for t in ts]
        assert enc.ids[enc.window(i)].tolist() == expect
        assert enc.labels[enc.window(i)].tolist() == labels.tolist()
        assert enc.word_index[enc.window(i)][firsts].tolist() == list(range(len(ws)))


@pytest.mark.parametrize('seed, max_length, stride', [(0, 512, 32), (1, 16, 4), (2, 10, 0), (3, 24, 11), (4, 6, 2)])
def test_gold_labels_round_trip_through_windows(tokenizer, seed, max_length, stride):
    words, tags = random_corpus(seed, 80, 40)
    pieces = [p for ps in word_pieces(words, tokenizer) for p in ps]
    assert sum(len(p) > 1 for p in pieces) > 0.5 * len(pieces)  # most words are several pieces ...
    assert sum(not w.isascii() for ws in words for w in ws) > 0.1 * len(pieces)  # ... many of them unicode
    enc = encode_tagging(words, tags, tokenizer, LABELS, max_length=max_length, stride=stride)
    assert enc.lengths.max() <= max_length
    assert word_predictions(enc, [enc.labels[enc.window(i)] for i in range(len(enc))], LABELS) == tags
    # as logits (one-hot on the gold label, padded to a common length), too
    width = int(enc.lengths.max())
    logits = np.zeros((len(enc), width + 3, len(LABELS)), np.float32)
    for i in range(len(enc)):
        lab = enc.labels[enc.window(i)]
        logits[i, np.flatnonzero(lab >= 0), lab[lab >= 0]] = 1.0
    assert word_predictions(enc, logits, LABELS) == tags
    ids = word_predictions(enc, [enc.labels[enc.window(i)] for i in range(len(enc))])
    assert [[LABELS[j] for j in p] for p in ids] == tags


def test_a_long_sentence_is_windowed_covering_every_word_once(tokenizer):
    rng = random.Random(5)
    words = [random_word(rng) for _ in range(400)]
    enc = encode_tagging([words], [random_iob2(rng, 400)], tokenizer, LABELS, max_length=32, stride=8)
    per_word = [pieces_one_by_one(tokenizer, w)[:30] for w in words]
    scored, prev_words = [], None
    assert len(enc) > 10
    for i in range(len(enc)):
        ids, w = enc.ids[enc.window(i)], enc.word_index[enc.window(i)]
        assert len(ids) <= 32 and ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        # whole words only: the window is the pieces of a run of words [a, b) (found by search)
        a, b = next((a, b) for a in range(prev_words[0] if prev_words else 0, 400) for b in range(a + 1, min(a + 31, 401))
                    if sum(per_word[a:b], []) == ids[1:-1].tolist())
        if prev_words is not None: assert prev_words[0] < a <= prev_words[1] and b > prev_words[1]  # overlap, progress
        prev_words = (a, b)
        scored += w[w >= 0].tolist()
        assert (enc.labels[enc.window(i)] >= 0).tolist() == (w >= 0).tolist()
    assert scored == list(range(400))  # every word scored once, in order


@pytest.mark.parametrize('seed', range(20))
def test_window_plans_partition_the_words(seed):
    rng = random.Random(seed)
    budget, stride = rng.randint(1, 30), rng.randint(0, 20)
    counts = [rng.randint(1, budget) for _ in range(rng.randint(0, 200))]
    plan = plan_windows(counts, budget, stride)
    assert [p[2] for p in plan[:1]] == ([0] if counts else []) and (plan[-1][3] if plan else 0) == len(counts)
    for k, (a, b, s, e) in enumerate(plan):
        assert a < b and a <= s <= e <= b and sum(counts[a:b]) <= budget
        if k: assert s == plan[k - 1][3] and a > plan[k - 1][0] and b > plan[k - 1][1]
        if k and stride == 0: assert a == plan[k - 1][1]  # no context asked: no overlap


def test_a_word_longer_than_a_window_keeps_its_first_pieces(tokenizer):
    enc = encode_tagging([['ab', 'x' * 50, 'c']], [['O', 'B-PER', 'O']], tokenizer, LABELS, max_length=8, stride=2)
    assert word_predictions(enc, [enc.labels[enc.window(i)] for i in range(len(enc))], LABELS) == [['O', 'B-PER', 'O']]
    assert enc.ids[enc.window(1)].tolist() == tokenizer.convert_tokens_to_ids(['[CLS]', 'x', *['##x'] * 5, '[SEP]'])


def test_unlabelled_text_and_bad_inputs(tokenizer):
    enc = encode_tagging([['a', 'b'], ['c']], None, tokenizer, LABELS)
    assert (enc.labels == IGNORE_INDEX).all() and word_predictions(enc, [[0, 6, 2, 0], [0, 3, 0]], LABELS) == [['O', 'B-PER'], ['I-LOC']]
    with pytest.raises(ConfigError, match=r"sentence 1: tag 'B-MISC' is not one of the model's labels"):
        encode_tagging([['a'], ['b']], [['O'], ['B-MISC']], tokenizer, LABELS)
    with pytest.raises(ConfigError, match='sentence 0: 2 words but 1 tags'):
        encode_tagging([['a', 'b']], [['O']], tokenizer, LABELS)
    with pytest.raises(ValueError, match='words without a prediction'):
        word_predictions(enc, [[-1] * 4, [0] * 3])
    with pytest.raises(ValueError, match='1 outputs for 2 windows'):
        word_predictions(enc, [[0] * 4])


def test_loader_pads_labels_and_gives_official_token_types(tokenizer):
    words, tags = random_corpus(7, 30, 20)
    enc = encode_tagging(words, tags, tokenizer, LABELS, max_length=16, stride=4)
    loader = make_tagging_loader(enc, batch_size=8, shuffle=False, pad_id=tokenizer.pad_token_id)
    seen = []
    for (ids, mask, types, labels), picks in zip(loader, loader.batch_sampler):
        assert ids.shape == mask.shape == types.shape == labels.shape and ids.dtype == torch.int64
        assert torch.equal(types, mask)  # official segment ids: 1 on every real token, 0 on padding
        for r, i in enumerate(picks):
            n = int(enc.lengths[i])
            assert ids[r, :n].tolist() == enc.ids[enc.window(i)].tolist() and (ids[r, n:] == tokenizer.pad_token_id).all()
            assert labels[r, :n].tolist() == enc.labels[enc.window(i)].tolist() and (labels[r, n:] == IGNORE_INDEX).all()
            seen.append(int(i))
    assert sorted(seen) == list(range(len(enc)))
    (ids, mask, types, labels, weight), = [next(iter(make_tagging_loader(enc, 64, True, 0, token_type=0, shard=(0, 1))))]
    assert weight.tolist() == [1.0] * len(weight) and not types.any()
