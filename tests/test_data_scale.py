"""Pretraining data at scale: raw documents split into sentences, tables and hub datasets, sharded
parallel builds, the verified cache, bad input, held-out evaluation, mixing, and looking at the data.
Uses slices of the shared real corpora (../shared/data); those tests skip when it is absent."""
import json
import logging
import os
import random
from pathlib import Path
from types import SimpleNamespace

import datasets
import numpy as np
import pytest
import torch

from electra.config.base import ConfigError
from electra.data.batches import PretrainingBatches, held_out_split, pretraining_dataloader
from electra.data.cache import build_corpus, build_summary, format_summary
from electra.data.corpus import BuildSettings, resolve_corpus
from electra.data.sentences import split_sentences
from electra.data.tokenizer import train_tokenizer
from electra.objective.masking import MaskingSettings
from electra.pretraining.evaluation import HeldOutEvaluation, eval_batches, roc_auc
from electra.tools.data_views import example_statistics, examples_frame, mask_batch, masked_frame, render_example

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / 'shared' / 'data' / 'corpus'
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason='../shared/data is absent')


# ---------------------------------------------------------------- helpers and fixtures

def wiki_slice(path: Path, n_docs: int) -> Path:
    "The first `n_docs` documents of the shared wikipedia_leads.txt (one paragraph per line, blank line between)."
    docs = (SHARED / 'wikipedia_leads.txt').read_text(encoding='utf-8').split('\n\n')[:n_docs]
    path.write_text('\n\n'.join(docs) + '\n', encoding='utf-8')
    return path


def sotu_slice(directory: Path, n_files: int) -> Path:
    "A directory linking to every 10th of the first 10 * n_files State of the Union addresses (no copy)."
    directory.mkdir(parents=True)
    for f in sorted((SHARED / 'sotu').glob('*.txt'))[:10 * n_files:10]:
        (directory / f.name).symlink_to(f)
    return directory


def build(entry, tok, cache, settings=BuildSettings(), num_proc=1, seed=0):
    source = resolve_corpus([str(entry)], Path(cache), settings)[0]
    return build_corpus(source, tok, settings, Path(cache), seed, num_proc, progress=False)


@pytest.fixture(scope='module')
def tok(tmp_path_factory):
    if not SHARED.is_dir(): pytest.skip('../shared/data is absent')
    root = tmp_path_factory.mktemp('tok')
    return train_tokenizer([wiki_slice(root / 'wiki.txt', 600)], 3000, True, root / 'tokenizer')


@pytest.fixture(scope='module')
def sotu(tok, tmp_path_factory):
    "A 20-address SOTU slice built at max_length 128 (auto: one document per file, sentences split by spaCy)."
    root = tmp_path_factory.mktemp('sotu')
    corpus = sotu_slice(root / 'sotu', 20)
    return corpus, build(corpus, tok, root / 'cache', BuildSettings(max_length=128), num_proc=2)


# ---------------------------------------------------------------- must show: real corpora build like the official builder

@needs_shared
def test_sotu_raw_documents_build_sentence_split_and_never_cross(sotu, tok):
    corpus, ds = sotu
    info = build_summary(ds)
    files = sorted(corpus.iterdir())
    assert info['n_documents'] == len(files) and info['counts']['sentences'] > 50 * len(files)
    assert info['settings']['sentence_split'] == 'auto' and info['num_proc'] == 2 and info['n_shards'] > 1
    # each document's sentences, split and tokenized as the build does it, indexed by their first token
    docs = []
    for f in files:
        sentences = split_sentences([f.read_text(encoding='utf-8').strip()], 'en')[0]
        by_first: dict[int, list[tuple]] = {}
        for ids in tok(sentences, add_special_tokens=False)['input_ids']:
            if ids: by_first.setdefault(ids[0], []).append(tuple(ids))
        docs.append(by_first)
    homes_of: dict[int, set] = {}
    for row in ds:
        ids, types = row['input_ids'], row['token_type_ids']
        n_a = types.count(0)
        a, b = ids[1:n_a - 1], ids[n_a:-1]
        homes = {d for d, by_first in enumerate(docs) if whole_sentences(a, by_first) and whole_sentences(b, by_first)}
        assert homes, 'an example is not made of sentences of one document'
        homes_of[row['document']] = homes_of.get(row['document'], homes) & homes
    assert len(homes_of) == len(files) and all(homes_of.values())  # one `document` value per document
    assert set.union(*homes_of.values()) == set(range(len(files)))


def whole_sentences(seq: list[int], by_first: dict[int, list[tuple]]) -> bool:
    "Whether `seq` is a run of sentences of one document (the last possibly cut short by truncation)."
    if not seq: return True
    for s in by_first.get(seq[0], []):
        if len(seq) <= len(s):
            if tuple(seq) == s[:len(seq)]: return True
        elif tuple(seq[:len(s)]) == s and whole_sentences(seq[len(s):], by_first): return True
    return False


@needs_shared
def test_statistics_match_spec_section_6(sotu):
    _, ds = sotu
    stats = example_statistics(ds, 128)
    assert stats['examples'] > 1000 and stats['document_ends'] < 0.03
    # at least the official 10% single-segment draw (less 4 standard errors), plus the examples whose first sentence
    # is longer than A's target; the draw itself is watched example by example in tests/test_data.py
    n = stats['examples']
    assert stats['single_segment'] > 0.1 - 4 * (0.09 / n) ** 0.5
    # the 5% shorter-target draw; a target overshot past max_length by its last sentence still gives a full example
    assert 0.025 < stats['short_targets'] < 0.065
    assert stats['mean_tokens'] > 120


@needs_shared
def test_wikipedia_paragraph_lines_are_split_and_build(tok, tmp_path):
    corpus = wiki_slice(tmp_path / 'wiki.txt', 300)
    ds = build(corpus, tok, tmp_path / 'cache')
    info = build_summary(ds)
    paragraphs = [line for line in corpus.read_text().splitlines() if line.strip()]
    assert info['n_documents'] == 300  # blank lines separate documents: the official layout's rule
    assert info['counts']['sentences'] > 1.5 * len(paragraphs)  # paragraph-long lines were split
    plain = build(corpus, tok, tmp_path / 'cache', BuildSettings(sentence_split='none'))
    assert build_summary(plain)['counts']['sentences'] == len(paragraphs)


@needs_shared
def test_sotu_trains_with_held_out_evaluation(tmp_path):
    from test_pretrain import TINY, pretrain
    corpus = sotu_slice(tmp_path / 'sotu', 4)
    g = pretrain(tmp_path, *TINY, '--corpus', str(corpus), '--run_name', 'sotu', '--eval_examples', '16')
    import csv
    rows = list(csv.DictReader((tmp_path / 'ckpt' / 'sotu_11081' / 'eval_metrics.csv').open()))
    assert [int(r['step']) for r in rows] == [6, 12, 18, 24]
    for r in rows:
        assert int(r['examples']) == 16
    assert float(rows[-1]['disc_loss']) < float(rows[0]['disc_loss'])
    assert len(g['held_out']) == 16 and len(g['dataset']) + 16 == len(g['parts'][0])


# ---------------------------------------------------------------- parallel, sharded, deterministic

@needs_shared
def test_one_file_is_cut_into_shards_and_num_proc_does_not_change_the_examples(tok, tmp_path):
    corpus = wiki_slice(tmp_path / 'wiki.txt', 400)
    small = BuildSettings(max_length=64, shard_bytes=24_000)
    one = build(corpus, tok, tmp_path / 'c1', small, num_proc=1)
    two = build(corpus, tok, tmp_path / 'c2', small, num_proc=2)
    info = build_summary(two)
    assert info['n_shards'] >= 8 and info['num_proc'] == 2 and info['n_documents'] == 400
    assert one[:] == two[:]
    whole = build(corpus, tok, tmp_path / 'c3', dataclasses_replace(small, shard_bytes=10**9))
    assert build_summary(whole)['n_documents'] == 400 and build_summary(whole)['n_shards'] == 1
    # every document read whole: the same sentences, wherever the shard boundaries fall
    assert build_summary(whole)['counts']['sentences'] == info['counts']['sentences']


def dataclasses_replace(settings, **kw):
    import dataclasses
    return dataclasses.replace(settings, **kw)


# ---------------------------------------------------------------- the cache

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


# ---------------------------------------------------------------- bad input

@needs_shared
def test_bad_input_is_skipped_and_counted(tok, tmp_path):
    d = tmp_path / 'raw'
    d.mkdir()
    docs = (SHARED / 'wikipedia_leads.txt').read_text(encoding='utf-8').split('\n\n')[:6]
    for i, doc in enumerate(docs[:4]): (d / f'doc{i}.txt').write_text(doc)  # one paragraph per line
    (d / 'image.png').write_bytes(b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR' + os.urandom(200))
    (d / 'empty.txt').write_text('  \n\n')
    (d / 'latin1.txt').write_bytes('Un café très crème, à la française.\n'.encode('latin-1') * 5)
    (d / 'mixed.txt').write_bytes(docs[4].encode() + b'\nUne ligne en latin-1: caf\xe9 cr\xe8me.\n')
    (d / 'minified.txt').write_text(docs[5] + '\n' + 'x=1;' * 5000 + '\n')  # one 20,000-character "sentence"
    (d / 'huge_line.txt').write_text(docs[5] + '\n' + 'word ' * 300_000 + '\n')  # a 1.5 MB line
    ds = build(d, tok, tmp_path / 'cache')
    info = build_summary(ds)
    assert info['skipped_files'] == {'binary': 1, 'empty': 1, 'not UTF-8': 1}
    c = info['counts']
    assert c['undecodable_lines'] == 1 and c['long_sentences'] == 1 and c['long_lines'] == 1
    assert info['n_documents'] == 7 and len(ds) > 7
    summary = format_summary(info)
    for words in ['1 binary file', '1 empty file', '1 not UTF-8 file', '1 lines not UTF-8', '1 lines over 1 MiB',
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
    (d / 'a.bin').write_bytes(b'\x00\x01' * 100)
    (d / 'b.txt').write_text('')
    with pytest.raises(ConfigError, match=r'bad has no usable text file \(1 binary, 1 empty\)'):
        resolve_corpus([str(d)], tmp_path)
    (tmp_path / 'long.txt').write_text(('y' * 200 + '\n') * 3)
    with pytest.raises(ConfigError, match=r'no pretraining examples .*3 sentences over max_sentence_chars'):
        build(tmp_path / 'long.txt', tokenizer, tmp_path / 'cache', BuildSettings(max_sentence_chars=100))


# ---------------------------------------------------------------- tables and the hub

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
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    with pytest.raises(ConfigError, match=r"'hub:openwebtext': the Hugging Face hub cannot be reached.*local files"):
        resolve_corpus(['hub:openwebtext'], tmp_path)


def test_unknown_sentence_split_language_is_a_config_error(tmp_path):
    from electra.data.sentences import sentencizer
    with pytest.raises(ConfigError, match="sentence_split: spaCy has no language 'qq'"):
        sentencizer('qq')


def test_config_keys_are_validated():
    from electra.config.base import config_from_dict
    from electra.config.pretrain import PretrainConfig
    with pytest.raises(ConfigError, match='corpus_weights: give one weight per corpus entry'):
        config_from_dict(PretrainConfig, {'corpus': ['a', 'b'], 'corpus_weights': [1.0]})
    with pytest.raises(ConfigError, match='corpus_format'):
        config_from_dict(PretrainConfig, {'corpus_format': 'sentences'})
    cfg = config_from_dict(PretrainConfig, {'corpus': ['a', 'b'], 'corpus_weights': '1,3', 'num_proc': 2})
    assert cfg.corpus_weights == [1.0, 3.0] and BuildSettings.from_config(cfg).max_length == cfg.max_length


# ---------------------------------------------------------------- mixing and held-out examples

def numbered(n: int, offset: int = 0) -> datasets.Dataset:
    "Examples whose single token is their row number (+ offset), so a batch tells which rows it holds."
    return datasets.Dataset.from_dict({'input_ids': [[offset + i] for i in range(n)], 'token_type_ids': [[0]] * n})


def test_mixing_weights_set_the_share_of_each_corpus():
    a, b = numbered(60), numbered(540, offset=60)
    data = datasets.concatenate_datasets([a, b])
    mixed = PretrainingBatches(data, 32, 4, 0, seed=1, total_steps=300, parts=[60, 540], weights=[1, 1])
    rows = np.concatenate([mixed.rows(s) for s in range(300)])
    share = (rows < 60).mean()
    assert abs(share - 0.5) < 0.01  # equal weights: half of the stream from the 10x smaller corpus
    counts = np.bincount(rows[rows < 60], minlength=60)
    assert counts.max() - counts.min() <= 1  # repeated pass after pass, not drawn with replacement
    plain = np.concatenate([PretrainingBatches(data, 32, 4, 0, seed=1, total_steps=300).rows(s) for s in range(300)])
    assert abs((plain < 60).mean() - 0.1) < 0.01  # concatenated: in proportion to size
    tilted = PretrainingBatches(data, 32, 4, 0, seed=1, total_steps=100, parts=[60, 540], weights=[1, 3])
    assert abs((np.concatenate([tilted.rows(s) for s in range(100)]) < 60).mean() - 0.25) < 0.015
    # still a pure function of (seed, step): a resumed loader gives the tail of the uninterrupted one
    full = list(pretraining_dataloader(data, 8, 4, 0, seed=3, total_steps=10, parts=[60, 540], weights=[2, 1]))
    tail = list(pretraining_dataloader(data, 8, 4, 0, seed=3, total_steps=10, start_step=6, parts=[60, 540], weights=[2, 1]))
    assert all(torch.equal(x[0], y[0]) for x, y in zip(full[6:], tail, strict=True))
    with pytest.raises(ValueError, match='parts'):
        PretrainingBatches(data, 8, 4, 0, seed=0, total_steps=1, parts=[60, 500], weights=[1, 1])


def test_held_out_split_is_deterministic_disjoint_and_spread():
    parts = [numbered(1000), numbered(3000, offset=1000)]
    train, held = held_out_split(parts, 200, seed=7)
    ids = lambda ds: [r[0] for r in ds['input_ids']]
    held_ids, train_ids = ids(held), [i for t in train for i in ids(t)]
    assert len(held_ids) == 200 and not set(held_ids) & set(train_ids)
    assert sorted(held_ids + train_ids) == list(range(4000))
    assert sum(i < 1000 for i in held_ids) == 50  # shares in proportion to size
    assert min(held_ids) < 400 and max(held_ids) > 3600  # spread over the whole corpus
    assert ids(held_out_split(parts, 200, seed=7)[1]) == held_ids
    assert ids(held_out_split(parts, 200, seed=8)[1]) != held_ids
    weighted = ids(held_out_split(parts, 200, seed=7, weights=[1, 1])[1])
    assert sum(i < 1000 for i in weighted) == 100
    assert held_out_split(parts, 0, seed=7) == (parts, None)
    assert len(held_out_split([numbered(30)], 200, seed=7)[1]) == 3  # at most a tenth of a corpus


# ---------------------------------------------------------------- evaluation metrics

def test_roc_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score
    g = torch.Generator().manual_seed(0)
    for n in (10, 1000):
        labels = torch.rand(n, generator=g) < 0.3
        scores = torch.randn(n, generator=g) + labels * 0.8
        scores[::3] = scores[::3].round()  # ties
        assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels.numpy(), scores.numpy()), abs=1e-12)
    assert np.isnan(roc_auc(torch.ones(5), torch.ones(5)))


def test_held_out_evaluation_is_fixed_and_leaves_training_state_alone(tmp_path):
    from electra.config.pretrain import PretrainConfig
    from electra.objective.model import build_pretraining_model
    cfg = PretrainConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         embedding_size=32, generator_size=0.5)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, 120, 0)
    model.rng = torch.Generator().manual_seed(5)
    rng = random.Random(0)
    data = datasets.Dataset.from_dict({'input_ids': [[2] + [rng.randrange(5, 120) for _ in range(rng.randint(5, 30))] + [3]
                                                     for _ in range(37)]})
    data = data.map(lambda r: {'token_type_ids': [0] * len(r['input_ids'])})
    batches = eval_batches(data, 16, 32, 0)
    assert [len(b[0]) for b in batches] == [16, 16, 5]
    cb = HeldOutEvaluation(batches, 10, 100, tmp_path / 'eval.csv', MaskingSettings((0, 1, 2, 3, 4), 0, 4, 120), seed=3)
    cb.learn = SimpleNamespace(model=model, train_iter=10)
    state = model.rng.get_state()
    torch_state = torch.get_rng_state()
    first, second = dict(cb.evaluate()), dict(cb.evaluate())
    assert first == second  # the same masks and samples every time
    assert torch.equal(model.rng.get_state(), state) and torch.equal(torch.get_rng_state(), torch_state)
    assert model.training and first['examples'] == 37
    # the AUC over all real tokens, recomputed by hand with sklearn
    from sklearn.metrics import roc_auc_score
    model.eval()
    device_rng = torch.Generator().manual_seed(3)
    saved, model.rng = model.rng, device_rng
    scores, labels = [], []
    from electra.objective.masking import mask_tokens
    with torch.no_grad():
        for ids, types in batches:
            m = mask_tokens(ids, torch.tensor([0, 1, 2, 3, 4]), 0, 4, 120, 0.15, 'fixed', 0.85, 0.0, device_rng)
            out = model(m.input_ids, types, m.positions, m.labels)
            scores.append(out['disc_logits'][out['attention_mask']])
            labels.append(out['is_replaced'][out['attention_mask']])
    model.rng = saved
    assert first['disc_auc'] == pytest.approx(roc_auc_score(torch.cat(labels).numpy(), torch.cat(scores).numpy()), abs=1e-9)


# ---------------------------------------------------------------- looking at the data

@needs_shared
def test_decoded_examples_show_segments_types_and_masks(sotu, tok):
    _, ds = sotu
    frame = examples_frame(ds, tok, n=6)
    assert list(frame.columns) == ['row', 'document', 'tokens', 'len_a', 'len_b', 'example'] and len(frame) == 6
    for _, r in frame.iterrows():
        assert r['example'].startswith('A: [CLS] ') and r['example'].endswith('[SEP]')
        assert (' | B: ' in r['example']) == (r['len_b'] > 0)
        assert r['len_a'] + r['len_b'] + 2 + (r['len_b'] > 0) == r['tokens']
    ids, types = next(iter(pretraining_dataloader(ds, 4, 128, tok.pad_token_id, seed=0, total_steps=1)))
    masked = mask_batch(ids, MaskingSettings.for_tokenizer(tok, random_token_prob=0.1), seed=1)
    table = masked_frame(ids, types, masked, tok, n=4)
    for _, r in table.iterrows():
        assert r['chosen'] == int((masked.labels[r['example']] >= 0).sum()) == r['masked'] + r['kept'] + r['random']
        assert r['example_masked'].count('«') == r['chosen'] and r['example_masked'].count('→[MASK]»') == r['masked']
    plain = render_example(tok, ids[0], types[0])
    assert '«' not in plain and '[PAD]' not in plain


def test_render_glues_word_pieces_and_marks_them(tmp_path):
    # hand-worked: "the player ##s" -> "players"; a marked continuation stays glued to its word and shows '##'
    from transformers import BertTokenizerFast
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'the', 'play', '##er', '##s', 'won']
    (tmp_path / 'vocab.txt').write_text('\n'.join(vocab) + '\n')
    t = BertTokenizerFast(str(tmp_path / 'vocab.txt'))
    ids = [2, 5, 6, 7, 8, 3, 9, 3, 0, 0]   # [CLS] the play ##er ##s [SEP] won [SEP] [PAD] [PAD]
    types = [0, 0, 0, 0, 0, 0, 1, 1, 0, 0]
    assert render_example(t, ids, types) == 'A: [CLS] the players [SEP] | B: won [SEP]'
    after = [2, 5, 6, 4, 8, 3, 5, 3, 0, 0]  # ##er -> [MASK], won -> the (random)
    assert render_example(t, ids, types, after) == 'A: [CLS] the play«##er→[MASK]»s [SEP] | B: «won→the» [SEP]'
    assert render_example(t, ids, types, ids, chosen=[4]) == 'A: [CLS] the player«##s» [SEP] | B: won [SEP]'
