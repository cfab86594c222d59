"""Tests never touch the network: the HF hub is switched off before anything imports transformers or datasets.
`one_thread` is for modules of tiny models (`pytestmark = pytest.mark.usefixtures('one_thread')`)."""
import os

import pytest

os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('HF_DATASETS_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('NEPTUNE_MODE', 'offline')


@pytest.fixture
def one_thread():
    "Tiny models run many times faster on one intra-op thread than on two busy ones; restored afterwards."
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
