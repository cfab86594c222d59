"Pretraining data: demo corpus, corpus checks, the official example builder, the Arrow cache, batches."
import dataclasses
import json
import logging
import os
import random
import re
from pathlib import Path

import datasets
import pytest
import torch

from electra.config.base import ConfigError
from electra.data.batches import PretrainingBatches, pretraining_dataloader
from electra.data.cache import build_corpus, build_summary
from electra.data.corpus import BuildSettings, CorpusSource, corpus_text_files, resolve_corpus
from electra.data.demo import demo_corpus_text, write_demo_corpus
from electra.data.examples import ExampleBuilder
from electra.data.tokenizer import load_tokenizer, train_tokenizer

WIKI = Path(__file__).resolve().parents[1].parent / 'shared' / 'data' / 'corpus' / 'wikipedia_leads.txt'
CLS, SEP = 101, 102  # BERT's ids, to catch code that assumes a trained vocabulary's [CLS]=2, [SEP]=3


# ---------------------------------------------------------------- helpers

def corpus_files(paths: list[str], cache_dir: Path) -> list[Path]:
    "The text files that `resolve_corpus` finds for `paths`."
    return corpus_text_files(resolve_corpus(paths, cache_dir))


def build_pretraining_dataset(files: list[Path], tokenizer, max_length: int, cache_dir: Path, seed: int,
                              num_proc: int = 1, settings: BuildSettings | None = None,
                              progress: bool = False) -> datasets.Dataset:
    """`build_corpus` for a list of text files read as one corpus, with `settings` (default: `corpus_format`
    and `sentence_split` 'auto', so files in the official layout read as before)."""
    files = [Path(f) for f in files]
    source = CorpusSource(', '.join(map(str, files)), 'files', files)
    settings = dataclasses.replace(settings or BuildSettings(), max_length=max_length)
    return build_corpus(source, tokenizer, settings, cache_dir, seed, num_proc, progress)


def read_documents(path: Path, max_chars: int = 10**9) -> list[list[str]]:
    "Documents (lists of stripped non-blank lines) of a corpus file, up to about `max_chars` characters."
    docs, doc, chars = [], [], 0
    with open(path, encoding='utf-8') as f:
        for line in f:
            line = line.strip()
            chars += len(line)
            if line: doc.append(line)
            elif doc:
                docs.append(doc)
                doc = []
                if chars > max_chars: break
    return docs + [doc] if doc else docs


def build_by_document(docs: list[list[list[int]]], max_length: int, seed: int, stride: int):
    """Run the builder over tokenized documents, shifting document d's ids by (d + 1) * stride so every
    example says which documents its tokens came from."""
    builder = ExampleBuilder(max_length, CLS, SEP, random.Random(seed))
    examples = []
    for d, doc in enumerate(docs):
        for sentence in doc:
            examples.append(builder.add_sentence([t + (d + 1) * stride for t in sentence]))
        examples.append(builder.end_document())
    return [e for e in examples if e]


def check_layout(ids, types, max_length, cls=CLS, sep=SEP):
    "[CLS] A [SEP] (B [SEP]), types 0 for [CLS] A [SEP] and 1 for B [SEP], no special token inside A or B."
    assert len(ids) == len(types) <= max_length
    assert ids[0] == cls and ids[-1] == sep
    n0 = types.count(0)
    assert types == [0] * n0 + [1] * (len(types) - n0)
    assert ids[n0 - 1] == sep and n0 >= 2
    inner = ids[1:n0 - 1] + ids[n0:-1]
    assert cls not in inner and sep not in inner
    assert len(types) - n0 != 1  # B is never an empty segment followed by its [SEP]


class ScriptedRNG:
    "Returns prescribed draws and fails on any draw that was not prescribed."

    def __init__(self, randoms, randints):
        self.randoms, self.randints, self.randint_args = list(randoms), list(randints), []

    def random(self):
        return self.randoms.pop(0)

    def randint(self, a, b):
        self.randint_args.append((a, b))
        return self.randints.pop(0)


def word_vocab_corpus(root: Path, n_docs: int = 60, words_per_doc: int = 10, seed: int = 0):
    """A BERT-style vocab.txt of words w0, w1, ... and a corpus (two files, one in a subdirectory) where
    document d only uses words w{d*10} ... w{d*10+9}, so an example's ids tell which document they came from."""
    rng = random.Random(seed)
    lines = ['[PAD]'] + [f'[unused{i}]' for i in range(99)] + ['[UNK]', '[CLS]', '[SEP]', '[MASK]']
    vocab = root / 'vocab.txt'
    vocab.write_text('\n'.join(lines + [f'w{i}' for i in range(n_docs * words_per_doc)]) + '\n')
    docs = ['\n'.join(' '.join(f'w{d * words_per_doc + rng.randrange(words_per_doc)}'
                               for _ in range(rng.randint(2, 30))) for _ in range(rng.randint(1, 12)))
            for d in range(n_docs)]
    docs[-1] = f'w{(n_docs - 1) * words_per_doc} w{(n_docs - 1) * words_per_doc + 1}'  # short, at the end of a file
    (root / 'corpus' / 'sub').mkdir(parents=True)
    half = n_docs // 2
    # a file with extra blank lines and CRLF line ends must read the same as a clean one
    (root / 'corpus' / 'a.txt').write_text('\n\n\n'.join(docs[:half]).replace('\n', '\r\n') + '\n\n')
    (root / 'corpus' / 'sub' / 'b.txt').write_text('\n\n'.join(docs[half:]))  # no blank line at the end
    return vocab, root / 'corpus', len(lines)


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope='module')
def demo(tmp_path_factory):
    "A small demo corpus and a tokenizer trained on it."
    root = tmp_path_factory.mktemp('demo')
    corpus = write_demo_corpus(root / 'demo.txt', n_docs=300)
    return corpus, train_tokenizer([corpus], 500, True, root / 'tokenizer')


@pytest.fixture(scope='module')
def words(tmp_path_factory):
    root = tmp_path_factory.mktemp('words')
    vocab, corpus_dir, first_word_id = word_vocab_corpus(root)
    return load_tokenizer(str(vocab)), corpus_dir, first_word_id


# ---------------------------------------------------------------- demo corpus

def test_demo_corpus_is_deterministic_and_written_once(tmp_path):
    path = write_demo_corpus(tmp_path / 'd' / 'demo.txt', n_docs=200, seed=3)
    text = path.read_text()
    docs = text.rstrip('\n').split('\n\n')
    assert len(docs) == 200 and all(3 <= len(d.split('\n')) <= 12 for d in docs)
    assert all(line and line[0].isupper() and line[-1] in '.?' for d in docs for line in d.split('\n'))
    mtime = path.stat().st_mtime_ns
    write_demo_corpus(path, n_docs=200, seed=3)
    assert path.stat().st_mtime_ns == mtime  # unchanged content: not rewritten (keeps the dataset cache valid)
    write_demo_corpus(path, n_docs=200, seed=4)
    assert path.read_text() != text and demo_corpus_text(200, 3) == text
    assert [p.name for p in path.parent.iterdir()] == ['demo.txt']  # no temporary file left behind
    full = demo_corpus_text()
    assert 200_000 < len(full.encode()) < 1_000_000
    # structure a small MLM can learn, e.g. number agreement and a/an
    there = re.findall(r'^There (is|are) (\w+) ', full, flags=re.M)
    assert len(there) > 500 and all((verb == 'is') == (n == 'one') for verb, n in there)
    assert len(re.findall(r'\ban [aeiou]', full)) > 50 and not re.search(r'\ba [aeiou]', full)


# ---------------------------------------------------------------- corpus files

def test_corpus_files_expands_directories_and_demo(tmp_path):
    (tmp_path / 'c' / 'z').mkdir(parents=True)
    (tmp_path / 'c' / '.git').mkdir()
    for name in ['b.txt', 'a.txt', 'z/c.txt', '.hidden.txt', '.git/config']:
        (tmp_path / 'c' / name).write_text('One sentence.\n')
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
    assert info['counts']['undecodable_lines'] == 1 and info['n_documents'] == 60 + 2000 + 1
    assert not list((tmp_path / 'cache' / 'pretrain_data').glob('.*'))  # no temporary directory left


def test_corpus_without_tokens_gives_no_examples_error(words, tmp_path):
    invisible = tmp_path / 'zero_width.txt'
    invisible.write_text('\u200b\n\n\u200b\u200b\n')  # text, but nothing the tokenizer keeps
    with pytest.raises(ConfigError, match='no pretraining examples'):
        build_pretraining_dataset(corpus_files([str(invisible)], tmp_path), words[0], 32, tmp_path, seed=0)


# ---------------------------------------------------------------- example builder

def test_builder_hand_worked_case():
    lengths = {1: 3, 2: 4, 3: 5, 4: 6, 5: 2, 6: 8, 7: 2, 8: 4}
    s = {n: list(range(10 * n, 10 * n + k)) for n, k in lengths.items()}  # sentence n: ids 10n, 10n + 1, ...
    rng = ScriptedRNG(randoms=[0.5, 0.3, 0.01,  # example 1: two segments; coin puts s2 in A; short next target
                               0.05, 0.9,  # example 2: the 10% single segment; next target max_length
                               0.5, 0.6, 0.5],  # example 3: coin sends s8 to B
                      randints=[9])
    b = ExampleBuilder(16, CLS, SEP, rng)
    # example 1: target 16, A target (16 - 3) // 2 = 6. s1 -> A (A empty); s2: 3 + 4 >= 6 but B empty and 3 < 6:
    # coin 0.3 < 0.5 -> A; s3: A (7) is at target -> B, no coin; s4 -> B. B trimmed to 16 - 7 - 3 = 6 tokens.
    assert [b.add_sentence(s[n]) for n in (1, 2, 3)] == [None] * 3
    ids, types = b.add_sentence(s[4])
    assert ids == [CLS] + s[1] + s[2] + [SEP] + (s[3] + s[4])[:6] + [SEP]
    assert types == [0] * 9 + [1] * 7
    assert b.target_length == 9 and rng.randint_args == [(5, 16)]
    # example 2: target 9 reached by 2 + 8 tokens; single segment, so both sentences go to A
    assert b.add_sentence(s[5]) is None
    assert b.add_sentence(s[6]) == ([CLS] + s[5] + s[6] + [SEP], [0] * 12)
    assert b.target_length == 16
    # example 3: the document ends early; A target 6: s7 -> A; s8: 2 + 4 is not < 6, so coin: 0.6 -> B
    assert b.add_sentence(s[7]) is None and b.add_sentence(s[8]) is None
    assert b.end_document() == ([CLS] + s[7] + [SEP] + s[8] + [SEP], [0] * 4 + [1] * 5)
    assert b.end_document() is None  # a second blank line: nothing pending, no draw
    assert rng.randoms == [] and rng.randints == []  # exactly the official draws, in order


def test_builder_single_segment_rate_is_10_percent():
    # 31-token sentences, max_length 64: with A target (64 - 3) // 2 = 30 the first sentence fills A and the
    # rest goes to B with no coin flip, so a full-length example is single-segment only by the 10% draw
    b = ExampleBuilder(64, CLS, SEP, random.Random(0))
    examples = [e for e in (b.add_sentence(list(range(200, 231))) for _ in range(60_000)) if e]
    full = [types for ids, types in examples if len(ids) == 64]
    single = sum(1 not in types for types in full) / len(full)
    assert len(full) > 15_000 and 0.085 < single < 0.115


def test_builder_short_target_rate_is_5_percent():
    # one-token sentences: an example's content is exactly its target length (when that leaves room for
    # [CLS] and two [SEP]), so the targets can be checked against the examples they produce
    b = ExampleBuilder(64, CLS, SEP, random.Random(1))
    targets, short = [b.target_length], 0
    for i in range(400_000):
        example = b.add_sentence([1000 + i % 7])
        if example:
            content = len(example[0]) - 2 - (1 in example[1])
            assert content == targets[-1] or targets[-1] > 61
            targets.append(b.target_length)
            short += targets[-1] < 64
    assert all(5 <= t <= 64 for t in targets)
    assert 0.038 < short / (len(targets) - 1) < 0.06  # 0.05 * 59/60, as randint(5, 64) may also give 64
    assert len(set(targets)) > 50  # the short targets are spread over [5, 64]


def _corpus_examples(path: Path, tok, max_chars: int, max_length: int):
    docs = [[tok(line, add_special_tokens=False)['input_ids'] for line in doc]
            for doc in read_documents(path, max_chars)]
    return docs, build_by_document(docs, max_length, seed=0, stride=len(tok))


@pytest.mark.parametrize('source', ['demo', 'wikipedia'])
def test_builder_properties_on_real_corpus(source, demo, tmp_path):
    if source == 'wikipedia':
        if not WIKI.is_file(): pytest.skip(f'{WIKI} not present')
        slice_ = tmp_path / 'wiki.txt'
        slice_.write_text('\n\n'.join('\n'.join(d) for d in read_documents(WIKI, 400_000)) + '\n')
        path, tok = slice_, train_tokenizer([slice_], 2000, True, tmp_path / 'tok')
    else:
        path, tok = demo
    max_length = 64
    docs, examples = _corpus_examples(path, tok, 400_000, max_length)
    assert len(examples) > 300
    seen = []
    for ids, types in examples:
        check_layout(ids, types, max_length)
        doc_of = {t // len(tok) - 1 for t in ids if t not in (CLS, SEP)}
        assert len(doc_of) == 1  # never crosses a document
        seen.append(doc_of.pop())
    assert seen == sorted(seen) and set(seen) == {d for d, doc in enumerate(docs) if any(doc)}
    assert sum(len(ids) == max_length for ids, _ in examples) > len(examples) / 4
    if source == 'demo':  # short sentences: most examples have two segments (wikipedia lines are paragraphs)
        assert 0.5 < sum(1 in types for _, types in examples) / len(examples) < 0.95


# ---------------------------------------------------------------- the cached dataset

def test_build_never_crosses_documents_or_files(words, tmp_path):
    tok, corpus_dir, first_word_id = words
    files = corpus_files([str(corpus_dir)], tmp_path)
    ds = build_pretraining_dataset(files, tok, 32, tmp_path / 'cache', seed=5)
    assert ds.features['input_ids'].feature.dtype == 'int32'
    assert ds.features['token_type_ids'].feature.dtype in ('int8', 'int32')
    seen = []
    for row in ds:
        check_layout(row['input_ids'], row['token_type_ids'], 32, tok.cls_token_id, tok.sep_token_id)
        doc_of = {(t - first_word_id) // 10 for t in row['input_ids'][1:-1] if t != tok.sep_token_id}
        assert len(doc_of) == 1
        seen.append(doc_of.pop())
    assert seen == sorted(seen) and set(seen) == set(range(60))  # every document, in file order
    info = json.loads(next((tmp_path / 'cache' / 'pretrain_data').glob('*/electra_build.json')).read_text())
    assert info['n_examples'] == len(ds) and info['n_documents'] == 60 and info['max_length'] == 32
    # more processes (one file each) give the same dataset
    again = build_pretraining_dataset(files, tok, 32, tmp_path / 'cache2', seed=5, num_proc=2)
    assert again[:] == ds[:]
    # the seed changes the segmentation
    assert build_pretraining_dataset(files, tok, 32, tmp_path / 'cache', seed=6)[:] != ds[:]


def test_cache_reuse_and_rebuild(words, tmp_path, caplog):
    tok, corpus_dir, _ = words
    files = corpus_files([str(corpus_dir)], tmp_path)
    cache = tmp_path / 'cache'

    def build(tokenizer=tok, max_length=32):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger='electra.data.cache'):
            ds = build_pretraining_dataset(files, tokenizer, max_length, cache, seed=0)
        return ds, 'reusing' in caplog.text

    first, reused = build()
    assert not reused
    [marker] = list((cache / 'pretrain_data').glob('*/electra_build.json'))
    mtime = marker.stat().st_mtime_ns
    second, reused = build()
    assert reused and marker.stat().st_mtime_ns == mtime and second[:] == first[:]
    assert not list((cache / 'pretrain_data').glob('.*'))  # no temporary directories left
    # a partial directory (marker missing) is rebuilt
    marker.unlink()
    (marker.parent / 'junk.arrow').write_text('half-written')
    third, reused = build()
    assert not reused and marker.is_file() and not (marker.parent / 'junk.arrow').exists() and third[:] == first[:]
    # other max_length, other tokenizer, touched corpus file: each a new build in its own directory
    assert not build(max_length=48)[1]
    cased = load_tokenizer(str(corpus_dir.parent / 'vocab.txt'), lowercase=False)
    assert not build(tokenizer=cased)[1]
    os.utime(files[0], ns=(files[0].stat().st_atime_ns, files[0].stat().st_mtime_ns + 10**9))
    assert not build()[1]
    assert len(list((cache / 'pretrain_data').glob('*/electra_build.json'))) == 4
    assert build()[1]


# ---------------------------------------------------------------- batches

@pytest.fixture(scope='module')
def small_dataset():
    rng = random.Random(0)
    rows = [[rng.randrange(1000, 2000) for _ in range(rng.randint(3, 16))] for _ in range(37)]
    types = [[0] * (len(r) // 2) + [1] * (len(r) - len(r) // 2) for r in rows]
    return datasets.Dataset.from_dict({'input_ids': rows, 'token_type_ids': types})


def test_batches_shapes_padding_and_content(small_dataset):
    loader = pretraining_dataloader(small_dataset, batch_size=8, max_length=20, pad_token_id=7, seed=3, total_steps=6)
    batches = list(loader)
    assert len(loader) == len(batches) == 6
    rows = loader.dataset.rows
    for step, (ids, types) in enumerate(batches):
        assert ids.shape == types.shape == (8, 20) and ids.dtype == types.dtype == torch.int64
        for j, r in enumerate(rows(step)):
            want = small_dataset[int(r)]
            n = len(want['input_ids'])
            assert ids[j, :n].tolist() == want['input_ids'] and (ids[j, n:] == 7).all()
            assert types[j, :n].tolist() == want['token_type_ids'] and (types[j, n:] == 0).all()
    # the stream is pass after pass over the data, each pass a different permutation
    order = [int(r) for step in range(6) for r in rows(step)]
    assert sorted(order[:37]) == list(range(37)) and order[:37] != list(range(37))
    assert order[37:] != order[:11]


def test_resume_gives_the_tail_of_an_uninterrupted_run(small_dataset):
    full = list(pretraining_dataloader(small_dataset, 8, 16, 0, seed=11, total_steps=12))
    tail = pretraining_dataloader(small_dataset, 8, 16, 0, seed=11, total_steps=12, start_step=7)
    assert len(tail) == 5
    for (a, b), (c, d) in zip(full[7:], tail, strict=True):
        assert torch.equal(a, c) and torch.equal(b, d)
    other_seed = next(iter(pretraining_dataloader(small_dataset, 8, 16, 0, seed=12, total_steps=1)))
    assert not torch.equal(other_seed[0], full[0][0])
    assert len(pretraining_dataloader(small_dataset, 8, 16, 0, seed=11, total_steps=12, start_step=12)) == 0


def test_dataset_smaller_than_a_batch_and_worker_processes(small_dataset):
    tiny = small_dataset.select(range(3))
    ids, _ = next(iter(pretraining_dataloader(tiny, 8, 16, 0, seed=0, total_steps=1)))
    assert ids.shape == (8, 16) and {tuple(r[:3].tolist()) for r in ids} <= {tuple(r[:3]) for r in tiny['input_ids']}
    serial = list(pretraining_dataloader(small_dataset, 4, 16, 0, seed=2, total_steps=4))
    parallel = list(pretraining_dataloader(small_dataset, 4, 16, 0, seed=2, total_steps=4, num_workers=2))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(serial, parallel, strict=True))


def test_batches_reject_bad_settings(small_dataset):
    with pytest.raises(ValueError, match='start_step'):
        PretrainingBatches(small_dataset, 8, 16, 0, seed=0, total_steps=3, start_step=4)
    with pytest.raises(ValueError, match='max_length'):
        PretrainingBatches(small_dataset, 8, 8, 0, seed=0, total_steps=3)[0]
    with pytest.raises(ValueError, match='empty'):
        PretrainingBatches(small_dataset.select([]), 8, 16, 0, seed=0, total_steps=3)


def test_built_dataset_feeds_the_loader(demo, tmp_path):
    corpus, tok = demo
    ds = build_pretraining_dataset([corpus], tok, 64, tmp_path, seed=0)
    ids, types = next(iter(pretraining_dataloader(ds, 16, 64, tok.pad_token_id, seed=0, total_steps=1)))
    assert ids.shape == (16, 64) and (ids[:, 0] == tok.cls_token_id).all()
    lengths = (ids != tok.pad_token_id).sum(1)
    assert (ids[torch.arange(16), lengths - 1] == tok.sep_token_id).all()
    assert (types == 1).any() and not ((types == 1) & (ids == tok.pad_token_id)).any()


WIKI_LEADS = Path(__file__).resolve().parents[2] / 'shared' / 'data' / 'corpus' / 'wikipedia_leads.txt'


@pytest.mark.skipif(not WIKI_LEADS.exists(), reason='../shared/data is absent')
def test_single_segment_draw_on_real_text(monkeypatch):
    """The official 10% single-segment draw, watched on real text: the first draw of every example is peeked (and put
    back, so the builder is unchanged). Every example whose draw is under 0.1 has no segment B, and about 10% do."""
    original = ExampleBuilder._create_example
    fired = []

    def watched(self):
        state = self.rng.getstate()
        draw = self.rng.random()
        self.rng.setstate(state)
        example = original(self)
        fired.append((draw < 0.1, sum(example[1]) == 0))       # (draw fired, no segment B)
        return example
    monkeypatch.setattr(ExampleBuilder, '_create_example', watched)
    vocab: dict[str, int] = {}
    builder = ExampleBuilder(128, 101, 102, random.Random(0))
    for line in WIKI_LEADS.read_text(encoding='utf-8').splitlines():
        if not line.strip():
            builder.end_document()
            continue
        builder.add_sentence([vocab.setdefault(w, 1000 + len(vocab)) for w in line.split()])
    n = len(fired)
    share = sum(f for f, _ in fired) / n
    assert n > 5000 and abs(share - 0.1) < 4 * (0.09 / n) ** 0.5
    assert all(single for f, single in fired if f)
    # without the draw, single-segment examples are rarer: a builder that skipped it would fail the next line
    assert sum(single for _, single in fired) / n >= share


def _running(pid: int) -> bool:
    "Whether process `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."
    try: return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, IndexError): return False


@pytest.mark.skipif(not Path('/proc/self/stat').exists(), reason='reads processes from /proc (Linux)')
def test_a_killed_build_takes_its_workers_along_and_its_files_are_swept(demo, tmp_path):
    """`kill -9` of a two-process build: its workers stop within 3 s (they used to build on for the rest of their
    shards), and the temporary directory it leaves is removed by the next build in that cache."""
    import signal
    import subprocess
    import sys
    import time
    corpus, tok = demo
    text = corpus.read_text(encoding='utf-8')
    big = tmp_path / 'big.txt'
    big.write_text(text * max(1, (24 << 20) // len(text.encode())), encoding='utf-8')  # ~24 MB: ~15 s for 2 processes
    tok.save_pretrained(tmp_path / 'tok')
    cache = tmp_path / 'cache'
    script = ('from pathlib import Path; from electra.data.corpus import BuildSettings, resolve_corpus; '
              'from electra.data.cache import build_corpus; from electra.data.tokenizer import load_tokenizer; '
              f's = BuildSettings(max_length=64); src = resolve_corpus([{str(big)!r}], Path({str(cache)!r}), s)[0]; '
              f'build_corpus(src, load_tokenizer({str(tmp_path / "tok")!r}), s, Path({str(cache)!r}), 0, 2, progress=False)')
    proc = subprocess.Popen([sys.executable, '-c', script], cwd=Path(__file__).resolve().parents[1])
    workers, deadline = [], time.time() + 120
    while len(workers) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        workers = [int(p.name) for p in Path('/proc').iterdir() if p.name.isdigit() and _running(int(p.name))
                   and (p / 'stat').read_text().rsplit(')', 1)[1].split()[1] == str(proc.pid)]
    time.sleep(1.0)  # the workers are building shards now
    assert len(workers) == 2 and proc.poll() is None, 'the build ended before it could be killed'
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    end = time.time() + 3
    while any(map(_running, workers)) and time.time() < end: time.sleep(0.05)
    assert not any(map(_running, workers))
    left = list((cache / 'pretrain_data').glob('.*.tmp'))
    assert len(left) == 1 and left[0].name.split('.')[2] == str(proc.pid)
    build_pretraining_dataset([corpus], tok, 64, cache, seed=0)  # another corpus, the same cache
    assert not left[0].exists()
