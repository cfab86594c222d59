"""electra/finetuning/tasks/qa/features.py: windows, max-context flags, labels, the token -> character map."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from electra.config.errors import ConfigError
from electra.finetuning.tasks.qa.data import QAExample
from electra.finetuning.tasks.qa.features import collate_windows, doc_windows, featurize, max_context_windows
from electra.finetuning.tasks.qa.heads import decode

# a long context with non-ASCII letters (accents, a letter without decomposition, CJK) and extra whitespace
_SENTENCES = ['The old  bridge of São Veloz was built in 1895.', 'Zoë lived near the river\u00a0Corran.',
              'Łukasik met\tSøren in 東京 .', 'It is  a quiet\n\ntown of the north.']


def _long_context(n: int = 6) -> str:
    return '   '.join(f'{s} Part {i}.' for i in range(n) for s in _SENTENCES)


def _example(qid: str, context: str, answer: str, nth: int = 0, question: str = 'Where was it built ?') -> QAExample:
    start = -1
    for _ in range(nth + 1): start = context.index(answer, start + 1)
    return QAExample(qid, question, context, ((answer, start),), False, (answer,))


def test_doc_windows_hand_worked():
    assert doc_windows(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]          # the last reaches the end: stop
    assert doc_windows(10, 4, 10) == [(0, 4), (4, 4), (8, 2)]         # a stride past a window advances by the window
    assert doc_windows(11, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4), (8, 3)]
    assert doc_windows(3, 5, 2) == [(0, 3)] and doc_windows(0, 5, 2) == []


def test_max_context_hand_worked():
    # the official example: "the man went to the store and bought a gallon of milk", windows
    # A = tokens 0-4, B = 3-7, C = 6-10, D = 9-11. 'bought' (7): B scores min(4, 0) + 0.05, C min(1, 3) + 0.05 -> C.
    best = max_context_windows([(0, 5), (3, 5), (6, 5), (9, 3)], 12)
    assert best[7] == 2
    # 'to' (3): A min(3, 1) = 1.05, B min(0, 4) = 0.05 -> A; 'the' (4): A 0.05, B 1.05 -> B
    assert best[3] == 0 and best[4] == 1
    # 'gallon' (9): C min(3, 1) + 0.05 = 1.05, D min(0, 2) + 0.03 -> C; 'milk' (11): only D
    assert best[9] == 2 and best[11] == 3
    assert best.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3]


def test_windows_cover_every_token_and_map_to_its_characters(qa_tokenizer):
    ctx = _long_context()
    ex = _example('long', ctx, 'São Veloz', nth=3)
    wins = featurize([ex], qa_tokenizer, max_seq_length=40, max_query_length=5, doc_stride=7, is_training=True)
    enc = qa_tokenizer(ctx, add_special_tokens=False, return_offsets_mapping=True)
    pieces = [tuple(o) for o in enc['offset_mapping']]
    q = qa_tokenizer(ex.question, add_special_tokens=False)['input_ids'][:5]
    assert len(wins) > 5 and [w.index for w in wins] == list(range(len(wins)))
    seen, best = {p: 0 for p in pieces}, {p: 0 for p in pieces}
    normalize = qa_tokenizer.backend_tokenizer.normalizer.normalize_str
    for w in wins:
        assert len(w) <= 40 and w.input_ids[:len(q) + 2].tolist() == [qa_tokenizer.cls_token_id, *q, qa_tokenizer.sep_token_id]
        assert w.input_ids[-1] == qa_tokenizer.sep_token_id
        assert w.token_type_ids.tolist() == [0] * (len(q) + 2) + [1] * (len(w) - len(q) - 2)
        inside = np.flatnonzero(w.char_spans[:, 0] >= 0)
        assert inside.tolist() == list(range(len(q) + 2, len(w) - 1))  # every context position maps to characters
        assert not w.max_context[:len(q) + 2].any() and not w.max_context[-1]
        for i in inside:
            a, b = w.char_spans[i]
            token = qa_tokenizer.convert_ids_to_tokens(int(w.input_ids[i]))
            if token != '[UNK]': assert normalize(ctx[a:b]).strip() == token.removeprefix('##')
            seen[a, b] += 1
            best[a, b] += int(w.max_context[i])
    assert all(v >= 1 for v in seen.values())  # windows cover every context token
    assert all(v == 1 for v in best.values())  # each token has its most context in exactly one window


def test_labels_and_decoded_span_are_the_exact_characters(qa_tokenizer):
    ctx = _long_context()
    answers = [('São Veloz', 2), ('river\u00a0Corran', 4), ('東京', 1), ('quiet\n\ntown', 5), ('old  bridge', 0)]
    examples = [_example(f'q{k}', ctx, a, nth) for k, (a, nth) in enumerate(answers)]
    wins = featurize(examples, qa_tokenizer, max_seq_length=48, max_query_length=6, doc_stride=9, is_training=True)
    rows = []
    for w in wins:
        ex = examples[w.example]
        holds = w.start > 0
        if holds: assert ctx[w.char_spans[w.start, 0]:w.char_spans[w.end, 1]] == ex.answers[0][0]
        else: assert w.end == 0
        # logits that point at the labelled span wherever a window holds it, and at [CLS] elsewhere
        start, end = np.full(len(w), -5.0, np.float32), np.full(len(w), -5.0, np.float32)
        start[w.start] += 10; end[w.end] += 10
        rows.append(dict(start_logits=start, end_logits=end, answerable_logit=np.float32(0)))
    assert all(any(w.start > 0 for w in wins if w.example == k) for k in range(len(examples)))
    assert any(w.start == 0 for w in wins if w.example == 0)  # the long context has windows without the answer
    preds, odds, _ = decode(examples, wins, rows, joint_prediction=False, max_answer_length=30)
    assert preds == {f'q{k}': a for k, (a, _) in enumerate(answers)} and odds == {}
    starts = [w.char_spans[w.start, 0] for w in wins if w.start > 0 and w.example == 0]
    assert set(starts) == {examples[0].answers[0][1]}


def test_answer_span_is_narrowed_as_the_official_code_does(qa_tokenizer):
    # official _improve_answer_span: '1895' out of the word '(1895-1943).'; 'Japan' inside 'Japanese' stays 'Japanese'
    ctx = 'The leader was John Smith (1895-1943). The Japanese electronics industry is large.'
    exs = [_example('a', ctx, '1895'), _example('b', ctx, 'Japan'), _example('c', ctx, 'Smith (1895')]
    got = []
    for w in featurize(exs, qa_tokenizer, max_seq_length=64, max_query_length=8, doc_stride=16, is_training=True):
        got.append(ctx[w.char_spans[w.start, 0]:w.char_spans[w.end, 1]])
    assert got == ['1895', 'Japanese', 'Smith (1895']


def test_unanswerable_and_evaluation_windows_point_at_cls(qa_tokenizer):
    ctx = _long_context(2)
    none = QAExample('n', 'Who is the mayor ?', ctx, (), True, ())
    ans = _example('a', ctx, 'São Veloz')
    train = featurize([none, ans], qa_tokenizer, 32, 5, 8, is_training=True)
    assert all((w.start, w.end, w.is_impossible) == (0, 0, True) for w in train if w.example == 0)
    assert any(w.start > 0 for w in train if w.example == 1)
    dev = featurize([none, ans], qa_tokenizer, 32, 5, 8, is_training=False)
    assert [(w.start, w.end) for w in dev] == [(0, 0)] * len(dev) and len(dev) == len(train)


def test_question_is_cut_and_no_room_is_an_error(qa_tokenizer):
    ex = _example('q1', 'It was built in 1895 .', '1895', question='when was the old bridge of the town built ?')
    q = qa_tokenizer(ex.question, add_special_tokens=False)['input_ids']
    (w,) = featurize([ex], qa_tokenizer, max_seq_length=64, max_query_length=3)
    assert w.input_ids[1:5].tolist() == [*q[:3], qa_tokenizer.sep_token_id]
    with pytest.raises(ConfigError) as e: featurize([ex], qa_tokenizer, max_seq_length=8, max_query_length=64)
    assert "question 'q1'" in str(e.value) and 'max_query_length to at most 4' in str(e.value)
    with pytest.raises(ConfigError, match='doc_stride'): featurize([ex], qa_tokenizer, doc_stride=0)


@pytest.mark.parametrize('question', ['', '   ', '\u200b'], ids=['empty', 'spaces', 'zero-width'])
def test_a_question_without_word_pieces_is_refused_naming_its_file_and_id(qa_tokenizer, question):
    """A question the tokenizer reads as nothing was taken: the windows began [CLS] [SEP] and the model answered from
    the context alone. U+200B is no whitespace to str.strip but the tokenizer drops it: the tokenizer decides."""
    assert qa_tokenizer(question, add_special_tokens=False)['input_ids'] == []  # the reference: no piece
    good, bad = _example('q1', 'It was built in 1895 .', '1895'), _example('e1', 'It was built in 1895 .', '1895')
    bad = dataclasses.replace(bad, question=question)
    for training in (True, False):
        with pytest.raises(ConfigError, match=rf"^dev\.json: question 'e1': the question {re.escape(repr(question))} "
                                              r"has no word piece .*Give it its text or remove it\.$"):
            featurize([good, bad], qa_tokenizer, is_training=training, where='dev.json')
    with pytest.raises(ConfigError, match=r"^question 'e1': the question"): featurize([bad], qa_tokenizer)
    assert len(featurize([good, dataclasses.replace(bad, question='\u200b when ?')], qa_tokenizer)) == 2


def test_training_needs_a_found_answer(qa_tokenizer):
    ex = QAExample('k', 'When ?', 'It was built in 1895 .', (('1895', 3),), False, ('1895',))  # kept with 'keep'
    assert featurize([ex], qa_tokenizer)[0].start == 0
    with pytest.raises(ConfigError, match="question 'k'"): featurize([ex], qa_tokenizer, is_training=True)


def test_collate_pads_to_the_longest(qa_tokenizer):
    exs = [_example('a', 'It was built in 1895 .', '1895'), _example('b', 'In 1895 .', '1895')]
    wins = featurize(exs, qa_tokenizer, is_training=True)
    ids, mask, types, start, end, imp = collate_windows(wins, pad_id=0)
    n = max(len(w) for w in wins)
    assert ids.shape == (2, n) and mask.sum(1).tolist() == [len(w) for w in wins]
    assert ids[1, len(wins[1]):].tolist() == [0] * (n - len(wins[1])) and types[1, len(wins[1]):].sum() == 0
    assert start.tolist() == [w.start for w in wins] and end.tolist() == [w.end for w in wins]
    assert imp.tolist() == [0.0, 0.0] and types[0].tolist() == wins[0].token_type_ids.tolist()
