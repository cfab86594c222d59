"""electra/finetuning/tasks/qa/data.py: the SQuAD and MRQA readers and their errors."""
from __future__ import annotations

import gzip
import json

import pytest

from electra.config.errors import ConfigError, RunWarning
from electra.finetuning.tasks.qa.data import (QAExample, answer_found, gold_answers, qa_format, read_mrqa, read_squad,
                                              split_words)
from tests.finetuning.tasks.qa.conftest import squad_file

CTX = 'The leader was John Smith (1895-1943).  He lived in New\u00a0York.'


def test_split_words_is_the_official_whitespace_split():
    # space, tab, CR, LF and U+202F split; a no-break space does not; whitespace belongs to the word before
    words, c2w = split_words(' a\tb\u202fc\u00a0d  e')
    assert words == ['a', 'b', 'c\u00a0d', 'e']
    assert c2w == [-1, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3]


def test_answer_found_exact_or_as_the_official_check():
    assert answer_found(CTX, '1895', CTX.index('1895'))                      # inside the word "(1895-1943)."
    assert answer_found(CTX, 'New\u00a0York', CTX.index('New'))              # exact (the official check misses it)
    assert answer_found('Go to New  York now', 'new york', 6)                # official: case and whitespace runs
    # official leniency: an offset inside the answer's words (or on the space before them) still finds it
    assert answer_found(CTX, 'John', CTX.index('John') + 1) and answer_found(CTX, 'John', CTX.index('John') - 1)
    assert not answer_found(CTX, 'John', CTX.index('Smith'))                 # points at another word
    assert not answer_found(CTX, 'York.', len(CTX) - 3)                       # runs past the end
    assert not answer_found(CTX, '', 0) and not answer_found(CTX, 'The', -1)


def test_read_squad_v1(tmp_path):
    path = squad_file(tmp_path / 'dev.json', [{'context': CTX, 'qas': [
        {'id': 'q1', 'question': 'When was he born?', 'answers': [
            {'text': '1895', 'answer_start': 27}, {'text': '1895-1943', 'answer_start': 27}]},
        {'id': 'q2', 'question': 'Where?', 'answers': [{'text': 'New\u00a0York', 'answer_start': 52}]}]}])
    ex = read_squad(path)
    assert ex == [QAExample('q1', 'When was he born?', CTX, (('1895', 27), ('1895-1943', 27)), False, ('1895', '1895-1943')),
                  QAExample('q2', 'Where?', CTX, (('New\u00a0York', 52),), False, ('New\u00a0York',))]
    assert gold_answers(ex) == {'q1': ['1895', '1895-1943'], 'q2': ['New\u00a0York']}
    assert qa_format(path) == 'squad'


def test_read_squad_v2_unanswerable(tmp_path):
    path = squad_file(tmp_path / 'train.json', [{'context': CTX, 'qas': [
        {'id': 'a', 'question': 'Who?', 'is_impossible': False, 'answers': [{'text': 'John Smith', 'answer_start': 15}]},
        {'id': 'b', 'question': 'Whose dog?', 'is_impossible': True, 'answers': [],
         'plausible_answers': [{'text': 'John Smith', 'answer_start': 15}]}]}], version='v2.0')
    a, b = read_squad(path)
    assert a.answers == (('John Smith', 15),) and not a.is_impossible
    assert b == QAExample('b', 'Whose dog?', CTX, (), True, (), (('John Smith', 15),))
    assert gold_answers([a, b]) == {'a': ['John Smith'], 'b': []}


def test_read_mrqa_jsonl_and_gz(tmp_path):
    lines = [{'header': {'dataset': 'NewsQA', 'split': 'dev'}},
             {'context': CTX, 'qas': [{'qid': 'n1', 'question': 'Who led?', 'answers': ['John Smith', 'Smith'],
                                       'detected_answers': [{'text': 'John Smith', 'char_spans': [[15, 24]]},
                                                            {'text': 'Smith', 'char_spans': [[20, 24], [20, 24]]}]}]}]
    text = '\n'.join(json.dumps(line) for line in lines) + '\n'
    (tmp_path / 'dev.jsonl').write_text(text, encoding='utf-8')
    with gzip.open(tmp_path / 'dev.jsonl.gz', 'wt', encoding='utf-8') as f: f.write(text)
    want = [QAExample('n1', 'Who led?', CTX, (('John Smith', 15), ('Smith', 20), ('Smith', 20)), False,
                      ('John Smith', 'Smith'))]
    assert read_mrqa(tmp_path / 'dev.jsonl') == want == read_mrqa(tmp_path / 'dev.jsonl.gz')
    assert qa_format(tmp_path / 'dev.jsonl') == qa_format(tmp_path / 'dev.jsonl.gz') == 'mrqa'


def _one(tmp_path, qa: dict, context: str = CTX, version: str = '1.1'):
    return squad_file(tmp_path / 'bad.json', [{'context': context, 'qas': [qa]}], version)


def test_bad_answer_names_file_and_id(tmp_path):
    path = _one(tmp_path, {'id': 'q7', 'question': 'Who?', 'answers': [{'text': 'John Smith', 'answer_start': 4}]})
    with pytest.raises(ConfigError) as e: read_squad(path)
    msg = str(e.value)
    assert str(path) in msg and "'q7'" in msg and 'offset 4' in msg and "on_bad_answer='skip'" in msg
    with pytest.raises(ConfigError, match='on_bad_answer'): read_squad(path, on_bad_answer='drop')


def _questions(n_bad: int, n: int = 20) -> list[dict]:
    "n questions about CTX, the first n_bad of them with the answer 'John Smith' at a wrong offset (4)."
    return [{'id': f'q{i}', 'question': 'Who?', 'answers': [{'text': 'John Smith', 'answer_start': 4 if i < n_bad else 15}]}
            for i in range(n)]


FIRST_BAD = r"\(first: question 'q0': 'John Smith' expected at 4, the context has 'leader was' there\)"


def test_a_few_bad_answers_are_skipped_or_kept_with_one_line_saying_how_many(tmp_path):
    "Skipped as the official reader skips them from training (dev: kept, only texts are scored), but never silently."
    path = squad_file(tmp_path / 'train.json', [{'context': CTX, 'qas': _questions(2)}])
    with pytest.warns(RunWarning, match=rf"train.json: 2 of 20 questions skipped: an answer is not found at its "
                                        rf"answer_start {FIRST_BAD}, as the official reader skips them from training"):
        kept = read_squad(path, on_bad_answer='skip')
    assert [ex.id for ex in kept] == [f'q{i}' for i in range(2, 20)]
    with pytest.warns(RunWarning, match=rf"train.json: 2 of 20 questions have an answer not found at its answer_start "
                                        rf"{FIRST_BAD}; kept: only answer texts are scored"):
        assert len(read_squad(path, on_bad_answer='keep')) == 20


@pytest.mark.parametrize('mode', ['skip', 'keep'])
def test_many_bad_answers_are_a_file_mistake_and_refused(tmp_path, mode):
    "All answers off (offsets in bytes, answers of another context): skipping them trained on what was left, or nothing."
    path = squad_file(tmp_path / 'train.json', [{'context': CTX, 'qas': _questions(3)}])
    with pytest.raises(ConfigError, match=rf"train.json: 3 of 20 questions have an answer not found at its answer_start "
                                          rf"{FIRST_BAD}: more than 10% is a mistake in the file"):
        read_squad(path, on_bad_answer=mode)
    one = _one(tmp_path, {'id': 'q7', 'question': 'Who?', 'answers': [{'text': 'John Smith', 'answer_start': 4}]})
    with pytest.raises(ConfigError, match=r"bad.json: 1 of 1 questions have an answer not found"):
        read_squad(one, on_bad_answer=mode)


@pytest.mark.parametrize('qa, version, words', [
    ({'id': 'q1', 'answers': []}, '1.1', ["'q1'", "'question' is missing"]),
    ({'question': 'Who?', 'answers': []}, '1.1', ['article 0, paragraph 0, question 0', "'id' is missing"]),
    ({'id': 'q2', 'question': 'Who?'}, '1.1', ["'q2'", "'answers' is missing"]),
    ({'id': 'q3', 'question': 'Who?', 'answers': [{'text': 'x'}]}, '1.1', ["'q3'", "'answer_start' is missing"]),
    ({'id': 'q4', 'question': 'Who?', 'answers': []}, 'v2.0', ["'q4'", "'is_impossible' is missing"]),
    ({'id': 'q5', 'question': 'Who?', 'answers': []}, '1.1', ["'q5'", 'no answer']),
    ({'id': 'q6', 'question': 'Who?', 'is_impossible': True, 'answers': [{'text': 'John', 'answer_start': 15}]},
     'v2.0', ["'q6'", 'is_impossible is true but it has answers']),
    ({'id': 'q8', 'question': 'Who?', 'answers': [{'text': 'John', 'answer_start': '15'}]}, '1.1',
     ["'q8'", "'answer_start' is str, expected int"]),
])
def test_missing_or_bad_fields_name_file_and_id(tmp_path, qa, version, words):
    path = _one(tmp_path, qa, version=version)
    with pytest.raises(ConfigError) as e: read_squad(path)
    assert str(path) in str(e.value)
    for w in words: assert w in str(e.value)
    if 'missing' in words[-1]:  # the fields to give, where it sent the user to the library's source
        assert str(e.value).endswith(". Give the fields of the official SQuAD JSON's: {data: [{paragraphs: [{context, "
                                     "qas: [{id, question, answers: [{text, answer_start}], is_impossible (2.0 only)}]}]}]}.")


def test_empty_context_names_file_and_ids(tmp_path):
    path = _one(tmp_path, {'id': 'q9', 'question': 'Who?', 'answers': []}, context=' \n\t ')
    with pytest.raises(ConfigError) as e: read_squad(path)
    assert str(path) in str(e.value) and "['q9']" in str(e.value) and 'empty' in str(e.value)


def test_duplicate_ids_and_bad_json(tmp_path):
    qa = {'id': 'd', 'question': 'Who?', 'answers': [{'text': 'John', 'answer_start': 15}]}
    path = squad_file(tmp_path / 'dup.json', [{'context': CTX, 'qas': [qa, qa]}])
    with pytest.raises(ConfigError, match="'d' appears twice"): read_squad(path)
    (tmp_path / 'broken.json').write_text('{"data": [', encoding='utf-8')
    with pytest.raises(ConfigError, match='broken.json: not JSON'): read_squad(tmp_path / 'broken.json')


def test_mrqa_errors_name_file_line_and_id(tmp_path):
    path = tmp_path / 'train.jsonl'
    good = {'qid': 'm1', 'question': 'Who?', 'answers': ['John'],
            'detected_answers': [{'text': 'John', 'char_spans': [[15, 18]]}]}
    path.write_text(json.dumps({'header': {}}) + '\n' + json.dumps({'context': CTX, 'qas': [good]}) + '\n{oops\n')
    with pytest.raises(ConfigError, match=r'train.jsonl: line 3: not JSON'): read_mrqa(path)
    bad = dict(good, detected_answers=[{'text': 'John', 'char_spans': [[3, 6]]}])
    path.write_text(json.dumps({'context': CTX, 'qas': [bad]}) + '\n')
    with pytest.raises(ConfigError) as e: read_mrqa(path)
    assert str(path) in str(e.value) and "'m1'" in str(e.value) and 'offset 3' in str(e.value)
    path.write_text(json.dumps({'context': CTX, 'qas': [{k: v for k, v in good.items() if k != 'detected_answers'}]}))
    with pytest.raises(ConfigError, match=r"line 1, question 'm1': the field 'detected_answers' is missing\. Give the "
                                          r"fields of MRQA's JSONL: a line per context, \{context, qas: \[\{qid, "
                                          r"question, answers: \[text, \.\.\.\], detected_answers: \[\{text, "
                                          r"char_spans: \[\[start, end\], \.\.\.\]\}\]\}\]\}\.$"):
        read_mrqa(path)
    assert read_mrqa(path, labeled=False) == [QAExample('m1', 'Who?', CTX)]
