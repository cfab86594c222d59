"""Shared by the tagging tests: an offline WordPiece tokenizer whose vocabulary splits most words into several
pieces (single characters, a few longer pieces), and random words and tags."""
from __future__ import annotations

import random

import pytest

# characters of the random words; BERT's normalizer lowercases and strips accents (é -> e) before WordPiece,
# splits CJK characters and punctuation off as words of their own, and turns words it cannot spell into [UNK]
LETTERS = 'abcdefghijklmnopqrstuvwxyz'
UNICODE = ['é', 'ß', 'ñ', 'ø', 'ž', 'Ω', 'λ', 'ж', '中', '文', 'ک', '😀', 'Ä']
PIECES = ['an', 'na', 'ber', 'lin', 'os', 'lo', 'ing', 'er', 'st', 'th', 'qu', 'ee']


def vocabulary() -> list[str]:
    specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    chars = [*LETTERS, *'0123456789', '.', ',', '-', "'", 'ß', 'ø', 'ω', 'λ', 'ж', '中', '文', 'ک']
    return specials + chars + ['##' + c for c in chars] + PIECES + ['##' + p for p in PIECES] + ['berlin', 'oslo']


@pytest.fixture(scope='session')
def tokenizer():
    import transformers
    return transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocabulary())})


def random_word(rng: random.Random) -> str:
    "A word of 1-12 characters, some unicode or punctuation (several pieces); every one has a piece."
    r = rng.random()
    if r < 0.05: return rng.choice(['berlin', 'Oslo', 'a.b', "o'neil", 'x-y-z', '中文', 'ÄÖ'])
    alphabet = LETTERS + LETTERS.upper() + ''.join(UNICODE) if r < 0.3 else LETTERS
    return ''.join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))


def random_iob2(rng: random.Random, n: int, types=('PER', 'LOC', 'ORG')) -> list[str]:
    "A well-formed IOB2 sequence of n tags."
    tags, prev = [], 'O'
    for _ in range(n):
        r = rng.random()
        if prev != 'O' and r < 0.4: tags.append('I-' + prev.split('-', 1)[1])
        elif r < 0.7: tags.append('O')
        else: tags.append('B-' + rng.choice(types))
        prev = tags[-1]
    return tags
