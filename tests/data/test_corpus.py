"""electra/data/corpus.py: corpus files and tables found and checked; files of other formats refused, naming them;
bad lines skipped and counted."""
import gzip
import json
import re
import tempfile
from pathlib import Path

import pytest
import hypothesis
from hypothesis import HealthCheck, example, given, strategies as st

from electra.config.errors import ConfigError
from electra.data.cache import build_corpus, build_summary, format_summary
from electra.data.corpus import BuildSettings, resolve_corpus
from electra.data.demo import demo_corpus_text
from electra.data.tokenizer import train_tokenizer
from tests.support.corpora import SHARED, build, needs_shared
from tests.support.data import build_pretraining_dataset, corpus_files


def test_corpus_files_expands_directories_and_demo(tmp_path):
    (tmp_path / 'c' / 'z').mkdir(parents=True)
    (tmp_path / 'c' / '.git').mkdir()
    for name in ['b.txt', 'a.txt', 'z/c.txt', '.hidden.txt', '.git/config']:
        (tmp_path / 'c' / name).write_text(f'One sentence of {name}.\n')  # not copies of each other
    single = tmp_path / 'single.txt'
    single.write_text('Hello there.\n\nSecond document.\n')
    files = corpus_files([str(tmp_path / 'c'), str(single), 'demo'], tmp_path / 'cache')
    c = tmp_path / 'c'
    assert files == [c / 'a.txt', c / 'b.txt', c / 'z' / 'c.txt', single,
                     tmp_path / 'cache' / 'demo' / 'demo_corpus.txt']
    assert files[-1].read_text() == demo_corpus_text()


@pytest.mark.parametrize('case', ['missing', 'empty_file', 'empty_dir', 'only_hidden', 'nul_bytes', 'latin1'])
def test_bad_corpus_paths_raise_config_error_naming_the_file(case, tmp_path):
    bad = tmp_path / case
    good = tmp_path / 'good.txt'
    good.write_text('A fine sentence.\n')
    if case == 'empty_file': bad.write_bytes(b'')
    if case in ('empty_dir', 'only_hidden'): bad.mkdir()
    if case == 'only_hidden': (bad / '.DS_Store').write_text('x')
    if case == 'nul_bytes': bad.write_bytes(b'abc\n\x00\x01\x02 binary')
    if case == 'latin1': bad.write_bytes('Café au lait.\n'.encode('latin-1'))
    with pytest.raises(ConfigError, match=str(bad)):
        corpus_files([str(good), str(bad)], tmp_path / 'cache')


def test_corpus_without_text_is_rejected(tmp_path):
    blank = tmp_path / 'blank.txt'
    blank.write_text('\n  \n\t\n')
    with pytest.raises(ConfigError, match='blank'):
        corpus_files([str(blank)], tmp_path)


def test_undecodable_line_past_the_checked_start_is_skipped_and_counted(words, tmp_path):
    tok, corpus_dir, _ = words
    bad = tmp_path / 'late.txt'
    # 120 KB: the bad bytes are past the 64 KiB checked up front; a mixed-encoding line is skipped, not fatal
    bad.write_bytes((b'w1 w2\n' * 10 + b'\n') * 2000 + b'w4 \xff\xfe\nw5 w6\n')
    files = corpus_files([str(corpus_dir), str(bad)], tmp_path)
    assert files[-1] == bad
    ds = build_pretraining_dataset(files, tok, 32, tmp_path / 'cache', seed=0, num_proc=2)
    info = build_summary(ds)
    c = info['counts']  # the 2000 documents are one text: the first is kept
    assert c['undecodable_lines'] == 1 and c['repeated_documents'] == 1999 and info['n_documents'] == 60 + 1 + 1
    assert not list((tmp_path / 'cache' / 'pretrain_data').glob('.*'))  # no temporary directory left


@needs_shared
def test_bad_input_is_skipped_and_counted(tok, tmp_path):
    d = tmp_path / 'raw'
    d.mkdir()
    docs = (SHARED / 'wikipedia_leads.txt').read_text(encoding='utf-8').split('\n\n')[:7]
    for i, doc in enumerate(docs[:4]): (d / f'doc{i}.txt').write_text(doc)  # one paragraph per line
    (d / 'empty.txt').write_text('  \n\n')
    (d / 'mixed.txt').write_bytes(docs[4].encode() + b'\nUne ligne en latin-1: caf\xe9 cr\xe8me.\n')
    (d / 'minified.txt').write_text(docs[5] + '\n' + 'x=1;' * 5000 + '\n')  # one 20,000-character "sentence"
    (d / 'huge_line.txt').write_text(docs[6] + '\n' + 'word ' * 300_000 + '\n')  # a 1.5 MB line (other text)
    ds = build(d, tok, tmp_path / 'cache')
    info = build_summary(ds)
    assert info['skipped_files'] == {'empty': 1}
    c = info['counts']
    assert c['undecodable_lines'] == 1 and c['long_sentences'] == 1 and c['long_lines'] == 1
    assert info['n_documents'] == 7 and len(ds) > 7
    summary = format_summary(info)
    for words in ['1 empty file', '1 lines not UTF-8', '1 lines over 1 MiB',
                  '1 sentences over max_sentence_chars']:
        assert words in summary, words


@needs_shared
def test_empty_documents_are_counted(tok, tmp_path):
    text = 'Short.\nTiny.\n\n' + (SHARED / 'wikipedia_leads.txt').read_text(encoding='utf-8').split('\n\n')[0] + '\n'
    (tmp_path / 'c.txt').write_text(text)
    info = build_summary(build(tmp_path / 'c.txt', tok, tmp_path / 'cache', BuildSettings(min_line_chars=80)))
    assert info['counts']['empty_documents'] == 1 and info['counts']['short_lines'] == 2 and info['n_documents'] == 1


def test_nothing_usable_left_is_a_clear_error(tmp_path):
    from electra.data.tokenizer import load_tokenizer
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'x']) + '\n')
    tokenizer = load_tokenizer(str(vocab))
    d = tmp_path / 'bad'
    d.mkdir()
    (d / 'a.txt').write_text(' \n\n')
    (d / 'b.txt').write_text('')
    with pytest.raises(ConfigError, match=r'bad has no usable text file \(2 empty\)'):
        resolve_corpus([str(d)], tmp_path)
    (tmp_path / 'long.txt').write_text(('y' * 200 + '\n') * 3)
    # three documents of one text: two dropped as repeats, the sentence of the one kept over max_sentence_chars
    with pytest.raises(ConfigError, match=r'no pretraining examples .*skipped: 2 repeated documents, 1 sentences over '
                                          r'max_sentence_chars'):
        build(tmp_path / 'long.txt', tokenizer, tmp_path / 'cache', BuildSettings(max_sentence_chars=100))


@needs_shared
def test_table_corpus_rows_are_documents(tok, tmp_path):
    docs = (SHARED / 'wikipedia_leads.txt').read_text(encoding='utf-8').split('\n\n')[:40]
    path = tmp_path / 'wiki.jsonl'
    path.write_text(''.join(json.dumps({'id': i, 'text': t}) + '\n' for i, t in enumerate(docs + [''])))
    settings = BuildSettings(min_line_chars=80, remove_empty_parens=True)
    [source] = resolve_corpus([str(path)], tmp_path, settings)
    assert source.kind == 'table' and source.text_column == 'text'
    info = build_summary(build_corpus(source, tok, settings, tmp_path / 'cache', 0, 2, progress=False))
    assert info['n_documents'] + info['counts']['empty_documents'] == 41 and info['counts']['empty_documents'] >= 1
    # a tokenizer can be trained on a table too
    assert len(train_tokenizer([], 400, True, tmp_path / 'tok', [source])) <= 400


def test_hub_offline_says_so_and_how_to_use_local_files(tmp_path, monkeypatch):
    import datasets
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    monkeypatch.setattr(datasets.config, 'HF_DATASETS_CACHE', tmp_path / 'hf')  # not a copy this machine may hold
    with pytest.raises(ConfigError, match=r"'hub:openwebtext': the Hugging Face hub cannot be reached.*local files"):
        resolve_corpus(['hub:openwebtext'], tmp_path)


@pytest.mark.parametrize('offline', [True, False])
def test_a_hub_name_that_a_local_folder_shadows_is_refused(tmp_path, monkeypatch, offline):
    """`datasets.load_dataset(name)` reads a folder or file of that name in the current folder before the hub:
    `hub:openwebtext` beside a folder ./openwebtext trained on the folder, and the card said openwebtext."""
    import datasets
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'openwebtext').mkdir()
    (tmp_path / 'openwebtext' / 'part.jsonl').write_text(json.dumps({'text': 'mine ' * 30}) + '\n')
    monkeypatch.setattr(datasets, 'load_dataset', lambda *a, **k: pytest.fail('read the local folder'))
    if offline: monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    else: monkeypatch.setattr('electra.data.corpus.hub_unreachable', lambda: None)
    folder = tmp_path / 'openwebtext'
    with pytest.raises(ConfigError, match=rf"^corpus 'hub:openwebtext': a hub dataset, but {re.escape(str(folder))} "
                                          r"is a folder of that name here, which `datasets` reads instead of the "
                                          r"hub's\. Give it as \./openwebtext to read the folder, or start the job "
                                          r"from another folder to read the hub dataset\.$"):
        resolve_corpus(['hub:openwebtext'], tmp_path / 'cache')


@pytest.mark.parametrize('name, pack, fmt', [('c.txt.gz', 'gzip', 'gzip'), ('c.txt.bz2', 'bz2', 'bzip2'),
                                             ('c.txt.xz', 'lzma', 'xz'), ('c.txt', 'gzip', 'gzip')])
def test_a_compressed_corpus_is_refused_naming_the_file_and_how_to_decompress_it(name, pack, fmt, tmp_path):
    """The reader splits files by byte ranges for its parallel build, so it reads plain text only. A compressed file
    (by its first bytes, whatever its name) was named 'binary, or UTF-16/32' alone; in a directory it was skipped as
    binary, its text silently left out of the corpus."""
    import importlib
    data = importlib.import_module(pack).compress(b'One sentence.\nAnother one.\n\n' * 50)
    alone = tmp_path / name
    alone.write_bytes(data)
    with pytest.raises(ConfigError, match=rf"corpus file {alone} is {fmt}-compressed.*`{fmt.replace('ip2', '')}"
                                          rf"\w* -dc {alone} > "):
        resolve_corpus([str(alone)], tmp_path / 'cache')
    folder = tmp_path / 'dir'
    folder.mkdir()
    (folder / 'a.txt').write_text('A fine sentence.\n')
    (folder / name).write_bytes(data)
    with pytest.raises(ConfigError, match=rf"corpus directory {folder}: {folder / name} is {fmt}-compressed"):
        resolve_corpus([str(folder)], tmp_path / 'cache')


def _zip_of_text(path):
    import zipfile
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z: z.writestr('a.txt', 'One sentence.\n' * 20)


def _torch_checkpoint(path):
    import torch
    torch.save({'weight': torch.zeros(3)}, path)


JSON_LINES = ''.join(json.dumps({'id': i, 'text': f'Sentence number {i}.'}) + '\n' for i in range(30))
# name, content, what the one line says, whether the format is one the user may declare instead
OTHER_FORMATS = [
    ('rows.jsonl', JSON_LINES, 'holds JSON lines', True),
    ('notes.txt', JSON_LINES, 'holds JSON lines', True),
    ('table.csv', 'id,text,label\n1,A first row of text,0\n2,A second row,1\n3,"Quoted, with a comma",0\n', 'CSV rows',
     True),
    ('table.txt', 'id\ttext\tlabel\n1\tA first row.\t0\n2\tA second row.\t1\n', 'tab-separated rows', True),
    ('c.txt.gz', lambda p: p.write_bytes(__import__('gzip').compress(b'One sentence.\n' * 50)), 'is gzip-compressed',
     False),
    ('model.pth', _torch_checkpoint, 'is a PyTorch checkpoint', False),
    ('image.png', b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR' + bytes(range(256)) * 4, 'is a PNG image', False),
    ('texts.zip', _zip_of_text, 'is zip-compressed', False),
    ('utf16.txt', 'One sentence.\nAnother one, café.\n'.encode('utf-16'), 'is UTF-16 text', False),
    ('utf16be.txt', 'One sentence.\nAnother one, café.\n'.encode('utf-16-be'), 'is UTF-16 text', False),
    ('nul.txt', b'One sentence.\nTwo\x00 words.\nThree.\n', 'holds a NUL byte on line 2', False),
    ('latin1.txt', 'Un café très crème.\nÀ la française.\n'.encode('latin-1'), 'is not UTF-8 text (line 1', False),
]


@pytest.mark.parametrize('name, content, says, declarable', OTHER_FORMATS, ids=[c[0] for c in OTHER_FORMATS])
def test_a_file_of_another_format_among_text_files_is_refused_in_one_line_naming_it(name, content, says, declarable,
                                                                                       tmp_path):
    """Before, a JSON-lines, CSV or TSV file among text files was read as text (its keys and quotes trained on); a
    PyTorch checkpoint, an image, UTF-16 text or a file with a NUL byte was skipped, its text (if any) left out with a
    count in the build record, a latin-1 file too. Each is refused now, before any work, in one line naming the file;
    where the format is one the user may declare, the line says how, and declaring it reads the file as declared."""
    folder = tmp_path / 'corpus'
    (folder / 'sub').mkdir(parents=True)
    (folder / 'a.txt').write_text('A fine sentence.\nAnother fine one.\n\nA second document.\n')
    bad = folder / 'sub' / name
    if callable(content): content(bad)
    elif isinstance(content, str): bad.write_text(content)
    else: bad.write_bytes(content)
    with pytest.raises(ConfigError) as e:
        resolve_corpus([str(folder)], tmp_path / 'cache')
    said = str(e.value)
    assert str(bad) in said and says in said and '\n' not in said, said
    assert ('corpus_format' in said) == declarable, said
    if declarable:  # declared as text lines, it is read as text lines
        [source] = resolve_corpus([str(folder)], tmp_path / 'cache', BuildSettings(corpus_format='lines'))
        assert source.files == [folder / 'a.txt', bad]
    # named by itself: a table by its suffix (.jsonl, .csv), else refused the same way
    if bad.suffix in ('.jsonl', '.csv'):
        [source] = resolve_corpus([str(bad)], tmp_path / 'cache')
        first = 'Sentence number 0.' if bad.suffix == '.jsonl' else 'A first row of text'
        assert source.kind == 'table' and source.dataset[source.text_column][0] == first
    else:
        with pytest.raises(ConfigError, match=re.escape(str(bad)) + '.*' + re.escape(says)):
            resolve_corpus([str(bad)], tmp_path / 'cache')


# ---------------------------------------------------------------- any folder: a corpus or one clear error

WORDS = st.text(st.sampled_from('ab cdé\t,.;"{}[]:\n'), max_size=80)  # text, separators, quotes and braces
UNICODE = st.text(st.characters(codec='utf-8', exclude_categories=['Cs']), max_size=120)
CONTENT = st.one_of(
    st.binary(max_size=300), st.just(b''), UNICODE.map(str.encode), WORDS.map(str.encode),
    st.lists(WORDS, max_size=6).map(lambda docs: '\n\n'.join(docs).encode()),
    st.lists(st.fixed_dictionaries({'text': WORDS}), min_size=1, max_size=4).map(
        lambda rows: ''.join(json.dumps(r) + '\n' for r in rows).encode()),
    st.lists(st.tuples(WORDS, WORDS), min_size=1, max_size=4).map(
        lambda rows: 'id,text\n'.join(f'{a!r},{b!r}\n' for a, b in rows).encode()),
    WORDS.map(lambda t: gzip.compress(t.encode())), WORDS.map(lambda t: t.encode('utf-16')))
NAMES = st.sampled_from(['a.txt', 'b.txt', 'c.jsonl', 'd.csv', 'e', 'f.parquet', 'sub/g.txt', 'sub/deep/h.txt',
                         '.hidden.txt', 'i.gz', 'j.tsv', 'k.json'])


@given(files=st.dictionaries(NAMES, CONTENT, max_size=4), link=st.sampled_from(['', 'file', 'gone', 'loop', 'up']),
       alone=st.booleans(),
       fmt=st.sampled_from(['auto', 'lines', 'documents', 'paragraphs']), dedup=st.booleans())
@example(files={'a.txt': b'\xff\xfe'}, link='', alone=False, fmt='auto', dedup=True)  # a BOM alone: UTF-16, no text
@hypothesis.settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_folder_of_files_ends_in_examples_or_one_config_error(files, link, alone, fmt, dedup, tmp_path, words):
    """Generated folders (random bytes, random unicode, empty files, JSON lines, CSV, compressed and UTF-16 files,
    nested folders, links to a file of it, to nothing, to itself, to above it) given as the corpus, or one file of it alone: the reader and the build end
    in examples, or in a ConfigError of one line naming what to fix; never another exception."""
    tok = words[0]
    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        folder = Path(tmp) / 'corpus'
        folder.mkdir()
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        targets = {'file': folder / next(iter(files), 'a.txt'), 'gone': folder / 'moved.txt', 'loop': folder,
                   'up': folder.parent}
        if link: (folder / 'link').symlink_to(targets[link])  # to a file of it, to nothing, to itself, to above it
        entry = folder / next(iter(files)) if alone and files else folder
        read = BuildSettings(max_length=16, corpus_format=fmt, deduplicate=dedup)
        try:
            for source in resolve_corpus([str(entry)], Path(tmp) / 'cache', read):
                if source.kind == 'files' and entry == folder:  # every file written is read, or said to be left out
                    written = sum(not name.startswith('.') for name in files) + (link == 'file')
                    assert len(source.files) + sum(source.duplicates.values()) + sum(source.skipped.values()) == written
                ds = build_corpus(source, tok, read, Path(tmp) / 'cache', 0, 1, progress=False)
                assert len(ds) == build_summary(ds)['n_examples'] > 0
        except ConfigError as e:
            assert str(e) and '\n' not in str(e), str(e)


def test_linked_folders_are_read_once_and_a_dangling_link_is_refused(tmp_path):
    """A folder linked into the corpus (`ln -s /data/books corpus/books`) was left out unsaid (its files never listed);
    it is read now, a link back up the tree reads nothing twice, and a link to a file that is gone (text meant for the
    corpus) is refused naming it, where it was skipped unsaid."""
    outside = tmp_path / 'books'
    outside.mkdir()
    (outside / 'b.txt').write_text('A sentence of a book.\n')
    folder = tmp_path / 'corpus'
    folder.mkdir()
    (folder / 'a.txt').write_text('A sentence of the corpus.\n')
    (folder / 'books').symlink_to(outside)
    (folder / 'books_again').symlink_to(outside)
    (folder / 'loop').symlink_to(folder)
    [source] = resolve_corpus([str(folder)], tmp_path / 'cache')
    assert source.files == [folder / 'a.txt', folder / 'books' / 'b.txt'] and source.duplicates == {'links': 1}
    (folder / 'gone.txt').symlink_to(tmp_path / 'moved.txt')
    with pytest.raises(ConfigError, match=re.escape(f"corpus directory {folder}: {folder / 'gone.txt'} is a link to "
                                                    f"{tmp_path / 'moved.txt'}, which does not exist")):
        resolve_corpus([str(folder)], tmp_path / 'cache')


def test_an_entry_whose_every_file_an_earlier_entry_reads_is_refused(tmp_path):
    "`--corpus a.txt,a.txt` (or a copy, or a folder and a file of it): trained on twice before; now refused, naming it."
    a = tmp_path / 'a.txt'
    a.write_text('One sentence.\n')
    (tmp_path / 'copy.txt').write_bytes(a.read_bytes())
    for second in (a, tmp_path / 'copy.txt'):
        with pytest.raises(ConfigError, match=re.escape(f"corpus '{second}': every file of it is read already")):
            resolve_corpus([str(tmp_path), str(second)], tmp_path / 'cache')
    [source] = resolve_corpus([str(a)], tmp_path / 'cache')
    assert source.files == [a]
    assert [len(s.files) for s in resolve_corpus([str(a), str(a)], tmp_path / 'cache',
                                                 BuildSettings(deduplicate=False))] == [1, 1]


@pytest.mark.parametrize('bad, shown', [(12345, '12345'), (['Alpha beta.', 'Delta.'], '["Alpha beta.", "Delta."]'),
                                        ({'body': 'x'}, '{"body": "x"}'), (True, 'true')])
def test_a_table_text_column_with_a_value_that_is_not_text_is_refused_naming_its_row(tmp_path, bad, shown):
    """One number, list or object among a JSONL column's strings: `datasets` reads the column as JSON, and every
    document was trained on wrapped in literal quotes, "" and blank rows as documents of two quote tokens, the
    number and the list's JSON as text, nothing said. Refused now, naming the row, its value and the fix."""
    rows = [{'text': 'Gamma rho earth.'}, {'text': None}, {'text': ''}, {'text': bad}, {'text': 'Fine.'}]
    path = tmp_path / 'mixed.jsonl'
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    with pytest.raises(ConfigError) as e:
        resolve_corpus([str(path)], tmp_path / 'cache')
    assert str(e.value).startswith(f"corpus '{path}': column 'text' is not all text: row 4 holds {shown}")
    assert 'one string' in str(e.value)
    # a column of numbers alone (a parquet or CSV of ids chosen as text) is refused the same way, at its first row
    (tmp_path / 'ids').mkdir()
    (tmp_path / 'ids' / 'n.jsonl').write_text(''.join(json.dumps({'text': i}) + '\n' for i in (None, 7, 8)))
    with pytest.raises(ConfigError, match=r"column 'text' is not all text: row 2 holds 7 "):
        resolve_corpus([str(tmp_path / 'ids')], tmp_path / 'cache')


def test_rows_whose_text_is_under_another_key_are_said_not_counted_as_empty(tmp_path):
    """Rows of a JSONL whose text is under another key (a field renamed partway): they were counted as empty
    documents, naming the wrong cause and no fix. A warning now says how many rows have no text and which column
    holds theirs; rows of no text at all stay counted as empty."""
    from electra.config.errors import RunWarning
    rows = [{'text': f'Sentence {i} of the first export.'} for i in range(6)]
    rows += [{'content': f'Sentence {i} of the second export.'} for i in range(4)] + [{'text': None}]
    path = tmp_path / 'half.jsonl'
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    with pytest.warns(RunWarning) as seen:
        resolve_corpus([str(path)], tmp_path / 'cache')
    [message] = [str(w.message) for w in seen if 'renamed partway' in str(w.message)]
    assert message == (f"corpus '{path}': 5 of its 11 rows have no 'text' (null, or no such key), and 4 of them hold "
                       "text in 'content' instead: a column renamed partway? They are skipped as empty documents; "
                       "give every row its text under one key (or set `text_column`).")
    with_text = tmp_path / 'fine.jsonl'  # a null text beside a title is a row of no text: no warning
    with_text.write_text(''.join(json.dumps(r) + '\n' for r in [{'title': 'A', 'text': 'Body.'},
                                                                   {'title': 'B', 'text': None}]))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('error', RunWarning)
        resolve_corpus([str(with_text)], tmp_path / 'cache')
