"""electra/finetuning/tasks/tagging/demo.py: the generated NER set, read by the real readers, and learnt end to end
by a tiny model (data -> windows -> head and loss -> predictions -> words -> seqeval -> prediction file)."""
from __future__ import annotations

import re

import pytest
import torch

from electra.finetuning.tasks.tagging.data import read_conll, read_tagging_files
from electra.finetuning.tasks.tagging.demo import DEMO_TAGGING_SIZES, write_demo_tagging
from electra.finetuning.tasks.tagging.encoding import encode_tagging, make_tagging_loader, word_predictions
from electra.finetuning.tasks.tagging.metrics import tagging_metrics, write_predictions
from electra.finetuning.tasks.tagging.model import ElectraTagger, TaggingLoss, predict_windows


@pytest.fixture(scope='module')
def demo(tmp_path_factory):
    return write_demo_tagging(tmp_path_factory.mktemp('demo_tagging'))


def test_demo_files_read_and_check(demo, tmp_path):
    d = read_tagging_files(demo / 'train.txt', dev=demo / 'dev.txt', test=demo / 'test.txt')
    assert d.scheme == 'IOB2' and d.labels == ['B-LOC', 'B-ORG', 'B-PER', 'I-LOC', 'I-ORG', 'I-PER', 'O']
    assert {k: len(f.sentences) for k, f in d.splits.items()} == DEMO_TAGGING_SIZES
    assert sum(line.startswith('-DOCSTART-') for line in d.splits['train'].lines) == 40
    train_words = {w for s in d.splits['train'].sentences for w in s.words}
    dev_names = {w for s in d.splits['dev'].sentences for w, t in zip(s.words, s.tags) if t != 'O'}
    assert dev_names - train_words  # dev has names that training never shows
    assert any(not w.isascii() for w in train_words)
    assert write_demo_tagging(tmp_path).joinpath('dev.txt').read_bytes() == (demo / 'dev.txt').read_bytes()


@pytest.mark.usefixtures('one_thread')
def test_a_tiny_model_learns_the_demo_from_scratch(demo, tmp_path):
    import transformers
    d = read_tagging_files(demo / 'train.txt', dev=demo / 'dev.txt')
    train, dev = d.splits['train'], d.splits['dev']
    # a vocabulary of the training words and of single letters, so that names never seen split into pieces
    letters = sorted(set('abcdefghijklmnopqrstuvwxyz0123456789'))
    words = sorted({w.lower() for s in train.sentences for w in s.words if re.fullmatch(r'[a-z0-9.,\-]+', w.lower())})
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', *letters, *('##' + c for c in letters), *words]
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(dict.fromkeys(vocab))})
    torch.manual_seed(0)
    body = transformers.ElectraModel(transformers.ElectraConfig(
        vocab_size=len(tok), embedding_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=64))
    model = ElectraTagger(body, len(d.labels))
    enc = encode_tagging([s.words for s in train.sentences], [s.tags for s in train.sentences], tok, d.labels, 64)
    loader = make_tagging_loader(enc, 16, True, tok.pad_token_id, seed=0)
    opt, loss_func = torch.optim.AdamW(model.parameters(), lr=2e-3), TaggingLoss('token')
    for _ in range(4):
        for ids, mask, types, labels in loader:
            opt.zero_grad()
            loss_func(model(ids, mask, types), labels).backward()
            opt.step()
    dev_enc = encode_tagging([s.words for s in dev.sentences], None, tok, d.labels, 64)
    pred = word_predictions(dev_enc, predict_windows(model, make_tagging_loader(dev_enc, 32, False, tok.pad_token_id)),
                            d.labels)
    scores = tagging_metrics([s.tags for s in dev.sentences], pred)
    # (about one dev entity in ten has a name never seen in training, which a model trained from scratch misses)
    assert scores['f1'] > 85 and scores['accuracy'] > 95, scores
    back = read_conll(write_predictions(dev, pred, tmp_path / 'dev_pred.txt'))
    assert [s.tags for s in back.sentences] == pred
