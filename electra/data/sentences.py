"""Lines to sentences: spaCy's rule-based sentencizer (`spacy.blank(lang)` + `sentencizer`, no model download), for
raw documents, tables and paragraph-long `lines` files (`sentence_split`; when it applies: `electra.data.corpus`)."""
from __future__ import annotations

import functools
from typing import Optional

from electra.config.errors import ConfigError
from electra.data.corpus import MAX_LINE_BYTES

__all__ = ['sentencizer', 'SentenceSplitter', 'splitter', 'split_sentences']


def sentencizer(lang: str):
    "A fresh spaCy blank pipeline for `lang` with the rule-based sentencizer (offline: no model download)."
    try: import spacy
    except ImportError:
        raise ConfigError("sentence_split: spaCy is not installed (pip install spacy), or set sentence_split none.") from None
    try: nlp = spacy.blank(lang)
    except (ImportError, KeyError, ValueError) as e:
        raise ConfigError(f"sentence_split: spaCy has no language '{lang}' ({e}). Use a code such as en, de, fr, "
                          "'auto' or 'none'.") from None
    nlp.add_pipe('sentencizer')
    nlp.max_length = MAX_LINE_BYTES + 1  # lines are capped when read; spaCy's own cap is 1,000,000 characters
    return nlp


class SentenceSplitter:
    """Splits lines into sentences with spaCy's sentencizer. spaCy's vocabulary keeps every word it has seen, so
    the pipeline is renewed after `renew_every` of them: memory stays bounded on any corpus (tokenizing does not
    depend on the vocabulary, so neither do the sentences)."""

    def __init__(self, lang: str, renew_every: int = 500_000):
        self.lang, self.renew_every = lang, renew_every
        self.nlp = sentencizer(lang)

    def split(self, lines: list[str]) -> list[list[str]]:
        from spacy.attrs import IDX, SENT_START
        if len(self.nlp.vocab) > self.renew_every: self.nlp = sentencizer(self.lang)
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
