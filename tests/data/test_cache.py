"""electra/data/cache.py: the verified Arrow cache, reused or rebuilt; a corpus with no examples."""
import dataclasses
import json
import logging
import os
from collections import Counter
from pathlib import Path

import pytest

from electra.config.errors import ConfigError, RunWarning
from electra.data.cache import build_summary
from electra.data.corpus import BuildSettings
from electra.data.tokenizer import load_tokenizer, train_tokenizer
from tests.support.corpora import build, needs_shared, wiki_slice
from tests.support.data import build_pretraining_dataset, corpus_files


def test_corpus_without_tokens_gives_no_examples_error(words, tmp_path):
    invisible = tmp_path / 'zero_width.txt'
    invisible.write_text('\u200b\n\n\u200b\u200b\n')  # text, but nothing the tokenizer keeps
    with pytest.raises(ConfigError, match='no pretraining examples'):
        build_pretraining_dataset(corpus_files([str(invisible)], tmp_path), words[0], 32, tmp_path, seed=0)


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
    other = corpus_dir.parent / 'other_vocab.txt'  # a word more (a cased reading of this uncased one is refused)
    other.write_text((corpus_dir.parent / 'vocab.txt').read_text() + 'extra\n')
    assert not build(tokenizer=load_tokenizer(str(other)))[1]
    os.utime(files[0], ns=(files[0].stat().st_atime_ns, files[0].stat().st_mtime_ns + 10**9))
    assert not build()[1]
    assert len(list((cache / 'pretrain_data').glob('*/electra_build.json'))) == 4
    assert build()[1]


@needs_shared
def test_cache_reused_and_rebuilt_after_tokenizer_or_builder_change(tok, tmp_path, caplog):
    corpus = wiki_slice(tmp_path / 'wiki.txt', 60)
    cache = tmp_path / 'cache'

    def run(settings=BuildSettings(), tokenizer=tok):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger='electra.data.cache'):
            ds = build(corpus, tokenizer, cache, settings)
        return ds, 'reusing' in caplog.text

    first, reused = run()
    assert not reused
    again, reused = run()
    assert reused and again[:] == first[:]
    other_tok = train_tokenizer([corpus], 500, True, tmp_path / 'tok500')
    changes = [dict(tokenizer=other_tok), dict(settings=BuildSettings(max_length=64)),
               dict(settings=BuildSettings(sentence_split='none')), dict(settings=BuildSettings(corpus_format='paragraphs')),
               dict(settings=BuildSettings(min_line_chars=80)), dict(settings=BuildSettings(remove_empty_parens=True)),
               dict(settings=BuildSettings(max_sentence_chars=100)), dict(settings=BuildSettings(shard_bytes=1 << 14))]
    for change in changes: assert not run(**change)[1], change
    assert len(list((cache / 'pretrain_data').glob('*/electra_build.json'))) == 1 + len(changes)
    assert run()[1]


@needs_shared
@pytest.mark.parametrize('damage', ['no_marker', 'bad_marker', 'other_fingerprint', 'truncated', 'overwritten',
                                    'missing_shard'])
def test_partial_or_corrupted_cache_is_rebuilt(damage, tok, tmp_path, caplog):
    corpus = wiki_slice(tmp_path / 'wiki.txt', 60)
    want = build(corpus, tok, tmp_path / 'cache', BuildSettings(shard_bytes=1 << 14))[:]  # read before the damage
    [directory] = list((tmp_path / 'cache' / 'pretrain_data').iterdir())
    marker = directory / 'electra_build.json'
    shard = sorted(directory.glob('shard-*.arrow'))[0]
    if damage == 'no_marker': marker.unlink()
    if damage == 'bad_marker': marker.write_text('{"fingerprint": ')
    if damage == 'other_fingerprint': marker.write_text(json.dumps({**json.loads(marker.read_text()), 'fingerprint': 'x'}))
    if damage == 'truncated': shard.write_bytes(shard.read_bytes()[:-100])
    if damage == 'overwritten':  # same size, garbage in the middle: only the checksum can tell
        data = bytearray(shard.read_bytes())
        data[len(data) // 2:len(data) // 2 + 64] = os.urandom(64)
        shard.write_bytes(bytes(data))
    if damage == 'missing_shard': shard.unlink()
    with caplog.at_level(logging.INFO, logger='electra.data.cache'):
        again = build(corpus, tok, tmp_path / 'cache', BuildSettings(shard_bytes=1 << 14))
    assert 'not usable' in caplog.text and 'reusing' not in caplog.text
    assert again[:] == want
    assert [p.name for p in (tmp_path / 'cache' / 'pretrain_data').iterdir()] == [directory.name]


def unique_words(root, n_docs: int, sentences: int = 6, words: int = 8):
    """A tokenizer of words u0, u1, ... and `n_docs` documents (lists of sentences) in which every word occurs once in
    the whole corpus: a token of an example tells which text it came from."""
    vocab = root / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] +
                               [f'u{i}' for i in range(n_docs * sentences * words)]) + '\n')
    ids = iter(range(n_docs * sentences * words))
    docs = [[' '.join(f'u{next(ids)}' for _ in range(words)) for _ in range(sentences)] for _ in range(n_docs)]
    return load_tokenizer(str(vocab)), docs


def lines_file(path, docs):
    path.write_text('\n\n'.join('\n'.join(doc) for doc in docs) + '\n')
    return path


def test_repeated_text_is_dropped_before_the_held_out_split_and_counted_in_one_line(tmp_path):
    """A file copied, a link to a file of the folder, documents repeated across files and inside one: before, each
    copy was built into examples and the held-out blocks held text that was also trained on. Now the second and later
    copies are dropped (files up front, documents in the build, across shards and processes), counted in one line,
    and no token of a held-out example occurs in a training example (each word of this corpus occurs once)."""
    from electra.data.batches import held_out_split
    from electra.data.cache import build_corpus, format_duplicates
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 60)
    folder = tmp_path / 'corpus'
    folder.mkdir()
    a = lines_file(folder / 'a.txt', docs[:30])
    lines_file(folder / 'b.txt', docs[30:45] + [docs[3], docs[35]] + docs[45:] + [docs[7]])  # 3 repeated documents
    (folder / 'copy.txt').write_bytes(a.read_bytes())
    (folder / 'link.txt').symlink_to(a)
    settings = BuildSettings(max_length=16, shard_bytes=2000)  # several shards, built by two processes
    [source] = resolve_corpus([str(folder)], tmp_path / 'cache', settings)
    assert source.files == [a, folder / 'b.txt'] and source.duplicates == {'copies': 1, 'links': 1}
    ds = build_corpus(source, tok, settings, tmp_path / 'cache', 0, 2, progress=False)
    info = build_summary(ds)
    assert info['n_shards'] > 2 and info['counts']['repeated_documents'] == 3 and info['n_documents'] == 60
    assert format_duplicates(source, info) == (f'corpus {folder}: 4 files, 2 duplicate files and 3 repeated '
                                               'documents dropped')
    special = {tok.cls_token_id, tok.sep_token_id}
    counts = Counter(i for ids in ds['input_ids'] for i in ids if i not in special)
    assert counts.most_common(1)[0][1] == 1  # every text once
    train, held = held_out_split([ds], 16, 0)
    held_tokens = {i for ids in held['input_ids'] for i in ids} - special
    assert len(held) == 16 and held_tokens and not held_tokens & {i for ids in train[0]['input_ids'] for i in ids}
    # deduplicate: false reads every file and document as the official code does, in a build of its own
    official = dataclasses.replace(settings, deduplicate=False)
    [every] = resolve_corpus([str(folder)], tmp_path / 'cache', official)
    assert len(every.files) == 4 and every.duplicates == {}
    info = build_summary(build_corpus(every, tok, official, tmp_path / 'cache', 0, 2, progress=False))
    assert info['n_documents'] == 3 * 30 + 33 and info['counts']['repeated_documents'] == 0
    assert format_duplicates(every, info) == f'corpus {folder}: 4 files, duplicates kept (deduplicate: false)'


def test_the_counts_of_a_build_are_those_of_the_documents_it_keeps(tmp_path):
    """R19a-1: a corpus with repeated documents printed the sentences, tokens and cut-off share of every document read,
    the dropped ones too, beside the documents and examples kept. Its counts are now those of the same text with the
    repeats removed by hand (the tokens cut off: those of its own examples, whose segmentation draws differ), in one
    shard and over several built by two processes."""
    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 40)
    lines_file(tmp_path / 'with.txt', docs[:30] + [docs[3], docs[7]] + docs[30:] + [docs[3]])
    lines_file(tmp_path / 'without.txt', docs)
    special = {tok.cls_token_id, tok.sep_token_id}
    for shard_bytes, num_proc in ((1 << 20, 1), (2000, 2)):
        settings = BuildSettings(max_length=16, shard_bytes=shard_bytes)
        counts, built = {}, {}
        for name in ('with', 'without'):
            [source] = resolve_corpus([str(tmp_path / f'{name}.txt')], tmp_path / 'cache', settings)
            built[name] = build_corpus(source, tok, settings, tmp_path / 'cache', 0, num_proc, progress=False)
            counts[name] = build_summary(built[name])['counts']
        assert counts['with']['repeated_documents'] == 3 and counts['without']['repeated_documents'] == 0
        for key in ('documents', 'sentences', 'tokens', 'overlong_tokens', 'long_sentences'):
            assert counts['with'].get(key, 0) == counts['without'].get(key, 0), key
        assert counts['without']['tokens'] == 40 * 6 * 8  # every word of the text once
        for name in ('with', 'without'):  # the tokens cut off: those of the text its examples do not hold
            held = sum(1 for ids in built[name]['input_ids'] for i in ids if i not in special)
            assert counts[name]['tokens'] - counts[name]['cut_tokens'] == held


def test_a_large_share_of_text_in_sentences_too_long_to_keep_is_warned_of(tmp_path):
    """R19a-3: a paragraph-long line in a file of one sentence a line is one "sentence" over max_sentence_chars,
    skipped whole: 56% of a corpus's text went with only "skipped: 2 sentences over max_sentence_chars" said. Over
    `CUT_WARN_SHARE` of the text in characters, one warning gives the share and the fix; under it, none. The counts
    are of the documents kept (a repeated long line is not counted twice)."""
    import warnings

    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 20)
    long_line = ' '.join(' '.join(sentence) + '.' for sentence in docs[0]) * 3  # one line of many sentences
    lines_file(tmp_path / 'a.txt', docs[1:] + [[long_line], [long_line]])
    settings = BuildSettings(max_length=16, sentence_split='none', max_sentence_chars=len(long_line) - 1)
    kept = sum(len(line) for doc in docs[1:] for line in doc)
    [source] = resolve_corpus([str(tmp_path / 'a.txt')], tmp_path / 'cache', settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        info = build_summary(build_corpus(source, tok, settings, tmp_path / 'cache', 0, 1, progress=False))
    share = len(long_line) / (len(long_line) + kept)
    assert share > 0.1 and info['counts']['long_sentences'] == 1 and info['counts']['repeated_documents'] == 1
    assert [str(w.message) for w in caught if w.category is RunWarning] == [
        f"corpus {tmp_path / 'a.txt'}: {share:.0%} of its text ({len(long_line):,} of {len(long_line) + kept:,} "
        f"characters) is in 1 sentence(s) over max_sentence_chars ({len(long_line) - 1:,}), skipped and never trained "
        "on: a line of many sentences left whole? Give the sentence_split of its language (e.g. en), or a larger "
        "max_sentence_chars."]
    lines_file(tmp_path / 'b.txt', docs[1:] + [['x' * 40]])  # under the share: counted, not warned of
    [source] = resolve_corpus([str(tmp_path / 'b.txt')], tmp_path / 'cache', dataclasses.replace(settings, max_sentence_chars=39))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        build_corpus(source, tok, dataclasses.replace(settings, max_sentence_chars=39), tmp_path / 'cache', 0, 1,
                     progress=False)
    assert not [w for w in caught if w.category is RunWarning]


def test_a_corpus_the_vocabulary_does_not_cover_is_warned_of_with_its_share_of_unk(tmp_path):
    """R23a-3: pretraining said nothing of a corpus read as [UNK] (9% from a vocabulary of lower-case words read
    cased), where fine-tuning warns past 5%. One word of each 8 not in the vocabulary: 12.5% of the tokens (by hand),
    said in one warning, whether the cache is built or reused; a covered corpus says nothing."""
    import warnings

    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 20)
    uncovered = [[' '.join(['zzz', *sentence.split()[1:]]) for sentence in doc] for doc in docs]
    settings = BuildSettings(max_length=128, sentence_split='none')  # a document fits an example: nothing cut off
    for name, corpus, said in (('a.txt', uncovered, True), ('b.txt', docs, False)):
        [source] = resolve_corpus([str(lines_file(tmp_path / name, corpus))], tmp_path / 'cache', settings)
        for _ in ('built', 'reused'):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter('always')
                info = build_summary(build_corpus(source, tok, settings, tmp_path / 'cache', 0, 1, progress=False))
            assert info['counts']['cut_tokens'] == 0
            assert [str(w.message) for w in caught if w.category is RunWarning] == ([
                f"corpus {tmp_path / name}: 12.5% of its tokens are [UNK] (over every example), text its tokenizer's "
                "vocabulary does not cover, of which the run learns nothing. A vocab.txt of lower-case words needs "
                "lowercase: true; else give a tokenizer of text like it, or leave tokenizer empty to train one."]
                if said else [])


def test_a_build_says_whether_it_reuses_its_cache_or_builds_it(tmp_path):
    """R23a-5: nothing told a corpus's cache reused from one built again after an edit (the summary line of a reused
    cache repeats the speed of the build that made it). `say` (the drivers' printer) is told which."""
    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 8)
    settings = BuildSettings(max_length=64, sentence_split='none')
    path = lines_file(tmp_path / 'a.txt', docs)
    said = []
    for _ in range(2):
        [source] = resolve_corpus([str(path)], tmp_path / 'cache', settings)
        ds = build_corpus(source, tok, settings, tmp_path / 'cache', 0, 1, progress=False, say=said.append)
    final = Path(ds.cache_files[0]['filename']).parent
    assert said == [f"pretraining data: building {path}: no cache of its files, tokenizer and settings as they are now",
                    f"pretraining data: reusing the cache of {path} in {final}, built before of its files, tokenizer "
                    "and settings as they are now"]
    lines_file(path, docs[::-1])  # edited: built again, and said
    [source] = resolve_corpus([str(path)], tmp_path / 'cache', settings)
    build_corpus(source, tok, settings, tmp_path / 'cache', 0, 1, progress=False, say=said.append)
    assert said[-1].startswith('pretraining data: building ')


def test_repeated_rows_of_a_table_are_dropped_and_counted(tmp_path):
    "A table's rows are its documents: a row repeated (as in scraped web text) is dropped and counted."
    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 20)
    rows = [' '.join(doc) for doc in docs] + [' '.join(docs[4]), ' '.join(docs[4]), ' '.join(docs[9])]
    table = tmp_path / 'rows.jsonl'
    table.write_text(''.join(json.dumps({'text': t}) + '\n' for t in rows))
    settings = BuildSettings(max_length=16, sentence_split='none')
    [source] = resolve_corpus([str(table)], tmp_path / 'cache', settings)
    ds = build_corpus(source, tok, settings, tmp_path / 'cache', 0, 1, progress=False)
    info = build_summary(ds)
    assert info['counts']['repeated_documents'] == 3 and info['n_documents'] == 20
    counts = Counter(i for ids in ds['input_ids'] for i in ids if i not in (tok.cls_token_id, tok.sep_token_id))
    assert counts.most_common(1)[0][1] == 1


def test_documents_repeated_across_corpus_entries_are_dropped_from_the_later_one(tmp_path):
    """Two corpus entries, the second holding 20 documents of the first among 10 of its own: each entry is built and
    cached alone, so its own de-duplication cannot see the other; the held-out examples of one corpus held text
    trained on in the other. The later entry's copies are dropped now, counted in its line."""
    from electra.data.batches import held_out_split
    from electra.data.cache import build_corpus, drop_repeated_across, examples_digest, format_duplicates
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 40)
    a = lines_file(tmp_path / 'a.txt', docs[:30])
    b = lines_file(tmp_path / 'b.txt', docs[30:] + docs[:20])
    settings = BuildSettings(max_length=16)
    sources = resolve_corpus([str(a), str(b)], tmp_path / 'cache', settings)
    parts = [build_corpus(s, tok, settings, tmp_path / 'cache', 0, 1, progress=False) for s in sources]
    assert [build_summary(p)['counts']['repeated_documents'] for p in parts] == [0, 0]
    kept, across = drop_repeated_across(parts)
    assert across == [0, 20] and len(kept[0]) == len(parts[0])
    # what the run trains on, as resumes compare it: other with the drop than without, as before when nothing dropped
    assert examples_digest(kept, across) != examples_digest(parts, [0, 0]) == examples_digest(parts)
    assert format_duplicates(sources[1], build_summary(kept[1]), across[1]) == (f'corpus {b}: 1 file, 0 duplicate files '
                                                                               'and 20 repeated documents dropped')
    special = {tok.cls_token_id, tok.sep_token_id}
    counts = Counter(i for part in kept for ids in part['input_ids'] for i in ids if i not in special)
    assert counts.most_common(1)[0][1] == 1  # every text once, over both corpora
    train, held = held_out_split(kept, 10, 0)
    held_tokens = {i for ids in held['input_ids'] for i in ids} - special
    trained = {i for part in train for ids in part['input_ids'] for i in ids}
    assert len(held) == 10 and held_tokens and not held_tokens & trained


def test_the_tokens_cut_off_examples_are_counted_said_and_warned_of(words, tmp_path):
    """Text longer than an example holds was cut off unsaid ('skipped: nothing'). Documents of one sentence each, of
    5, 14, 20 and 40 words (one token each), in examples of max_length 16: each example keeps 14 tokens ([CLS] and
    [SEP] aside), so 0 + 0 + 6 + 26 = 32 of the 79 tokens are cut off, all of sentences longer than an example;
    said beside 'skipped', and (over 10%) warned of once, with the fix, at the build and at a reuse of it."""
    import warnings
    from electra.config.errors import RunWarning
    from electra.data.cache import format_summary
    tok = words[0]
    corpus = tmp_path / 'long.txt'
    corpus.write_text('\n\n'.join(' '.join(f'w{i}' for i in range(n)) for n in (5, 14, 20, 40)) + '\n')
    settings = BuildSettings(max_length=16)
    for _ in range(2):  # the build, then its reuse
        with pytest.warns(RunWarning) as caught:
            info = build_summary(build(corpus, tok, tmp_path / 'cache', settings))
        assert [str(w.message) for w in caught] == [
            f"corpus {corpus}: 41% of its tokens (32 of 79) are of sentences longer than an example of max_length 16 "
            "holds, cut off and never trained on. Give it one sentence a line, or the sentence_split of its language, "
            "or a larger max_length."]
    counts = info['counts']
    assert (counts['tokens'], counts['cut_tokens'], counts['overlong_tokens'], info['n_examples']) == (79, 32, 32, 4)
    assert ('; skipped: nothing; cut off: 32 tokens (40.5%) past what an example holds, 32 of them of sentences longer '
            'than an example)') in format_summary(info)
    # under the share: said, not warned of (5 + 14 + 15 tokens: 1 of 34 cut, 2.9%)
    short = tmp_path / 'short.txt'
    short.write_text('\n\n'.join(' '.join(f'w{i}' for i in range(n)) for n in (5, 14, 15)) + '\n')
    with warnings.catch_warnings():
        warnings.simplefilter('error', RunWarning)
        info = build_summary(build(short, tok, tmp_path / 'cache', settings))
    assert 'cut off: 1 tokens (2.9%) past what an example holds, 1 of them' in format_summary(info)


@pytest.mark.parametrize('fmt', ['auto', 'lines'])
def test_a_corpus_file_of_cr_line_ends_reads_as_its_lf_copy(tmp_path, fmt):
    """A file of classic Mac line ends (CR alone) was one line: its 60 documents one, examples across them, no repeated
    document told apart, without a word, even with corpus_format lines. Its lines are read as the LF file's, through
    shards cut at its blank lines and two processes, for the examples and for a tokenizer; its cache is its own (a
    build of an earlier version, which read it as one line, is not taken for it)."""
    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus, source_lines
    tok, docs = unique_words(tmp_path, 60)
    for folder in ('lf', 'cr'): (tmp_path / folder).mkdir()
    lf = lines_file(tmp_path / 'lf' / 'c.txt', docs + [docs[5]])  # a document repeated
    cr = tmp_path / 'cr' / 'c.txt'
    cr.write_bytes(lf.read_bytes().replace(b'\n', b'\r'))
    assert b'\n' not in cr.read_bytes() and cr.stat().st_size == lf.stat().st_size
    settings = BuildSettings(max_length=16, shard_bytes=2000, corpus_format=fmt)
    built = {}
    for path in (lf, cr):
        entry = path if fmt == 'auto' else path.parent  # declared: its folder
        [source] = resolve_corpus([str(entry)], tmp_path / 'cache', settings)
        ds = build_corpus(source, tok, settings, tmp_path / 'cache', 0, 2, progress=False)
        built[path] = build_summary(ds), ds['input_ids'], list(source_lines([source])), source
    (lf_info, lf_ids, lf_lines, _), (cr_info, cr_ids, cr_lines, source) = built[lf], built[cr]
    assert cr_info['n_documents'] == lf_info['n_documents'] == 60 and cr_info['n_shards'] == lf_info['n_shards'] > 2
    assert cr_info['counts']['repeated_documents'] == 1 and cr_ids == lf_ids and len(cr_ids) > 60
    assert cr_lines == lf_lines and len(cr_lines) == 61 * 6
    assert source.cr_files == 1 and dataclasses.replace(source, cr_files=0).content_hash() != source.content_hash()


@pytest.mark.parametrize('name', ['corpus.txt', 'corpus.jsonl'])
def test_a_corpus_edited_with_its_size_and_mtime_kept_is_built_again(tmp_path, name):
    """A same-length fix copied over a corpus file with its time kept (`cp` then `touch -r`, as `cp -p`, `rsync -t` or
    `tar x` of a regenerated file do): before, the cache of the old text was reused, saying it was that of the files
    as they are now, and the run trained on text no longer in the corpus; `datasets`' own cache of a table read the
    old rows too. A file's change time (ctime), which no tool sets back, now tells the edit."""
    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 12)
    path = tmp_path / name
    texts = [' '.join(doc) for doc in docs]
    write = (lambda ts: lines_file(path, [[t] for t in ts])) if name.endswith('.txt') else \
        (lambda ts: path.write_text(''.join(json.dumps({'text': t}) + '\n' for t in ts)))
    settings = BuildSettings(max_length=16, sentence_split='none')

    def tokens():
        [source] = resolve_corpus([str(path)], tmp_path / 'cache', settings)
        ds = build_corpus(source, tok, settings, tmp_path / 'cache', 0, 1, progress=False)
        return {tok.convert_ids_to_tokens(i) for ids in ds['input_ids'] for i in ids}

    write(texts)
    assert 'u0' in tokens()
    st = path.stat()
    edited = texts[0].replace('u0 ', 'u9 ', 1).replace('u1 ', 'u0 ', 1)  # same length: u0 moves, u9 is read twice
    write([edited] + texts[1:])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert 'u1' not in tokens()


def test_documents_the_tokenizer_reads_as_one_are_one_text_to_the_de_duplication(tmp_path):
    """A corpus of documents and their upper-cased copies, read by an uncased tokenizer: the copies were other text to
    the de-duplication (it compared characters) and the same model input, so held-out examples had exactly the token
    ids of training ones. Documents are compared as the model reads them now, by their token ids; a document that
    differs in a word stays, and a cased tokenizer keeps the copies (other ids)."""
    from electra.data.batches import held_out_split
    from electra.data.cache import build_corpus
    from electra.data.corpus import resolve_corpus
    tok, docs = unique_words(tmp_path, 40)
    path = lines_file(tmp_path / 'case.txt', docs + [[s.upper() for s in doc] for doc in docs])
    settings = BuildSettings(max_length=16, shard_bytes=3000)
    [source] = resolve_corpus([str(path)], tmp_path / 'cache', settings)
    ds = build_corpus(source, tok, settings, tmp_path / 'cache', 0, 2, progress=False)
    info = build_summary(ds)
    assert (info['n_documents'], info['counts']['repeated_documents']) == (40, 40)
    train, held = held_out_split([ds], 16, 0)
    rows = {tuple(ids) for ids in train[0]['input_ids']}
    assert len(held) and not [ids for ids in held['input_ids'] if tuple(ids) in rows]
    more = docs[5][:-1] + [docs[5][-1].upper() + ' u0']  # a word more than document 5: other text, kept
    [source] = resolve_corpus([str(lines_file(tmp_path / 'more.txt', docs + [more]))], tmp_path / 'cache', settings)
    info = build_summary(build_corpus(source, tok, settings, tmp_path / 'cache', 0, 1, progress=False))
    assert (info['n_documents'], info['counts'].get('repeated_documents', 0)) == (41, 0)
