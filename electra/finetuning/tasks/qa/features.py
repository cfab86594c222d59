"""QA examples as model inputs, windowed as the official featurisation (google-research/electra,
finetune/qa/qa_tasks.py, `QATask.featurize`) does it, with an HF fast tokenizer.

The official code splits the context at whitespace into words and word-pieces each word on its own. A BERT WordPiece
fast tokenizer splits at that whitespace too (and at more: punctuation, other spaces), so tokenizing the whole context
once gives the same pieces, and its offset mapping gives each piece's context characters; a piece's word is the word
of its first character. From there the steps are the official ones:

- the question is cut to its first `max_query_length` tokens;
- the context tokens are cut into windows of `max_seq_length - len(question) - 3` tokens, each starting `doc_stride`
  tokens (at most a window) after the last, until one reaches the end: every context token is in some window, and no
  input is truncated;
- a window is `[CLS] question [SEP] context tokens [SEP]`, token type 0 up to the first [SEP], 1 after;
- a token seen by several windows is scored in the one where it has the most context (`max_context`);
- training labels: the first answer's words, narrowed to the tokens that spell the answer (`_improve_answer_span`),
  as token positions in the window, or 0 ([CLS]) for both ends when the window does not hold the whole answer or the
  question is unanswerable.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from electra.config.errors import ConfigError
from electra.data.tokenizer import DROPPED, tokenizer_fingerprint
from electra.finetuning.tasks.encoding import NPZ_DAMAGED
from electra.finetuning.tasks.qa.data import QAExample, answer_found, split_words
from electra.runtime.files import atomic_write_bytes, path_inside
from electra.runtime.processes import is_main_process

__all__ = ['Window', 'doc_windows', 'max_context_windows', 'question_ids', 'featurize', 'featurize_cached',
           'collate_windows']

_CACHE_VERSION = 1
# verbose=False: a context is encoded whole and cut into windows, a question cut to max_query_length, so
# transformers' warning of a text longer than the model takes (`model_max_length`) would be false
_PLAIN = dict(add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False)


@dataclass
class Window:
    "One model input: a window of a question's context. Arrays are unpadded, one entry per token."
    example: int                # index of its question in the list given to `featurize`
    index: int                  # the window's number within its question (official `doc_span_index`)
    input_ids: np.ndarray       # int64 [n]: [CLS] question [SEP] context tokens [SEP]
    token_type_ids: np.ndarray  # int64 [n]: 0 up to the first [SEP], 1 after
    char_spans: np.ndarray      # int64 [n, 2]: context characters [start, end) of a context token, -1 elsewhere
    max_context: np.ndarray     # bool [n]: a context token that has its most context in this window
    start: int = 0              # training label: answer start position, 0 ([CLS]) when not in this window
    end: int = 0
    is_impossible: bool = False

    def __len__(self) -> int: return len(self.input_ids)


def doc_windows(n_tokens: int, max_tokens: int, doc_stride: int) -> list[tuple[int, int]]:
    "(start, length) of the official sliding windows over `n_tokens` context tokens."
    spans, start = [], 0
    while start < n_tokens:
        length = min(n_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length == n_tokens: break
        start += min(length, doc_stride)
    return spans


def max_context_windows(spans: list[tuple[int, int]], n_tokens: int) -> np.ndarray:
    """int64 [n_tokens]: the window in which each token has the most context (official `_check_is_max_context`):
    the largest min(left, right) context + 0.01 * window length, the first such window on a tie."""
    best, score = np.full(n_tokens, -1, dtype=np.int64), np.full(n_tokens, -np.inf)
    for w, (s, length) in enumerate(spans):
        pos = np.arange(s, s + length)
        sc = np.minimum(pos - s, s + length - 1 - pos) + 0.01 * length
        better = sc > score[pos]  # strictly: an earlier window keeps a tie
        best[pos[better]], score[pos[better]] = w, sc[better]
    return best


@dataclass
class _Pieces:
    "A context's word pieces."
    ids: np.ndarray         # int64 [m]
    spans: np.ndarray       # int64 [m, 2]: characters [start, end) of each piece
    word_start: np.ndarray  # int64 [n_words + 1]: first piece of each word (official `orig_to_tok_index`), then m
    char_to_word: list[int]


def _pieces(context: str, enc_ids: list[int], offsets: list[tuple[int, int]]) -> _Pieces:
    words, char_to_word = split_words(context)
    spans = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    piece_word = np.asarray([char_to_word[s] for s, _ in spans.tolist()], dtype=np.int64)  # official tok_to_orig_index
    word_start = np.searchsorted(piece_word, np.arange(len(words) + 1), side='left')
    return _Pieces(np.asarray(enc_ids, dtype=np.int64), spans, word_start.astype(np.int64), char_to_word)


def _answer_tokens(ex: QAExample, p: _Pieces, tokenizer) -> tuple[int, int]:
    """Context token span [start, end] of the first answer: the pieces of its words, then the first (shortest shift,
    longest span) sub-span whose pieces spell the answer's own pieces (official `_improve_answer_span`: '1895' out of
    '(1895-1943).')."""
    text, start = ex.answers[0]
    w0, w1 = p.char_to_word[start], p.char_to_word[start + len(text) - 1]
    t0, t1 = int(p.word_start[w0]), int(p.word_start[w1 + 1]) - 1
    want = ' '.join(tokenizer.tokenize(text))
    toks = tokenizer.convert_ids_to_tokens(p.ids[t0:t1 + 1].tolist())
    for a in range(t1 - t0 + 1):
        for b in range(t1 - t0, a - 1, -1):
            if ' '.join(toks[a:b + 1]) == want: return t0 + a, t0 + b
    return t0, t1


def _check_sizes(max_seq_length: int, max_query_length: int, doc_stride: int) -> None:
    if doc_stride < 1: raise ConfigError(f"doc_stride: {doc_stride} must be at least 1 (official default 128).")
    if max_query_length < 0: raise ConfigError(f"max_query_length: {max_query_length} must be at least 0.")
    if max_seq_length < 4:  # the job's key of the official max_seq_length is max_length
        raise ConfigError(f"max_length: {max_seq_length} leaves no room for [CLS] [SEP] [SEP] and a context token.")


def _window(ex_i: int, w: int, span: tuple[int, int], query: list[int], p: _Pieces, best: np.ndarray,
            cls: int, sep: int) -> Window:
    "The input of window `w` (context tokens span = (start, length)); labels are set by the caller."
    s, length = span
    n_first = len(query) + 2
    ids = np.concatenate([[cls], query, [sep], p.ids[s:s + length], [sep]]).astype(np.int64)
    types = (np.arange(len(ids)) >= n_first).astype(np.int64)
    chars = np.full((len(ids), 2), -1, dtype=np.int64)
    chars[n_first:n_first + length] = p.spans[s:s + length]
    flags = np.zeros(len(ids), dtype=bool)
    flags[n_first:n_first + length] = best[s:s + length] == w
    return Window(ex_i, w, ids, types, chars, flags)


def _label(win: Window, span: tuple[int, int], answer: tuple[int, int] | None, n_first: int) -> None:
    "Training targets of a window: the answer's positions when the window holds all of it, else 0 ([CLS])."
    if answer is None: return
    s, length = span
    if answer[0] >= s and answer[1] <= s + length - 1:
        win.start, win.end = answer[0] - s + n_first, answer[1] - s + n_first


def _named(ex: QAExample, where: str) -> str:
    "How a refusal names a question: its file (`where`, when given) and its id."
    return f"{where}: question {ex.id!r}" if where else f"question {ex.id!r}"


def question_ids(examples: list[QAExample], tokenizer, where: str = '') -> list[list[int]]:
    """The token ids of every question (no special tokens, not cut). A question of none (empty, spaces, or only
    characters the tokenizer drops, such as U+200B, which str.strip keeps) is refused, named by its file (`where`) and
    id: its windows would begin [CLS] [SEP], and the model would answer from the context alone. The tokenizer decides,
    as it does for an empty context and a tagging word, because the model sees its tokens, not the text."""
    ids = tokenizer([ex.question for ex in examples], **_PLAIN)['input_ids'] if examples else []
    for ex, q in zip(examples, ids):
        if not q:
            raise ConfigError(f"{_named(ex, where)}: the question {ex.question!r} has no word piece ({DROPPED}), so "
                              "the model would answer from the context alone. Give it its text or remove it.")
    return ids


def _no_room(ex: QAExample, query: list[int], sizes: tuple[int, int], where: str, places: dict) -> ConfigError:
    """A question too long for any context, said in the job's keys (its max_length is the official max_seq_length),
    each with where it was set (`places`: key -> a file and its line, 'command line', ...) where known."""
    length, query_length = sizes
    query_said = f"max_query_length {query_length}" + (f", {places['max_query_length']}"
                                                        if 'max_query_length' in places else '')
    length_said = f"max_length {length}" + (f" ({places['max_length']})" if 'max_length' in places else '')
    return ConfigError(f"{_named(ex, where)}: its {len(query)} tokens ({query_said}) leave no room for the context in "
                       f"{length_said}: set max_query_length to at most {length - 4}, or raise max_length.")


def _example_windows(ex_i: int, ex: QAExample, query: list[int], p: _Pieces, tokenizer, max_seq_length: int,
                     doc_stride: int, is_training: bool, where: str) -> list[Window]:
    max_tokens = max_seq_length - len(query) - 3  # [CLS], [SEP], [SEP]
    if len(p.ids) == 0:
        raise ConfigError(f"{_named(ex, where)}: its context has no tokens (only characters the tokenizer drops). "
                          "Remove the question or give the context its text.")
    answer = None
    if is_training and not ex.is_impossible:
        if not ex.answers or not answer_found(ex.context, *ex.answers[0]):
            raise ConfigError(f"{_named(ex, where)}: a training question needs its first answer found at its offset; "
                              "read the training file with on_bad_answer 'error' or 'skip', not 'keep'.")
        answer = _answer_tokens(ex, p, tokenizer)
    spans = doc_windows(len(p.ids), max_tokens, doc_stride)
    best = max_context_windows(spans, len(p.ids))
    out = []
    for w, span in enumerate(spans):
        win = _window(ex_i, w, span, query, p, best, tokenizer.cls_token_id, tokenizer.sep_token_id)
        win.is_impossible = ex.is_impossible
        _label(win, span, answer, len(query) + 2)
        out.append(win)
    return out


def featurize(examples: list[QAExample], tokenizer, max_seq_length: int = 512, max_query_length: int = 64,
              doc_stride: int = 128, is_training: bool = False, where: str = '',
              places: dict | None = None) -> list[Window]:
    """The windows of every question, in question order (defaults: the official ones for QA tasks). `tokenizer`: an
    HF fast WordPiece tokenizer (its offset mapping locates the tokens). `is_training`: set the answer labels, as the
    official code does for the train split only (evaluation windows keep 0). `where`: the file of the questions, which
    a refusal names beside the question's id; `places`: where the job's `max_length` (`max_seq_length` here) and
    `max_query_length` were set, for a refusal to name."""
    _check_sizes(max_seq_length, max_query_length, doc_stride)
    if not getattr(tokenizer, 'is_fast', False) or tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ConfigError("model: QA needs a fast (Rust) tokenizer with [CLS] and [SEP], for its offset mapping; load "
                          "the model's tokenizer with AutoTokenizer (use_fast=True) or ElectraTokenizerFast.")
    contexts = list(dict.fromkeys(ex.context for ex in examples))  # questions of a paragraph share its context
    enc = tokenizer(contexts, return_offsets_mapping=True, **_PLAIN) if contexts else {'input_ids': []}
    pieces = {c: _pieces(c, enc['input_ids'][i], enc['offset_mapping'][i]) for i, c in enumerate(contexts)}
    queries = question_ids(examples, tokenizer, where)
    out = []
    for i, ex in enumerate(examples):
        query = queries[i][:max_query_length]
        if max_seq_length - len(query) - 3 < 1:  # [CLS] query [SEP] ... [SEP]: not one context token fits
            raise _no_room(ex, query, (max_seq_length, max_query_length), where, places or {})
        out += _example_windows(i, ex, query, pieces[ex.context], tokenizer, max_seq_length, doc_stride, is_training,
                                where)
    return out


def _examples_fingerprint(examples: list[QAExample]) -> str:
    "SHA-1 of every field of the questions, in order (a context shared by consecutive questions is hashed once)."
    h, last = hashlib.sha1(), None
    for ex in examples:
        parts = [ex.id, ex.question, repr(ex.answers), str(ex.is_impossible)]
        if ex.context != last: parts.append(ex.context)
        last = ex.context
        h.update('\x1f'.join(parts).encode('utf-8', 'surrogatepass') + b'\x1e')
    return h.hexdigest()


def _save_windows(windows: list[Window], path: Path) -> None:
    "The windows as one .npz of concatenated arrays, written atomically."
    cat = (lambda key, dtype, shape=(0,): np.concatenate([getattr(w, key) for w in windows]).astype(dtype)
           if windows else np.zeros(shape, dtype))
    buf = io.BytesIO()
    np.savez(buf, lengths=np.array([len(w) for w in windows], dtype=np.int64),
             example=np.array([w.example for w in windows], dtype=np.int64),
             index=np.array([w.index for w in windows], dtype=np.int64),
             start=np.array([w.start for w in windows], dtype=np.int64),
             end=np.array([w.end for w in windows], dtype=np.int64),
             is_impossible=np.array([w.is_impossible for w in windows], dtype=bool),
             input_ids=cat('input_ids', np.int64), token_type_ids=cat('token_type_ids', np.int8),
             char_spans=cat('char_spans', np.int64, (0, 2)), max_context=cat('max_context', bool))
    atomic_write_bytes(buf.getvalue(), path)


def _load_windows(path: Path) -> list[Window]:
    with np.load(path) as z:
        a = {k: z[k] for k in z.files}
    cuts = np.cumsum(a['lengths'])[:-1]
    parts = {k: np.split(a[k], cuts) for k in ('input_ids', 'token_type_ids', 'char_spans', 'max_context')}
    return [Window(int(a['example'][i]), int(a['index'][i]), parts['input_ids'][i],
                   parts['token_type_ids'][i].astype(np.int64), parts['char_spans'][i], parts['max_context'][i],
                   int(a['start'][i]), int(a['end'][i]), bool(a['is_impossible'][i])) for i in range(len(a['lengths']))]


def featurize_cached(examples: list[QAExample], tokenizer, cache_dir: str | Path, name: str, max_seq_length: int = 512,
                     max_query_length: int = 64, doc_stride: int = 128, is_training: bool = False,
                     where: str = '', places: dict | None = None) -> list[Window]:
    """`featurize`, read from `<cache_dir>/<name>-<key>.npz` when the same questions were featurized before with the
    same tokenizer and options; otherwise featurized and written there (main process only, atomically). An unreadable
    cache file is featurized again. `where` and `places` name the questions' file and where the lengths were set in
    a refusal (not part of the key)."""
    _check_sizes(max_seq_length, max_query_length, doc_stride)
    options = f'{max_seq_length}|{max_query_length}|{doc_stride}|{int(is_training)}'
    key = hashlib.sha1(f'{_CACHE_VERSION}|{options}|{tokenizer_fingerprint(tokenizer)}|{_examples_fingerprint(examples)}'
                       .encode()).hexdigest()[:16]
    path = path_inside(cache_dir, f'{name}-{key}.npz', key='cache_dir')
    if path.is_file():
        try: return _load_windows(path)
        except NPZ_DAMAGED: pass  # a damaged file: made again
    windows = featurize(examples, tokenizer, max_seq_length, max_query_length, doc_stride, is_training, where, places)
    if is_main_process(): _save_windows(windows, path)
    return windows


def collate_windows(windows: list[Window], pad_id: int, length: int | None = None) -> tuple[torch.Tensor, ...]:
    """A batch padded to its longest window (or to `length`): (input_ids, attention_mask, token_type_ids) [B, L]
    int64, then the targets start_positions, end_positions [B] int64 and is_impossible [B] float32."""
    n = length or max(len(w) for w in windows)
    ids = np.full((len(windows), n), pad_id, dtype=np.int64)
    mask, types = np.zeros_like(ids), np.zeros_like(ids)
    for r, w in enumerate(windows):
        ids[r, :len(w)], mask[r, :len(w)], types[r, :len(w)] = w.input_ids, 1, w.token_type_ids
    t = torch.from_numpy
    return (t(ids), t(mask), t(types), torch.tensor([w.start for w in windows]), torch.tensor([w.end for w in windows]),
            torch.tensor([float(w.is_impossible) for w in windows]))
