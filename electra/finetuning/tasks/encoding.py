"""Sentence and sentence-pair examples (GLUE's and task files') as model inputs: BERT-style encoding and truncation, an
on-disk token cache; length-bucketed batches and their sharding over processes, which tagging and QA batch with too.

Encoding follows the official ELECTRA `featurize` (google-research/electra, finetune/classification/
classification_tasks.py): each segment is tokenized on its own, a pair is cut to `max_length - 3` tokens by
repeatedly dropping the last token of the longer segment (of B on a tie), a single segment to `max_length - 2`;
the input is `[CLS] A [SEP] B [SEP]` with token type 0 up to the first [SEP] and 1 after it; a second text of no
tokens (empty, or spaces) is none, `[CLS] A [SEP]` (the official `if tokens_b:`, as transformers' `tokenizer(a, '')`
gives it). Examples are stored
unpadded; each batch is padded only to its own longest example, and batches group examples of similar length.
"""
from __future__ import annotations

import hashlib
import io
import math
import unicodedata
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from electra.config.errors import ConfigError
from electra.data.tokenizer import UNKNOWN_SAMPLE, UNKNOWN_SHARE, capitals_unknown, tokenizer_fingerprint
from electra.finetuning.tasks.sources import Examples
from electra.runtime.files import atomic_write_bytes, path_inside
from electra.runtime.processes import is_main_process

__all__ = ['padded_length', 'truncate_pair', 'Encoded', 'encode', 'encode_texts', 'encode_cached', 'LengthBatchSampler', 'ShardedBatchSampler', 'LoaderIndices',
           'make_loader', 'NPZ_DAMAGED', 'UNKNOWN_SHARE', 'unknown_share_warning']

_CACHE_VERSION = 2  # 2: a second text of no tokens encoded as none


def truncate_pair(len_a: int, len_b: int, max_tokens: int) -> tuple[int, int]:
    "Segment lengths after BERT's `_truncate_seq_pair`: drop the last token of the longer segment (B on a tie) until they fit."
    while len_a + len_b > max_tokens:
        if len_a > len_b: len_a -= 1
        else: len_b -= 1
    return len_a, len_b


@dataclass
class Encoded:
    "Token ids of all examples of a split, concatenated; example i is `ids[offsets[i]:offsets[i+1]]`."
    ids: np.ndarray       # int32, all examples' tokens
    offsets: np.ndarray   # int64, n + 1
    n_first: np.ndarray   # int32, tokens of token type 0 ([CLS] A [SEP]) per example
    label: np.ndarray     # class ids (int64) or scores (float32); -1 in test splits
    idx: np.ndarray       # int64, the examples' own indices

    def __len__(self) -> int: return len(self.label)

    @property
    def lengths(self) -> np.ndarray: return np.diff(self.offsets)

    def tokens(self, i: int) -> np.ndarray: return self.ids[self.offsets[i]:self.offsets[i + 1]]


def _special_ids(tokenizer) -> tuple[int, int]:
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls is None or sep is None:
        raise ConfigError("model: the tokenizer has no [CLS]/[SEP] tokens; an ELECTRA (BERT WordPiece) tokenizer is needed.")
    return cls, sep


# what a split mostly [UNK] costs: its training text is learned from, its dev text scored on, its test text predicted
_UNKNOWN_COST = {'train': 'a run learns little from it', 'dev': 'its dev scores say little of a run',
                 'test': 'its predictions are made from little of it'}


def _ids(texts: list[str], tokenizer) -> list[list[int]]:
    return tokenizer(texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False,
                     verbose=False)['input_ids']


def _is_punctuation(c: str) -> bool:
    "BERT's `_is_punctuation` (google-research/bert tokenization.py): ASCII non-alphanumerics and Unicode's P* classes."
    return 33 <= ord(c) <= 47 or 58 <= ord(c) <= 64 or 91 <= ord(c) <= 96 or 123 <= ord(c) <= 126 or \
        unicodedata.category(c).startswith('P')


def _lacking_marks(texts: list[str], tokenizer) -> set[str]:
    "The punctuation marks of `texts` that the vocabulary lacks (each one [UNK] on its own)."
    marks = sorted({c for t in texts for c in t if _is_punctuation(c)})
    return {c for c, row in zip(marks, _ids(marks, tokenizer) if marks else []) if row == [tokenizer.unk_token_id]}


def _unknown_share(texts: list[str], tokenizer) -> tuple[float, list[list[int]], set[str]]:
    """The share of [UNK] among the tokens of `texts`, a punctuation mark the vocabulary lacks not counted as unknown:
    BERT's basic tokenizer splits each mark off (`_run_split_on_punc`), so it is one [UNK] token a mark, and a run
    loses next to nothing of a text by it (the demo vocabulary has no ','); their ids, and those marks."""
    ids, lacking = _ids(texts, tokenizer), _lacking_marks(texts, tokenizer)
    total, marks = sum(map(len, ids)), sum(t.count(c) for t in texts for c in lacking)
    unknown = sum(row.count(tokenizer.unk_token_id) for row in ids) - marks
    return (max(0, unknown) / total if total else 0.0), ids, lacking


def _lacked_letter(word: str, tokenizer) -> str:
    """', whose 'е' U+0435 CYRILLIC SMALL LETTER IE the vocabulary lacks': the first character of `word` beyond ASCII
    that the vocabulary holds neither alone nor as a continuation piece ('##е'), as the model's normalizer makes it; a
    look-alike letter or a lone combining mark reads as the word it looks like. '' when there is none (ASCII letters
    are not named: a vocabulary of words only, as a hand-made one, holds no letters alone)."""
    vocab, norm = tokenizer.get_vocab(), getattr(getattr(tokenizer, 'backend_tokenizer', None), 'normalizer', None)
    for c in word:
        n = norm.normalize_str(c) if norm is not None else c
        if ord(c) > 127 and n and n not in vocab and f'##{n}' not in vocab:
            return f", whose {c!r} U+{ord(c):04X} {unicodedata.name(c, '')}".rstrip() + ' the vocabulary lacks'
    return ''


def unknown_share_warning(name: str, texts: Sequence[str], tokenizer, split: str = 'train', file: str = '') -> str:
    """A `warning:` line when over 5% of the tokens of task `name`'s `split` (its `file`) are [UNK]: text the model's
    vocabulary does not cover (another script, look-alike letters of one; accents in another Unicode form, NFD text on
    a vocabulary of NFC words), of which a run learns next to nothing, or on which it is scored or predicts next to
    nothing (dev at the majority rate, every test prediction one class), without a word. With the share, a word made
    [UNK] and what would cover it (`_unknown_fix`); '' otherwise. Counted over up to 2,000 of the texts,
    evenly spread (the same each time)."""
    if getattr(tokenizer, 'unk_token_id', None) is None or not texts: return ''
    sample = [t for t in texts[::max(1, len(texts) // UNKNOWN_SAMPLE)][:UNKNOWN_SAMPLE] if t]
    share, ids, lacking = _unknown_share(sample, tokenizer)
    if share <= UNKNOWN_SHARE: return ''
    unk = tokenizer.unk_token_id
    word = next((w for t, row in zip(sample, ids) if unk in row for w in t.split()
                 if unk in _ids([''.join(c for c in w if c not in lacking) or ' '], tokenizer)[0]), None)
    kind = 'training' if split == 'train' else split
    whole = f'its {kind} file {file}' if file else f'its {kind} text'
    of = whole if len(sample) == len(texts) else (f'{len(sample):,} of the {len(texts):,} texts of {whole}' if file else
                                                   f'{len(sample):,} of its {len(texts):,} {kind} texts')
    example = f' (e.g. {word!r}{_lacked_letter(word, tokenizer)})' if word else ''
    cost = _UNKNOWN_COST[split.split('_')[0]]  # GLUE's dev_matched is a dev split, its test_matched a test split
    fix = _unknown_fix(sample, tokenizer)
    return f'warning: {name}: {share:.1%} of the tokens of {of} are [UNK]{example}, so {cost}; {fix}.'


def _unknown_fix(sample: list[str], tokenizer) -> str:
    """What would cover a sample mostly [UNK]: the text in NFC (NFD text on a vocabulary of NFC words), the text
    lower-cased (a tokenizer that keeps case on an uncased vocabulary, `capitals_unknown`), or another model."""
    nfc, _, _ = _unknown_share([unicodedata.normalize('NFC', t) for t in sample], tokenizer)
    if nfc <= UNKNOWN_SHARE:
        return f"in NFC (unicodedata.normalize) {nfc:.1%} would be: normalise the text to NFC, as the model's vocabulary is"
    if capitals_unknown(tokenizer):
        lower, _, _ = _unknown_share([t.lower() for t in sample], tokenizer)
        if lower <= UNKNOWN_SHARE:
            return (f"lower-cased {lower:.1%} would be: the model's tokenizer keeps case (do_lower_case: false) on a "
                    "vocabulary without upper-case entries: save the model's tokenizer lower-casing (do_lower_case: "
                    "true), or lower-case the text")
    return "the model's vocabulary does not cover this text: fine-tune a model pretrained on text like it"


def encode(ex: Examples, tokenizer, max_length: int) -> Encoded:
    "`[CLS] A [SEP] (B [SEP])` for every example, BERT-truncated to `max_length` tokens; B only where it has tokens."
    cls, sep = _special_ids(tokenizer)
    # verbose=False: each text is encoded whole and cut below, so transformers' warning of a text longer than the model
    # takes (`model_max_length`) would be false
    def tok(texts): return tokenizer(texts, add_special_tokens=False, return_attention_mask=False,
                                     return_token_type_ids=False, verbose=False)['input_ids'] if texts else []
    ids_a, ids_b = tok(ex.text_a), (tok(ex.text_b) if ex.text_b is not None else None)
    parts, n_first = [], np.empty(len(ex), dtype=np.int32)
    for i, a in enumerate(ids_a):
        if ids_b is None or not ids_b[i]:  # shape (n,) lists of ids; an empty B: one segment, as the official code
            a = a[:max_length - 2]
            parts.append([cls, *a, sep])
        else:
            b = ids_b[i]
            la, lb = truncate_pair(len(a), len(b), max_length - 3)
            parts.append([cls, *a[:la], sep, *b[:lb], sep])
            a = a[:la]
        n_first[i] = len(a) + 2
    lengths = np.array([len(p) for p in parts], dtype=np.int64)
    ids = np.fromiter((t for p in parts for t in p), dtype=np.int32, count=int(lengths.sum()))
    return Encoded(ids, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), n_first, np.asarray(ex.label),
                   np.asarray(ex.idx, dtype=np.int64))


def encode_texts(tokenizer, texts: str | Sequence, text_pairs: str | Sequence | None = None, *,
                 max_length: int) -> dict[str, torch.Tensor]:
    """The inputs of a fine-tuned classification, regression or multi-label run (`load_finetuned`) for `texts` (and
    their `text_pairs`), encoded as the run encoded its data (`encode`: `[CLS] A [SEP] (B [SEP])`, BERT's
    `_truncate_seq_pair` to `max_length`, the run's: its card gives it) and padded: `model(**encode_texts(...))` gives
    the run's outputs. Takes what a tokenizer takes: a str is one text, (text, pair) tuples are pairs; a missing second
    text (None, NaN: pandas' empty cell) is none, as an empty one is to the run. A tokenizer's own call cuts at its
    `model_max_length`, not at the run's length."""
    texts, text_pairs = _texts_given(texts, text_pairs)
    _check_max_length(max_length, tokenizer, text_pairs is not None and any(text_pairs))
    ex = Examples(np.arange(len(texts)), texts, text_pairs, np.zeros(len(texts)))
    input_ids, attention_mask, token_type_ids, _ = _Collate(encode(ex, tokenizer, max_length),
                                                            tokenizer.pad_token_id)(list(range(len(texts))))
    return {'input_ids': input_ids, 'attention_mask': attention_mask, 'token_type_ids': token_type_ids}


def _texts_given(texts, text_pairs) -> tuple[list[str], list[str] | None]:
    "`encode_texts`' texts and second texts as lists of strings, or a one-line ConfigError naming the argument."
    if isinstance(texts, str): texts = [texts]
    if isinstance(text_pairs, str): text_pairs = [text_pairs]
    texts = list(texts)
    if text_pairs is None and texts and all(isinstance(t, (tuple, list)) and len(t) == 2 for t in texts):
        texts, text_pairs = [a for a, _ in texts], [b for _, b in texts]  # pairs, as a tokenizer's batch takes them
    if not texts: raise ConfigError('texts: none given; give at least one text.')
    for i, t in enumerate(texts):
        if not isinstance(t, str): raise ConfigError(f'texts: item {i} is {t!r}, not a text: give strings.')
    if text_pairs is None: return texts, None
    missing = lambda b: b is None or (isinstance(b, float) and math.isnan(b))  # noqa: E731
    pairs = ['' if missing(b) else b for b in text_pairs]
    if len(pairs) != len(texts):
        raise ConfigError(f'text_pairs: {len(pairs)} second texts for {len(texts)} texts; give one per text (None or '
                          'an empty string for none).')
    for i, b in enumerate(pairs):
        if not isinstance(b, str): raise ConfigError(f'text_pairs: item {i} is {b!r}, not a text: give strings.')
    return texts, pairs


def _check_max_length(max_length, tokenizer, pairs: bool) -> None:
    "A `max_length` that holds a token of each segment and that the tokenizer's positions take, or a one-line error."
    whole = isinstance(max_length, int) and not isinstance(max_length, bool)
    if whole and pairs and max_length < 5:
        raise ConfigError(f"max_length: {max_length} leaves no token of a pair ([CLS] A [SEP] B [SEP] takes 5 at "
                          "least); give the run's (its card says it).")
    if not whole or max_length < 3:
        raise ConfigError(f"max_length: {max_length!r} is not a length of at least 3 tokens ([CLS] A [SEP]); give the "
                          "run's (its card says it).")
    limit = getattr(tokenizer, 'model_max_length', None)
    if isinstance(limit, int) and limit < 1_000_000 and max_length > limit:
        raise ConfigError(f"max_length: {max_length} is past the tokenizer's model_max_length ({limit}): the model has "
                          "no positions for it; give the run's (its card says it).")


def _examples_fingerprint(ex: Examples) -> str:
    h = hashlib.sha1()
    for texts in (ex.text_a, ex.text_b or []):
        h.update('\x1f'.join(texts).encode('utf-8', 'surrogatepass'))
        h.update(b'\x1e')
    h.update(np.ascontiguousarray(ex.label).tobytes()); h.update(np.ascontiguousarray(ex.idx).tobytes())
    return h.hexdigest()


NPZ_DAMAGED = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)  # what reading a damaged .npz raises


def encode_cached(ex: Examples, tokenizer, max_length: int, cache_dir: str | Path, name: str) -> Encoded:
    """`encode`, read from `<cache_dir>/<name>-<key>.npz` when the same texts, labels, tokenizer and length were
    encoded before; otherwise encoded and written there (rank 0 only, atomically). An unreadable cache file is encoded
    again."""
    key = hashlib.sha1(f'{_CACHE_VERSION}|{max_length}|{tokenizer_fingerprint(tokenizer)}|{_examples_fingerprint(ex)}'
                       .encode()).hexdigest()[:16]
    path = path_inside(cache_dir, f'{name}-{key}.npz', key='cache_dir')
    if path.is_file():
        try:
            with np.load(path) as z: return Encoded(*(z[k] for k in ('ids', 'offsets', 'n_first', 'label', 'idx')))
        except NPZ_DAMAGED: pass  # a damaged file: encoded again
    enc = encode(ex, tokenizer, max_length)
    if is_main_process():
        buf = io.BytesIO()
        np.savez(buf, ids=enc.ids, offsets=enc.offsets, n_first=enc.n_first, label=enc.label, idx=enc.idx)
        atomic_write_bytes(buf.getvalue(), path)
    return enc


class LengthBatchSampler:
    """Training batches: a fresh permutation each pass cut into batches, as the official code draws them; with
    `bucketing`, batches of examples of similar length instead (less padding, faster): the permutation is cut into
    chunks of `chunk` batches, each chunk sorted by length and cut into batches, batch order shuffled. Evaluation:
    one global sort, longest first (an out-of-memory error shows at once). Either way `ceil(n / batch_size)` batches."""

    def __init__(self, lengths: np.ndarray, batch_size: int, shuffle: bool, seed: int = 0, chunk: int = 50,
                 bucketing: bool = True):
        self.lengths, self.batch_size, self.shuffle, self.chunk = np.asarray(lengths), batch_size, shuffle, chunk
        self.bucketing, self.rng = bucketing, np.random.default_rng(seed)

    def __len__(self) -> int: return math.ceil(len(self.lengths) / self.batch_size)

    def _cut(self, order: np.ndarray) -> list[np.ndarray]:
        return [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def __iter__(self):
        if not self.shuffle:
            yield from self._cut(np.argsort(-self.lengths, kind='stable'))
            return
        if not self.bucketing:
            yield from self._cut(self.rng.permutation(len(self.lengths)))
            return
        perm, size, batches = self.rng.permutation(len(self.lengths)), self.chunk * self.batch_size, []
        for s in range(0, len(perm), size):
            part = perm[s:s + size]
            batches += self._cut(part[np.argsort(-self.lengths[part], kind='stable')])
        for i in self.rng.permutation(len(batches)): yield batches[i]


class ShardedBatchSampler:
    """This process's part of every batch of `sampler` in a job of `size` processes. Training batches are split by rows
    (contiguous blocks, as pretraining splits its batches), so every process takes part in every step of the same
    global batches; a process left without rows (a last batch smaller than the job) gets the batch's first example
    as a stand-in of weight 0, written -(i + 1). Evaluation batches are dealt out whole, in turn."""

    def __init__(self, sampler: LengthBatchSampler, rank: int, size: int):
        self.sampler, self.rank, self.size = sampler, rank, size

    def __len__(self) -> int:
        n = len(self.sampler)
        return n if self.sampler.shuffle else len(range(self.rank, n, self.size))

    def __iter__(self):
        for k, batch in enumerate(self.sampler):
            if not self.sampler.shuffle:
                if k % self.size == self.rank: yield batch
                continue
            part = np.array_split(np.asarray(batch), self.size)[self.rank]
            yield part if len(part) else np.array([-batch[0] - 1])


class LoaderIndices:
    "A loader's dataset: item i is i itself (a `range` would turn a stand-in's -(i + 1) into a real example)."

    def __init__(self, n: int): self.n = n
    def __len__(self) -> int: return self.n
    def __getitem__(self, i: int) -> int: return i


def padded_length(longest: int, buckets: Sequence[int] = ()) -> int:
    """The length a batch whose longest example has `longest` tokens is padded to: the smallest of `buckets` that holds
    it (a few fixed lengths: a compiled step sees a few shapes, not one per batch), else `longest` itself."""
    return min((b for b in buckets if b >= longest), default=longest)


class _Collate:
    """Pads one batch of encoded examples to its longest (or the bucket that holds it, `padded_length`):
    (input_ids, attention_mask, token_type_ids, labels), and with `weights` each example's weight (0 for a stand-in
    written -(i + 1), see `ShardedBatchSampler`)."""

    def __init__(self, enc: Encoded, pad_id: int, weights: bool = False, buckets: Sequence[int] = ()):
        self.enc, self.pad_id, self.lengths, self.weights, self.buckets = enc, pad_id, enc.lengths, weights, buckets

    def __call__(self, pick: list[int]):
        pick = np.asarray(pick, dtype=np.int64)
        weight, pick = (pick >= 0).astype(np.float32), np.where(pick >= 0, pick, -pick - 1)
        lengths = self.lengths[pick]
        ids = np.full((len(pick), padded_length(int(lengths.max()), self.buckets)), self.pad_id, dtype=np.int64)
        pos = np.arange(ids.shape[1])[None, :]
        mask, types = pos < lengths[:, None], pos >= self.enc.n_first[pick][:, None]
        for r, i in enumerate(pick): ids[r, :lengths[r]] = self.enc.tokens(i)
        batch = (torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64)),
                 torch.from_numpy((types & mask).astype(np.int64)), torch.from_numpy(self.enc.label[pick]))
        return (*batch, torch.from_numpy(weight)) if self.weights else batch


def make_loader(enc: Encoded, batch_size: int, shuffle: bool, pad_id: int, seed: int = 0, num_workers: int = 0,
                pin_memory: bool = False, bucketing: bool = True,
                shard: tuple[int, int] | None = None, buckets: Sequence[int] = ()) -> torch.utils.data.DataLoader:
    """A loader of batches padded to their longest example, or to the smallest of `buckets` that holds it
    (`LengthBatchSampler`: random or length-bucketed training batches); its `batch_sampler` gives the example order of
    an evaluation pass. `shard` (rank, size): this process's part of each batch in a torchrun job
    (`ShardedBatchSampler`); its training batches also give the examples' weights."""
    sampler = LengthBatchSampler(enc.lengths, batch_size, shuffle, seed, bucketing=bucketing)
    if shard is not None: sampler = ShardedBatchSampler(sampler, *shard)
    collate = _Collate(enc, pad_id, weights=shard is not None and shuffle, buckets=buckets)
    return torch.utils.data.DataLoader(LoaderIndices(len(enc)), batch_sampler=sampler, collate_fn=collate,
                                       num_workers=num_workers, pin_memory=pin_memory)
