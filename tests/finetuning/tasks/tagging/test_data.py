"""electra/finetuning/tasks/tagging/data.py: CoNLL and JSONL readers, scheme checks."""
from __future__ import annotations

import json
import re

import pytest

from electra.config.errors import ConfigError
from electra.finetuning.tasks.tagging import data

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER


BRUSSELS NNP B-NP B-LOC
"""


def write(path, text: str):
    path.write_text(text, encoding='utf-8')
    return path


def test_conll_reads_words_and_last_column_and_keeps_lines(tmp_path):
    f = data.read_conll(write(tmp_path / 'a.txt', CONLL))
    assert f.format == 'conll' and f.lines == CONLL.split('\n')
    assert [s.words for s in f.sentences] == [['EU', 'rejects', 'German', 'call', '.'], ['Peter', 'Blackburn'], ['BRUSSELS']]
    assert [s.tags for s in f.sentences] == [['B-ORG', 'O', 'B-MISC', 'O', 'O'], ['B-PER', 'I-PER'], ['B-LOC']]
    assert [s.word_lines for s in f.sentences] == [[3, 4, 5, 6, 7], [9, 10], [13]]
    assert [s.id for s in f.sentences] == ['0', '1', '2'] and [s.line for s in f.sentences] == [3, 9, 13]


def test_conll_tabs_crlf_bom_no_final_newline_and_odd_words(tmp_path):
    raw = '\ufeffa\tX\tB-PER\r\nb\u00a0c I-PER\r\n\r\n\u2028\tO'  # a no-break space and U+2028 stay inside words
    (tmp_path / 'b.txt').write_bytes(raw.encode('utf-8'))
    f = data.read_conll(tmp_path / 'b.txt')
    assert [s.words for s in f.sentences] == [['a', 'b\u00a0c'], ['\u2028']]
    assert [s.tags for s in f.sentences] == [['B-PER', 'I-PER'], ['O']]
    assert f.lines == ['a\tX\tB-PER', 'b\u00a0c I-PER', '', '\u2028\tO']


def test_jsonl_reads_records_ids_and_keeps_other_fields(tmp_path):
    rows = [{'id': 7, 'tokens': ['Zoë', 'lives', 'in', 'Kraków'], 'tags': ['B-PER', 'O', 'O', 'B-LOC'], 'src': 'x'},
            {'tokens': ['hi'], 'tags': ['O']}]
    f = data.read_tagged(write(tmp_path / 'a.jsonl', json.dumps(rows[0]) + '\n\n' + json.dumps(rows[1]) + '\n'))
    assert f.format == 'jsonl' and [s.id for s in f.sentences] == ['7', '1'] and [s.line for s in f.sentences] == [1, 3]
    assert f.sentences[0].words == rows[0]['tokens'] and f.sentences[0].record == rows[0]
    assert f.where(f.sentences[1], 0) == f'{tmp_path / "a.jsonl"}:3 (token 1)'


@pytest.mark.parametrize('name, text, where, message', [
    ('a.txt', 'EU B-ORG\nrejects\n', 2, "the word 'rejects' has no tag"),
    ('b.jsonl', '{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["a", "b"], "tags": ["O"]}\n', 2, '2 tokens but 1 tags'),
    ('c.jsonl', '{"tokens": ["a"], "tags": ["O"]}\n{"tokens": "a b", "tags": ["O"]}\n', 2, '`tokens` must be a list'),
    ('d.jsonl', '{"tokens": ["a"], "tags": ["O"]\n', 1, 'not JSON'),
    ('e.jsonl', '{"id": 1, "tokens": ["a"], "tags": ["O"]}\n{"id": "1", "tokens": ["a"], "tags": ["O"]}\n', 2,
     "id '1' already used on line 1"),
    ('f.jsonl', '{"tokens": [], "tags": []}\n', 1, 'without tokens'),
])
def test_reader_errors_name_file_and_line(tmp_path, name, text, where, message):
    path = write(tmp_path / name, text)
    with pytest.raises(ConfigError) as e:
        data.read_tagged(path)
    assert str(e.value).startswith(f'{path}:{where}') and message in str(e.value)


def test_missing_and_undecodable_files(tmp_path):
    with pytest.raises(ConfigError, match='no such file'):
        data.read_conll(tmp_path / 'none.txt')
    (tmp_path / 'bad.txt').write_bytes(b'a O\n\ncaf\xe9 O\n')  # latin-1 on line 3: the line and the fix are named
    with pytest.raises(ConfigError, match=r'bad.txt: line 3: not UTF-8 text .*Save it as UTF-8'):
        data.read_conll(tmp_path / 'bad.txt')


@pytest.mark.parametrize('scheme, text, line, message', [
    ('IOB2', 'a B-LOC\nb I-PER\n', 2, "'I-PER' after 'B-LOC'"),
    ('IOB2', 'a O\nb I-PER\n', 2, 'pass scheme IOB1'),
    ('IOB2', 'a O\n\nb I-PER\n', 3, 'at the start of the sentence'),
    ('IOB2', 'a O\nb E-PER\n', 2, "'E-PER' is not O or B-/I-<type>"),
    ('IOBES', 'a O\nb E-PER\n', 2, 'an E- tag follows B-PER or I-PER'),
    ('IOBES', 'a B-PER\nb O\n', 2, "the entity 'B-PER' must end with E- first"),
    ('IOBES', 'a S-PER\nb B-PER\nc I-PER\n\nd O\n', 3, 'the sentence ends inside the entity'),
    ('IOB1', 'a O\nb B-PER\n', 2, 'in IOB1 a B- tag only begins an entity right after another of its type'),
    ('IOB2', 'a O\nb PER\n', 2, "'PER' is not O or B-/I-<type>"),
])
def test_scheme_errors_name_file_and_line(tmp_path, scheme, text, line, message):
    path = write(tmp_path / 'x.txt', text)
    with pytest.raises(ConfigError) as e:
        data.check_scheme(data.read_conll(path), scheme)
    assert str(e.value).startswith(f'{path}:{line}: ') and message in str(e.value)


def test_schemes_are_detected_and_iob1_is_read_when_named(tmp_path):
    def scheme(text): return data.detect_scheme(data.read_conll(write(tmp_path / 'd.txt', text)))
    assert scheme('a B-PER\nb I-PER\nc O\n') == 'IOB2' and scheme('a O\n') == 'IOB2'
    assert scheme('a B-PER\nb E-PER\nc S-LOC\n') == 'IOBES' and scheme('a NN\nb VBZ\nc O\n') == 'plain'
    with pytest.raises(ConfigError, match=r"d.txt:2: tag 'NN' has no B-/I-/E-/S- prefix, but .*d.txt:1 has 'B-PER'"):
        scheme('a B-PER\nb NN\n')
    with pytest.raises(ConfigError, match=r"d.txt:2: tag 'NOUN' has no .* but .*d.txt:1 has 'S_ADJ'.*give scheme: plain"):
        scheme('a S_ADJ\nb NOUN\n')  # '_' is a prefix separator now: a plain tag set holding one is told the key
    iob1 = write(tmp_path / 'iob1.txt', 'a I-PER\nb I-PER\nc B-PER\nd O\ne I-LOC\n')
    with pytest.raises(ConfigError, match='iob1.txt:1: .*pass scheme IOB1'):
        data.read_tagging_files(iob1)
    got = data.read_tagging_files(iob1, scheme='IOB1')
    assert got.scheme == 'IOB1' and got.labels == ['B-PER', 'I-LOC', 'I-PER', 'O']
    with pytest.raises(ConfigError, match="scheme: 'BIO' is not one of"):
        data.read_tagging_files(iob1, scheme='BIO')


@pytest.mark.parametrize('text', ['', '-DOCSTART- O\n\n\n', '\n \t\n'], ids=['empty', 'docstart', 'blank'])
@pytest.mark.parametrize('split', ['train', 'dev', 'test'])
def test_a_file_without_sentences_is_refused_in_any_split(tmp_path, split, text):
    """An empty dev file trained a run and then stopped in seqeval (a TypeError, the epoch lost); an empty test file
    wrote an empty file of tags. Each is refused when read, as the training file was and QA's files are."""
    good = write(tmp_path / 'good.txt', 'Olga B-PER\nleft O\n')
    empty = write(tmp_path / f'{split}.txt', text)
    files = {'train': good, 'dev': good, 'test': good, split: empty}
    what = {'train': 'train on', 'dev': 'score', 'test': 'tag'}[split]
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(empty))}: no sentences to {what}\.$"):
        data.read_tagging_files(files.pop('train'), **files)


def test_dev_and_test_tags_must_occur_in_training(tmp_path):
    train = write(tmp_path / 'train.txt', 'a B-PER\nb I-PER\nc O\n\nd B-LOC\n')
    dev = write(tmp_path / 'dev.jsonl', '{"tokens": ["a"], "tags": ["B-PER"]}\n{"tokens": ["a", "b"], "tags": ["O", "B-ORG"]}\n')
    with pytest.raises(ConfigError) as e:
        data.read_tagging_files(train, dev=dev)
    assert str(e.value).startswith(f"{dev}:2 (token 2): tag 'B-ORG' never occurs in the training file {train}")
    test = write(tmp_path / 'test.txt', 'a O\n\nb B-LOC\nc I-LOC\n')  # well-formed, but I-LOC is never in training
    with pytest.raises(ConfigError, match="test.txt:4: tag 'I-LOC' never occurs"):
        data.read_tagging_files(train, test=test)
    ok = data.read_tagging_files(train, dev=write(tmp_path / 'dev.txt', 'a O\nb B-LOC\n'), test=None)
    assert ok.scheme == 'IOB2' and ok.labels == ['B-LOC', 'B-PER', 'I-PER', 'O'] and list(ok.splits) == ['train', 'dev']


def test_entity_types():
    assert data.entity_types([['B-PER', 'O'], ['I-LOC', 'S-ORG', 'E-ORG']]) == ['LOC', 'ORG', 'PER']


def test_a_test_file_may_have_no_tags_but_a_dev_file_must(tmp_path):
    train = write(tmp_path / 'train.txt', 'a B-PER\nb I-PER\nc O\n')
    words = write(tmp_path / 'test.txt', '-DOCSTART-\n\nEU\nrejects\n\nPeter\tX\n')  # one column; the last line two
    with pytest.raises(ConfigError, match=r"test.txt:6 has a word and its tag but line 3 has a word alone: a test "
                                          r"file gives tags on every word line or on none\.$"):  # one rule, both lines
        data.read_tagging_files(train, test=words)
    words = write(tmp_path / 'test.txt', '-DOCSTART-\n\nEU\nrejects\n\nPeter\n')
    f = data.read_tagging_files(train, test=words).splits['test']
    assert not f.labeled and [s.words for s in f.sentences] == [['EU', 'rejects'], ['Peter']]
    assert [s.tags for s in f.sentences] == [[], []] and [s.word_lines for s in f.sentences] == [[3, 4], [6]]
    with pytest.raises(ConfigError, match=r"dev.txt:1: the word 'EU' has no tag"):
        data.read_tagging_files(train, dev=write(tmp_path / 'dev.txt', 'EU\n'))
    jsonl = write(tmp_path / 'test.jsonl', '{"id": 7, "tokens": ["EU", "rejects"]}\n{"tokens": ["Peter"], "x": 1}\n')
    f = data.read_tagging_files(train, test=jsonl).splits['test']
    assert not f.labeled and [(s.id, s.words, s.tags) for s in f.sentences] == [('7', ['EU', 'rejects'], []), ('1', ['Peter'], [])]
    from electra.finetuning.tasks.tagging.metrics import write_predictions
    out = write_predictions(f, [['B-PER', 'O'], ['O']], tmp_path / 'pred.jsonl')
    assert [json.loads(ln) for ln in out.read_text().splitlines()] == [
        {'id': 7, 'tokens': ['EU', 'rejects'], 'pred_tags': ['B-PER', 'O']}, {'tokens': ['Peter'], 'x': 1, 'pred_tags': ['O']}]


@pytest.mark.parametrize('records, said', [
    ([{}, {'tags': ['B-PER', 'I-PER']}], ':2 has "tags" but line 1 has no "tags"'),
    ([{'tags': ['B-PER', 'I-PER']}, {}], ':2 has no "tags" but line 1 has "tags"'),
    ([{}, {}, {'tags': None}], ':3 has "tags": null but line 1 has no "tags"'),
    ([{'tags': ['O', 'O']}, {'tags': None}], ':2 has "tags": null but line 1 has "tags"'),
    ([{'tags': None}], ':1 has "tags": null'),
])
def test_a_jsonl_test_file_has_tags_on_every_record_or_on_none(tmp_path, records, said):
    "A mixture was refused at line 1 (`tags` must be a list of strings) though line 1 was a words-only record."
    train = write(tmp_path / 'train.txt', 'a B-PER\nb I-PER\nc O\n')
    test = write(tmp_path / 'test.jsonl', ''.join(json.dumps({'tokens': ['Anna', 'Fischer'], **r}) + '\n' for r in records))
    with pytest.raises(ConfigError) as e:
        data.read_tagging_files(train, test=test)
    assert str(e.value) == f'{test}{said}: a test file gives tags (a list of strings) on every record or on none.'


def test_bio_tags_with_an_underscore_are_entities_of_their_type(tmp_path):
    "B_LOC / I_PER under scheme auto were plain tags: entity F1 dropped, and `metrics: f1` said the task 'has 0' types."
    train = write(tmp_path / 'u.txt', 'Olga B_PER\nKeller I_PER\nin O\nVienna B_LOC\n\nACME B_ORG\nCorp I_ORG\n')
    got = data.read_tagging_files(train)
    assert got.scheme == 'IOB2' and got.labels == ['B_LOC', 'B_ORG', 'B_PER', 'I_ORG', 'I_PER', 'O']
    assert data.entity_types([got.labels]) == ['LOC', 'ORG', 'PER']
    assert data.read_tagging_files(train, scheme='IOB2').scheme == 'IOB2'  # named, too: one rule
    with pytest.raises(ConfigError, match=r"u\.txt:2: tag 'I_LOC' after 'B_PER': in IOB2 an I- tag continues"):
        data.read_tagging_files(write(tmp_path / 'u.txt', 'Olga B_PER\nKeller I_LOC\n'))
    # one file writing both separators: 'B-PER' and 'B_PER' would be two labels of one entity part
    with pytest.raises(ConfigError, match=r"m\.txt:3: tag 'B_LOC' writes its prefix with '_', but .*m\.txt:1 has "
                                          r"'B-PER' with '-'"):
        data.read_tagging_files(write(tmp_path / 'm.txt', 'Olga B-PER\n\nVienna B_LOC\n'))
    assert data.read_tagging_files(write(tmp_path / 'p.txt', 'a B_x\nb NN\n'), scheme='plain').scheme == 'plain'


def test_bio_tags_with_lower_case_prefixes_are_entities_of_their_type(tmp_path):
    "b-LOC / i-PER under scheme auto were plain tags, silently: accuracy alone, no entity F1."
    train = write(tmp_path / 'l.txt', 'Olga b-PER\nKeller i-PER\nin O\nVienna b-LOC\n\nACME b-ORG\nCorp i-ORG\n')
    got = data.read_tagging_files(train)
    assert got.scheme == 'IOB2' and got.labels == ['O', 'b-LOC', 'b-ORG', 'b-PER', 'i-ORG', 'i-PER']
    assert data.entity_types([got.labels]) == ['LOC', 'ORG', 'PER']
    assert data.read_tagging_files(train, scheme='IOB2').scheme == 'IOB2'  # named, too: one rule
    iobes = write(tmp_path / 's.txt', 'Olga b_PER\nKeller e_PER\nin O\nVienna s_LOC\n')
    assert data.read_tagging_files(iobes).scheme == 'IOBES' and data.entity_types([['b_PER', 's_LOC']]) == ['LOC', 'PER']
    with pytest.raises(ConfigError, match=r"l\.txt:2: tag 'i-LOC' after 'b-PER': in IOB2 an I- tag continues"):
        data.read_tagging_files(write(tmp_path / 'l.txt', 'Olga b-PER\nKeller i-LOC\n'))
    # one file writing its prefixes two ways: 'B-PER' and 'b-PER' would be two labels of one entity part
    with pytest.raises(ConfigError, match=r"m\.txt:3: tag 'b-LOC' writes its prefix as 'b-', but .*m\.txt:1 has "
                                          r"'B-PER' as 'B-': write every tag one way"):
        data.read_tagging_files(write(tmp_path / 'm.txt', 'Olga B-PER\n\nVienna b-LOC\n'))
    assert [data.dashed(t) for t in ('b-LOC', 'i_PER', 's-X', 'O', 'NN', 'bx-LOC')] == \
        ['B-LOC', 'I-PER', 'S-X', 'O', 'NN', 'bx-LOC']


def test_training_tags_that_differ_only_in_case_are_said(tmp_path):
    from electra.config.errors import RunWarning
    train = write(tmp_path / 't.txt', 'Olga B-PER\nin O\n\nAnna B-Per\n\nBob B-PER\n')  # hand count: B-PER 2, B-Per 1
    with pytest.warns(RunWarning, match=r"t\.txt: the tags 'B-PER' \(2 words\) and 'B-Per' \(1 word\) differ only in "
                                        r"case, so they are separate classes"):
        data.read_tagging_files(train)


def test_files_of_cr_line_ends_read_as_their_lf_copies(tmp_path):
    """A CoNLL file of classic Mac line ends (CR alone) was one line, refused as 'no sentences to train on'; a JSONL
    one 'not JSON (Extra data ...)'. Both read as their LF copies: the same sentences, lines and line numbers."""
    rows = [{'tokens': ['EU', 'rejects'], 'tags': ['B-ORG', 'O']}, {'tokens': ['Peter'], 'tags': ['B-PER']}]
    jsonl = ''.join(json.dumps(r) + '\n' for r in rows)
    for name, text in (('a.txt', CONLL), ('a.jsonl', jsonl)):
        lf = data.read_tagged(write(tmp_path / f'lf_{name}', text))
        (tmp_path / f'cr_{name}').write_bytes(text.replace('\n', '\r').encode())
        cr = data.read_tagged(tmp_path / f'cr_{name}')
        assert cr.format == lf.format and cr.lines == lf.lines and len(cr.sentences) == len(lf.sentences) > 1
        for a, b in zip(cr.sentences, lf.sentences):
            assert (a.words, a.tags, a.line, a.word_lines) == (b.words, b.tags, b.line, b.word_lines)


def test_entity_tags_without_prefixes_beside_o_read_as_plain_are_said(tmp_path):
    """PER/LOC beside O (entities written without B-/I-, the IO scheme) were read as plain in silence: word accuracy
    alone, no entity F1 (R21a-5). Said in one warning with the fix; POS-like tags (no O) and `scheme: plain` say
    nothing."""
    import warnings
    from electra.config.errors import RunWarning
    io = write(tmp_path / 'io.txt', 'Olga PER\nin O\nRome LOC\n\nAnna PER\n')
    with pytest.warns(RunWarning, match=r"io\.txt: its tags PER, LOC beside 'O' have no B-/I- prefixes, so "
                                        r"scheme auto reads them as plain: each word's tag scored by accuracy, no "
                                        r"entity F1\. If they are entities \(the IO scheme\), write B- on each "
                                        r"entity's first word and I- on the rest \(IOB2\); give scheme: plain if they "
                                        r"are no entities\.$"):
        assert data.read_tagging_files(io).scheme == 'plain'
    pos = write(tmp_path / 'pos.txt', 'Olga NNP\nruns VBZ\n\nAnna NNP\n')
    with warnings.catch_warnings():
        warnings.simplefilter('error', RunWarning)
        assert data.read_tagging_files(pos).scheme == 'plain'
        assert data.read_tagging_files(io, scheme='plain').scheme == 'plain'
