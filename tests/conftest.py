"""Tests never touch the network: the HF hub is switched off before anything imports transformers or datasets.
`one_thread` is for modules of tiny models (`pytestmark = pytest.mark.usefixtures('one_thread')`). The fixtures below
it are shared by test files in several folders: a tiny GLUE directory and a tiny random discriminator (fine-tuning),
and a tokenizer and a SOTU build from the shared real corpora (pretraining data)."""
import os
import re

import pytest

os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('HF_DATASETS_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('NEPTUNE_MODE', 'offline')

# imported after the variables above are set: these import transformers and datasets
import torch

from electra.data.corpus import BuildSettings
from electra.data.tokenizer import train_tokenizer
from electra.experiments import runs
from electra.finetuning import loading, workers
from electra.finetuning.tasks.glue.demo import write_demo_glue
from tests.support import distributed, forked
from tests.support.corpora import SHARED, build, sotu_slice, wiki_slice


# The test files that start processes (drivers, torchrun jobs, workers), costliest first: the suite's two workers
# (pytest.ini) take these first and the many quick files fill in around them, so that both end together.
COSTLIEST_FIRST = ['tests/test_finetune_signals.py', 'tests/training/test_distributed_resume.py',
                   'tests/test_pretrain_signals.py', 'tests/training/test_distributed.py', 'tests/test_pretrain.py',
                   'tests/test_finetune.py',
                   'tests/finetuning/test_workers.py', 'tests/experiments/test_compare.py', 'tests/test_trackers.py',
                   'tests/finetuning/test_diverged.py',
                   'tests/benchmarks/test_scaling.py', 'tests/finetuning/test_parallel_run.py',
                   'tests/test_notebooks.py', 'tests/convert/test_tf.py', 'tests/finetuning/test_stack.py',
                   'tests/finetuning/test_compile.py', 'tests/training/test_one_graph.py', 'tests/tools/test_explore.py',
                   'tests/tools/test_notebooks.py',
                   'tests/runtime/test_processes.py', 'tests/data/test_builder.py']
if int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')) > 1:  # the cores shared out, never oversubscribed
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1
    torch.set_num_threads(max(1, cores // int(os.environ['PYTEST_XDIST_WORKER_COUNT'])))


def pytest_collection_modifyitems(items):
    rank = {path: k for k, path in enumerate(COSTLIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split('::')[0], len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope='session', autouse=True)
def fork_servers():
    """In the suite's worker processes, fork servers for the two environments most tests start processes with (this
    one's, and the torchrun tests' one thread), importing beside the first tests (tests/support/forked.py)."""
    if os.environ.get('PYTEST_XDIST_WORKER'): forked.prestart(dict(os.environ), distributed.ENV)


@pytest.fixture(autouse=True)
def library_children_forked(monkeypatch):
    """The processes the library starts in this process (fine-tuning workers, a comparison's jobs) forked from a
    server, as the tests' own are (tests/support/forked.py); ELECTRA_TESTS_FORK=top or 0 starts them afresh."""
    if forked.forking(nested=True):
        for module in (workers, runs): monkeypatch.setattr(module, 'subprocess', forked.subprocess_forked)


@pytest.fixture
def one_thread():
    "Tiny models run many times faster on one intra-op thread than on two busy ones; restored afterwards."
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope='module')
def glue_dir(tmp_path_factory):
    "A tiny GLUE-layout directory for every task (written by the project's demo writer, read by the real readers)."
    return write_demo_glue(tmp_path_factory.mktemp('glue'), sizes={'train': 32, 'dev': 16, 'test': 12})


@pytest.fixture(scope='module')
def tiny_dir(tmp_path_factory, glue_dir):
    "`save_pretrained` directory of a tiny random discriminator (embedding 16 -> hidden 32, 2 layers) with its tokenizer."
    import transformers
    words = sorted({w for p in glue_dir.rglob('*.tsv') for w in re.findall(r'[a-z]+', p.read_text().lower())})
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.', ',', '?', '*', *words]
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=len(tok), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    d = tmp_path_factory.mktemp('tiny') / 'discriminator'
    transformers.ElectraForPreTraining(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope='module')
def tiny(tiny_dir):
    """The tiny model and its tokenizer as a model built in memory: the jobs of the tests name it `tiny` (a name, not
    its folder), so it does not say where it was read from (`run_sweep` refuses a model read from elsewhere)."""
    model, tok = loading.load_pretrained(str(tiny_dir))
    del model.electra_source
    return model, tok


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
