"""Property-based tests (Hypothesis) of every task-file reader: the task file itself (electra/finetuning/tasks/files.py
`read_task_file`, and through it each kind's: classification, regression, multilabel, tagging, squad, mrqa), the data
files of the sentence tasks (CSV, TSV, JSONL, parquet), of tagging (CoNLL, JSONL), of QA (SQuAD JSON, MRQA JSONL) and
GLUE's TSV files. Files of any content (wrong types, NaN, huge numbers, unicode, keys missing, unknown or twice, nested
junk, random bytes, cut short, a byte-order mark, CRLF) end in a task and its examples or in one `ConfigError` of one
line (the drivers' `error: ...`), never in another exception."""
import csv
import io
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from electra.config.errors import ConfigError
from electra.config.finetune import TASK_KEYS
from electra.finetuning.tasks.files import KEYS, FileSource, FileTaskSpec, file_task, make_task, read_task_file
from electra.finetuning.tasks.glue.sources import TsvSource
from electra.finetuning.tasks.glue.tasks import task_named
from electra.finetuning.tasks.qa.data import read_mrqa, read_squad
from electra.finetuning.tasks.qa.task import KEYS as QA_KEYS
from electra.finetuning.tasks.tagging.data import SCHEMES, read_tagging_files
from electra.finetuning.tasks.tagging.task import KEYS as TAGGING_KEYS
from tests.support.properties import bounded, damaged, junk, numbers, result_or_one_line, yaml_text

# ---- the task file (YAML)

DATA = {'train.csv': 'text,label,id\ngood,pos,a\nbad,neg,b\n', 'dev.csv': 'text,label,id\nfine,pos,c\n',
        'train.tsv': 'text\tlabel\nok\t1\nno\t0\n', 'train.jsonl': '{"text": "a", "label": 1.5}\n',
        'train.txt': 'John B-PER\nruns O\n\n', 'dev.txt': 'Mary B-PER\n',
        'train.json': json.dumps({'version': 'v2.0', 'data': [{'paragraphs': [{'context': 'a b', 'qas': [
            {'id': 'q', 'question': 'what?', 'answers': [{'text': 'b', 'answer_start': 2}], 'is_impossible': False}]}]}]}),
        'mrqa.jsonl': json.dumps({'context': 'a b', 'qas': [{'qid': 'q', 'question': 'w', 'answers': ['b'],
                                                             'detected_answers': [{'text': 'b', 'char_spans': [[2, 2]]}]}]})}


@pytest.fixture(scope='module')
def folder(tmp_path_factory):
    "A folder of small valid data files of every format that generated task files may name."
    root = tmp_path_factory.mktemp('task_files')
    for name, text in DATA.items(): (root / name).write_text(text, encoding='utf-8')
    return root


TASK_FILE_KEYS = sorted({*KEYS, *TAGGING_KEYS, *QA_KEYS, *TASK_KEYS})
plausible_values = {
    'kind': st.sampled_from(['classification', 'regression', 'multilabel', 'tagging', 'squad', 'mrqa', 'glue', '']),
    **{s: st.sampled_from([*DATA, 'missing.csv', '~/x.csv', '../x.csv', 'train.csv.gz', '.', '']) for s in ('train', 'dev', 'test')},
    'text': st.sampled_from(['text', ['text', 'text'], ['text'], ['a', 'b', 'c'], []]),
    'label': st.sampled_from(['label', 'id', 'nope']), 'id': st.sampled_from(['id', 'text', '']),
    'metrics': st.sampled_from(['accuracy', ['f1', 'accuracy'], ['f1', 'f1'], 'pearson', 'mcc', [], 'f1_micro']),
    'scheme': st.sampled_from([*SCHEMES, 'auto', 'BIO']), 'name': st.sampled_from(['mine', 'RTE', '../x', 'a b', '.x']),
}
task_mappings = st.dictionaries(st.sampled_from(TASK_FILE_KEYS) | st.text(max_size=6), st.just(None), max_size=7).flatmap(
    lambda keys: st.fixed_dictionaries({k: (plausible_values[k] | junk) if k in plausible_values else (junk | numbers)
                                        for k in keys}))


@st.composite
def task_files(draw) -> bytes:
    return draw(damaged(yaml_text(draw(task_mappings), draw(st.sampled_from([None, True, False])))))


def read_and_make(path):
    "The task a task file describes, made (its data files read and checked), or the one error line."
    spec = result_or_one_line(read_task_file, path)
    return spec if isinstance(spec, Exception) else result_or_one_line(make_task, spec)


@bounded(120)
@given(content=task_files())
@example(content=b'kind: tagging\ntrain: 5\ndev: dev.txt\n')  # a file name that is a number: TypeError in Path / 5
@example(content=b'kind: classification\ntrain: train.csv\ndev: dev.csv\ntext: text\nlabel: label\nepochs: 0x' + b'f' * 4000)
@example(content=b'train: [')  # YAML's error was cut to its first line, "while parsing a flow node", without its place
@example(content=b"adam_beta1: 1\n? ''\n: 12379292\nkind: []\n")  # found: a list as kind, unhashable (TypeError)
@example(content=b'kind: tagging\n1: x\nfoo: y\n')  # keys of two types: sorted() of the unknown ones (TypeError)
def test_a_task_file_of_any_content_is_a_task_or_one_error_line(content, folder):
    path = folder / 'task.yaml'
    path.write_bytes(content)
    read_and_make(path)


# ---- the data files of sentence tasks: CSV, TSV, JSONL, parquet

COLUMNS = ['text', 'text_b', 'label', 'id']
cells = st.sampled_from(['pos', 'neg', '1', '0', '2.5', 'nan', 'inf', '', ' pos', 'a,b', '"q"', 'x\ty', 'é', '1e999']) | st.text(max_size=8)


@st.composite
def delimited(draw, sep: str) -> bytes:
    "A CSV or TSV file: a header of the columns (or others), rows of any cells, quoted by csv or joined as they are."
    header = draw(st.lists(st.sampled_from(COLUMNS) | st.text(max_size=4), min_size=1, max_size=5))
    rows = draw(st.lists(st.lists(cells, min_size=len(header) - 1, max_size=len(header) + 1), max_size=5))
    if draw(st.booleans()):
        out = io.StringIO()
        csv.writer(out, delimiter=sep, lineterminator='\n').writerows([header, *rows])
        text = out.getvalue()
    else: text = ''.join(sep.join(r) + '\n' for r in [header, *rows])
    return draw(damaged(text))


HUGE = '1' * 5000  # past Python's 4300-digit limit of int('...')
json_lines = st.lists(st.one_of(
    st.dictionaries(st.sampled_from(COLUMNS) | st.text(max_size=4), cells | junk, max_size=5).map(json.dumps),
    st.sampled_from(['{"text": "a", "label": %s}' % HUGE, '{"text": "a", "label": "x", "label": "y"}', '[' * 5000,
                     '{"text": "a", "label": NaN}', '"just a string"', '{"text": "a"']),
    junk.map(json.dumps)), max_size=5).map(lambda lines: '\n'.join(lines) + '\n')


def parquet_bytes(records: list) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq
    try: table = pa.Table.from_pylist(records)
    except (pa.ArrowException, TypeError, ValueError, OverflowError): return b'PAR1 not parquet'  # records pyarrow refuses
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


parquets = st.lists(st.fixed_dictionaries({'text': cells}, optional={'label': cells | numbers | st.none(), 'id': cells}),
                    max_size=4).map(parquet_bytes)
CONTENT = {'.csv': delimited(','), '.tsv': delimited('\t'), '.jsonl': json_lines.flatmap(damaged), '.parquet': parquets}


@bounded(120)
@given(suffix=st.sampled_from(list(CONTENT)), kind=st.sampled_from(['classification', 'regression', 'multilabel']),
       pair=st.booleans(), ids=st.booleans(), data=st.data())
@example(suffix='.jsonl', kind='classification', pair=False, ids=False, data=None)
def test_data_files_of_any_content_are_examples_or_one_error_line(suffix, kind, pair, ids, data, tmp_path_factory):
    root = tmp_path_factory.getbasetemp() / 'sentence_data'
    root.mkdir(exist_ok=True)
    files = {s: root / f'{s}{suffix}' for s in ('train', 'dev', 'test')}
    for split, path in files.items():  # the failures found, kept: a 5000-digit label, a label twice in one record
        path.write_bytes(data.draw(CONTENT[suffix]) if data else
                         f'{{"text": "a", "label": {HUGE}}}\n{{"text": "b", "label": "x", "label": "y"}}\n'.encode())
    metrics = {'classification': ('accuracy',), 'regression': ('pearson',), 'multilabel': ('f1_micro',)}[kind]
    spec = FileTaskSpec(root / 'task.yaml', 'mine', kind, files, ('text', 'text_b') if pair else ('text',), 'label',
                        'id' if ids else '', metrics, False, 1.0, ',', {})
    made = result_or_one_line(file_task, spec)
    if isinstance(made, Exception): return
    task, source = made
    for split in files: result_or_one_line(source.load, task, split)


# ---- tagging: CoNLL and JSONL

tags = st.sampled_from(['O', 'B-PER', 'I-PER', 'E-PER', 'S-LOC', 'I-LOC', 'B-', 'X', '-DOCSTART-']) | st.text(max_size=4)
conll_lines = st.lists(st.one_of(st.just(''), st.lists(tags | st.text(max_size=5), min_size=1, max_size=3).map(' '.join),
                                 st.lists(tags, min_size=2, max_size=3).map('\t'.join)), max_size=8)
tagging_jsonl = st.lists(st.one_of(
    st.fixed_dictionaries({}, optional={'tokens': st.lists(st.text(max_size=4), max_size=3) | junk,
                                        'tags': st.lists(tags, max_size=3) | junk, 'id': junk}).map(json.dumps),
    st.sampled_from(['{"tokens": ["a"], "tags": ["O"], "id": %s}' % HUGE, '[' * 5000,
                     '{"tokens": ["a"], "tags": ["O"], "tags": ["B-X"]}'])), max_size=5)


@bounded(100)
@given(jsonl=st.booleans(), scheme=st.sampled_from([*SCHEMES, 'auto']), data=st.data())
@example(jsonl=True, scheme='auto', data=None)
def test_tagging_files_of_any_content_are_sentences_or_one_error_line(jsonl, scheme, data, tmp_path_factory):
    root = tmp_path_factory.getbasetemp() / 'tagging_data'
    root.mkdir(exist_ok=True)
    files = {s: root / f"{s}{'.jsonl' if jsonl else '.txt'}" for s in ('train', 'dev', 'test')}
    for path in files.values():
        lines = (data.draw(tagging_jsonl if jsonl else conll_lines) if data else
                 ['{"tokens": ["a"], "tags": ["O"], "id": %s}' % HUGE])  # the failure found, kept
        path.write_bytes(data.draw(damaged('\n'.join(lines) + '\n')) if data else '\n'.join(lines).encode())
    result_or_one_line(read_tagging_files, files['train'], scheme, dev=files['dev'], test=files['test'])


# ---- QA: SQuAD JSON and MRQA JSONL

CONTEXTS = ['a b c', 'Paris is in France.', ' ', '', 'é\u202fx']
answer = st.fixed_dictionaries({}, optional={'text': st.sampled_from(['a', 'b c', 'Paris', 'x']) | junk,
                                            'answer_start': st.integers(-2, 12) | junk,
                                            'char_spans': st.lists(st.lists(st.integers(-1, 12), max_size=3), max_size=2) | junk})
question = st.fixed_dictionaries({}, optional={'id': st.sampled_from(['q1', 'q2']) | junk, 'qid': st.sampled_from(['q1', 'q2']) | junk,
                                              'question': st.text(max_size=6) | junk, 'answers': st.lists(answer, max_size=2) | junk,
                                              'detected_answers': st.lists(answer, max_size=2) | junk,
                                              'is_impossible': st.booleans() | junk, 'plausible_answers': st.lists(answer, max_size=1)})
paragraph = st.fixed_dictionaries({}, optional={'context': st.sampled_from(CONTEXTS) | junk,
                                               'qas': st.lists(question, max_size=3) | junk})
squad = st.fixed_dictionaries({}, optional={'version': st.sampled_from(['v2.0', '1.1', 2]) | junk, 'data': st.lists(
    st.fixed_dictionaries({}, optional={'paragraphs': st.lists(paragraph, max_size=2) | junk}), max_size=2) | junk})


@bounded(100)
@given(mrqa=st.booleans(), mode=st.sampled_from(['error', 'skip', 'keep']), labeled=st.booleans(), data=st.data())
@example(mrqa=False, mode='error', labeled=True, data=None)
def test_qa_files_of_any_content_are_questions_or_one_error_line(mrqa, mode, labeled, data, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / ('qa.jsonl' if mrqa else 'qa.json')
    if data is None: text = '{"version": "v2.0", "data": %s}' % HUGE  # the failure found, kept
    elif mrqa: text = '\n'.join(json.dumps(p) for p in data.draw(st.lists(paragraph | junk, max_size=3)))
    else: text = json.dumps(data.draw(squad | junk))
    path.write_bytes(data.draw(damaged(text)) if data else text.encode())
    result_or_one_line(read_mrqa if mrqa else read_squad, path, mode, labeled)


# ---- GLUE TSV files (the download script's layout)

@bounded(60)
@given(name=st.sampled_from(['SST-2', 'MRPC', 'STS-B', 'CoLA']), split=st.sampled_from(['train', 'dev', 'test']),
       content=delimited('\t'))
def test_glue_tsv_files_of_any_content_are_examples_or_one_error_line(name, split, content, tmp_path_factory):
    task = task_named(name)
    root = tmp_path_factory.getbasetemp() / 'glue'
    path = root / task.tsv[split].path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    result_or_one_line(TsvSource(root).load, task, split)


@pytest.mark.parametrize('reader', ['sentence', 'tagging', 'squad', 'mrqa'])
def test_a_key_twice_in_a_json_record_is_refused_naming_the_key_and_line(reader, tmp_path):
    "json.loads keeps the last of two equal keys; the label (or the answers) given twice would be read silently."
    if reader == 'sentence':
        path = tmp_path / 'train.jsonl'
        path.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "x", "label": "y"}\n')
        spec = FileTaskSpec(tmp_path / 't.yaml', 't', 'classification', {'train': path, 'dev': path}, ('text',), 'label',
                            '', ('accuracy',), False, 1.0, ',', {})
        call, where = (lambda: file_task(spec)), f'{path}: line 2'
    elif reader == 'tagging':
        path = tmp_path / 'train.jsonl'
        path.write_text('{"tokens": ["a"], "tags": ["O"], "tags": ["B-X"]}\n')
        call, where = (lambda: read_tagging_files(path)), f'{path}:1'
    elif reader == 'squad':
        path = tmp_path / 'train.json'
        path.write_text('{"version": "1.1", "data": [], "data": []}')
        call, where = (lambda: read_squad(path)), str(path)
    else:
        path = tmp_path / 'train.jsonl'
        path.write_text('{"context": "a", "qas": [], "qas": []}\n')
        call, where = (lambda: read_mrqa(path)), f'{path}: line 1'
    key = {'sentence': 'label', 'tagging': 'tags', 'squad': 'data', 'mrqa': 'qas'}[reader]
    with pytest.raises(ConfigError) as e: call()
    assert str(e.value).startswith(f"{where}: key '{key}' is given twice in one object")
