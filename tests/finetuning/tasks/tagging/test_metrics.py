"""electra/finetuning/tasks/tagging/metrics.py: entity scores against hand-written span readers and seqeval,
token accuracy, prediction files in the input's format."""
from __future__ import annotations

import json
import random

import pytest
import seqeval.metrics
import seqeval.scheme

from electra.finetuning.tasks.tagging import data, metrics

TYPES = ('PER', 'LOC', 'ORG')


def parts(tag: str) -> tuple[str, str]:
    return ('O', '') if tag == 'O' else (tag[0], tag[2:])


def conlleval_spans(tags) -> set:
    "Entities as conlleval reads them: any I-/E- not continuing an open entity of its type begins one."
    spans, start, prev = set(), None, ('O', '')
    for i, tag in enumerate([*tags, 'O']):
        p, t = parts(tag)
        ends = prev[0] in 'ES' or (prev[0] in 'BI' and (p in 'BSO' or t != prev[1]))  # (prefixes are one letter)
        begins = p in 'BS' or (p in 'IE' and (prev[0] in 'OES' or t != prev[1]))
        if start is not None and ends: spans.add((prev[1], start, i - 1)); start = None
        if begins: start = i
        prev = (p, t)
    return spans


def strict_iob2_spans(tags) -> set:
    "Entities of strict IOB2: B-x and the I-x right after it; a stray I- makes none."
    spans = set()
    for i, tag in enumerate(tags):
        if tag[0] == 'B':
            j = i + 1
            while j < len(tags) and tags[j] == 'I-' + tag[2:]: j += 1
            spans.add((tag[2:], i, j - 1))
    return spans


def strict_iobes_spans(tags) -> set:
    "Entities of strict IOBES: S-x, or B-x I-x* E-x; anything unfinished makes none."
    spans = set()
    for i, tag in enumerate(tags):
        if tag[0] == 'S': spans.add((tag[2:], i, i))
        if tag[0] == 'B':
            j = i + 1
            while j < len(tags) and tags[j] == 'I-' + tag[2:]: j += 1
            if j < len(tags) and tags[j] == 'E-' + tag[2:]: spans.add((tag[2:], i, j))
    return spans


def prf(gold: set, pred: set) -> tuple[float, float, float]:
    tp = len(gold & pred)
    p = 100.0 * tp / len(pred) if pred else 0.0
    r = 100.0 * tp / len(gold) if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def by_sentence(tag_lists, reader) -> set:
    return {(k, *s) for k, tags in enumerate(tag_lists) for s in reader(tags)}


def assert_scored_as_seqeval(gold, pred, spelt) -> None:
    """The run's entity scores of the tags as `spelt` writes them (B_LOC, b-LOC) equal seqeval's of the tags themselves
    (B-LOC): micro precision, recall and F1, each type's F1, and the strict IOB2 F1."""
    ref = seqeval.metrics.classification_report(gold, pred, output_dict=True, zero_division=0)
    got = metrics.tagging_metrics(spelt(gold), spelt(pred), 'IOB2')
    assert [got[k] for k in ('precision', 'recall', 'f1')] == [100.0 * ref['micro avg'][k]
                                                               for k in ('precision', 'recall', 'f1-score')]
    assert {k: v for k, v in got.items() if k.startswith('f1_')} == {f'f1_{t}': 100.0 * ref[t]['f1-score'] for t in TYPES}
    strict = seqeval.metrics.f1_score(gold, pred, mode='strict', scheme=seqeval.scheme.IOB2)
    assert metrics.tagging_metrics(spelt(gold), spelt(pred), 'IOB2', strict=True)['f1'] == 100.0 * strict


def random_tags(rng: random.Random, n_sent: int, prefixes: str) -> list[list[str]]:
    "Random (mostly malformed) tag sequences."
    return [[rng.choice(['O', 'O', *(f'{p}-{t}' for p in prefixes for t in TYPES)]) for _ in range(rng.randint(1, 12))]
            for _ in range(n_sent)]


def noisy_copy(rng: random.Random, gold, prefixes: str):
    "Predictions: the gold tags with some replaced at random (so that many entities match)."
    opts = ['O', *(f'{p}-{t}' for p in prefixes for t in TYPES)]
    return [[rng.choice(opts) if rng.random() < 0.25 else t for t in tags] for tags in gold]


def check(scores: dict, gold, pred, reader):
    g, p = by_sentence(gold, reader), by_sentence(pred, reader)
    assert (scores['precision'], scores['recall'], scores['f1']) == pytest.approx(prf(g, p), abs=1e-9)
    assert scores['support'] == len(g)
    types = sorted({s[1] for s in g | p})
    assert list(scores['per_type']) == types
    for t in types:
        gt, pt = {s for s in g if s[1] == t}, {s for s in p if s[1] == t}
        got = scores['per_type'][t]
        assert (got['precision'], got['recall'], got['f1']) == pytest.approx(prf(gt, pt), abs=1e-9)
        assert got['support'] == len(gt)


@pytest.mark.parametrize('seed', range(8))
def test_entity_scores_on_random_tags_equal_hand_written_spans_and_seqeval(seed):
    rng = random.Random(seed)
    for prefixes in ('BI', 'BIES'):
        gold = random_tags(rng, 60, prefixes)
        pred = noisy_copy(rng, gold, prefixes) if seed % 2 else random_tags(rng, 60, prefixes)
        for k, tags in enumerate(pred): pred[k] = tags[:len(gold[k])] + ['O'] * (len(gold[k]) - len(tags))
        s = metrics.entity_scores(gold, pred)
        check(s, gold, pred, conlleval_spans)
        assert s['f1'] == pytest.approx(100 * seqeval.metrics.f1_score(gold, pred, zero_division=0), abs=1e-9)
        assert s['precision'] == pytest.approx(100 * seqeval.metrics.precision_score(gold, pred, zero_division=0), abs=1e-9)
        assert s['recall'] == pytest.approx(100 * seqeval.metrics.recall_score(gold, pred, zero_division=0), abs=1e-9)
        scheme, reader = ('IOB2', strict_iob2_spans) if prefixes == 'BI' else ('IOBES', strict_iobes_spans)
        strict = metrics.entity_scores(gold, pred, scheme)
        check(strict, gold, pred, reader)
        assert strict['f1'] == pytest.approx(100 * seqeval.metrics.f1_score(
            gold, pred, mode='strict', scheme=getattr(seqeval.scheme, scheme), zero_division=0), abs=1e-9)


def test_the_readings_differ_on_malformed_tags_only():
    gold, pred = [['B-PER', 'I-PER', 'O']], [['I-PER', 'I-PER', 'O']]  # a stray I- begins an entity in conlleval
    assert metrics.entity_scores(gold, pred)['f1'] == 100.0 and metrics.entity_scores(gold, pred, 'IOB2')['f1'] == 0.0
    assert metrics.entity_scores([['O']], [['O']]) == {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'support': 0,
                                                       'per_type': {}}
    with pytest.raises(ValueError, match='sentence 0: 1 gold tags, 2 predicted'):
        metrics.entity_scores([['O']], [['O', 'O']])


def test_token_accuracy_and_the_flat_row():
    gold = [['B-PER', 'I-PER', 'O'], ['B-LOC']]
    pred = [['B-PER', 'I-PER', 'B-ORG'], ['O']]
    assert metrics.token_accuracy(gold, pred) == pytest.approx(50.0)
    row = metrics.tagging_metrics(gold, pred)
    assert row == pytest.approx({'f1': 50.0, 'precision': 50.0, 'recall': 50.0, 'accuracy': 50.0, 'f1_LOC': 0.0,
                                 'f1_ORG': 0.0, 'f1_PER': 100.0})
    assert metrics.tagging_metrics([['NN', 'VB']], [['NN', 'NN']], scheme='plain') == {'accuracy': 50.0}


def test_conll_predictions_are_the_input_lines_with_a_last_column(tmp_path):
    text = '-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects\tVBZ\tO \n\n\nPeter NNP B-PER\nBlackburn NNP I-PER'
    (tmp_path / 'in.txt').write_text(text, encoding='utf-8')
    f = data.read_conll(tmp_path / 'in.txt')
    pred = [['B-ORG', 'B-PER'], ['B-PER', 'O']]
    out = metrics.write_predictions(f, pred, tmp_path / 'out.txt')
    assert out.read_text(encoding='utf-8').split('\n') == [
        '-DOCSTART- -X- O', '', 'EU NNP B-ORG B-ORG', 'rejects\tVBZ\tO\tB-PER', '', '', 'Peter NNP B-PER B-PER',
        'Blackburn NNP I-PER O']
    back = data.read_conll(out)  # read again: the same words, the predictions as tags
    assert [s.words for s in back.sentences] == [s.words for s in f.sentences] and [s.tags for s in back.sentences] == pred
    with pytest.raises(ValueError, match='in.txt:3: 2 words, 1 predicted tags'):
        metrics.write_predictions(f, [['O'], ['O', 'O']], tmp_path / 'bad.txt')
    with pytest.raises(ValueError, match="predicted tag 'B PER' is not one column"):
        metrics.write_predictions(f, [['B PER', 'O'], ['O', 'O']], tmp_path / 'bad.txt')


def test_jsonl_predictions_are_the_records_with_pred_tags(tmp_path):
    rows = [{'id': 'a', 'tokens': ['Zoë', 'sang'], 'tags': ['B-PER', 'O'], 'meta': {'k': 1}},
            {'tokens': ['中文'], 'tags': ['O']}]
    (tmp_path / 'in.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows), encoding='utf-8')
    f = data.read_jsonl(tmp_path / 'in.jsonl')
    out = metrics.write_predictions(f, [['B-PER', 'B-LOC'], ['O']], tmp_path / 'out.jsonl')
    got = [json.loads(line) for line in out.read_text(encoding='utf-8').splitlines()]
    assert got == [{**rows[0], 'pred_tags': ['B-PER', 'B-LOC']}, {**rows[1], 'pred_tags': ['O']}]
    assert 'Zoë' in out.read_text(encoding='utf-8')  # written as text, not \\u escapes


def test_entity_scores_of_underscore_tags_are_seqevals_of_the_same_tags_with_a_dash():
    "seqeval reads B_LOC as the type '_LOC' (and warns); the run's metrics name the types LOC, PER, as its messages do."
    rng = random.Random(3)
    def sentence(n):
        out, prev = [], 'O'
        for _ in range(n):
            r = rng.random()
            out.append(f'I-{prev[2:]}' if prev != 'O' and r < 0.3 else 'O' if r < 0.7 else f'B-{rng.choice(TYPES)}')
            prev = out[-1]
        return out
    gold = [sentence(rng.randint(1, 12)) for _ in range(60)]
    pred = [[t if rng.random() < 0.8 else rng.choice(['O', 'B-PER', 'I-LOC', 'B-ORG']) for t in s] for s in gold]
    assert_scored_as_seqeval(gold, pred, lambda tags: [[t.replace('-', '_', 1) for t in s] for s in tags])


def test_entity_scores_of_lower_case_prefixes_are_seqevals_of_the_same_tags_upper_cased():
    """seqeval's default mode takes b-/i- for no prefix (it warns 'seems not to be NE tag') and joins words by type
    alone, b-LOC b-LOC one entity; its strict mode fails on them (KeyError 'b'): the run reads them as B-/I-."""
    rng = random.Random(5)
    gold = random_tags(rng, 60, 'BI')
    pred = noisy_copy(rng, gold, 'BI')
    lower = lambda tags: [[t if t == 'O' else t[0].lower() + t[1:] for t in s] for s in tags]
    assert_scored_as_seqeval(gold, pred, lower)
    # two one-word entities of a type side by side: two entities, as seqeval reads B-LOC B-LOC
    assert metrics.entity_scores([['b-LOC', 'b-LOC']], [['b-LOC', 'O']])['recall'] == 50.0
