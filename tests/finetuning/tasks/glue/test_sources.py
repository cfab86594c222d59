"""electra/finetuning/tasks/glue/sources.py: the GLUE readers; and the filters of the training sets (tasks/sources.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from electra.config.errors import ConfigError, RunWarning
from electra.finetuning.tasks.glue.sources import HubSource, SavedSource, TsvSource, open_source
from electra.finetuning.tasks.glue.tasks import TASKS, GlueDataError
from electra.finetuning.tasks.sources import double_unordered, drop_empty

REAL_STSB = Path(__file__).resolve().parents[4].parent / 'shared' / 'data' / 'glue' / 'STS-B'


def write(path, lines, bom=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(('\ufeff' if bom else '') + '\n'.join('\t'.join(map(str, r)) for r in lines) + '\n', encoding='utf-8')


@pytest.fixture
def glue_dir(tmp_path):
    "A few rows of each task in the layout of the GLUE download script (as classification_tasks.py reads it)."
    d = tmp_path / 'glue'
    write(d / 'CoLA/train.tsv', [['gj04', 1, '', 'The sailors rode the breeze clear of the rocks.'],
                                 ['gj04', 0, '*', 'The more we study verbs, the crazier they get get.']])
    write(d / 'CoLA/test.tsv', [['index', 'sentence'], [0, 'Bill whistled past the house.'], [1, 'A "quoted" word.']])
    write(d / 'SST-2/dev.tsv', [['sentence', 'label'], ["it 's a charming and often affecting journey . ", 1],
                                ['unflinchingly bleak and desperate ', 0]])
    write(d / 'MRPC/train.tsv', [['Quality', '#1 ID', '#2 ID', '#1 String', '#2 String'],
                                 [1, 702876, 702977, 'Amrozi accused his brother .', 'Referring to him , Amrozi accused .'],
                                 [0, 2108705, 2108831, 'Yucaipa owned Dominick .', 'Yucaipa bought Dominick .']], bom=True)
    write(d / 'STS-B/dev.tsv', [['index', 'genre', 'filename', 'year', 'old_index', 'source1', 'source2', 'sentence1',
                                 'sentence2', 'score'],
                                [0, 'main-captions', 'MSRvid', '2012test', '0000', 'none', 'none', 'A man with a hard hat.',
                                 'A man wearing a hard hat.', '5.000'],
                                [1, 'main-captions', 'MSRvid', '2012test', '0002', 'none', 'none', 'A young child.',
                                 'A child is riding.', '4.750']])
    write(d / 'QQP/train.tsv', [['id', 'qid1', 'qid2', 'question1', 'question2', 'is_duplicate'],
                                [133273, 213221, 213222, 'How is the life of a math student?', 'Which level of prepration?', 0],
                                [201841, 303951, 174364, 'How can I start?', '', 0],
                                [402555, 536040, 536041, '', 'What is it?', 1],
                                [360472, 364011, 490273, 'What is the best way?', 'How can I do it best?', 1]])
    write(d / 'QQP/test.tsv', [['id', 'question1', 'question2'], [0, 'Why do rockets look white?', 'Why are rockets white?']])
    mnli = ['index', 'promptID', 'pairID', 'genre', 'sentence1_binary_parse', 'sentence2_binary_parse',
            'sentence1_parse', 'sentence2_parse', 'sentence1', 'sentence2']
    write(d / 'MNLI/dev_mismatched.tsv', [mnli + ['label1', 'label2', 'label3', 'label4', 'label5', 'gold_label'],
                                          [0, 75290, '75290c', 'letters', '( p )', '( h )', '(ROOT p)', '(ROOT h)',
                                           'Your contribution helped.', 'Your contributions were of no help.',
                                           'contradiction', 'contradiction', 'contradiction', 'contradiction',
                                           'contradiction', 'contradiction'],
                                          [1, 133794, '133794n', 'verbatim', '( p )', '( h )', '(ROOT p)', '(ROOT h)',
                                           'The answer has nothing to do with their cause.', 'Their cause is irrelevant.',
                                           'neutral', 'entailment', 'neutral', 'neutral', 'neutral', 'neutral']])
    write(d / 'MNLI/test_matched.tsv', [mnli, [7, 31493, '31493', 'travel', '( p )', '( h )', '(ROOT p)', '(ROOT h)',
                                               'Hierbas is a sweet liqueur.', 'Hierbas is a drink.']])
    write(d / 'QNLI/train.tsv', [['index', 'question', 'sentence', 'label'],
                                 [0, 'When did it start?', 'It started in 1899.', 'entailment'],
                                 [1, 'Who wrote it?', 'Nobody knows when.', 'not_entailment']])
    write(d / 'diagnostic/diagnostic.tsv', [['index', 'sentence1', 'sentence2'], [0, 'The cat sat.', 'A cat sat.']])
    return d


def test_reads_every_layout(glue_dir):
    src = open_source(str(glue_dir))
    assert isinstance(src, TsvSource)
    cola = src.load(TASKS['CoLA'], 'train')  # no header: source, label, original label, sentence
    assert cola.text_a == ['The sailors rode the breeze clear of the rocks.', 'The more we study verbs, the crazier they get get.']
    assert cola.text_b is None and cola.label.tolist() == [1, 0] and cola.idx.tolist() == [0, 1]
    test = src.load(TASKS['CoLA'], 'test')
    assert test.text_a[1] == 'A "quoted" word.' and test.label.tolist() == [-1, -1]  # quotes are text, not quoting
    sst = src.load(TASKS['SST-2'], 'dev')
    assert sst.label.tolist() == [1, 0] and sst.text_a[1] == 'unflinchingly bleak and desperate '
    mrpc = src.load(TASKS['MRPC'], 'train')  # the file starts with a byte-order mark before 'Quality'
    assert mrpc.label.tolist() == [1, 0] and mrpc.text_b[0] == 'Referring to him , Amrozi accused .'
    sts = src.load(TASKS['STS-B'], 'dev')
    assert sts.label.dtype == np.float32 and sts.label.tolist() == [5.0, 4.75] and sts.text_a[1] == 'A young child.'
    mm = src.load(TASKS['MNLI'], 'dev_mismatched')  # gold_label, not label1
    assert [TASKS['MNLI'].labels[i] for i in mm.label] == ['contradiction', 'neutral']
    tm = src.load(TASKS['MNLI'], 'test_matched')
    assert tm.idx.tolist() == [7] and tm.text_b == ['Hierbas is a drink.']
    qqp = src.load(TASKS['QQP'], 'test')  # test index column is 'id'
    assert qqp.idx.tolist() == [0] and qqp.text_a == ['Why do rockets look white?']
    qnli = src.load(TASKS['QNLI'], 'train')
    assert qnli.label.tolist() == [0, 1]  # HF ids: 0 entailment, 1 not_entailment
    ax = src.load(TASKS['AX'], 'test')
    assert ax.text_a == ['The cat sat.'] and ax.text_b == ['A cat sat.']


def test_qqp_filter_drops_empty_questions(glue_dir):
    qqp = TsvSource(glue_dir).load(TASKS['QQP'], 'train')
    kept = drop_empty(qqp)
    assert len(qqp) == 4 and kept.idx.tolist() == [0, 3] and kept.label.tolist() == [0, 1]
    assert kept.text_a == ['How is the life of a math student?', 'What is the best way?']


def test_double_unordered_appends_swapped_copy(glue_dir):
    mrpc = TsvSource(glue_dir).load(TASKS['MRPC'], 'train')
    d = double_unordered(mrpc)
    assert len(d) == 4
    assert d.text_a == mrpc.text_a + mrpc.text_b and d.text_b == mrpc.text_b + mrpc.text_a
    assert d.label.tolist() == [1, 0, 1, 0] and d.idx.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError): double_unordered(TsvSource(glue_dir).load(TASKS['CoLA'], 'train'))


@pytest.mark.parametrize('task, split, edit, words', [
    ('SST-2', 'dev', lambda d: (d / 'SST-2/dev.tsv').unlink(), ['SST-2/dev.tsv', 'not found', '--data hub']),
    ('SST-2', 'dev', lambda d: write(d / 'SST-2/dev.tsv', [['text', 'label'], ['good', 1]]),
     ["no column 'sentence'", 'SST-2/dev.tsv']),
    ('SST-2', 'dev', lambda d: write(d / 'SST-2/dev.tsv', [['sentence', 'label'], ['good', 'positive']]),
     ['SST-2/dev.tsv line 2', "unknown label 'positive'", 'expected one of 0, 1']),
    ('CoLA', 'train', lambda d: write(d / 'CoLA/train.tsv', [['source', 'label', 'x', 'sentence'], ['a', 1, '', 'ok']]),
     ['CoLA/train.tsv line 1', "unknown label 'label'", 'no header line']),
    ('CoLA', 'train', lambda d: write(d / 'CoLA/train.tsv', [['gj04', 1, 'one column short']]),
     ['CoLA/train.tsv line 1 has 3 fields, expected 4 (CoLA train files have no header line)']),
    ('STS-B', 'dev', lambda d: write(d / 'STS-B/dev.tsv', [['sentence1', 'sentence2', 'score'], ['a', 'b', '7.5']]),
     ['STS-B/dev.tsv line 2', "'7.5'", '[0, 5]']),
])
def test_bad_files_name_the_file_and_the_fix(glue_dir, task, split, edit, words):
    edit(glue_dir)
    with pytest.raises(GlueDataError) as e: TsvSource(glue_dir).load(TASKS[task], split)
    assert isinstance(e.value, ConfigError)
    for w in words: assert w in str(e.value)


def test_malformed_training_lines_are_skipped_with_a_warning(glue_dir):
    "As the official reader skips the lines it cannot read (QQP's train.tsv has a few); a wide one too: its columns shift."
    with open(glue_dir / 'QQP/train.tsv', 'a', encoding='utf-8') as f:
        f.write('99\t1\t2\tonly one question\n7\t8\t9\tWhy\tnot?\tWhy so?\t1\n')
    with pytest.warns(RunWarning, match=r"QQP/train.tsv: skipped 2 line\(s\) whose fields do not match the header's 6 "
                                         r"\(first: line 6 has 4 fields\), as the official reader skips lines it cannot read"):
        qqp = TsvSource(glue_dir).load(TASKS['QQP'], 'train')
    assert len(qqp) == 4 and qqp.text_a[-1] == 'What is the best way?' and qqp.idx.tolist() == [0, 1, 2, 3]


MNLI_ROW = [0, 75290, '75290c', 'letters', '( p )', '( h )', '(ROOT p)', '(ROOT h)']


@pytest.mark.parametrize('task, split, edit, message', [
    ('MNLI', 'dev_mismatched',  # a tab inside sentence1: sentence2 became its second half, the label annotator 5's
     lambda d: _append(d / 'MNLI/dev_mismatched.tsv', MNLI_ROW + ['Your', 'contribution.', 'No help.'] + ['neutral'] * 6),
     'MNLI/dev_mismatched.tsv line 4 has 17 fields, the header has 16. A field holding a tab shifts the columns'),
    ('QQP', 'test', lambda d: _append(d / 'QQP/test.tsv', [1, 'Why?']), 'QQP/test.tsv line 3 has 2 fields, the header has 3'),
    ('CoLA', 'train', lambda d: _append(d / 'CoLA/train.tsv', ['gj04', 1, '', 'A tab\there.']),
     'CoLA/train.tsv line 3 has 5 fields, expected 4 (CoLA train files have no header line)'),
])
def test_a_row_with_a_field_more_or_less_is_refused_with_its_line(glue_dir, task, split, edit, message):
    "Columns are read by position: a wide row shifted its texts and label silently."
    edit(glue_dir)
    with pytest.raises(GlueDataError) as e: TsvSource(glue_dir).load(TASKS[task], split)
    assert message in str(e.value) and str(glue_dir) in str(e.value)


def _append(path, row):
    with open(path, 'a', encoding='utf-8') as f: f.write('\t'.join(map(str, row)) + '\n')


def test_a_test_index_twice_is_refused(glue_dir, tmp_path):
    "The submission file held two predictions for one index."
    _append(glue_dir / 'MNLI/test_matched.tsv', [7] + MNLI_ROW[1:] + ['Hierbas is sweet.', 'It is a drink.'])
    with pytest.raises(GlueDataError, match=r"MNLI/test_matched.tsv line 3: index 7 is also on line 2; the submission "
                                            r"file would hold two predictions for it"):
        TsvSource(glue_dir).load(TASKS['MNLI'], 'test_matched')
    import datasets
    rows = {'sentence1': ['a', 'b'], 'sentence2': ['c', 'd'], 'label': [-1, -1], 'idx': [3, 3]}
    datasets.DatasetDict({'test': datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / 'saved' / 'rte'))
    with pytest.raises(GlueDataError, match=r"rte/test row 1: index 3 is also on row 0"):
        open_source(str(tmp_path / 'saved')).load(TASKS['RTE'], 'test')


def test_long_fields_blank_lines_and_bad_bytes(glue_dir):
    long = 'word ' * 40000  # 200,000 characters: over csv's default field limit (131072)
    write(glue_dir / 'SST-2/dev.tsv', [['sentence', 'label'], [long, 1], [], ['bleak', 0]])
    dev = TsvSource(glue_dir).load(TASKS['SST-2'], 'dev')
    assert dev.text_a == [long, 'bleak'] and dev.label.tolist() == [1, 0]  # the blank line holds no example
    (glue_dir / 'SST-2/dev.tsv').write_bytes(b'sentence\tlabel\ngood\t1\ncaf\xe9\t1\n')
    with pytest.raises(ConfigError, match=r"SST-2/dev.tsv: line 3 is not UTF-8 text \(byte 0xe9\)"):
        TsvSource(glue_dir).load(TASKS['SST-2'], 'dev')


@pytest.mark.skipif(not (REAL_STSB / 'train.tsv').is_file(), reason='../shared/data/glue/STS-B is absent')
def test_the_real_sts_b_loads_every_split_whole(recwarn):
    src = TsvSource(REAL_STSB.parent)
    sizes = {s: len(src.load(TASKS['STS-B'], s)) for s in ('train', 'dev', 'test')}
    assert sizes == {'train': 5749, 'dev': 1500, 'test': 1379}
    assert not [w for w in recwarn if issubclass(w.category, RunWarning)]


def test_open_source_rejects_unknown_dirs(tmp_path):
    with pytest.raises(GlueDataError, match='not a directory'): open_source(str(tmp_path / 'nope'))
    with pytest.raises(GlueDataError, match='holds no GLUE data'): open_source(str(tmp_path))
    assert isinstance(open_source('hub'), HubSource)


def test_open_source_of_demo_names_the_function_that_writes_the_demo_tasks(tmp_path):
    """'demo', the finetune presets' `data`, given to open_source from Python: refused with a list that offered 'demo'
    itself. It names resolve_data, public, which writes the sample tasks and opens them (as finetune.py does)."""
    import electra
    with pytest.raises(GlueDataError, match=r"^data: 'demo' names the project's sample tasks, written to a folder "
                                            r"first: electra\.resolve_data\('demo', cfg\.cache_dir\) writes them "
                                            r"there and opens them, as finetune\.py does; open_source reads 'hub' or a "
                                            r"folder\.$"):
        open_source('demo')
    source = electra.resolve_data('demo', tmp_path / 'cache')
    assert isinstance(source, TsvSource) and len(source.load(TASKS['RTE'], 'train')) > 0


def test_hub_offline_names_the_local_options(monkeypatch):
    import datasets

    def offline(*a, **k): raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (OfflineModeIsEnabled)")
    monkeypatch.setattr(datasets, 'load_dataset', offline)
    with pytest.raises(GlueDataError) as e: HubSource().load(TASKS['CoLA'], 'train')
    for w in ('nyu-mll/glue/cola', 'download-script layout', 'save_to_disk', 'parquet', '--data demo'): assert w in str(e.value)


def test_a_hub_dataset_name_that_a_local_folder_shadows_is_refused(tmp_path, monkeypatch):
    "`datasets` would read a folder ./nyu-mll/glue instead of the hub's GLUE."
    import datasets
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'nyu-mll' / 'glue').mkdir(parents=True)
    monkeypatch.setattr(datasets, 'load_dataset', lambda *a, **k: pytest.fail('read the local folder'))
    with pytest.raises(GlueDataError, match=r"^data: nyu-mll/glue is a hub dataset, but .*nyu-mll/glue is a folder "
                                            r"of that name here, which `datasets` reads instead of the hub's\."):
        HubSource().load(TASKS['CoLA'], 'train')


def test_hub_source_maps_splits_and_columns(monkeypatch):
    import datasets
    calls = []

    def fake(name, config):
        calls.append((name, config))
        rows = {'premise': ['p1', 'p2'], 'hypothesis': ['h1', 'h2'], 'label': [2, 0], 'idx': [0, 1]}
        return datasets.DatasetDict({'validation_matched': datasets.Dataset.from_dict(rows),
                                     'test_mismatched': datasets.Dataset.from_dict({**rows, 'label': [-1, -1]})})
    monkeypatch.setattr(datasets, 'load_dataset', fake)
    hub = HubSource()
    dev = hub.load(TASKS['MNLI'], 'dev_matched')
    assert dev.text_a == ['p1', 'p2'] and dev.text_b == ['h1', 'h2'] and dev.label.tolist() == [2, 0]
    assert hub.load(TASKS['MNLI'], 'test_mismatched').label.tolist() == [-1, -1]
    assert calls == [('nyu-mll/glue', 'mnli')]  # loaded once per task


def test_saved_hub_copies(tmp_path):
    import datasets
    rows = {'sentence1': ['a b', 'c d'], 'sentence2': ['b a', 'd c'], 'label': [0, 1], 'idx': [0, 1]}
    test = {**rows, 'label': [-1, -1], 'idx': [10, 11]}
    datasets.DatasetDict({'train': datasets.Dataset.from_dict(rows), 'validation': datasets.Dataset.from_dict(rows),
                          'test': datasets.Dataset.from_dict(test)}).save_to_disk(str(tmp_path / 'rte'))
    (tmp_path / 'stsb').mkdir()
    datasets.Dataset.from_dict({**rows, 'label': [4.5, 0.25]}).to_parquet(str(tmp_path / 'stsb/validation-00000-of-00001.parquet'))
    src = open_source(str(tmp_path))
    assert isinstance(src, SavedSource)
    rte = src.load(TASKS['RTE'], 'train')
    assert rte.text_a == ['a b', 'c d'] and rte.label.tolist() == [0, 1]
    assert src.load(TASKS['RTE'], 'test').idx.tolist() == [10, 11]
    assert src.load(TASKS['STS-B'], 'dev').label.tolist() == [4.5, 0.25]
    with pytest.raises(GlueDataError, match="no 'train' split"): src.load(TASKS['STS-B'], 'train')
    datasets.Dataset.from_dict({**rows, 'label': [0, 7]}).to_parquet(str(tmp_path / 'stsb/train.parquet'))
    with pytest.raises(GlueDataError, match='out of range'): src.load(TASKS['STS-B'], 'train')


def test_a_missing_or_nan_glue_label_is_refused_naming_its_line_or_row(glue_dir, tmp_path):
    "A null label of a saved copy stopped the job with a numpy TypeError; 'nan' and '' are no labels in any source."
    import pyarrow as pa
    import pyarrow.parquet as pq
    write(glue_dir / 'STS-B/dev.tsv', [['sentence1', 'sentence2', 'score'], ['a', 'b', '1.5'], ['c', 'd', 'nan']])
    with pytest.raises(GlueDataError, match=r"STS-B/dev.tsv line 3: label 'nan' is not a similarity score in \[0, 5\]"):
        TsvSource(glue_dir).load(TASKS['STS-B'], 'dev')
    write(glue_dir / 'SST-2/dev.tsv', [['sentence', 'label'], ['good', '1'], ['bad', '']])
    with pytest.raises(GlueDataError, match=r"SST-2/dev.tsv line 3: unknown label '' for SST-2"):
        TsvSource(glue_dir).load(TASKS['SST-2'], 'dev')
    for task, config, label, match in (
            ('RTE', 'rte', None, r"rte/train-00000-of-00001.parquet row 1: no label \(null\)"),
            ('STS-B', 'stsb', float('nan'), r"stsb/train-00000-of-00001.parquet row 1: label nan is out of range")):
        (tmp_path / config).mkdir()
        rows = [{'sentence1': 'a', 'sentence2': 'b', 'label': v, 'idx': i} for i, v in enumerate((0, label))]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / config / 'train-00000-of-00001.parquet')
        with pytest.raises(GlueDataError, match=match): open_source(str(tmp_path)).load(TASKS[task], 'train')
