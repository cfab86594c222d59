"""electra/data/cache.py: the verified Arrow cache, reused or rebuilt; a corpus with no examples."""
import json
import logging
import os

import pytest

from electra.config.base import ConfigError
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
    cased = load_tokenizer(str(corpus_dir.parent / 'vocab.txt'), lowercase=False)
    assert not build(tokenizer=cased)[1]
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
