"""Lines to sentences: spaCy's rule-based sentencizer (`spacy.blank(lang)` + `sentencizer`, no model download), for
raw documents, tables and paragraph-long `lines` files (`sentence_split`; when it applies: `electra.data.corpus`).

spaCy's tokenizers for languages written with spaces (English's among them) cut text at spaces, and its sentencizer
ends a sentence only at a punctuation token: a Chinese or Japanese paragraph, written without spaces, is one token
and so one sentence. Under `sentence_split: auto` (`AUTO`) each line is looked at: a line is written without spaces
(`written_unspaced`) when at least half of its other characters are of the scripts that put no space between words
(Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar: `UNSPACED_SCRIPTS`); such a line is split by rule
(`split_unspaced`, no extra package) after each run of sentence-final punctuation (。｡！？!?, and Myanmar's ။ and
Khmer's ។), the closing quotes and brackets after it kept with its sentence; other lines go to spaCy's English rules.
Thai and Lao end a sentence with a space, not a mark: their lines stay whole (the build counts what that cuts off).
"""
from __future__ import annotations

import functools
import re
from typing import Optional

from electra.config.errors import ConfigError
from electra.data.corpus import AUTO_SPLIT, MAX_LINE_BYTES

__all__ = ['AUTO', 'UNSPACED_SCRIPTS', 'sentencizer', 'SentenceSplitter', 'splitter', 'split_sentences',
           'split_unspaced', 'written_unspaced']

AUTO = AUTO_SPLIT  # what `resolve_split` gives under `sentence_split: auto`: each line's own rules (see above)
# the scripts written without spaces between words, as ranges of code points
UNSPACED_SCRIPTS = {'Han': '\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff'
                           '\uf900-\ufaff\U00020000-\U0003134f',
                    'Hiragana': '\u3041-\u309f', 'Katakana': '\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f',
                    'Thai': '\u0e00-\u0e7f', 'Lao': '\u0e80-\u0eff', 'Myanmar': '\u1000-\u109f',
                    'Khmer': '\u1780-\u17ff'}
_UNSPACED = re.compile('[' + ''.join(UNSPACED_SCRIPTS.values()) + ']')
_ENDS = '。｡！？!?\u104b\u17d4'   # sentence-final: ideographic full stop (and halfwidth), ! ? (fullwidth and not), ။ ។
_CLOSERS = '」』）〕］｝〉》】〗〙〛〞〟｣"\'”’)]}'  # closing quotes and brackets: they end the sentence they close
_E, _C = re.escape(_ENDS), re.escape(_CLOSERS)
_UNSPACED_SENTENCE = re.compile(f'[^{_E}]*[{_E}]+[{_C}]*|[^{_E}]+')


def written_unspaced(line: str) -> bool:
    "Whether `line` is written without spaces: at least half of its characters other than spaces are `UNSPACED_SCRIPTS`'."
    if not _UNSPACED.search(line): return False  # most lines of most corpora: one scan, no count
    return 2 * len(_UNSPACED.findall(line)) >= len(line) - line.count(' ')


def split_unspaced(line: str) -> list[str]:
    "The sentences of a line written without spaces: cut after each run of sentence-final marks and the closers after it."
    return [x for x in (m.strip() for m in _UNSPACED_SENTENCE.findall(line)) if x]


def sentencizer(lang: str):
    "A fresh spaCy blank pipeline for `lang` with the rule-based sentencizer (offline: no model download)."
    try: import spacy
    except ImportError:
        raise ConfigError("sentence_split: spaCy is not installed (pip install spacy), or set sentence_split none.") from None
    try: nlp = spacy.blank(lang)
    except (ImportError, KeyError, ValueError) as e:
        raise ConfigError(f"sentence_split: spaCy has no language '{lang}' ({e}). Use a code such as en, de, fr, "
                          "'auto' (which splits Chinese and Japanese at their punctuation with no extra package) or "
                          "'none'.") from None
    nlp.add_pipe('sentencizer')
    nlp.max_length = MAX_LINE_BYTES + 1  # lines are capped when read; spaCy's own cap is 1,000,000 characters
    return nlp


class SentenceSplitter:
    """Splits lines into sentences with spaCy's sentencizer. spaCy's vocabulary keeps every word it has seen, so
    the pipeline is renewed after `renew_every` of them: memory stays bounded on any corpus (tokenizing does not
    depend on the vocabulary, so neither do the sentences)."""

    def __init__(self, lang: str, renew_every: int = 500_000):
        self.lang, self.renew_every = lang, renew_every
        self.nlp = sentencizer(self.spacy_lang)

    @property
    def spacy_lang(self) -> str: return 'en' if self.lang == AUTO else self.lang

    def split(self, lines: list[str]) -> list[list[str]]:
        "Each line's sentences; under `AUTO` a line written without spaces by rule, the others by spaCy's English."
        if self.lang != AUTO: return self._spacy(lines)
        unspaced = [written_unspaced(line) for line in lines]
        spaced = iter(self._spacy([line for line, u in zip(lines, unspaced) if not u]))
        return [split_unspaced(line) if u else next(spaced) for line, u in zip(lines, unspaced)]

    def _spacy(self, lines: list[str]) -> list[list[str]]:
        from spacy.attrs import IDX, SENT_START
        if not lines: return []
        if len(self.nlp.vocab) > self.renew_every: self.nlp = sentencizer(self.spacy_lang)
        out = []
        for line, doc in zip(lines, self.nlp.pipe(lines, batch_size=256)):
            # sentence starts as character offsets: cheaper than a Span per sentence (`doc.sents`)
            arr = doc.to_array([SENT_START, IDX]).reshape(-1, 2)
            starts = [0] + [int(i) for i in arr[arr[:, 0] == 1, 1] if i > 0]
            out.append([x for x in (line[a:b].strip() for a, b in zip(starts, starts[1:] + [len(line)])) if x])
        return out


@functools.lru_cache(maxsize=None)
def splitter(lang: str) -> SentenceSplitter:
    "The process's splitter for `lang` (made once: a spaCy pipeline takes a while to load)."
    return SentenceSplitter(lang)


def split_sentences(lines: list[str], lang: Optional[str]) -> list[list[str]]:
    "Each line's sentences (the line itself when `lang` is None)."
    if lang is None: return [[line] for line in lines]
    return splitter(lang).split(lines)
