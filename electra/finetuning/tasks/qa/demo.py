"""A small SQuAD-format QA set that the project writes itself (no third-party text), for a demo on 2 CPU cores.

Paragraphs describe invented people, one fact per sentence (where they live, their work, birth year, animal,
instrument), in the everyday words of the pretraining demo corpus; questions ask for one fact of one person, so the
answer's type follows the question and its place follows the name. Some names carry accents, some sentences are
separated by extra spaces or a line break, and about one paragraph in six describes a dozen people: several hundred
tokens, so it needs several windows at the demo's sequence lengths (a short one fits in one window of 128). For 2.0, about a third of the questions cannot be answered: they ask about a
person the paragraph does not mention, or a fact it does not give; their `plausible_answers` hold a fact of the same
kind about someone else. The dev set gives up to three gold answers per question, as the real one does.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from electra.runtime.files import atomic_write_text

__all__ = ['write_demo_squad', 'DEMO_QA_SIZES']

# questions per split: a 2-layer model of hidden size 64 finds the answers of 400 training questions for a fifth of
# the dev questions (HasAns F1 17), of 2,000 for half of them (HasAns F1 about 55)
DEMO_QA_SIZES = {'train': 2000, 'dev': 120}

# everyday words of the pretraining demo corpus (electra/data/demo.py), so that its tokenizer covers most of them;
# a few names keep accents (the tokenizer strips them)
_NAMES = ['Alba', 'Borin', 'Calla', 'Dovan', 'Elsin', 'Farro', 'Gisa', 'Halden', 'Ilka', 'Joren', 'Kesta', 'Lumo',
          'Mirel', 'Nando', 'Orla', 'Pavo', 'Quilla', 'Rastin', 'Selda', 'Tovin', 'Ulma', 'Varek', 'Wenna', 'Zelia',
          'Zoë', 'Inès', 'Tomás', 'Chloé', 'José', 'Renée']
_PLACES = ['near the pond', 'in the harbor', 'on the hill', 'by the window', 'in the valley', 'across the bridge',
           'near the station', 'under the oak', 'near the island', 'on the main street', 'by the gate', 'in the orchard']
_JOBS = ['farmer', 'driver', 'sailor', 'captain', 'cook', 'teacher', 'singer', 'gardener', 'climber', 'guide']
_ANIMALS = ['cow', 'horse', 'goat', 'sheep', 'pig', 'hen', 'fish', 'bee', 'gull', 'worm']
_INSTRUMENTS = ['drum', 'piano', 'guitar', 'violin']
_SEPARATORS = [' '] * 8 + ['  ', '\n']  # mostly one space; sometimes two, or a line break

# fact kind -> (sentence with {who} and {x}, question with {who}, value pool, words some annotators leave out
# at the start of the value, or add before it)
_FACTS = {
    'place': ('{who} lives {x}.', 'Where does {who} live?', _PLACES, 'drop'),
    'job': ('{who} works as a {x}.', 'What does {who} work as?', _JOBS, 'a '),
    'year': ('{who} was born in {x}.', 'In what year was {who} born?', [str(y) for y in range(1921, 2000)], ''),
    'animal': ('{who} keeps a {x} in the garden.', 'What animal does {who} keep?', _ANIMALS, 'a '),
    'music': ('In the evening, {who} plays the {x}.', 'What does {who} play in the evening?', _INSTRUMENTS, 'the '),
}


def _people(rng: random.Random, n: int) -> list[dict]:
    "n people with distinct names, each with 3 to 5 of the facts."
    out = []
    for name in rng.sample(_NAMES, n):
        facts = {k: rng.choice(v[2]) for k, v in _FACTS.items()}
        keep = rng.sample(list(facts), rng.randint(3, 5))
        out.append({'name': name, 'facts': {k: facts[k] for k in _FACTS if k in keep}})
    return out


def _paragraph(rng: random.Random, people: list[dict]) -> tuple[str, dict]:
    "The text, and (name, kind) -> (value, character offset) of every fact stated."
    text, where = '', {}
    for p in people:
        for kind, value in p['facts'].items():
            if text: text += rng.choice(_SEPARATORS)
            template = _FACTS[kind][0]
            before = template[:template.index('{x}')].format(who=p['name'])
            where[p['name'], kind] = (value, len(text) + len(before))
            text += template.format(who=p['name'], x=value)
    return text, where


def _answers(rng: random.Random, kind: str, value: str, start: int, n: int) -> list[dict]:
    """n gold answers for a fact: the value, or (some annotators) the value with the word before it ('a ', 'the '),
    or, for a place, without its preposition ('the pond')."""
    extra, out = _FACTS[kind][3], []
    for _ in range(n):
        text, at = value, start
        if extra and rng.random() < 0.3:
            if extra == 'drop': text, at = value.split(' ', 1)[1], start + value.index(' ') + 1
            else: text, at = extra + value, start - len(extra)
        out.append({'text': text, 'answer_start': at})
    return out


def _unanswerable(rng: random.Random, people: list[dict], where: dict) -> tuple[str, str, list[dict]] | None:
    "(who, kind, plausible answers) of a question the paragraph cannot answer: someone absent, or a fact not given."
    names = [p['name'] for p in people]
    if rng.random() < 0.5:
        who = rng.choice([n for n in _NAMES if n not in names])
        kind = rng.choice(sorted({k for _, k in where}))
    else:
        gaps = [(n, k) for n in names for k in _FACTS if (n, k) not in where]
        if not gaps: return None
        who, kind = rng.choice(gaps)
    near = [(v, s) for (n, k), (v, s) in where.items() if k == kind and n != who]
    plausible = [{'text': v, 'answer_start': s} for v, s in near[:1]]
    return who, kind, plausible


def _questions(rng: random.Random, people: list[dict], where: dict, n: int, v2: bool, n_gold: int,
               ids: list[int]) -> list[dict]:
    "Up to n questions about distinct facts (for 2.0, a third unanswerable); ids count on in `ids[0]`."
    facts, out = rng.sample(sorted(where), min(n, len(where))), []
    for who, kind in facts:
        ids[0] += 1
        qa = {'id': f'demo{ids[0]:05d}'}
        no = _unanswerable(rng, people, where) if v2 and rng.random() < 1 / 3 else None
        if no is not None:
            out.append({**qa, 'question': _FACTS[no[1]][1].format(who=no[0]), 'answers': [], 'is_impossible': True,
                        'plausible_answers': no[2]})
            continue
        value, start = where[who, kind]
        qa.update(question=_FACTS[kind][1].format(who=who), answers=_answers(rng, kind, value, start, n_gold))
        out.append({**qa, 'is_impossible': False} if v2 else qa)
    return out


def _split(rng: random.Random, n_questions: int, v2: bool, n_gold: int, ids: list[int]) -> list[dict]:
    "Articles of five paragraphs each until the split has `n_questions` questions."
    paragraphs, count = [], 0
    while count < n_questions:
        long = rng.random() < 1 / 6
        people = _people(rng, rng.randint(10, 12) if long else rng.randint(2, 3))
        text, where = _paragraph(rng, people)
        qas = _questions(rng, people, where, min(n_questions - count, 12 if long else 5), v2, n_gold, ids)
        paragraphs.append({'context': text, 'qas': qas})
        count += len(qas)
    return [{'title': f'Demo article {a + 1}', 'paragraphs': paragraphs[a * 5:(a + 1) * 5]}
            for a in range((len(paragraphs) + 4) // 5)]


def write_demo_squad(root: str | Path, version: str = '2.0', sizes: dict[str, int] | None = None,
                     seed: int = 0) -> Path:
    """Write `train.json` and `dev.json` in the official SQuAD format under `root` (`version` '1.1' or '2.0');
    `sizes`: questions per split ({'train': n, 'dev': n}, default `DEMO_QA_SIZES`). Returns `root`."""
    if version not in ('1.1', '2.0'): raise ValueError(f"write_demo_squad: version {version!r} is not '1.1' or '2.0'")
    root, n, v2 = Path(root), {**DEMO_QA_SIZES, **(sizes or {})}, version == '2.0'
    rng, ids = random.Random(seed), [0]
    for split, n_gold in (('train', 1), ('dev', 3)):
        data = {'version': 'v2.0' if v2 else '1.1', 'data': _split(rng, n[split], v2, n_gold, ids)}
        atomic_write_text(json.dumps(data, ensure_ascii=False, indent=1), root / f'{split}.json')
    return root
