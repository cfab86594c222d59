"""A small synthetic NER set that the project writes itself (no third-party text), in the official layout:
`train.txt`, `dev.txt`, `test.txt` (the file names the official tagging task reads), CoNLL-style `word tag` lines
in IOB2, a blank line between sentences and a `-DOCSTART-` line before every document of ten sentences.

Entities are people (a first name and often a last name), places (one or two words) and organisations (a name and
a kind, "Acme Bank"), in about twenty sentence patterns with a few entity-free ones. The set is learnable by a tiny
model in minutes: most entity words recur, but a few words are both a last name and a place (so context decides),
some names have accents (so words split into several pieces), and about one entity in ten of dev and test uses a
name never seen in training.
"""
from __future__ import annotations

import random
from pathlib import Path

from electra.runtime.files import atomic_write_text

__all__ = ['write_demo_tagging', 'DEMO_TAGGING_SIZES']

DEMO_TAGGING_SIZES = {'train': 400, 'dev': 100, 'test': 100}

_FIRST = ['Anna', 'Bruno', 'Clara', 'David', 'Elena', 'Felix', 'Greta', 'Hugo', 'Irene', 'Jonas', 'Karin', 'Louis',
          'Marta', 'Nico', 'Olga', 'Paolo', 'Renée', 'José', 'Zoë', 'Søren']
_LAST = ['Novak', 'Berger', 'Costa', 'Dubois', 'Fischer', 'Moreau', 'Keller', 'Silva', 'Müller', 'Ortega',
         'Lindqvist', 'Jackson', 'Sydney', 'Lincoln']
_PLACES = ['Berlin', 'Lisbon', 'Oslo', 'Vienna', 'Madrid', 'Prague', 'Dublin', 'Zürich', 'Kraków', 'Jackson',
           'Sydney', 'Lincoln', 'New Harbor', 'East Valley', 'Port Elm', 'San Marco']
_ORG_NAMES = ['Acme', 'Northwind', 'Globex', 'Initech', 'Vandelay', 'Blue River', 'Red Oak', 'Nordlicht']
_ORG_KINDS = ['Bank', 'Corp', 'Group', 'Institute', 'University', 'Airlines']
# names that only dev and test use, so that a model must read the context there too
_FIRST_NEW = ['Wanda', 'Yusuf', 'Ingrid', 'Émile']
_LAST_NEW = ['Petrov', 'Okafor', 'Håkansson']
_PLACES_NEW = ['Tallinn', 'Bergen', 'Green Bay', 'Córdoba']
_ORG_NAMES_NEW = ['Umbra', 'Sterling']

_PATTERNS = [
    '{PER} visited {LOC} last week .', '{PER} works for {ORG} in {LOC} .', '{ORG} opened an office in {LOC} .',
    'yesterday {PER} met {PER} at the {ORG} office .', 'the weather in {LOC} was cold .',
    '{PER} said that {ORG} will hire more people .', '{ORG} and {ORG} signed a deal in {LOC} .',
    'people in {LOC} like {PER} .', '{PER} moved from {LOC} to {LOC} .', 'shares of {ORG} rose on monday .',
    'a spokesman for {ORG} declined to comment .', '{PER} , a lawyer from {LOC} , joined {ORG} .',
    'the mayor of {LOC} thanked {PER} .', 'fans waited for {PER} outside the hotel .', '{LOC} beat {LOC} 2 - 1 .',
    'according to {PER} , {ORG} lost money .', 'the train from {LOC} was late again .',
    '{PER} wrote a book about {LOC} .', 'the meeting was short .', 'prices went up again this year .',
    'nobody answered the phone .',
]


def _entity(rng: random.Random, kind: str, new: bool) -> list[str]:
    "The words of one entity; `new`: from the names that training never sees (one part of it, at least)."
    if kind == 'PER':
        first = rng.choice(_FIRST_NEW if new else _FIRST)
        return [first] if rng.random() < 0.3 else [first, rng.choice(_LAST_NEW if new else _LAST)]
    if kind == 'LOC': return rng.choice(_PLACES_NEW if new else _PLACES).split()
    return [*rng.choice(_ORG_NAMES_NEW if new else _ORG_NAMES).split(), rng.choice(_ORG_KINDS)]


def _sentence(rng: random.Random, new_rate: float) -> list[tuple[str, str]]:
    "One sentence as (word, IOB2 tag) pairs."
    out = []
    for part in rng.choice(_PATTERNS).split():
        if part in ('{PER}', '{LOC}', '{ORG}'):
            kind = part[1:-1]
            words = _entity(rng, kind, rng.random() < new_rate)
            out += [(w, ('B-' if i == 0 else 'I-') + kind) for i, w in enumerate(words)]
        else: out.append((part, 'O'))
    return out


def _split_text(rng: random.Random, n: int, new_rate: float) -> str:
    lines = []
    for i in range(n):
        if i % 10 == 0: lines += ['-DOCSTART- O', '']  # CoNLL-2003's document marker, then a blank line
        lines += [f'{w} {t}' for w, t in _sentence(rng, new_rate)] + ['']
    return '\n'.join(lines)


def write_demo_tagging(root: str | Path, sizes: dict[str, int] | None = None, seed: int = 0) -> Path:
    "Writes `<root>/{train,dev,test}.txt` (sizes: sentences per split, default `DEMO_TAGGING_SIZES`); returns root."
    root, sizes = Path(root), {**DEMO_TAGGING_SIZES, **(sizes or {})}
    root.mkdir(parents=True, exist_ok=True)
    for k, (split, n) in enumerate(sizes.items()):
        rng = random.Random(seed * 1000 + k)
        atomic_write_text(_split_text(rng, n, 0.0 if split == 'train' else 0.1), root / f'{split}.txt')
    return root
