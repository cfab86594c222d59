"""Tagged sentences as model inputs: word pieces with labels on each word's first piece, long sentences in
overlapping windows, and predictions on pieces mapped back to one tag per word.

As the official tagging task (google-research/electra, finetune/tagging/tagging_tasks.py, `TaggingTask.featurize`
and `tokenize_and_align`): each word is cut into word pieces on its own, the input is `[CLS] pieces [SEP]`, and a
word's label sits on its first piece; here every other piece and the special tokens get the ignore index -100.
The official code cuts a sentence that does not fit in `max_seq_length` (its last words get no input and no
prediction); here a long sentence becomes several windows, consecutive ones overlapping by up to `stride` pieces of
context, and every word is scored (labelled, predicted) in exactly one window: in an overlap, the first half of the
words in the window before, the second half in the one after (where each has the more context on both sides).
Windows never split a word, except a word longer than a whole window, which keeps its first `max_length - 2`
pieces (its label and prediction are on the first). A word that the tokenizer turns into no piece at all (empty,
spaces, or only characters BERT's cleaning drops, such as U+00AD or U+200B) stops the job naming its file and line:
transformers' tokenizer and the official `tokenize_and_align` give it no input, so the model has nothing of it to
tag (the official `featurize` reads its tag off the next word's first piece), and an invented [UNK] in its place
would change the other words' tags from those of the same text read through transformers. Official inputs have token type
1 on every real token (`segment_ids = pad([1] * len(input_ids))`); the loader's `token_type` keeps that default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from electra.config.errors import ConfigError
from electra.finetuning.tasks.encoding import LengthBatchSampler, LoaderIndices, ShardedBatchSampler, padded_length

__all__ = ['IGNORE_INDEX', 'EncodedTagging', 'word_pieces', 'plan_windows', 'encode_tagging', 'word_predictions',
           'make_tagging_loader']

IGNORE_INDEX = -100  # torch's cross-entropy default
Where = Callable[[int, int], str]  # (sentence, word) -> the word's place in its file, for messages


@dataclass
class EncodedTagging:
    "The windows of a split, concatenated; window i is `ids[offsets[i]:offsets[i + 1]]` (with [CLS] and [SEP])."
    ids: np.ndarray          # int32 [pieces]: every window's input ids
    offsets: np.ndarray      # int64 [windows + 1]
    labels: np.ndarray       # int64 [pieces]: the label id on the first piece of each word scored there, else -100
    word_index: np.ndarray   # int32 [pieces]: that word's index in its sentence, else -1
    sentence: np.ndarray     # int64 [windows]: the sentence of each window
    n_words: np.ndarray      # int64 [sentences]

    def __len__(self) -> int: return len(self.sentence)

    @property
    def lengths(self) -> np.ndarray: return np.diff(self.offsets)

    def window(self, i: int) -> slice: return slice(int(self.offsets[i]), int(self.offsets[i + 1]))


def word_pieces(sentences: Sequence[Sequence[str]], tokenizer, where: Where | None = None) -> list[list[list[int]]]:
    """Piece ids of every word of every sentence, from an HF fast tokenizer; a word without pieces is refused, named
    by `where(sentence, word)` (its file and line) or by its indices."""
    if not getattr(tokenizer, 'is_fast', False):
        raise ConfigError("model: tagging needs a fast (Rust) tokenizer, for its word ids.")
    todo = [i for i, s in enumerate(sentences) if len(s)]
    # verbose=False: a sentence is encoded whole and cut into windows, so transformers' warning of a text longer than
    # the model takes (`model_max_length`) would be false
    enc = tokenizer([list(sentences[i]) for i in todo], is_split_into_words=True, add_special_tokens=False,
                    return_attention_mask=False, return_token_type_ids=False, verbose=False) if todo else None
    out: list[list[list[int]]] = [[] for _ in sentences]
    for j, i in enumerate(todo):
        per = [[] for _ in sentences[i]]
        for piece, w in zip(enc['input_ids'][j], enc.word_ids(j)):
            if w is not None: per[w].append(piece)
        if [] in per: _no_piece(sentences[i][per.index([])], where(i, per.index([])) if where else
                                f'sentence {i}, word {per.index([]) + 1}')
        out[i] = per
    return out


def _no_piece(word: str, place: str) -> None:
    raise ConfigError(f"{place}: the word {word!r} has no word piece (the tokenizer drops it: empty, spaces, or only "
                      "characters such as U+00AD or U+200B), so the model has nothing of it to tag; transformers' "
                      "tokenizer and the official code give it no input. Remove the word (and its tag) from the file.")


def plan_windows(counts: Sequence[int], budget: int, stride: int) -> list[tuple[int, int, int, int]]:
    """Word ranges (start, end, score_start, score_end) of the windows of a sentence whose words have `counts`
    pieces (each at most `budget`): each window holds words [start, end) in at most `budget` pieces, the next
    starts up to `stride` pieces of words before its end, and the score ranges cut [0, n) into consecutive parts."""
    n, spans, start = len(counts), [], 0
    while n:
        end, used = start, 0
        while end < n and used + counts[end] <= budget: used += counts[end]; end += 1
        spans.append((start, end))
        if end == n: break
        s, ctx = end, 0  # step back over whole words while they fit in `stride` and leave room for word `end`
        while s - 1 > start and ctx + counts[s - 1] <= stride and ctx + counts[s - 1] + counts[end] <= budget:
            s -= 1; ctx += counts[s]
        start = s
    cuts = [0]
    for (_, end), (nxt, _) in zip(spans, spans[1:]):
        cuts.append(max((nxt + end + 1) // 2, cuts[-1]))  # the overlap [nxt, end) split at its middle
    cuts.append(n)
    return [(a, b, cuts[k], cuts[k + 1]) for k, (a, b) in enumerate(spans)]


def _label_ids(tags: Sequence[str] | None, index: dict[str, int], sentence: int) -> list[int]:
    if tags is None: return []
    try: return [index[t] for t in tags]
    except KeyError as e:
        raise ConfigError(f"sentence {sentence}: tag {e.args[0]!r} is not one of the model's labels "
                          f"({', '.join(index)}).") from None


def encode_tagging(words: Sequence[Sequence[str]], tags: Sequence[Sequence[str]] | None, tokenizer,
                   labels: Sequence[str], max_length: int = 128, stride: int = 32,
                   where: Where | None = None) -> EncodedTagging:
    """The windows of every sentence (`words[i]`, tagged `tags[i]`; `tags` None for unlabelled text: no labels,
    -100 everywhere) as `[CLS] pieces [SEP]` of at most `max_length` ids; label ids index `labels`; `where` as
    `word_pieces` takes it."""
    if max_length < 3: raise ConfigError(f"max_length: {max_length} leaves no room for a word between [CLS] and [SEP].")
    budget = max_length - 2
    stride = max(0, min(stride, budget // 2))  # more context than half a window would score words twice as often
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls is None or sep is None: raise ConfigError("model: the tokenizer has no [CLS]/[SEP] tokens.")
    index = {t: i for i, t in enumerate(labels)}
    ids, lab, widx, sent, offsets = [], [], [], [], [0]
    for i, pieces in enumerate(word_pieces(words, tokenizer, where)):
        pieces = [p[:budget] for p in pieces]  # only a word longer than a whole window loses pieces (never its first)
        ys = _label_ids(None if tags is None else tags[i], index, i)
        if tags is not None and len(ys) != len(pieces):
            raise ConfigError(f"sentence {i}: {len(pieces)} words but {len(ys)} tags.")
        for start, end, a, b in plan_windows([len(p) for p in pieces], budget, stride):
            ids.append(cls); lab.append(IGNORE_INDEX); widx.append(-1)
            for w in range(start, end):
                scored = a <= w < b
                ids += pieces[w]
                lab += [ys[w] if scored and ys else IGNORE_INDEX] + [IGNORE_INDEX] * (len(pieces[w]) - 1)
                widx += [w if scored else -1] + [-1] * (len(pieces[w]) - 1)
            ids.append(sep); lab.append(IGNORE_INDEX); widx.append(-1)
            sent.append(i); offsets.append(len(ids))
    return EncodedTagging(np.asarray(ids, dtype=np.int32), np.asarray(offsets, dtype=np.int64),
                          np.asarray(lab, dtype=np.int64), np.asarray(widx, dtype=np.int32),
                          np.asarray(sent, dtype=np.int64), np.asarray([len(w) for w in words], dtype=np.int64))


def word_predictions(enc: EncodedTagging, outputs, labels: Sequence[str] | None = None) -> list:
    """One prediction per word of every sentence, read off each window's scored first pieces. `outputs[i]`: window
    i's per-piece label ids [T] or logits [T, C] (T >= its length: padding is ignored), a list or a padded array.
    Label ids, or with `labels` their tags. Gold labels (`enc.labels` per window) give back the encoded tags exactly."""
    preds = [np.full(int(n), -1, dtype=np.int64) for n in enc.n_words]
    if len(outputs) != len(enc): raise ValueError(f"{len(outputs)} outputs for {len(enc)} windows")
    for i in range(len(enc)):
        w = enc.word_index[enc.window(i)]
        pos = np.flatnonzero(w >= 0)
        out = np.asarray(outputs[i])
        picked = out[pos].argmax(-1) if out.ndim == 2 else out[pos]
        preds[enc.sentence[i]][w[pos]] = picked
    missing = [s for s, p in enumerate(preds) if (p < 0).any()]
    if missing: raise ValueError(f"sentences {missing[:5]}: words without a prediction (outputs not of this encoding?)")
    return [[labels[j] for j in p] for p in preds] if labels is not None else preds


class _Collate:
    """Pads a batch of windows to its longest: (input_ids, attention_mask, token_type_ids, labels), each [B, T], labels
    -100 on padding; with `weights`, each window's weight [B] too (0 for a stand-in)."""

    def __init__(self, enc: EncodedTagging, pad_id: int, token_type: int, weights: bool = False,
                 buckets: Sequence[int] = ()):
        self.enc, self.pad_id, self.token_type, self.weights, self.lengths = enc, pad_id, token_type, weights, enc.lengths
        self.buckets = buckets

    def __call__(self, pick: list[int]):
        pick = np.asarray(pick, dtype=np.int64)
        weight, pick = (pick >= 0).astype(np.float32), np.where(pick >= 0, pick, -pick - 1)
        lengths = self.lengths[pick]
        ids = np.full((len(pick), padded_length(int(lengths.max()), self.buckets)), self.pad_id, dtype=np.int64)
        labels = np.full(ids.shape, IGNORE_INDEX, dtype=np.int64)
        for r, i in enumerate(pick):
            ids[r, :lengths[r]], labels[r, :lengths[r]] = self.enc.ids[self.enc.window(i)], self.enc.labels[self.enc.window(i)]
        mask = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
        batch = (torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(mask * self.token_type),
                 torch.from_numpy(labels))
        return (*batch, torch.from_numpy(weight)) if self.weights else batch


def make_tagging_loader(enc: EncodedTagging, batch_size: int, shuffle: bool, pad_id: int, seed: int = 0,
                        token_type: int = 1, num_workers: int = 0, pin_memory: bool = False, bucketing: bool = True,
                        shard: tuple[int, int] | None = None, buckets: Sequence[int] = ()) -> torch.utils.data.DataLoader:
    """A loader of windows padded to the batch's longest (or the smallest of `buckets` that holds it), batched as
    GLUE's (`LengthBatchSampler`; an evaluation pass goes longest first, its order in `loader.batch_sampler`).
    `token_type`: of every real token (official: 1). `shard` (rank, size): this process's part of each batch in a
    torchrun job, with the windows' weights."""
    sampler = LengthBatchSampler(enc.lengths, batch_size, shuffle, seed, bucketing=bucketing)
    if shard is not None: sampler = ShardedBatchSampler(sampler, *shard)
    collate = _Collate(enc, pad_id, token_type, weights=shard is not None and shuffle, buckets=buckets)
    return torch.utils.data.DataLoader(LoaderIndices(len(enc)), batch_sampler=sampler, collate_fn=collate,
                                       num_workers=num_workers, pin_memory=pin_memory)
