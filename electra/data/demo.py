"""A synthetic English-like pretraining corpus that the project generates itself (no third-party text).

A small random grammar writes documents in the official ELECTRA corpus layout: one sentence per line,
a blank line between documents. Each document has a topic (farm, city, sea, ...) with its own nouns,
verbs, adjectives and places, and one or two recurring characters, so a tiny masked language model has
real structure to learn: subject-verb agreement (`the cow eats` / `the cows eat`), a/an, number words
with plural nouns, tense following time phrases (`yesterday ... fed`, `tomorrow ... will feed`), and
topic words that predict each other within a document.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

__all__ = ['write_demo_corpus', 'demo_corpus_text']

_NAMES = ['Alba', 'Borin', 'Calla', 'Dovan', 'Elsin', 'Farro', 'Gisa', 'Halden', 'Ilka', 'Joren', 'Kesta',
          'Lumo', 'Mirel', 'Nando', 'Orla', 'Pavo', 'Quilla', 'Rastin', 'Selda', 'Tovin', 'Ulma', 'Varek',
          'Wenna', 'Yorrit', 'Zelia']

# topic -> (nouns, verbs, adjectives, places); nouns and verbs are base forms, inflected by the rules below
_TOPICS = {
    'farm': ('cow horse goat farmer barn field tractor hen fence orchard sheep pig'.split(),
             'feed milk paint repair watch follow plant clean'.split(),
             'muddy quiet old brown hungry tired green wooden'.split(),
             ['in the barn', 'near the pond', 'behind the fence', 'on the hill', 'in the orchard']),
    'city': ('bus street driver tower bridge shop taxi market lamp crowd station train'.split(),
             'drive cross pass wait visit open close build'.split(),
             'busy loud tall crowded narrow bright modern grey'.split(),
             ['in the square', 'near the station', 'downtown', 'across the bridge', 'on the main street']),
    'sea': ('ship sailor wave harbor fish island storm anchor captain gull net boat'.split(),
            'sail steer catch pull reach watch fear follow'.split(),
            'salty stormy calm deep blue wet brave distant'.split(),
            ['at sea', 'in the harbor', 'near the island', 'on the deck', 'along the coast']),
    'kitchen': ('cook bread soup pan oven apple knife spoon cake onion table kettle'.split(),
                'bake cut stir boil taste wash serve prepare'.split(),
                'hot sweet fresh sharp warm salty crisp golden'.split(),
                ['in the kitchen', 'on the stove', 'at the table', 'in the pantry', 'by the window']),
    'school': ('teacher student book lesson desk pencil map question class library exam chalk'.split(),
               'read write answer study explain borrow draw check'.split(),
               'difficult clever new long careful curious easy short'.split(),
               ['in the classroom', 'in the library', 'after school', 'at the blackboard', 'in the hall']),
    'music': ('singer drum song piano band guitar choir violin concert note stage melody'.split(),
              'play sing tune practice hear record learn perform'.split(),
              'loud soft slow happy sad famous gentle strange'.split(),
              ['on the stage', 'in the studio', 'at the festival', 'in the church', 'under the lights']),
    'garden': ('rose tree gardener bee seed flower leaf shovel path bush worm hedge'.split(),
               'water dig cut grow pick trim smell carry'.split(),
               'tiny tall red yellow wild fragrant thick dry'.split(),
               ['in the garden', 'by the gate', 'under the oak', 'in the greenhouse', 'near the wall']),
    'mountain': ('climber rope peak cabin goat trail guide tent snow rock valley pine'.split(),
                 'climb cross carry reach find follow build watch'.split(),
                 'steep cold icy rocky high windy lonely white'.split(),
                 ['on the ridge', 'below the summit', 'in the valley', 'near the cabin', 'above the clouds']),
}
_PLURAL = {'sheep': 'sheep', 'fish': 'fish', 'leaf': 'leaves', 'knife': 'knives', 'class': 'classes'}
_PAST = {'feed': 'fed', 'catch': 'caught', 'build': 'built', 'read': 'read', 'write': 'wrote', 'draw': 'drew',
         'sing': 'sang', 'hear': 'heard', 'dig': 'dug', 'cut': 'cut', 'grow': 'grew', 'find': 'found',
         'drive': 'drove', 'see': 'saw', 'plan': 'planned', 'stir': 'stirred', 'trim': 'trimmed'}
_SHARED_VERBS = ['see', 'like', 'find', 'remember', 'plan']
_NUMBERS = 'two three four five six seven eight nine ten eleven twelve'.split()
_PAST_TIMES = ['yesterday', 'last week', 'last summer', 'two days ago', 'in the morning']
_FUTURE_TIMES = ['tomorrow', 'next week', 'next summer', 'soon', 'in the evening']
_VOWELS = tuple('aeiou')


def _plural(noun: str) -> str:
    if noun in _PLURAL: return _PLURAL[noun]
    if noun.endswith(('s', 'sh', 'ch', 'x')): return noun + 'es'
    if noun.endswith('y') and not noun.endswith(('ay', 'ey', 'oy', 'uy')): return noun[:-1] + 'ies'
    return noun + 's'


def _third(verb: str) -> str:
    if verb.endswith(('s', 'sh', 'ch', 'x', 'o')): return verb + 'es'
    if verb.endswith('y') and not verb.endswith(('ay', 'ey', 'oy', 'uy')): return verb[:-1] + 'ies'
    return verb + 's'


def _past(verb: str) -> str:
    if verb in _PAST: return _PAST[verb]
    if verb.endswith('e'): return verb + 'd'
    if verb.endswith('y') and not verb.endswith(('ay', 'ey', 'oy', 'uy')): return verb[:-1] + 'ied'
    return verb + 'ed'


def _a(word: str) -> str:
    return ('an ' if word.startswith(_VOWELS) else 'a ') + word


class _Document:
    "One document's vocabulary (its topics and characters) and the sentence templates drawing from it."

    def __init__(self, rng: random.Random):
        self.rng = rng
        topics = rng.sample(sorted(_TOPICS), 2)
        # most documents stay on one topic; some borrow a few words from a second one
        self.nouns, self.verbs, self.adjs, self.places = (list(part) for part in _TOPICS[topics[0]])
        if rng.random() < 0.3:
            nouns, verbs, adjs, places = _TOPICS[topics[1]]
            self.nouns += rng.sample(nouns, 3)
            self.verbs += rng.sample(verbs, 2)
            self.adjs += rng.sample(adjs, 2)
            self.places += rng.sample(places, 1)
        self.verbs += _SHARED_VERBS
        self.names = rng.sample(_NAMES, 2)

    def subject(self) -> tuple[str, bool]:
        "A subject phrase and whether it is plural."
        r, rng = self.rng.random(), self.rng
        if r < 0.3: return rng.choice(self.names), False
        if r < 0.45:
            pronoun = rng.choice(['he', 'she', 'it', 'they', 'we'])
            return pronoun, pronoun in ('they', 'we')
        noun = rng.choice(self.nouns)
        if r < 0.7: return f'the {noun}', False
        if r < 0.85: return f'the {rng.choice(self.adjs)} {_plural(noun)}', True
        return f'{rng.choice(_NUMBERS)} {_plural(noun)}', True

    def obj(self) -> str:
        r, rng = self.rng.random(), self.rng
        noun = rng.choice(self.nouns)
        if r < 0.35: return f'the {noun}'
        if r < 0.6: return _a(f'{rng.choice(self.adjs)} {noun}')
        if r < 0.8: return f"{rng.choice(self.names)}'s {noun}"
        return f'the {_plural(noun)}'

    def clause(self) -> str:
        "A present, past or future clause with a correctly inflected verb."
        rng = self.rng
        subj, plural = self.subject()
        verb, r = rng.choice(self.verbs), rng.random()
        if r < 0.4: return f'{subj} {verb if plural else _third(verb)} {self.obj()} {rng.choice(self.places)}'
        if r < 0.7: return f'{rng.choice(_PAST_TIMES)} {subj} {_past(verb)} {self.obj()}'
        if r < 0.85: return f'{rng.choice(_FUTURE_TIMES)} {subj} will {verb} {self.obj()}'
        return f"{subj} {'do' if plural else 'does'} not {verb} {self.obj()}"

    def sentence(self) -> str:
        rng, r = self.rng, self.rng.random()
        if r < 0.4: text, end = self.clause(), '.'
        elif r < 0.5:
            subj, plural = self.subject()
            be = rng.choice(['are', 'were'] if plural else ['is', 'was'])
            text, end = f'{subj} {be} very {rng.choice(self.adjs)}', '.'
        elif r < 0.6:
            n, noun = rng.randint(1, 12), rng.choice(self.nouns)
            thing = f'is one {noun}' if n == 1 else f'are {_NUMBERS[n - 2]} {_plural(noun)}'
            text, end = f'there {thing} {rng.choice(self.places)}', '.'
        elif r < 0.7: text, end = f'{rng.choice(self.names)} said that {self.clause()}', '.'
        elif r < 0.8: text, end = f'{self.clause()} because {self.clause()}', '.'
        elif r < 0.88:
            subj, plural = self.subject()
            text, end = f"{'do' if plural else 'does'} {subj} {rng.choice(self.verbs)} {self.obj()}", '?'
        elif r < 0.94:
            subj, _ = self.subject()
            text, end = f'in {rng.randint(1800, 2020)} {subj} {_past(rng.choice(self.verbs))} {self.obj()}', '.'
        else:
            noun = rng.choice(self.nouns)
            text, end = f'the {noun} cost {rng.randint(2, 500)} coins {rng.choice(self.places)}', '.'
        return text[0].upper() + text[1:] + end


def demo_corpus_text(n_docs: int = 1500, seed: int = 0) -> str:
    "The demo corpus as one string: 3 to 12 sentences per document, documents separated by a blank line."
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        doc = _Document(rng)
        docs.append('\n'.join(doc.sentence() for _ in range(rng.randint(3, 12))))
    return '\n\n'.join(docs) + '\n'


def write_demo_corpus(path: Path, n_docs: int = 1500, seed: int = 0) -> Path:
    """Write the demo corpus to `path` (atomically) and return `path`.

    An existing file with exactly this content is left untouched, so its mtime (part of the pretraining
    dataset's cache key) stays the same and the built dataset is reused.
    """
    path = Path(path)
    data = demo_corpus_text(n_docs, seed).encode('utf-8')
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data: return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
