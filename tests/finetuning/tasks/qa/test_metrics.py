"""electra/finetuning/tasks/qa/metrics.py: the official SQuAD / MRQA evaluation against hand computations."""
from __future__ import annotations

import json

import pytest

from electra.finetuning.tasks.qa.metrics import (exact_match, f1_score, find_best_thresh, mrqa_eval,
                                                 normalize_answer, null_thresholded, qa_metrics, squad_v1_eval,
                                                 squad_v2_eval, write_null_odds, write_predictions)


def test_normalize_answer():
    assert normalize_answer('The  Cat, sat!') == 'cat sat'                    # case, punctuation, article, spaces
    assert normalize_answer('An apple a day.') == 'apple day'
    assert normalize_answer('Theatre of the absurd') == 'theatre of absurd'  # "the" inside a word stays
    assert normalize_answer('a-b c') == 'ab c'                                # punctuation goes before articles
    assert normalize_answer(' São\tPaulo\n') == 'são paulo'
    assert normalize_answer('\u201cquoted\u201d') == '\u201cquoted\u201d'     # only ASCII punctuation is removed
    assert normalize_answer('The') == '' and normalize_answer('') == ''


def test_exact_and_f1_hand_computed():
    assert exact_match('The Cat', 'cat') == 1 and exact_match('cats', 'cat') == 0
    # pred [cat, sat, on, mat], gold [cat, on, mat]: precision 3/4, recall 1 -> 2 * 3/4 / (7/4) = 6/7
    assert f1_score('the cat sat on the mat', 'a cat on a mat') == pytest.approx(6 / 7)
    assert f1_score('cat cat', 'cat') == pytest.approx(2 / 3)                # repeated tokens count once per match
    assert f1_score('a dog', 'cat') == 0.0
    assert f1_score('', 'the') == 0.0 and f1_score('', 'the', empty_agrees=True) == 1.0
    assert f1_score('x', 'the', empty_agrees=True) == 0.0


def test_squad_v1_and_mrqa_several_golds_and_missing():
    gold = {'a': ['Paris', 'the city of Paris'], 'b': ['1895'], 'c': ['red']}
    preds = {'a': 'City of  Paris.', 'b': 'in 1895'}  # c has no prediction
    # a: exact against the second gold; b: EM 0, F1 [in, 1895] vs [1895] = 2/3; c: 0 in SQuAD, left out in MRQA
    assert squad_v1_eval(gold, preds) == pytest.approx({'exact_match': 100 / 3, 'f1': 100 * (1 + 2 / 3) / 3})
    assert mrqa_eval(gold, preds) == pytest.approx({'exact_match': 50.0, 'f1': 100 * (1 + 2 / 3) / 2})
    assert qa_metrics('squadv1', gold, preds) == squad_v1_eval(gold, preds)
    with pytest.raises(ValueError, match="'c' has no gold answer"): squad_v1_eval({'c': []}, {'c': 'x'})


def _v2_case():
    gold = {'h1': ['Paris'], 'h2': ['red car', 'car'], 'n1': [], 'n2': []}
    preds = {'h1': 'Paris', 'h2': 'blue car', 'n1': 'London', 'n2': ''}
    odds = {'h1': -5.0, 'h2': 0.5, 'n1': 1.0, 'n2': -3.0}
    return gold, preds, odds


def test_squad_v2_threshold_splits_and_best_threshold():
    gold, preds, odds = _v2_case()
    got = squad_v2_eval(gold, preds, odds, na_prob_thresh=-2.75)
    # raw: h1 EM 1 F1 1; h2 EM 0, F1 max(1/2 vs 'red car', 2/3 vs 'car'); n1 0 ('London' vs ''); n2 1 ('' vs '')
    # odds > -2.75 answer "": h2 (0.5) -> 0, n1 (1.0) -> 1. exact = f1 = (1 + 0 + 1 + 1) / 4
    want = {'exact': 75.0, 'f1': 75.0, 'total': 4, 'HasAns_exact': 50.0, 'HasAns_f1': 50.0, 'HasAns_total': 2,
            'NoAns_exact': 100.0, 'NoAns_f1': 100.0, 'NoAns_total': 2,
            # search in increasing odds from 2 (all ""): h1 +1 -> 3 (peak at -5); n2 ('' predicted) +0; h2 EM +0,
            # F1 +2/3 -> 3 2/3 (peak at 0.5); n1 -1
            'best_exact': 75.0, 'best_exact_thresh': -5.0, 'best_f1': 100 * (3 + 2 / 3) / 4, 'best_f1_thresh': 0.5}
    assert got == pytest.approx(want) and list(got) == list(want)
    assert qa_metrics('squad', gold, preds, odds) == got
    # no null odds: nothing is answered "" and there is no search
    plain = squad_v2_eval(gold, preds)
    assert plain['exact'] == 50.0 and plain['f1'] == pytest.approx(100 * (1 + 2 / 3 + 0 + 1) / 4) and 'best_f1' not in plain
    with pytest.raises(ValueError, match='no prediction'): squad_v2_eval(gold, {'h1': 'Paris'}, odds)


def test_find_best_thresh_takes_ties_one_at_a_time():
    # equal odds: the official search peaks after 'h' although no threshold answers 'h' without 'n'
    assert find_best_thresh({'h': 'a', 'n': 'x'}, {'h': 1, 'n': 0}, {'h': 1.0, 'n': 1.0},
                            {'h': True, 'n': False}) == (100.0, 1.0)
    # nothing beats answering "" everywhere: threshold stays 0.0
    assert find_best_thresh({'n': 'x'}, {'n': 0}, {'n': -1.0}, {'n': False}) == (100.0, 0.0)


def test_prediction_files(tmp_path):
    preds = {'q1': 'café', 'q2': 'x'}
    path = write_predictions(preds, tmp_path / 'out' / 'predictions.json')
    assert json.loads(path.read_text()) == preds and '\\u00e9' in path.read_text()  # json.dump's ASCII escapes
    odds = write_null_odds({'q1': -3, 'q2': -2.5}, tmp_path / 'null_odds.json')
    assert json.loads(odds.read_text()) == {'q1': -3.0, 'q2': -2.5}
    assert null_thresholded(preds, {'q1': -3, 'q2': -2.5}) == {'q1': 'café', 'q2': ''}  # -2.5 > -2.75
