"""The official QA evaluation, in percent, and the official prediction files.

- SQuAD 1.1 (finetune/qa/squad_official_eval_v1.py) and MRQA (finetune/qa/mrqa_official_eval.py): exact match and
  F1 of each prediction against the best of its gold answers. SQuAD 1.1 scores a question without a prediction 0;
  MRQA leaves it out of the mean (the official ELECTRA call passes `skip_no_answer=True`).
- SQuAD 2.0 (finetune/qa/squad_official_eval.py): the same per question, with the empty string the only gold answer of
  an unanswerable question (and F1 1 only when both sides are empty); a question is answered "" when its null odds
  exceed `na_prob_thresh` (ELECTRA's scorer passes `qa_na_threshold`, -2.75); the HasAns / NoAns splits; and the
  best threshold search over the null odds (`find_best_thresh`).

Answers are compared after `normalize_answer`: lower case, no ASCII punctuation, no articles a/an/the, single spaces.
"""
from __future__ import annotations

import collections
import json
import re
import string
from collections.abc import Mapping, Sequence
from pathlib import Path

from electra.runtime.files import atomic_write_text

__all__ = ['normalize_answer', 'exact_match', 'f1_score', 'squad_v1_eval', 'mrqa_eval', 'squad_v2_raw_scores',
           'find_best_thresh', 'squad_v2_eval', 'no_answer_f1', 'qa_metrics', 'null_thresholded', 'write_predictions',
           'write_null_odds', 'write_nbest', 'QA_NA_THRESHOLD']

QA_NA_THRESHOLD = -2.75  # official `qa_na_threshold`: null odds above it answer "" (configure_finetuning.py)

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r'\b(a|an|the)\b', re.UNICODE)


def normalize_answer(s: str) -> str:
    "Lower-cased, ASCII punctuation removed, articles a/an/the removed, whitespace runs made single spaces."
    s = ''.join(c for c in s.lower() if c not in _PUNCT)
    return ' '.join(_ARTICLES.sub(' ', s).split())


def exact_match(prediction: str, gold: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, empty_agrees: bool = False) -> float:
    """Token F1 of the normalised answers. `empty_agrees` (SQuAD 2.0): when either side normalises to nothing, 1 if
    both do, else 0; without it (SQuAD 1.1, MRQA) no common token scores 0."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if empty_agrees and (not pred or not ref): return float(pred == ref)
    same = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if same == 0: return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def _mean_scores(gold: Mapping[str, Sequence[str]], preds: Mapping[str, str], skip_missing: bool) -> dict[str, float]:
    em = f1 = total = 0.0
    for qid, answers in gold.items():
        if qid not in preds:
            total += 0 if skip_missing else 1
            continue
        if not answers: raise ValueError(f'QA evaluation: question {qid!r} has no gold answer; every question needs one')
        total += 1
        em += max(exact_match(preds[qid], a) for a in answers)
        f1 += max(f1_score(preds[qid], a) for a in answers)
    if total == 0: raise ValueError('QA evaluation: no question to score (no gold answers, or no predictions for them)')
    return {'exact_match': 100.0 * em / total, 'f1': 100.0 * f1 / total}


def squad_v1_eval(gold: Mapping[str, Sequence[str]], preds: Mapping[str, str]) -> dict[str, float]:
    "SQuAD 1.1: `exact_match` and `f1` over every question of `gold` (id -> gold answers); a missing prediction scores 0."
    return _mean_scores(gold, preds, skip_missing=False)


def mrqa_eval(gold: Mapping[str, Sequence[str]], preds: Mapping[str, str]) -> dict[str, float]:
    "MRQA: `exact_match` and `f1` over the questions that have a prediction."
    return _mean_scores(gold, preds, skip_missing=True)


def squad_v2_raw_scores(gold: Mapping[str, Sequence[str]],
                        preds: Mapping[str, str]) -> tuple[dict[str, int], dict[str, float]]:
    """Exact match and F1 (0-1) of each predicted question before any threshold; gold answers that normalise to
    nothing are dropped, and a question left without one has the empty string as its only gold answer."""
    exact, f1 = {}, {}
    for qid, answers in gold.items():
        if qid not in preds: continue
        golds = [a for a in answers if normalize_answer(a)] or ['']
        exact[qid] = max(exact_match(preds[qid], a) for a in golds)
        f1[qid] = max(f1_score(preds[qid], a, empty_agrees=True) for a in golds)
    return exact, f1


def find_best_thresh(preds: Mapping[str, str], scores: Mapping[str, float], na_probs: Mapping[str, float],
                     has_ans: Mapping[str, bool]) -> tuple[float, float]:
    """(best score in percent, its threshold) of the official search: start from every question answered "" (the
    unanswerable ones right), then answer them one by one in increasing null odds, each answerable one adding its score
    and each unanswerable one losing its point when its prediction is not empty. The threshold is the null odds of
    the question where the running score peaked (first peak). As in the official code, questions with equal odds are
    taken one at a time, so a peak inside a tie is reported although no threshold separates the tied questions."""
    cur = best = sum(1 for k in has_ans if not has_ans[k])
    thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores: continue
        cur += scores[qid] if has_ans[qid] else (-1 if preds[qid] else 0)
        if cur > best: best, thresh = cur, na_probs[qid]
    return 100.0 * best / len(scores), thresh


def _split_eval(exact: Mapping[str, float], f1: Mapping[str, float], qids: Sequence[str]) -> dict[str, float]:
    return {'exact': 100.0 * sum(exact[k] for k in qids) / len(qids), 'f1': 100.0 * sum(f1[k] for k in qids) / len(qids),
            'total': len(qids)}


def squad_v2_eval(gold: Mapping[str, Sequence[str]], preds: Mapping[str, str],
                  null_odds: Mapping[str, float] | None = None,
                  na_prob_thresh: float = QA_NA_THRESHOLD) -> dict[str, float]:
    """SQuAD 2.0: `exact`, `f1`, `total`, `HasAns_*`, `NoAns_*` with the questions whose null odds exceed
    `na_prob_thresh` answered "", and with `null_odds`, `best_exact`, `best_exact_thresh`, `best_f1`,
    `best_f1_thresh`. `gold`: id -> gold answers (empty for an unanswerable question). Every question needs a
    prediction and, when given, null odds (the official script fails without them)."""
    missing = [q for q in gold if q not in preds or (null_odds is not None and q not in null_odds)]
    if missing:
        raise ValueError(f'SQuAD 2.0 evaluation: {len(missing)} questions have no prediction or null odds, e.g. '
                         f'{missing[:3]}; decode every question of the dev set')
    has_ans = {q: bool(a) for q, a in gold.items()}
    exact_raw, f1_raw = squad_v2_raw_scores(gold, preds)
    odds = dict(null_odds) if null_odds is not None else {q: 0.0 for q in gold}
    thresh = na_prob_thresh if null_odds is not None else 1.0  # no odds: nothing is answered "" (official default)
    def cut(scores): return {q: float(not has_ans[q]) if odds[q] > thresh else s for q, s in scores.items()}
    exact, f1 = cut(exact_raw), cut(f1_raw)
    out = _split_eval(exact, f1, list(exact))
    for name, keep in (('HasAns', True), ('NoAns', False)):
        qids = [q for q in gold if has_ans[q] == keep]
        if qids: out.update({f'{name}_{k}': v for k, v in _split_eval(exact, f1, qids).items()})
    if null_odds is not None:
        out['best_exact'], out['best_exact_thresh'] = find_best_thresh(preds, exact_raw, odds, has_ans)
        out['best_f1'], out['best_f1_thresh'] = find_best_thresh(preds, f1_raw, odds, has_ans)
    return out


def no_answer_f1(gold: Mapping[str, Sequence[str]]) -> float:
    """The F1 (percent) of answering "" to every question, the baseline a SQuAD 2.0 model has to beat: scored by the
    official rules themselves, so a question whose gold answers all normalise to nothing ("the", ".") counts as
    answered right, as the unanswerable ones do, and not only the questions marked `is_impossible`."""
    return squad_v2_eval(gold, dict.fromkeys(gold, ''))['f1']


def qa_metrics(kind: str, gold: Mapping[str, Sequence[str]], preds: Mapping[str, str],
               null_odds: Mapping[str, float] | None = None, na_prob_thresh: float = QA_NA_THRESHOLD) -> dict[str, float]:
    "The official evaluation of a task kind: 'squad' (2.0), 'squadv1' or 'mrqa'."
    if kind == 'squad': return squad_v2_eval(gold, preds, null_odds, na_prob_thresh)
    if kind == 'squadv1': return squad_v1_eval(gold, preds)
    if kind == 'mrqa': return mrqa_eval(gold, preds)
    raise ValueError(f"QA evaluation: unknown kind {kind!r}; use 'squad' (2.0), 'squadv1' or 'mrqa'")


def null_thresholded(preds: Mapping[str, str], null_odds: Mapping[str, float],
                     threshold: float = QA_NA_THRESHOLD) -> dict[str, str]:
    "The predictions with \"\" for questions whose null odds exceed `threshold` (official SQuAD 2.0 test outputs)."
    return {q: '' if null_odds[q] > threshold else p for q, p in preds.items()}


def write_predictions(preds: Mapping[str, str], path: str | Path) -> Path:
    "`predictions.json`: {question id: answer text}, as the official scorer writes it for the evaluation scripts."
    return atomic_write_text(json.dumps(dict(preds)), path)


def write_null_odds(null_odds: Mapping[str, float], path: str | Path) -> Path:
    "`null_odds.json`: {question id: null odds} (SQuAD 2.0), the evaluation script's `--na-prob-file`."
    return atomic_write_text(json.dumps({q: float(v) for q, v in null_odds.items()}), path)


def write_nbest(nbest: Mapping[str, list[dict]], path: str | Path) -> Path:
    "`nbest_predictions.json`: {question id: its n-best answers with their logits and probabilities}."
    return atomic_write_text(json.dumps(dict(nbest), ensure_ascii=False), path)
