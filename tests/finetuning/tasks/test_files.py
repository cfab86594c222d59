"""electra/finetuning/tasks/files.py: a task from files trains, sweeps, summarises and predicts as a GLUE task does;
the real STS-B given as files gives the GLUE route's dev metrics; bad files are named with their line."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from electra.config.errors import ConfigError
from electra.finetuning import sweep
from electra.finetuning.tasks.demo import write_demo_tasks
from electra.finetuning.tasks.files import file_task, make_task, read_task_file
from electra.finetuning.tasks.glue.sources import open_source
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')

REAL_STSB = Path(__file__).resolve().parents[3].parent / 'shared' / 'data' / 'glue' / 'STS-B'
WORDS = ['good', 'bad', 'fine', 'poor', 'great', 'awful', 'the', 'film', 'was', 'a', 'plot']


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding='utf-8')
    return path


def sentiment(tmp_path: Path, n: int = 24, seed: int = 0) -> list[dict]:
    "Sentences whose label is the sentiment of their first word, string labels and string ids."
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        first = WORDS[int(rng.integers(0, 6))]
        rows.append({'id': f'ex-{seed}-{i}', 'sentence': ' '.join([first, *rng.choice(WORDS[6:], 4)]),
                     'label': 'pos' if first in ('good', 'fine', 'great') else 'neg'})
    return rows


def to_csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.skipif(not (REAL_STSB / 'train.tsv').is_file(), reason='../shared/data/glue/STS-B is absent')
def test_real_sts_b_as_a_task_from_files_gives_the_glue_routes_metrics(tmp_path, tiny):
    spec = write(tmp_path / 'stsb_files.yaml', f"kind: regression\ntrain: {REAL_STSB / 'train.tsv'}\n"
                 f"dev: {REAL_STSB / 'dev.tsv'}\ntest: {REAL_STSB / 'test.tsv'}\ntext: [sentence1, sentence2]\n"
                 f"label: score\nid: index\nmetrics: [spearman, pearson]\nunordered_pair: true\ntarget_scale: 5\n")
    kw = dict(runs=2, max_train_samples=64, epochs=1, batch_size=16)
    glue = job(tmp_path / 'glue', REAL_STSB.parent, tasks=['STS-B'], **kw)
    files = job(tmp_path / 'files', REAL_STSB.parent, tasks=[str(spec)], **kw)
    got = {}
    for name, cfg in (('STS-B', glue), ('stsb_files', files)):
        src = open_source(cfg.data)
        results = sweep.run_sweep(cfg, *tiny, src, log=lambda s: None)
        got[name] = results.task_rows(name)
        sweep.write_test_predictions(cfg, results, tiny[1], src, log=lambda s: None)
    for col in ('seed', 'pearson', 'spearman', 'train_loss', 'steps'):
        assert got['STS-B'][col].tolist() == got['stsb_files'][col].tolist(), col
    assert got['stsb_files']['score'].tolist() == got['stsb_files']['spearman'].tolist()
    ours = pd.read_csv(tmp_path / 'files/out/t/stsb_files.tsv', sep='\t')
    theirs = pd.read_csv(tmp_path / 'glue/out/t/STS-B.tsv', sep='\t')
    assert ours['id'].tolist() == theirs['index'].tolist() and len(ours) == 1379
    np.testing.assert_allclose(np.clip(ours['prediction'], 0, 5), theirs['prediction'], atol=6e-4)  # (3 decimals)


def test_the_demo_classification_task_from_csv_trains_summarises_and_predicts_with_its_ids(tmp_path, tiny):
    spec = write_demo_tasks(tmp_path / "tasks", sizes={"train": 32, "dev": 12, "test": 10})[0]
    cfg = job(tmp_path, 'demo', tasks=[str(spec), 'RTE'], runs=2)
    src = sweep.resolve_data('demo', cfg.cache_dir)
    results = sweep.run_sweep(cfg, *tiny, src, log=lambda s: None)
    assert results.df['task'].tolist() == ['RTE', 'RTE', 'reviews', 'reviews']  # GLUE's first, then files'
    rows = results.task_rows('reviews')
    assert (rows['score'] == rows['accuracy']).all() and rows['f1'].notna().all() and rows['mcc'].isna().all()
    assert '| reviews | accuracy | 2 |' in sweep.write_summary(cfg, results)
    files = sweep.write_test_predictions(cfg, results, tiny[1], src, log=lambda s: None)
    assert sorted(p.name for p in files) == ['RTE.tsv', 'glue_submission.zip', 'reviews.tsv']
    with open(tmp_path / 'out/t/reviews.tsv', newline='') as f: out = list(csv.reader(f, delimiter='\t'))
    test_ids = pd.read_csv(tmp_path / 'tasks/reviews/test.csv')['review_id'].tolist()
    assert out[0] == ['id', 'prediction'] and [r[0] for r in out[1:]] == test_ids == [f'test-{i:04d}' for i in range(10)]
    assert {r[1] for r in out[1:]} <= {'negative', 'positive'}


def test_every_format_reads_the_same_examples(tmp_path):
    rows = sentiment(tmp_path, 8)
    to_csv(tmp_path / 'a.csv', rows)
    pd.DataFrame(rows).to_csv(tmp_path / 'a.tsv', sep='\t', index=False)
    (tmp_path / 'a.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    pd.DataFrame(rows).to_parquet(tmp_path / 'a.parquet')
    seen = []
    for ext in ('csv', 'tsv', 'jsonl', 'parquet'):
        spec = write(tmp_path / f'{ext}.yaml', f'train: a.{ext}\ndev: a.{ext}\ntext: sentence\nlabel: label\n')
        task, src = file_task(read_task_file(spec))
        ex = src.load(task, 'dev')
        seen.append((task.labels, ex.text_a, ex.label.tolist()))
    assert all(s == seen[0] for s in seen) and seen[0][0] == ('neg', 'pos')
    assert seen[0][2] == [int(r['label'] == 'pos') for r in rows]


@pytest.mark.parametrize('spec, files, match', [
    ('train: t.csv\ndev: d.csv\ntext: sentence\nlabel: label\nkind: ranking\n', {},
     r'kind must be one of classification, regression'),
    ('train: t.csv\ndev: d.csv\ntext: sentence\nlabel: label\ncolumns: 2\n', {}, r"unknown key\(s\) columns"),
    ('name: RTE\ntrain: t.csv\ndev: d.csv\ntext: sentence\nlabel: label\n', {}, r"name 'RTE' is a GLUE task's"),
    ('train: t.csv\ndev: missing.csv\ntext: sentence\nlabel: label\n', {}, r'dev: .*missing.csv not found'),
    ('train: t.csv\ndev: d.csv\ntext: sentence\nlabel: label\nmetrics: [pearson]\n', {},
     r'task.yaml: line 5: metrics: pearson scores regression tasks; this is a classification task'),
    ('train: t.csv\ndev: d.csv\ntext: sentence\nlabel: label\n', {'d.csv': 'sentence,label\nthe film,meh\n'},
     r"d.csv: line 2: label 'meh' never occurs in the training file \(neg, pos\)"),
    ('train: t.csv\ndev: d.csv\ntext: sentence\nlabel: label\n', {'d.csv': 'text,label\nthe film,pos\n'},
     r"d.csv: line 2: no value in column 'sentence' \(columns: text, label\)"),
])
def test_bad_task_files_are_named_with_the_line(tmp_path, spec, files, match):
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    to_csv(tmp_path / 'd.csv', sentiment(tmp_path, 4, 1))
    for name, text in files.items(): write(tmp_path / name, text)
    with pytest.raises(ConfigError, match=match):
        task, src = file_task(read_task_file(write(tmp_path / 'task.yaml', spec)))
        src.load(task, 'dev')


def test_a_multilabel_task_from_jsonl_trains_and_writes_its_label_sets(tmp_path, tiny):
    rng = np.random.default_rng(0)
    topics = {'good': 'praise', 'bad': 'blame', 'film': 'cinema', 'plot': 'story'}

    def rows(n):
        out = []
        for i in range(n):
            words = list(rng.choice(WORDS, 5))
            out.append({'id': i, 'text': ' '.join(words), 'topics': sorted({topics[w] for w in words if w in topics})})
        return out
    for split, n in (('train', 40), ('dev', 12), ('test', 6)):
        (tmp_path / f'{split}.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows(n)))
    spec = write(tmp_path / 'topics.yaml', 'kind: multilabel\ntrain: train.jsonl\ndev: dev.jsonl\ntest: test.jsonl\n'
                 'text: text\nlabel: topics\nid: id\nmetrics: [f1_micro, f1_macro, subset_accuracy]\n')
    task, src = file_task(read_task_file(spec))
    assert task.labels == ('blame', 'cinema', 'praise', 'story') and task.multilabel and task.n_outputs == 4
    dev = src.load(task, 'dev')
    first = json.loads((tmp_path / 'dev.jsonl').read_text().splitlines()[0])['topics']
    assert dev.label.shape == (12, 4) and [task.labels[k] for k in np.flatnonzero(dev.label[0])] == first
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], runs=1, epochs=2, lr=1e-3)
    results = sweep.run_sweep(cfg, *tiny, src, log=lambda s: None)
    row = results.get('topics', 0)
    assert row['score'] == row['f1_micro'] and 0 <= row['subset_accuracy'] <= 100 and np.isnan(row['accuracy'])
    sweep.write_test_predictions(cfg, results, tiny[1], src, log=lambda s: None)
    out = pd.read_csv(tmp_path / 'out/t/topics.tsv', sep='\t', keep_default_na=False)
    assert out['id'].tolist() == list(range(6))
    assert all(set(filter(None, v.split(','))) <= set(task.labels) for v in out['prediction'])


def _spec(tmp_path: Path, train: str, dev: str | None = None, ext: str = 'csv', extra: str = '') -> Path:
    "A task file over a train file of the given text (dev: the same text unless given)."
    write(tmp_path / f'train.{ext}', train)
    write(tmp_path / f'dev.{ext}', train if dev is None else dev)
    return write(tmp_path / 'task.yaml', f'train: train.{ext}\ndev: dev.{ext}\ntext: sentence\nlabel: label\n{extra}')


GOOD = 'sentence,label\ngood film,pos\nbad film,neg\n'


@pytest.mark.parametrize('ext, train, match', [
    ('csv', GOOD + 'nice, really nice,pos\n',
     r"train.csv: line 4 has 3 fields, the header has 2 \(sentence, label\)\. A field holding a comma must be quoted"),
    ('csv', 'id,sentence,label\n1,good film,pos\n2,bad film,neg\nbad one,neg\n',
     r"train.csv: line 4 has 2 fields, the header has 3 \(id, sentence, label\)"),
    ('tsv', GOOD.replace(',', '\t') + 'nice\treally nice\tpos\n',
     r"train.tsv: line 4 has 3 fields, the header has 2 \(sentence, label\)\. TSV fields cannot hold a tab"),
    ('csv', 'sentence,label\n"good\nfilm",pos\n\nbad film,neg\nworse,film,neg\n',  # a quoted line break, a blank line
     r"train.csv: line 6 has 3 fields, the header has 2"),
])
def test_a_row_with_more_or_fewer_fields_than_the_header_is_refused_with_its_line(tmp_path, ext, train, match):
    "Read by position, an extra field made the text the label (a new class) and training went on."
    with pytest.raises(ConfigError, match=match):
        file_task(read_task_file(_spec(tmp_path, train, ext=ext)))


@pytest.mark.parametrize('train, match', [
    ('', r"train.csv: empty file: expected a header line naming the columns, then one line per example"),
    ('sentence,label\n', r"train.csv: no examples below the header line"),
    ('sentence,label,label\ngood,pos,neg\nbad,neg,pos\n', r"train.csv: line 1: the header names column 'label' twice"),
    (GOOD.replace(',', '\t'), r"train.csv: the header is one column, 'sentence\\tlabel': the file looks "
                              r"tab-separated, but a .csv file is read comma-separated"),
    (GOOD.replace(',', ';'), r"the file looks ';'-separated, but a .csv file is read comma-separated"),
])
def test_empty_headerless_and_misdelimited_files_are_named(tmp_path, train, match):
    with pytest.raises(ConfigError, match=match):
        file_task(read_task_file(_spec(tmp_path, train)))


def test_a_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
    spec = _spec(tmp_path, GOOD)
    (tmp_path / 'train.csv').write_bytes(GOOD.encode() + 'caf\u00e9 film,pos\n'.encode('latin-1'))
    with pytest.raises(ConfigError, match=r"train.csv: line 4 is not UTF-8 text \(byte 0xe9\); save the file as UTF-8"):
        file_task(read_task_file(spec))


def test_a_jsonl_record_that_is_not_an_object_is_named(tmp_path):
    spec = _spec(tmp_path, '{"sentence": "good", "label": "pos"}\n[1, 2]\n', ext='jsonl')
    with pytest.raises(ConfigError, match=r"train.jsonl: line 2: a record must be a JSON object of column: value"):
        file_task(read_task_file(spec))


@pytest.mark.parametrize('ext', ['csv', 'tsv'])
def test_a_field_longer_than_the_csv_default_limit_is_read_whole(tmp_path, ext):
    "csv's default limit is 131072 characters; the tokenizer truncates long texts anyway."
    long = 'word ' * 40000  # 200,000 characters
    sep = ',' if ext == 'csv' else '\t'
    task, src = file_task(read_task_file(_spec(tmp_path, f'sentence{sep}label\n{long}{sep}pos\nbad film{sep}neg\n', ext=ext)))
    ex = src.load(task, 'dev')
    assert ex.text_a == [long, 'bad film'] and ex.label.tolist() == [1, 0]


def test_line_numbers_count_quoted_line_breaks_and_blank_lines(tmp_path):
    dev = 'sentence,label\n"good\n\nfilm",pos\n\nbad film,meh\n'
    task, src = file_task(read_task_file(_spec(tmp_path, GOOD, dev)))
    with pytest.raises(ConfigError, match=r"dev.csv: line 6: label 'meh' never occurs in the training file"):
        src.load(task, 'dev')


def test_an_id_twice_in_the_test_file_is_refused_before_any_run(tmp_path, tiny):
    "The predictions file held two rows for one id."
    to_csv(tmp_path / 'train.csv', sentiment(tmp_path, 8))
    rows = sentiment(tmp_path, 4, 1)
    rows[3]['id'] = rows[1]['id']
    to_csv(tmp_path / 'test.csv', rows)
    spec = write(tmp_path / 'task.yaml', 'train: train.csv\ndev: train.csv\ntest: test.csv\ntext: sentence\n'
                 'label: label\nid: id\n')
    cfg = job(tmp_path, 'demo', tasks=[str(spec)])
    with pytest.raises(ConfigError, match=r"test.csv: line 5: id 'ex-1-1' is also on line 3; the predictions file would "
                                          r"hold two rows for it\. Make the ids in column 'id' unique"):
        sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    assert not list(tmp_path.rglob('*.pth'))  # no run trained


def test_a_key_twice_in_a_task_file_is_refused(tmp_path):
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    spec = write(tmp_path / 'task.yaml', 'train: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\ntrain: other.csv\n')
    with pytest.raises(ConfigError, match=rf"^{spec}: key 'train' is given twice, on lines 1 and 5"):
        read_task_file(spec)


@pytest.mark.parametrize('data, line', [('train: train.csv\n# café\n'.encode('latin-1'), 2),
                                        ('train: train.csv\n'.encode('utf-16'), 1)], ids=['latin-1', 'utf-16'])
def test_a_task_yaml_not_in_utf8_is_named_with_its_line(tmp_path, data, line):
    spec = _spec(tmp_path, GOOD)
    spec.write_bytes(data)
    with pytest.raises(ConfigError, match=rf"task.yaml: line {line}: not UTF-8 text .*Save it as UTF-8"):
        read_task_file(spec)


@pytest.mark.parametrize('extra, match', [
    ('unordered_pair: maybe\n', r"task.yaml: line 5: key 'unordered_pair': expected true or false, got 'maybe'\.$"),
    ('target_scale: abc\n', r"task.yaml: line 5: key 'target_scale': expected a number, got 'abc'\.$"),
    ('target_scale: 0\n', r"task.yaml: line 5: key 'target_scale': 0\.0 is not a finite number > 0 \(regression: targets "
                          r"are learned divided by this"),
    ('target_scale: .nan\n', r"task.yaml: line 5: key 'target_scale': nan is not a finite number > 0"),
])
def test_a_flag_or_scale_of_the_wrong_kind_is_refused_naming_the_key(tmp_path, extra, match):
    "'maybe' was taken as true and a scale of 0 divided every target by zero; both ran on."
    with pytest.raises(ConfigError, match=match):
        read_task_file(_spec(tmp_path, GOOD, extra=extra))


def test_a_file_name_that_is_not_a_string_is_refused(tmp_path):
    spec = _spec(tmp_path, GOOD)
    spec.write_text('train: 5\ndev: dev.csv\ntext: sentence\nlabel: label\n')
    with pytest.raises(ConfigError, match=r"task.yaml: train: 5 is not a file name"):
        read_task_file(spec)


def test_one_metric_name_is_one_metric(tmp_path):
    "`metrics: f1` was read letter by letter: 'metric(s) f, 1 do not apply'."
    assert read_task_file(_spec(tmp_path, GOOD, extra='metrics: f1\n')).metrics == ('f1',)


def test_labels_that_are_one_number_written_two_ways_are_refused(tmp_path):
    "1 and 1.0 were two classes (three in all) and training went on."
    spec = _spec(tmp_path, 'sentence,label\ngood,1\nfine,1.0\nbad,0\n')
    with pytest.raises(ConfigError, match=r"train.csv: column 'label': the labels '1' and '1.0' are one number written two "
                                          r"ways"):
        file_task(read_task_file(spec))
    task, _ = file_task(read_task_file(_spec(tmp_path, 'sentence,label\ngood,1\nbad,0\nworse,10\n')))
    assert task.labels == ('0', '1', '10')


def test_a_parquet_file_that_is_not_parquet_is_named(tmp_path):
    spec = _spec(tmp_path, 'not parquet at all\n', ext='parquet')  # read by content: one line of text, no rows
    with pytest.raises(ConfigError, match=r"train.parquet: no examples below the header line"):
        file_task(read_task_file(spec))


def test_a_quote_left_open_in_a_csv_is_refused_naming_its_line(tmp_path):
    "Read leniently, the open quote swallowed every later line into one example and training went on."
    spec = _spec(tmp_path, GOOD + '"nice film,pos\nbad film,neg\nworse,neg\n')
    with pytest.raises(ConfigError, match=r'train.csv: line 4: not valid CSV \(unexpected end of data\)\. A quote opened '
                                          r'in a field must close it'):
        file_task(read_task_file(spec))


def test_a_quote_in_a_tsv_text_is_text(tmp_path):
    "TSV is read without quoting, as GLUE's files: a quote is part of the text (T45 of the sweep)."
    task, src = file_task(read_task_file(_spec(tmp_path, 'sentence\tlabel\nthe "film\tpos\nbad\tneg\n', ext='tsv')))
    assert src.load(task, 'dev').text_a == ['the "film', 'bad']


def test_a_compressed_data_file_is_named_with_how_to_decompress_it(tmp_path):
    "A gzip file given as a task's train file was 'line 1 is not UTF-8 text (byte 0x8b)': true, but not what to do."
    import gzip
    from electra.finetuning.tasks.qa.data import read_squad
    from electra.finetuning.tasks.tagging.data import read_conll
    spec = _spec(tmp_path, GOOD)
    (tmp_path / 'train.csv').write_bytes(gzip.compress(GOOD.encode()))
    with pytest.raises(ConfigError, match=rf"task.yaml: train: train.csv is gzip-compressed.*`gzip -dc "):
        file_task(read_task_file(spec))
    for path, read in ((tmp_path / 'ner.txt', read_conll), (tmp_path / 'squad.json', read_squad)):
        path.write_bytes(gzip.compress(b'{}'))
        with pytest.raises(ConfigError, match=rf"{path} is gzip-compressed"):
            read(path)
    squad = write(tmp_path / 'squad.yaml', 'kind: squad\ntrain: squad.json\ndev: squad.json\n')  # its version read first
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'squad.json'} is gzip-compressed"):
        make_task(read_task_file(squad))
    (tmp_path / 'train.csv.gz').write_bytes(gzip.compress(GOOD.encode()))
    (tmp_path / 'task.yaml').write_text('train: train.csv.gz\ndev: dev.csv\ntext: sentence\nlabel: label\n')
    with pytest.raises(ConfigError, match=r"train: train.csv.gz is gzip-compressed.*`gzip -dc .*train.csv.gz > "):
        read_task_file(tmp_path / 'task.yaml')


def test_a_task_given_twice_is_refused_naming_the_name_and_both_entries(tmp_path, monkeypatch):
    "Two task files of one `name` were refused as 'a task is listed twice.', naming neither the name nor the files."
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    first = write(tmp_path / 'first.yaml', 'name: mine\ntrain: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n')
    second = write(tmp_path / 'second.yaml', 'name: mine\ntrain: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n')
    with pytest.raises(ConfigError, match=rf"^tasks: the task files {first} and {second} both name the task 'mine'; "
                                          r"give each its own `name`\.$"):
        job(tmp_path, 'demo', tasks=[str(first), 'RTE', str(second)])
    with pytest.raises(ConfigError, match=r"^tasks: RTE is listed twice; list each task once\.$"):
        job(tmp_path, 'demo', tasks=['RTE', 'MRPC', 'RTE'])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=rf"^tasks: the task file {first} is listed twice; list each task once\.$"):
        job(tmp_path, 'demo', tasks=[str(first), first.name])  # (the one relative to the current folder: the same path)
    (tmp_path / 'link.yaml').symlink_to(first)
    with pytest.raises(ConfigError, match=rf"^tasks: the task file {first} is listed twice \({first}, "
                                          rf"{tmp_path / 'link.yaml'}\); list each task once\.$"):
        job(tmp_path, 'demo', tasks=[str(first), 'link.yaml'])
    with pytest.raises(ConfigError, match=r"^seeds: 5 is listed twice \(\[4, 5, 5\]\); seeds must differ\.$"):
        job(tmp_path, 'demo', tasks=['RTE'], runs=3, seeds=[4, 5, 5])


def test_task_names_that_differ_only_in_case_are_refused_naming_both(tmp_path):
    "A task file `sst-2` beside GLUE's SST-2 was accepted: their files (SST-2_0.pth, sst-2_0.pth) are one on macOS."
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    body = 'train: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n'
    with pytest.raises(ConfigError, match=rf"^{tmp_path / 'sst-2.yaml'}: name 'sst-2' \(none given, so the file's\) "
                                          r"differs only in case from GLUE's task SST-2: their files would be one on a "
                                          r"case-insensitive file system \(macOS, Windows\); choose another\.$"):
        job(tmp_path, 'demo', tasks=['SST-2', str(write(tmp_path / 'sst-2.yaml', body))])
    with pytest.raises(ConfigError, match=r"name 'MNLI-mm' is GLUE's test file MNLI-mm\.tsv \(of MNLI\): their files "
                                          r"would be one; choose another\.$"):
        read_task_file(write(tmp_path / 'm.yaml', f'name: MNLI-mm\n{body}'))
    lower, upper = write(tmp_path / 'a.yaml', f'name: mine\n{body}'), write(tmp_path / 'b.yaml', f'name: Mine\n{body}')
    with pytest.raises(ConfigError, match=rf"^tasks: the task names 'mine' \({lower}\) and 'Mine' \({upper}\) differ only "
                                          r"in case: their files \(<task>_<i>\.pth, <task>\.tsv\) would be one on a "
                                          r"case-insensitive file system \(macOS, Windows\); rename one\.$"):
        job(tmp_path, 'demo', tasks=[str(lower), str(upper)])


def _quoted_tsv(path: Path, rows: list[list[str]]) -> Path:
    "A TSV file as R's write.table(sep='\\t') and Python's csv.QUOTE_ALL write it: every field in double quotes."
    with open(path, 'w', newline='', encoding='utf-8') as f:
        csv.writer(f, delimiter='\t', quoting=csv.QUOTE_ALL).writerows(rows)
    return path


def test_a_tsv_with_every_field_quoted_is_refused_naming_the_quotes_and_the_fix(tmp_path):
    "Refused as 'line 2: no value in column 'label' (columns: \"id\", ...)': the value is there, in quotes."
    rows = [['id', 'sentence', 'label'], ['a1', 'good film', 'pos'], ['a2', 'bad film', 'neg']]
    for name in ('train.tsv', 'dev.tsv'): _quoted_tsv(tmp_path / name, rows)
    with open(tmp_path / 'train.tsv', newline='', encoding='utf-8') as f:  # the csv module unquotes it to the values
        assert list(csv.reader(f, delimiter='\t')) == rows
    spec = write(tmp_path / 'task.yaml', 'train: train.tsv\ndev: dev.tsv\ntext: sentence\nlabel: label\n')
    with pytest.raises(ConfigError, match=r'train\.tsv: line 1: every field is in double quotes \("id", "sentence", '
                                          r'"label"\); a TSV file is read without quoting, as the GLUE files are.*'
                                          r"quote=FALSE.*csv\.QUOTE_NONE.*\.csv"):
        file_task(read_task_file(spec))
    write(tmp_path / 'train.tsv', 'id\tsentence\tlabel\n"a1"\t"good film"\t"pos"\n"a2"\t"bad"\t"neg"\n')  # a bare header
    with pytest.raises(ConfigError, match=r'train\.tsv: line 2: every field is in double quotes \("a1", "good film", '
                                          r'"pos"\)'):
        file_task(read_task_file(spec))
    # a quoted text among unquoted fields is text, as before (the GLUE rule)
    write(tmp_path / 'train.tsv', 'id\tsentence\tlabel\na1\t"good film"\tpos\na2\tbad\tneg\n')
    write(tmp_path / 'dev.tsv', 'id\tsentence\tlabel\na1\t"good film"\tpos\na2\tbad\tneg\n')
    task, src = file_task(read_task_file(spec))
    assert src.load(task, 'dev').text_a == ['"good film"', 'bad']


def test_a_glue_tsv_with_every_field_quoted_is_refused_by_the_same_rule(tmp_path):
    from electra.finetuning.tasks.glue.sources import TsvSource
    from electra.finetuning.tasks.glue.tasks import TASKS
    (tmp_path / 'SST-2').mkdir()
    _quoted_tsv(tmp_path / 'SST-2' / 'dev.tsv', [['sentence', 'label'], ['a good film', '1'], ['a bad film', '0']])
    with pytest.raises(ConfigError, match=r'dev\.tsv: line 1: every field is in double quotes \("sentence", "label"\)'):
        TsvSource(tmp_path).load(TASKS['SST-2'], 'dev')


def test_labels_that_differ_only_in_case_are_said_before_the_runs(tmp_path):
    "'Positive' and 'positive' were two classes, without a word (4 classes, 2 of them in no dev row)."
    from electra.config.errors import RunWarning
    train = 'sentence,label\n' + ''.join(f'film {i},{lab}\n' for i, lab in enumerate(
        ['pos', 'pos', 'Pos', 'neg', 'neg', 'neg', 'Neg', 'pos']))
    spec = _spec(tmp_path, train, dev='sentence,label\ngood,pos\nbad,neg\n')
    # hand count: 'Pos' 1 row, 'pos' 3; 'Neg' 1, 'neg' 3
    with pytest.warns(RunWarning, match=r"train\.csv: column 'label': the labels 'Neg' \(1 row\) and 'neg' \(3 rows\), "
                                        r"'Pos' \(1 row\) and 'pos' \(3 rows\) differ only in case, so they are "
                                        r"separate classes; write each class one way"):
        task, _ = file_task(read_task_file(spec))
    assert task.labels == ('Neg', 'Pos', 'neg', 'pos')  # still read as the file says


def _pairs_csv(path: Path, b_of_row) -> Path:
    "Ten pair rows, labels alternating; row i's second text is `b_of_row(i)`."
    rows = [{'a': f'good film {i}', 'b': b_of_row(i), 'label': ('pos', 'neg')[i % 2]} for i in range(10)]
    return to_csv(path, rows)


@pytest.mark.parametrize('source', ['csv pair', 'jsonl single', 'glue tsv', 'saved hub copy'])
def test_training_rows_dropped_for_an_empty_text_are_said_with_their_file_count_and_key(tmp_path, tiny, source):
    """drop_empty left out the training rows of an empty or blank text of a task file without a word (40 of 400, the
    log just gave the smaller count), while the GLUE reader counts the lines it skips: every source says it now, in
    one warning naming the file, the count and the key that keeps them; drop_empty false keeps them, and says nothing."""
    import warnings
    from electra.config.errors import RunWarning
    from electra.finetuning.tasks.classification import ClassificationTask
    from electra.finetuning.tasks.glue.sources import SavedSource, TsvSource
    from electra.finetuning.tasks.glue.tasks import TASKS
    from electra.finetuning.tasks.glue.demo import write_demo_glue
    if source == 'csv pair':  # rows 0, 3, 6, 9: b empty or a space (hand count: 4 of 10)
        train = _pairs_csv(tmp_path / 'train.csv', lambda i: ('', ' ')[i % 2] if i % 3 == 0 else f'a plot {i}')
        write(tmp_path / 'dev.csv', 'a,b,label\ngood,film,pos\nbad,film,neg\n')
        task = make_task(read_task_file(write(tmp_path / 't.yaml', 'name: pe\ntrain: train.csv\ndev: dev.csv\n'
                                                                   'text: [a, b]\nlabel: label\n')))
        name, dropped, total = 'pe', 4, 10
    elif source == 'jsonl single':  # rows 2 and 5: '' and '\t \n' (2 of 8)
        texts = ['good', 'bad', '', 'fine', 'poor', '\t \n', 'great', 'awful']
        train = tmp_path / 'train.jsonl'
        train.write_text(''.join(json.dumps({'s': t, 'y': i % 2}) + '\n' for i, t in enumerate(texts)))
        task = make_task(read_task_file(write(tmp_path / 't.yaml', 'name: one\ntrain: train.jsonl\ndev: train.jsonl\n'
                                                                   'text: s\nlabel: y\n')))
        name, dropped, total = 'one', 2, 8
    elif source == 'glue tsv':  # the demo writer's QQP: rows 1 and 2 have an empty question (2 of 12)
        root = write_demo_glue(tmp_path / 'glue', sizes={'train': 12, 'dev': 4, 'test': 2})
        task, train = ClassificationTask(TASKS['QQP'], TsvSource(root)), root / 'QQP' / 'train.tsv'
        name, dropped, total = 'QQP', 2, 12
    else:  # RTE saved with datasets' to_parquet: one empty sentence2, one blank sentence1 (2 of 6)
        import datasets
        rows = {'sentence1': ['a b', ' ', 'c d', 'e f', 'g h', 'i j'], 'sentence2': ['b a', 'x', '', 'f e', 'h g', 'j i'],
                'label': [0, 1, 0, 1, 0, 1], 'idx': list(range(6))}
        (tmp_path / 'rte').mkdir()
        for split in ('train', 'validation'):
            datasets.Dataset.from_dict(rows).to_parquet(str(tmp_path / f'rte/{split}.parquet'))
        task, train = ClassificationTask(TASKS['RTE'], SavedSource(tmp_path)), tmp_path / 'rte' / 'train.parquet'
        name, dropped, total = 'RTE', 2, 6
    cfg = job(tmp_path, tmp_path, tasks=[name] if source in ('glue tsv', 'saved hub copy') else [str(tmp_path / 't.yaml')])
    with pytest.warns(RunWarning) as said:
        data = task.prepare(cfg.for_task(name), tiny[1], tmp_path / 'cache', False)
    assert len(data.train) == total - dropped
    assert [str(w.message) for w in said] == [
        f"{train}: {dropped} of its {total} training rows have an empty or blank text and are left out (drop_empty: "
        f"true, as the replication drops QQP's); --drop_empty false keeps them (task_overrides: {{{name}: "
        f"{{drop_empty: false}}}} for {name} alone)."]
    kept = job(tmp_path, tmp_path, tasks=cfg.tasks, drop_empty=False)
    with warnings.catch_warnings():
        warnings.simplefilter('error', RunWarning)
        assert len(task.prepare(kept.for_task(name), tiny[1], tmp_path / 'cache', False).train) == total


def test_max_train_samples_past_the_training_set_is_said_and_its_size_takes_every_row(tmp_path, tiny):
    """R22a-5: 10000 asked of 12 rows trained on all 12 without a word (the row records 10000, so another such value
    trains the same runs again). Said in one warning; the training set's own size and 0 say nothing."""
    import warnings
    from electra.config.errors import RunWarning
    from electra.finetuning.tasks.classification import ClassificationTask
    from electra.finetuning.tasks.glue.demo import write_demo_glue
    from electra.finetuning.tasks.glue.sources import TsvSource
    from electra.finetuning.tasks.glue.tasks import TASKS
    root = write_demo_glue(tmp_path / 'glue', sizes={'train': 12, 'dev': 4, 'test': 2})
    task = ClassificationTask(TASKS['RTE'], TsvSource(root))
    cfg = job(tmp_path, root, tasks=['RTE'], max_train_samples=10000)
    with pytest.warns(RunWarning) as said:
        assert len(task.prepare(cfg.for_task('RTE'), tiny[1], tmp_path / 'cache', False).train) == 12
    assert [str(w.message) for w in said] == [
        "RTE: max_train_samples 10000 is more than its 12 training examples: all 12 are used, as with max_train_samples "
        "0; its runs record 10000, so another value above 12 trains them again."]
    for every in (12, 0):
        with warnings.catch_warnings():
            warnings.simplefilter('error', RunWarning)
            data = task.prepare(job(tmp_path, root, tasks=['RTE'], max_train_samples=every).for_task('RTE'), tiny[1],
                                tmp_path / 'cache', False)
        assert len(data.train) == 12


@pytest.mark.parametrize('key, hint', [
    ('negrg', "negreg"), ('neg', 'negreg'), ('NegReg', 'negreg'), ('NEG', 'negreg'), ('rtee', 'RTE'), ('sts_b', 'STS-B')])
def test_a_task_overrides_key_not_of_the_job_names_its_task_files_beside_the_glue_tasks(tmp_path, key, hint):
    """A key for a task file misspelt, given as the file's stem or in another case was refused as an 'unknown GLUE
    task' with the GLUE names alone and no "Did you mean": the job's task files are valid keys, so the refusal lists
    them and suggests from them too (a stem or another case pointing to the file's name, naming the file)."""
    from electra.finetuning.tasks.glue.tasks import ALL_TASKS
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    spec = write(tmp_path / 'neg.yaml', 'name: negreg\ntrain: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n')
    other = write(tmp_path / 'rev.yaml', 'train: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n')
    where = f" (the task file {spec})" if hint == 'negreg' else ''
    with pytest.raises(ConfigError) as e:
        job(tmp_path, 'demo', tasks=[str(spec), 'RTE', str(other)], task_overrides={key: {'epochs': 2}})
    assert str(e.value) == (f"task_overrides: unknown task '{key}'. Did you mean '{hint}'{where}? This job's task files "
                            f"are negreg ({spec}), rev ({other}); GLUE tasks are {', '.join(ALL_TASKS)}.")
    assert job(tmp_path, 'demo', tasks=[str(spec)], task_overrides={'negreg': {'epochs': 2}}).for_task('negreg').epochs == 2
    with pytest.raises(ConfigError, match=rf"^task_overrides: unknown GLUE task 'negrg'\. Tasks are {', '.join(ALL_TASKS)}\.$"):
        job(tmp_path, 'demo', tasks=['RTE'], task_overrides={'negrg': {'epochs': 2}})  # no task file: GLUE's alone


def test_a_tasks_entry_that_is_no_glue_task_nor_a_file_says_task_files_go_by_path(tmp_path, monkeypatch):
    """`--tasks neg` beside neg.yaml (its stem) was 'unknown GLUE task' with the GLUE names alone, as if task files
    could not be given: the refusal says a task file is given by its path, and suggests the YAML file of that stem."""
    from electra.finetuning.tasks.glue.tasks import ALL_TASKS
    monkeypatch.chdir(tmp_path)
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    write(tmp_path / 'neg.yml', 'name: negreg\ntrain: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n')
    tail = f"Tasks are {', '.join(ALL_TASKS)}, or a task file (YAML) by its path."
    for entry, hint in (('neg', " Did you mean 'neg.yml' (a task file)?"), ('negreg', ''), ('rtee', " Did you mean 'RTE'?")):
        with pytest.raises(ConfigError) as e:
            job(tmp_path, 'demo', tasks=[entry])
        assert str(e.value) == f"tasks: unknown GLUE task '{entry}'.{hint} {tail}"
    assert job(tmp_path, 'demo', tasks=['neg.yml']).task_names == ['negreg']


@pytest.mark.parametrize('ext', ['csv', 'tsv', 'jsonl'])
def test_a_data_file_of_cr_line_ends_reads_as_its_lf_copy(tmp_path, ext):
    "A JSONL file of classic Mac line ends (CR alone) was one line, refused as 'not JSON'; CSV and TSV were read right."
    rows = sentiment(tmp_path, 8)
    text = {'csv': pd.DataFrame(rows).to_csv(index=False), 'tsv': pd.DataFrame(rows).to_csv(sep='\t', index=False),
            'jsonl': ''.join(json.dumps(r) + '\n' for r in rows)}[ext]
    seen = []
    for name, data in (('lf', text.encode()), ('cr', text.replace('\n', '\r').encode())):
        (tmp_path / f'{name}.{ext}').write_bytes(data)
        spec = write(tmp_path / f'{name}.yaml', f'train: {name}.{ext}\ndev: {name}.{ext}\ntext: sentence\nlabel: label\n'
                                                'id: id\ntest: ' + f'{name}.{ext}\n')
        task, src = file_task(read_task_file(spec))
        ex = src.load(task, 'train')
        seen.append((task.labels, ex.text_a, ex.label.tolist(), src.ids('test')))
    assert seen[0] == seen[1] and len(seen[0][1]) == 8 and seen[0][3] == [r['id'] for r in rows]


def test_a_training_set_drop_empty_leaves_empty_is_refused_naming_the_file_and_the_key(tmp_path, tiny):
    "Every training row of an empty text: the job trained 0 examples and ended in a TypeError traceback after its epoch."
    train = _pairs_csv(tmp_path / 'train.csv', lambda i: '')
    task = make_task(read_task_file(write(tmp_path / 't.yaml', 'name: pe\ntrain: train.csv\ndev: train.csv\n'
                                                               'text: [a, b]\nlabel: label\n')))
    cfg = job(tmp_path, tmp_path, tasks=[str(tmp_path / 't.yaml')])
    with pytest.raises(ConfigError) as e:
        task.prepare(cfg.for_task('pe'), tiny[1], tmp_path / 'cache', False)
    assert str(e.value) == (f"{train}: every one of its 10 training rows has an empty or blank text, so drop_empty "
                            "(true) leaves nothing to train on; fill in the texts, or keep the rows with --drop_empty "
                            "false (task_overrides: {pe: {drop_empty: false}} for pe alone).")


def test_task_names_and_labels_in_two_unicode_forms_are_one_name_as_on_macos(tmp_path):
    """'reviéw' typed on Linux (é one character, NFC) and copied from a macOS file name (e and a combining accent, NFD)
    are two names to Python and one file on macOS: two tasks would share their files, two labels would be two classes."""
    from electra.config.errors import RunWarning
    nfc, nfd = 'revi\u00e9w', 'revie\u0301w'
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    body = 'train: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n'
    one, two = write(tmp_path / 'a.yaml', f'name: {nfc}\n{body}'), write(tmp_path / 'b.yaml', f'name: {nfd}\n{body}')
    with pytest.raises(ConfigError, match=rf"^tasks: the task names '{nfc}' \({one}\) and '{nfd}' \({two}\) differ "
                                          r"only in Unicode form \(NFC, NFD: an accented letter as one character or "
                                          r"as a letter and a combining accent\): their files \(<task>_<i>\.pth, "
                                          r"<task>\.tsv\) would be one on macOS, whose file systems do not tell the "
                                          r"forms apart; rename one\.$"):
        job(tmp_path, 'demo', tasks=[str(one), str(two)])
    train = 'sentence,label\n' + ''.join(f'film {i},{lab}\n' for i, lab in enumerate([nfc, nfc, nfd, 'bad', 'bad']))
    spec = write(tmp_path / 'labels.yaml', 'train: l.csv\ndev: l.csv\ntext: sentence\nlabel: label\n')
    (tmp_path / 'l.csv').write_text(train, encoding='utf-8')
    with pytest.warns(RunWarning, match=rf"l\.csv: column 'label': the labels '{nfd}' \(1 row\) and '{nfc}' \(2 rows\) "
                                        r"differ only in Unicode form \(NFC, NFD: .*\), so they are separate classes"):
        task, _ = file_task(read_task_file(spec))
    assert len(task.labels) == 3  # still read as the file says


def test_a_presets_per_task_entry_for_a_task_the_job_does_not_run_names_the_preset_line_and_the_fix(tmp_path):
    """`--config demo_tagging --tasks mine.yaml`: the preset's `task_overrides: {ner: ...}` names a task this job does
    not have, refused as `unknown task 'ner'`, which the user never typed, naming neither the preset nor the fix
    (R21a-1). The line names the preset's file and line and the fix, which works."""
    from electra.config.cli import load_config
    from electra.config.finetune import FinetuneConfig
    to_csv(tmp_path / 't.csv', sentiment(tmp_path, 8))
    mine = write(tmp_path / 'mine.yaml', 'train: t.csv\ndev: t.csv\ntext: sentence\nlabel: label\n')
    preset = Path('configs/finetune') / 'demo_tagging.yaml'  # as load_config names it, from its preset_dir
    line = next(i for i, text in enumerate(preset.read_text().splitlines(), 1) if text.startswith('  ner:'))
    for typed in ([], ['--task_overrides', '{mine: {lr: 1e-4}}']):
        argv = ['--config', 'demo_tagging', '--tasks', str(mine), *typed]
        with pytest.raises(ConfigError) as e:
            load_config(FinetuneConfig, argv, preset_dir='configs/finetune')
        assert str(e.value) == (
            f"{preset}: line {line}: task_overrides: the preset's entry for the task 'ner', which this job does not "
            "run (its task files: mine). Give --task_overrides '{}' to drop the preset's entries (and a key for every "
            "task, such as --max_length 64, where one was meant), or a preset of your own.")
    cfg = load_config(FinetuneConfig, ['--config', 'demo_tagging', '--tasks', str(mine), '--task_overrides', '{}'],
                      preset_dir='configs/finetune')
    assert cfg.task_overrides == {} and cfg.task_names == ['mine']
