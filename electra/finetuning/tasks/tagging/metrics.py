"""Tagging metrics, in percent as the official code reports them, and predictions written back in the input's format.

Entity precision / recall / F1 are computed by `seqeval` (micro over all entities, and per type); token accuracy is
the share of words whose tag is right (official `AccuracyScorer`, google-research/electra, finetune/tagging/
tagging_metrics.py). `scheme=None` reads entities as conlleval does (seqeval's default mode): a malformed
prediction still makes entities (an I-X after O begins one). A scheme name ('IOB2', 'IOBES', 'IOB1') uses seqeval's
strict mode, where only well-formed entities count. The official `EntityLevelF1Scorer` reads spans with its own
lenient reader (tagging_utils.py, `get_span_labels`), which agrees with conlleval on well-formed tags but not on
malformed ones: it reads B-PER I-LOC as one LOC entity over both words, conlleval as PER then LOC.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Sequence

from electra.finetuning.tasks.tagging.data import TaggedFile, dashed
from electra.runtime.files import atomic_write_text

__all__ = ['entity_scores', 'token_accuracy', 'tagging_metrics', 'write_conll_predictions', 'write_jsonl_predictions',
           'write_predictions']


def _check_lengths(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> None:
    if len(true_tags) != len(pred_tags): raise ValueError(f"{len(true_tags)} gold sentences, {len(pred_tags)} predicted")
    for i, (t, p) in enumerate(zip(true_tags, pred_tags)):
        if len(t) != len(p): raise ValueError(f"sentence {i}: {len(t)} gold tags, {len(p)} predicted")


def _seqeval_scheme(scheme: str | None):
    if scheme is None: return {}
    import seqeval.scheme
    if scheme not in ('IOB2', 'IOBES', 'IOB1'): raise ValueError(f"scheme: {scheme!r} is not IOB2, IOBES, IOB1 or None")
    return {'mode': 'strict', 'scheme': getattr(seqeval.scheme, scheme)}


def entity_scores(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]],
                  scheme: str | None = None) -> dict:
    """{'precision', 'recall', 'f1', 'support', 'per_type': {type: {'precision', 'recall', 'f1', 'support'}}}: micro
    scores over all entities (0 where undefined, as the official scorer), per-type ones for every type in either
    side; support counts gold entities. Percent."""
    from seqeval.metrics import classification_report
    _check_lengths(true_tags, pred_tags)
    # B_LOC, b-LOC as B-LOC: seqeval reads a '_' prefix as part of the type ('_LOC'), a lower-case one as no prefix, and
    # fails its strict schemes on both
    true_tags, pred_tags = ([[dashed(t) for t in s] for s in tags] for tags in (true_tags, pred_tags))
    with warnings.catch_warnings():  # no entity at all: seqeval warns of its empty macro mean, which is not used
        warnings.simplefilter('ignore')
        rep = classification_report([list(t) for t in true_tags], [list(p) for p in pred_tags], output_dict=True,
                                    zero_division=0, **_seqeval_scheme(scheme))

    def pct(r): return {'precision': 100.0 * float(r['precision']), 'recall': 100.0 * float(r['recall']),
                        'f1': 100.0 * float(r['f1-score']), 'support': int(r['support'])}
    per_type = {k: pct(v) for k, v in rep.items() if not k.endswith(' avg')}
    return {**pct(rep['micro avg']), 'per_type': dict(sorted(per_type.items()))}


def token_accuracy(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> float:
    "Percent of words tagged right, over all words (official `AccuracyScorer`)."
    _check_lengths(true_tags, pred_tags)
    n = sum(len(t) for t in true_tags)
    right = sum(a == b for t, p in zip(true_tags, pred_tags) for a, b in zip(t, p))
    return 100.0 * right / n if n else 0.0


def tagging_metrics(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]], scheme: str = 'IOB2',
                    strict: bool = False) -> dict[str, float]:
    """A flat row of results: 'f1', 'precision', 'recall' (entities, micro), 'accuracy' (words), and 'f1_<type>' per
    entity type; for `scheme` 'plain' (POS and the like) 'accuracy' alone. `strict`: seqeval's strict mode."""
    out: dict[str, float] = {}
    if scheme != 'plain':
        s = entity_scores(true_tags, pred_tags, scheme if strict else None)
        out.update(f1=s['f1'], precision=s['precision'], recall=s['recall'])
        out.update({f'f1_{t}': v['f1'] for t, v in s['per_type'].items()})
    out['accuracy'] = token_accuracy(true_tags, pred_tags)
    return out


# -- predictions in the input's format

def _check_predictions(f: TaggedFile, pred_tags: Sequence[Sequence[str]]) -> None:
    if len(pred_tags) != len(f.sentences): raise ValueError(f"{f.path}: {len(f.sentences)} sentences, {len(pred_tags)} predicted")
    for s, p in zip(f.sentences, pred_tags):
        if len(p) != len(s.words): raise ValueError(f"{f.where(s)}: {len(s.words)} words, {len(p)} predicted tags")


def write_conll_predictions(f: TaggedFile, pred_tags: Sequence[Sequence[str]], path: str | Path) -> Path:
    """The CoNLL file `f` as read, each word line with its predicted tag appended as a last column (tab-separated
    when the line has a tab, else a space); blank and -DOCSTART- lines unchanged."""
    _check_predictions(f, pred_tags)
    lines = list(f.lines)
    for s, tags in zip(f.sentences, pred_tags):
        for n, tag in zip(s.word_lines, tags):
            if not tag or any(c in tag for c in ' \t\r\n'): raise ValueError(f"{f.path}:{n}: predicted tag {tag!r} is not one column")
            line = lines[n - 1].rstrip(' \t')
            lines[n - 1] = line + ('\t' if '\t' in line else ' ') + tag
    return atomic_write_text('\n'.join(lines), path)


def write_jsonl_predictions(f: TaggedFile, pred_tags: Sequence[Sequence[str]], path: str | Path) -> Path:
    "The JSONL records of `f` as read, each with a `pred_tags` field, one per line."
    _check_predictions(f, pred_tags)
    rows = [json.dumps({**s.record, 'pred_tags': list(tags)}, ensure_ascii=False) for s, tags in zip(f.sentences, pred_tags)]
    return atomic_write_text(''.join(r + '\n' for r in rows), path)


def write_predictions(f: TaggedFile, pred_tags: Sequence[Sequence[str]], path: str | Path) -> Path:
    "`write_conll_predictions` or `write_jsonl_predictions`, by the format `f` was read in."
    return (write_jsonl_predictions if f.format == 'jsonl' else write_conll_predictions)(f, pred_tags, path)
