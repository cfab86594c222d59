"""Fixtures of the data tests: the demo corpus and its tokenizer; a corpus whose ids tell their document."""
import random
from pathlib import Path

import pytest

from electra.data.demo import write_demo_corpus
from electra.data.tokenizer import load_tokenizer, train_tokenizer


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
