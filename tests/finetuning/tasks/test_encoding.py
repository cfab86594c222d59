"""electra/finetuning/tasks/encoding.py: truncation, encoding, its cache, batches."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from electra.finetuning.tasks.encoding import LengthBatchSampler, encode, encode_cached, make_loader, truncate_pair


def test_truncate_pair_follows_bert():
    # hand-worked: drop from the longer segment, from B on a tie, until the pair fits
    assert truncate_pair(3, 2, 10) == (3, 2)
    assert truncate_pair(10, 2, 6) == (4, 2)
    assert truncate_pair(2, 10, 6) == (2, 4)
    assert truncate_pair(5, 5, 6) == (3, 3)
    assert truncate_pair(5, 4, 6) == (3, 3)
    assert truncate_pair(4, 5, 7) == (4, 3)
    assert truncate_pair(0, 9, 4) == (0, 4)


class WordTokenizer:
    "A stand-in tokenizer: one id per whitespace word (ids from 10), [CLS] 1, [SEP] 2."
    cls_token_id, sep_token_id, pad_token_id = 1, 2, 0

    def __call__(self, texts, **kw):
        return {'input_ids': [[10 + int(w) for w in t.split()] for t in texts]}

    def get_vocab(self): return {'[PAD]': 0}


def test_encode_builds_bert_inputs():
    from electra.finetuning.tasks.sources import Examples
    ex = Examples(np.arange(3), ['0 1 2 3 4 5 6', '0 1', '5'], ['7 8', '3 4 5 6 7 8 9', '1'], np.array([0, 1, 0]))
    enc = encode(ex, WordTokenizer(), max_length=8)  # room for 5 segment tokens
    assert enc.tokens(0).tolist() == [1, 10, 11, 12, 2, 17, 18, 2]
    assert enc.tokens(1).tolist() == [1, 10, 11, 2, 13, 14, 15, 2]
    assert enc.tokens(2).tolist() == [1, 15, 2, 11, 2]
    assert enc.n_first.tolist() == [5, 4, 3]
    single = encode(Examples(np.arange(1), ['0 1 2 3 4 5 6 7 8'], None, np.array([1])), WordTokenizer(), 6)
    assert single.tokens(0).tolist() == [1, 10, 11, 12, 13, 2] and single.n_first.tolist() == [6]
    # padded batches: attention on real tokens, token type 1 for B [SEP]
    ids, mask, types, labels = next(iter(make_loader(enc, 3, False, pad_id=0)))
    order = list(next(iter(make_loader(enc, 3, False, pad_id=0).batch_sampler)))
    assert order == [0, 1, 2]  # longest first, stable
    assert ids[2].tolist() == [1, 15, 2, 11, 2, 0, 0, 0] and mask[2].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    assert types[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1] and types[2].tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
    assert labels.tolist() == [0, 1, 0]


def test_a_second_text_of_no_tokens_is_none_as_in_the_official_featurize():
    """An empty (or all-space) second text: the official featurize adds B and its [SEP] only `if tokens_b`, and cuts A
    to max_length - 2 (google-research/electra classification_tasks.py), as transformers' tokenizer(a, '') does. It was
    encoded `[CLS] A [SEP] [SEP]`, so the exported folder called as its card says gave other logits (R20a-4)."""
    from electra.finetuning.tasks.sources import Examples
    ex = Examples(np.arange(4), ['0', '0', '0 1 2 3 4 5 6', ''], ['', '   ', '', ''], np.array([0, 1, 0, 1]))
    enc = encode(ex, WordTokenizer(), max_length=6)
    assert [enc.tokens(i).tolist() for i in range(4)] == [[1, 10, 2], [1, 10, 2], [1, 10, 11, 12, 13, 2], [1, 2]]
    assert enc.n_first.tolist() == [3, 3, 6, 2]  # token type 0 throughout: no second segment


def test_encode_cache_is_reused_and_keyed(tmp_path):
    from electra.finetuning.tasks.sources import Examples
    ex = Examples(np.arange(2), ['0 1', '2'], None, np.array([0, 1]))
    a = encode_cached(ex, WordTokenizer(), 8, tmp_path, 'X-train')
    files = list(tmp_path.glob('X-train-*.npz'))
    assert len(files) == 1
    b = encode_cached(ex, WordTokenizer(), 8, tmp_path, 'X-train')
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.offsets, b.offsets) and len(list(tmp_path.iterdir())) == 1
    encode_cached(ex, WordTokenizer(), 6, tmp_path, 'X-train')  # another max_length: another entry
    encode_cached(Examples(np.arange(2), ['0 1', '3'], None, np.array([0, 1])), WordTokenizer(), 8, tmp_path, 'X-train')
    assert len(list(tmp_path.glob('X-train-*.npz'))) == 3


@pytest.mark.parametrize('damage', [lambda b: b'garbage' * 100, lambda b: b[:len(b) // 2]], ids=['garbage', 'truncated'])
def test_a_damaged_cache_file_is_encoded_again(tmp_path, damage):
    "As the QA windows' cache: a damaged file is made again, not read. Before: a ValueError or BadZipFile traceback."
    from electra.finetuning.tasks.sources import Examples
    ex = Examples(np.arange(2), ['0 1', '2'], None, np.array([0, 1]))
    a = encode_cached(ex, WordTokenizer(), 8, tmp_path, 'X-train')
    (path,) = tmp_path.glob('X-train-*.npz')
    path.write_bytes(damage(path.read_bytes()))
    b = encode_cached(ex, WordTokenizer(), 8, tmp_path, 'X-train')
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.label, b.label)
    assert np.array_equal(np.load(path)['ids'], a.ids)  # written again, whole


def test_length_batches_cover_everything_and_keep_padding_small():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 128, size=1000)
    sampler = LengthBatchSampler(lengths, 32, shuffle=True, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 32
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    padded = sum(len(b) * lengths[b].max() for b in batches)
    random_padded = sum(len(b) * lengths[b].max() for b in np.array_split(rng.permutation(1000), 32))
    assert padded < 0.75 * random_padded  # buckets pad far less than random batches
    assert [b.tolist() for b in list(sampler)] != [b.tolist() for b in batches]  # a fresh order each epoch
    again = LengthBatchSampler(lengths, 32, shuffle=True, seed=1)
    assert [b.tolist() for b in again] == [b.tolist() for b in batches]  # and reproducible from the seed


def test_random_batches_are_a_fresh_permutation_cut_in_order():
    "Without bucketing (the official batches): pass k is the k-th permutation of the seeded generator, cut in order."
    lengths = np.random.default_rng(0).integers(5, 128, size=100)
    sampler = LengthBatchSampler(lengths, 32, shuffle=True, seed=4, bucketing=False)
    rng = np.random.default_rng(4)
    for _ in range(2):
        perm = rng.permutation(100)
        assert [b.tolist() for b in sampler] == [perm[i:i + 32].tolist() for i in range(0, 100, 32)]


def test_batches_are_padded_up_to_the_smallest_bucket_that_holds_them():
    """With `buckets` every batch takes one of a few lengths (static shapes for compiled code): the smallest bucket at
    least as long as its longest example, the extra columns padding; without, the longest example's length."""
    from electra.finetuning.tasks.encoding import padded_length
    from electra.finetuning.tasks.sources import Examples
    assert [padded_length(n, (16, 8, 32)) for n in (1, 8, 9, 16, 17, 32, 40)] == [8, 8, 16, 16, 32, 32, 40]
    assert padded_length(11) == 11
    texts = [' '.join(['1'] * n) for n in (2, 3, 5, 9, 12, 20)]
    enc = encode(Examples(np.arange(6), texts, None, np.arange(6) % 2), WordTokenizer(), max_length=32)
    plain = list(make_loader(enc, 2, False, pad_id=0))
    bucketed = list(make_loader(enc, 2, False, pad_id=0, buckets=(8, 16, 32)))
    assert [b[0].shape[1] for b in plain] == [22, 11, 5] and [b[0].shape[1] for b in bucketed] == [32, 16, 8]
    for p, b in zip(plain, bucketed):
        n = p[0].shape[1]
        for x, y in zip(p[:3], b[:3]):
            assert torch.equal(y[:, :n], x) and not y[:, n:].any()  # the same tokens, then pad id 0, mask 0, type 0
        assert torch.equal(p[3], b[3])


def test_encoders_that_cut_inputs_themselves_do_not_warn_that_a_text_is_too_long(tmp_path):
    """A model's tokenizer knows its length (`model_max_length`: the position table, as an export or a hub model has
    it). GLUE, QA and tagging encode a long text whole and cut it themselves: transformers' warning that the sequence
    'will result in indexing errors' would be false, and alarming."""
    from transformers import ElectraTokenizerFast
    from electra.finetuning.tasks.sources import Examples
    from electra.finetuning.tasks.qa.data import QAExample
    from electra.finetuning.tasks.qa.features import featurize
    from electra.finetuning.tasks.tagging.encoding import word_pieces
    words = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'the', 'cat', 'sat', '.']
    tok = ElectraTokenizerFast(vocab={w: i for i, w in enumerate(words)}, model_max_length=16)
    long = 'the cat sat . ' * 20
    encoded = encode(Examples(np.arange(1), [long], [long], np.zeros(1, dtype=np.int64)), tok, 16)
    assert len(encoded.tokens(0)) == 16
    featurize([QAExample('q', 'the cat', long, ((4, 7),), False, ('cat',))], tok, 16, 4, 4)
    word_pieces([long.split()], tok)
    assert not tok.deprecation_warnings.get('sequence-length-is-longer-than-the-specified-maximum')


def test_a_training_text_mostly_unknown_to_the_vocabulary_is_said_with_its_share_a_word_and_the_fix(tmp_path):
    """Text in NFD on a vocabulary of NFC words, or in a script the vocabulary lacks, is [UNK] for the most part and a
    run learns the majority class, silently. Counted by hand on a vocabulary of six words: "l'élève the cat" is
    l ' élève the cat in NFC (5 tokens, none [UNK]) and l ' [UNK] the cat in NFD; with "the cat sat", 1 of 8 tokens."""
    import unicodedata

    from electra.data.tokenizer import load_tokenizer
    from electra.finetuning.tasks.encoding import unknown_share_warning
    from tests.data.test_tokenizer import bert_style_vocab
    tok = load_tokenizer(str(bert_style_vocab(tmp_path / 'v.txt', ['the', 'cat', 'sat', 'élève', 'l', "'"])),
                         strip_accents=False)
    nfc = ["l'élève the cat", 'the cat sat']
    nfd = [unicodedata.normalize('NFD', t) for t in nfc]
    assert nfd[0] != nfc[0] and tok.tokenize(nfd[0]) == ['l', "'", '[UNK]', 'the', 'cat']
    assert unknown_share_warning('fr', nfc, tok) == ''
    word = nfd[0].split()[0]
    assert unknown_share_warning('fr', nfd, tok) == (
        f"warning: fr: 12.5% of the tokens of its training text are [UNK] (e.g. {word!r}, whose '\u0301' U+0301 "
        "COMBINING ACUTE ACCENT the vocabulary lacks), so a run learns little from it; in NFC (unicodedata.normalize) "
        "0.0% would be: normalise the text to NFC, as the model's vocabulary is.")
    assert unknown_share_warning('ru', ['кот the cat sat'], tok) == (
        "warning: ru: 25.0% of the tokens of its training text are [UNK] (e.g. 'кот', whose 'к' U+043A CYRILLIC SMALL "
        "LETTER KA the vocabulary lacks), so a run learns little from it; "
        "the model's vocabulary does not cover this text: fine-tune a model pretrained on text like it.")
    assert unknown_share_warning('en', ['кот'] + ['the cat sat'] * 7, tok) == ''  # 1 of 22 tokens: 4.5%


def test_text_unknown_for_its_capitals_to_a_tokenizer_that_keeps_case_names_the_case_fix(tmp_path):
    """R24b-6: an uncased vocabulary read by a tokenizer that keeps case: 'The Movie' is [UNK] [UNK], and the warning
    said the vocabulary does not cover the text (fine-tune another model). Lower-cased, it is covered: the warning
    says so, and that the tokenizer keeps case."""
    from electra.data.tokenizer import load_tokenizer
    from electra.finetuning.tasks.encoding import unknown_share_warning
    from tests.data.test_tokenizer import bert_style_vocab
    vocab = bert_style_vocab(tmp_path / 'v.txt', ['the', 'movie', 'is', 'great'])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        tok = load_tokenizer(str(vocab), lowercase=True)
    tok.backend_tokenizer.normalizer = None  # as a folder saved with do_lower_case false reads
    assert tok.tokenize('The movie is GREAT') == ['[UNK]', 'movie', 'is', '[UNK]']
    assert unknown_share_warning('senti', ['The movie is GREAT', 'the movie is great'], tok) == (
        "warning: senti: 25.0% of the tokens of its training text are [UNK] (e.g. 'The'), so a run learns little from "
        "it; lower-cased 0.0% would be: the model's tokenizer keeps case (do_lower_case: false) on a vocabulary without "
        "upper-case entries: save the model's tokenizer lower-casing (do_lower_case: true), or lower-case the text.")


def test_a_dev_or_test_file_mostly_unknown_is_said_naming_its_split_and_file_and_a_lacking_mark_is_not_unknown(tmp_path):
    """The dev and test files are what a run is scored on and predicts: one mostly [UNK] is said as the training text
    is, naming the split and the file. A punctuation mark the vocabulary lacks (the demo vocabulary has no ',') is one
    [UNK] token a mark (BERT's basic tokenizer splits each off), of which a run loses next to nothing: not counted as
    unknown. Counted by hand on a vocabulary of four words: "thе cat sat" with a Cyrillic е is [UNK] cat sat, 1 of 3;
    "the cat , sat" is the cat [UNK] sat: 1 of 4 tokens [UNK], none of them a word's."""
    from electra.data.tokenizer import load_tokenizer
    from electra.finetuning.tasks.encoding import unknown_share_warning
    from tests.data.test_tokenizer import bert_style_vocab
    tok = load_tokenizer(str(bert_style_vocab(tmp_path / 'v.txt', ['the', 'cat', 'sat', '.'])), strip_accents=False)
    assert tok.tokenize('the cat , sat') == ['the', 'cat', '[UNK]', 'sat']
    assert unknown_share_warning('en', ['the cat , sat'] * 3, tok) == ''  # 25% [UNK], every one a comma
    cyrillic = ['th\u0435 cat sat'] * 2  # the word looks like 'the': the letter the vocabulary lacks is named
    lacks = "(e.g. 'th\u0435', whose '\u0435' U+0435 CYRILLIC SMALL LETTER IE the vocabulary lacks)"
    fix = "the model's vocabulary does not cover this text: fine-tune a model pretrained on text like it."
    assert unknown_share_warning('en', cyrillic, tok, 'dev', 'x/dev.csv') == (
        f"warning: en: 33.3% of the tokens of its dev file x/dev.csv are [UNK] {lacks}, so its dev scores say little "
        f"of a run; {fix}")
    assert unknown_share_warning('en', cyrillic, tok, 'test', 'x/test.csv') == (
        f"warning: en: 33.3% of the tokens of its test file x/test.csv are [UNK] {lacks}, so its predictions are made "
        f"from little of it; {fix}")
    # a comma beside the unknown word: the example is the word, and the share counts the comma as a known token
    assert unknown_share_warning('en', ['th\u0435 , cat sat'], tok, 'train', 'x/train.csv') == (
        f"warning: en: 25.0% of the tokens of its training file x/train.csv are [UNK] {lacks}, so a run learns little "
        f"from it; {fix}")
