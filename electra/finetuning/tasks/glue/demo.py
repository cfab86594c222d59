"""Small synthetic GLUE tasks that the project writes itself (no third-party text), in the GLUE download layout.

Every task gets the files, columns and headers of the real download (CoLA's train/dev without header, MRPC's
byte-order mark, MNLI's parse and annotator columns, `diagnostic/diagnostic.tsv`), so the demo exercises the same
readers as real data. Each task has a learnable rule, so a small pretrained model beats chance on several of them:

- CoLA: acceptable scenes vs. ones with broken agreement, a doubled article or swapped words.
- SST-2: the label follows the sentiment words of a short review.
- MRPC / QQP: the same scene (or question) rephrased vs. one with a changed participant.
- STS-B: the score is the number of the five scene slots (who, does, what, where, when) the two sentences share.
- MNLI / RTE / AX: the hypothesis drops details (entailment), negates the action (contradiction) or adds a
  detail the premise does not give (neutral); MNLI's mismatched splits use other people and things.
- QNLI: the sentence answers the "where" question when it describes the same person and action.
- WNLI: "A <verb>ed B because he was <adjective>"; the verb decides whom "he" means.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

from electra.runtime.files import atomic_write_text

__all__ = ['write_demo_glue', 'DEMO_SIZES', 'review_example']

# people and things of the "matched" genre and of the "mismatched" one
_PEOPLE = ['farmer', 'teacher', 'baker', 'sailor', 'doctor', 'painter', 'driver', 'singer', 'gardener', 'student']
_PEOPLE_MM = ['pilot', 'miner', 'nurse', 'judge', 'tailor', 'guard', 'poet', 'clerk']
_THINGS = ['cow', 'letter', 'bread', 'boat', 'lamp', 'garden', 'piano', 'map', 'basket', 'window', 'fence', 'soup']
_THINGS_MM = ['engine', 'coat', 'bridge', 'ladder', 'clock', 'wagon', 'drum', 'tent']
_VERBS = [('feed', 'fed', 'feeds'), ('paint', 'painted', 'paints'), ('clean', 'cleaned', 'cleans'),
          ('carry', 'carried', 'carries'), ('watch', 'watched', 'watches'), ('repair', 'repaired', 'repairs'),
          ('open', 'opened', 'opens'), ('visit', 'visited', 'visits')]
_PLACES = ['in the barn', 'near the river', 'at the market', 'on the hill', 'in the kitchen', 'by the station',
           'in the old house', 'at the harbor']
_TIMES = ['in the morning', 'at noon', 'in the evening', 'on monday', 'last week', 'at night']
_ADJS = ['old', 'small', 'red', 'heavy', 'new', 'quiet']
_GOOD = ['wonderful', 'delightful', 'excellent', 'lovely', 'charming', 'brilliant', 'superb', 'pleasant']
_BAD = ['terrible', 'awful', 'boring', 'dreadful', 'horrible', 'dull', 'poor', 'miserable']
_TOPICS = ['film', 'meal', 'concert', 'book', 'trip', 'show', 'game', 'story']
_FILLER = ['the ending', 'the music', 'the acting', 'the start', 'the service', 'the cast', 'the pace', 'the view']
# WNLI: after "A <verb> B because he was ...", "he" is A for the first verbs and B for the second
_WNLI_SUBJ = [('thanked', 'grateful'), ('called', 'worried'), ('followed', 'curious'), ('envied', 'jealous')]
_WNLI_OBJ = [('praised', 'brave'), ('comforted', 'sad'), ('warned', 'careless'), ('paid', 'helpful')]

NLI3 = ('entailment', 'neutral', 'contradiction')
DEMO_SIZES = {'train': 400, 'dev': 150, 'test': 100}


@dataclass(frozen=True)
class _Scene:
    who: str
    verb: tuple[str, str, str]
    what: str
    adj: str
    where: str
    when: str

    def say(self, adj: bool = True, where: bool = True, when: bool = True, negate: bool = False) -> str:
        verb = f'did not {self.verb[0]}' if negate else self.verb[1]
        words = [f'the {self.who} {verb} the {self.adj + " " if adj else ""}{self.what}']
        if where: words.append(self.where)
        if when: words.append(self.when)
        return ' '.join(words) + ' .'

    def passive(self) -> str:
        return f'the {self.adj} {self.what} was {self.verb[1]} by the {self.who} {self.where} {self.when} .'


def _scene(rng: random.Random, mismatched: bool = False) -> _Scene:
    return _Scene(rng.choice(_PEOPLE_MM if mismatched else _PEOPLE), rng.choice(_VERBS),
                  rng.choice(_THINGS_MM if mismatched else _THINGS), rng.choice(_ADJS), rng.choice(_PLACES),
                  rng.choice(_TIMES))


def _other(rng: random.Random, options: list, current):
    return rng.choice([o for o in options if o != current])


def _changed(rng: random.Random, s: _Scene, slots: list[str], mismatched: bool = False) -> _Scene:
    "The scene with the given slots replaced by other values."
    pools = {'who': _PEOPLE_MM if mismatched else _PEOPLE, 'verb': _VERBS, 'what': _THINGS_MM if mismatched else _THINGS,
             'where': _PLACES, 'when': _TIMES}
    return replace(s, **{k: _other(rng, pools[k], getattr(s, k)) for k in slots})


def _cola(rng: random.Random) -> tuple[str, int]:
    s = _scene(rng)
    good = s.say(when=rng.random() < 0.5)
    if rng.random() < 0.5: return good, 1
    words = good.split()
    kind = rng.randrange(3)
    if kind == 0:   # agreement: present tense with a plural subject written singular, or vice versa
        words = ['the', s.who + 's', s.verb[2]] + words[3:] if rng.random() < 0.5 else ['the', s.who, s.verb[0]] + words[3:]
    elif kind == 1:  # doubled article
        words.insert(3, 'the')
    else:           # subject and verb swapped
        words[1], words[2] = words[2], words[1]
    return ' '.join(words), 0


def review_example(rng: random.Random) -> tuple[str, int]:
    "A short review and its sentiment (1 positive): the label follows its sentiment words (SST-2 of the demo)."
    label = rng.randrange(2)
    main, side = (_GOOD, _BAD) if label else (_BAD, _GOOD)
    topic = rng.choice(_TOPICS)
    parts = [f'the {topic} was {rng.choice(main)}', f'{rng.choice(_FILLER)} was {rng.choice(main)}']
    if rng.random() < 0.4: parts.insert(1, f'though {rng.choice(_FILLER)} was {rng.choice(side)}')
    return ' , '.join(parts) + ' .', label


def _paraphrase(rng: random.Random) -> tuple[str, str, int]:
    s = _scene(rng)
    label = rng.randrange(2)
    t = s if label else _changed(rng, s, [rng.choice(['who', 'what', 'verb'])])
    return s.say(), (t.passive() if rng.random() < 0.5 else t.say()), label


def _question(s: _Scene, form: int) -> str:
    if form == 0: return f'how did the {s.who} {s.verb[0]} the {s.what} {s.where} ?'
    return f'what is the best way for a {s.who} to {s.verb[0]} a {s.what} {s.where} ?'


def _qqp(rng: random.Random) -> tuple[str, str, int]:
    s = _scene(rng)
    label = rng.randrange(2)
    t = s if label else _changed(rng, s, [rng.choice(['who', 'what', 'verb', 'where'])])
    form = rng.randrange(2)
    return _question(s, form), _question(t, 1 - form if label else rng.randrange(2)), label


def _sts(rng: random.Random) -> tuple[str, str, float]:
    s = _scene(rng)
    keep = rng.randrange(6)
    slots = ['who', 'verb', 'what', 'where', 'when']
    t = _changed(rng, s, rng.sample(slots, 5 - keep))
    score = min(5.0, max(0.0, keep + rng.uniform(-0.4, 0.4)))
    return s.say(adj=False), t.say(adj=False), score


def _nli(rng: random.Random, mismatched: bool = False) -> tuple[str, str, str]:
    s = _scene(rng, mismatched)
    premise = s.say(when=rng.random() < 0.5)
    label = rng.choice(NLI3)
    if label == 'entailment':
        hyp = s.say(adj=False, where=rng.random() < 0.5, when=False)
    elif label == 'contradiction':
        hyp = s.say(adj=False, where=False, when=False, negate=True)
    else:  # a detail the premise does not give: another thing too
        hyp = f'the {s.who} {s.verb[1]} the {s.what} and the {_other(rng, _THINGS_MM if mismatched else _THINGS, s.what)} .'
    return premise, hyp, label


def _qnli(rng: random.Random) -> tuple[str, str, str]:
    s = _scene(rng)
    question = f'where did the {s.who} {s.verb[0]} the {s.what} ?'
    label = rng.choice(['entailment', 'not_entailment'])
    t = s if label == 'entailment' else _changed(rng, s, [rng.choice(['who', 'verb'])])
    return question, t.say(), label


def _wnli(rng: random.Random) -> tuple[str, str, int]:
    a, b = rng.sample(_PEOPLE, 2)
    subj = rng.random() < 0.5
    verb, adj = rng.choice(_WNLI_SUBJ if subj else _WNLI_OBJ)
    label = rng.randrange(2)
    meant = (a if subj else b) if label else (b if subj else a)
    return f'the {a} {verb} the {b} because he was {adj} .', f'the {meant} was {adj} .', label


def _write(path: Path, header: list[str] | None, rows: list[list], bom: bool = False) -> None:
    lines = (['\t'.join(header)] if header else []) + ['\t'.join(str(v) for v in r) for r in rows]
    atomic_write_text(('\ufeff' if bom else '') + '\n'.join(lines) + '\n', path)


def _rte(rng: random.Random) -> tuple[str, str, str]:
    premise, hyp, label = _nli(rng)
    return premise, hyp, 'entailment' if label == 'entailment' else 'not_entailment'


def _parse(sentence: str) -> str:
    return '( ' + ' '.join(sentence.split()) + ' )'


def _sts_row(i: int, a: str, b: str) -> list:
    return [i, 'main-demo', 'demo', '2024', f'{i:04d}', 'none', 'none', a, b]


def _mnli_row(i: int, a: str, b: str, genre: str) -> list:
    return [i, 1000 + i, f'{1000 + i}n', genre, _parse(a), _parse(b), f'(ROOT {_parse(a)})', f'(ROOT {_parse(b)})', a, b]


_MRPC = ['#1 ID', '#2 ID', '#1 String', '#2 String']
_STS = ['index', 'genre', 'filename', 'year', 'old_index', 'source1', 'source2', 'sentence1', 'sentence2']
_MNLI = ['index', 'promptID', 'pairID', 'genre', 'sentence1_binary_parse', 'sentence2_binary_parse', 'sentence1_parse',
         'sentence2_parse', 'sentence1', 'sentence2']
# task: (example maker, train/dev header (None: no header), train/dev row, test header, test row); an example is
# (text, label) or (text_a, text_b, label)
_FILES = {
    'CoLA': (_cola, None, lambda i, e: [f'demo{i % 7}', e[1], '' if e[1] else '*', e[0]],
             ['index', 'sentence'], lambda i, e: [i, e[0]]),
    'SST-2': (review_example, ['sentence', 'label'], lambda i, e: list(e), ['index', 'sentence'], lambda i, e: [i, e[0]]),
    'MRPC': (_paraphrase, ['Quality', *_MRPC], lambda i, e: [e[2], 2 * i, 2 * i + 1, e[0], e[1]],
             ['index', *_MRPC], lambda i, e: [i, 2 * i, 2 * i + 1, e[0], e[1]]),
    'STS-B': (_sts, [*_STS, 'score'], lambda i, e: _sts_row(i, e[0], e[1]) + [f'{e[2]:.3f}'],
              _STS, lambda i, e: _sts_row(i, e[0], e[1])),
    'QQP': (_qqp, ['id', 'qid1', 'qid2', 'question1', 'question2', 'is_duplicate'], lambda i, e: [i, 2 * i, 2 * i + 1, *e],
            ['id', 'question1', 'question2'], lambda i, e: [i, e[0], e[1]]),
    'QNLI': (_qnli, ['index', 'question', 'sentence', 'label'], lambda i, e: [i, *e],
             ['index', 'question', 'sentence'], lambda i, e: [i, e[0], e[1]]),
    'RTE': (_rte, ['index', 'sentence1', 'sentence2', 'label'], lambda i, e: [i, *e],
            ['index', 'sentence1', 'sentence2'], lambda i, e: [i, e[0], e[1]]),
    'WNLI': (_wnli, ['index', 'sentence1', 'sentence2', 'label'], lambda i, e: [i, *e],
             ['index', 'sentence1', 'sentence2'], lambda i, e: [i, e[0], e[1]]),
}


def write_demo_glue(root: str | Path, sizes: dict[str, int] | None = None, seed: int = 0) -> Path:
    """Write every GLUE task's train/dev/test files (and `diagnostic/diagnostic.tsv`) under `root` in the layout of the
    GLUE download script. `sizes` gives examples per split kind: {'train': n, 'dev': n, 'test': n}."""
    root, n = Path(root), {**DEMO_SIZES, **(sizes or {})}
    rng = random.Random(seed)
    for name, (make, header, row, test_header, test_row) in _FILES.items():
        for split in ('train', 'dev', 'test'):
            data = [make(rng) for _ in range(n[split])]
            if name == 'QQP' and split == 'train' and len(data) > 2:  # QQP's train set has rows with an empty question
                data[1:3] = [(data[1][0], '', 0), ('', data[2][1], 0)]
            if split == 'test':
                _write(root / name / 'test.tsv', test_header, [test_row(i, e) for i, e in enumerate(data)])
            else:  # MRPC's download copies the original header, byte-order mark included
                _write(root / name / f'{split}.tsv', header, [row(i, e) for i, e in enumerate(data)], bom=name == 'MRPC')
    annotators = [f'label{k}' for k in range(1, 6)]
    for split, kind, mm in [('train', 'train', False), ('dev_matched', 'dev', False), ('dev_mismatched', 'dev', True),
                            ('test_matched', 'test', False), ('test_mismatched', 'test', True)]:
        rows = [_mnli_row(i, a, b, 'fiction' if mm else 'letters') + [y] for i, (a, b, y) in
                enumerate(_nli(rng, mm) for _ in range(n[kind]))]
        if kind == 'test': _write(root / f'MNLI/{split}.tsv', _MNLI, [r[:-1] for r in rows])
        elif kind == 'train': _write(root / 'MNLI/train.tsv', _MNLI + ['label1', 'gold_label'], [r + r[-1:] for r in rows])
        else: _write(root / f'MNLI/{split}.tsv', _MNLI + annotators + ['gold_label'], [r + r[-1:] * 5 for r in rows])
    _write(root / 'diagnostic/diagnostic.tsv', ['index', 'sentence1', 'sentence2'],
           [[i, a, b] for i, (a, b, _) in enumerate(_nli(rng, rng.random() < 0.5) for _ in range(n['test']))])
    return root
