"""A small offline WordPiece tokenizer for the QA tests: single characters (so every word tokenizes), their `##`
forms, punctuation, and whole words for some of the demo's and the tests' words (so words split in several ways)."""
import json
import re
import string

import pytest

from electra.finetuning.tasks.qa.demo import write_demo_squad

EXTRA_WORDS = ['japanese', 'new', 'york', 'city', 'when', 'where', 'who', 'what', 'born', 'lived', 'cafe', 'river',
               'bridge', 'old', 'town', 'is', 'it', 'the', 'a', 'in', 'of', 'was', 'leader', 'smith', 'john']


def make_tokenizer(words):
    import transformers
    chars = string.ascii_lowercase + string.digits + 'øł東京'
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', *string.punctuation, *chars, *('##' + c for c in chars),
             *words]
    vocab = list(dict.fromkeys(vocab))
    return transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})


@pytest.fixture(scope='session')
def qa_demo(tmp_path_factory):
    "The demo sets, both versions: {'1.1': root, '2.0': root}."
    base = tmp_path_factory.mktemp('qa_demo')
    return {v: write_demo_squad(base / v, v) for v in ('1.1', '2.0')}


@pytest.fixture(scope='session')
def qa_tokenizer(qa_demo):
    text = ' '.join(p.read_text(encoding='utf-8') for p in qa_demo['2.0'].glob('*.json')).lower()
    words = sorted({w for w in re.findall(r'[a-z]+', text) if len(w) % 2 == 0})  # odd-length words split into pieces
    return make_tokenizer([*EXTRA_WORDS, *words])


def squad_file(path, paragraphs, version='1.1'):
    "A SQuAD JSON file of one article with the given paragraphs."
    path.write_text(json.dumps({'version': version, 'data': [{'title': 't', 'paragraphs': paragraphs}]}), encoding='utf-8')
    return path
