"""electra/training/speed.py: compilation trials and the device prefetcher."""
import pytest
import torch

from electra.config.errors import RunWarning
from electra.training.speed import DevicePrefetcher, try_compile

pytestmark = pytest.mark.usefixtures('one_thread')


def test_try_compile_reports_failure_of_trial():
    m = torch.nn.Linear(3, 3)
    def trial(): raise ValueError('boom')
    with pytest.warns(RunWarning, match='compile: torch.compile of the model failed \\(ValueError: boom\\)'):
        assert try_compile([m], trial, backend='eager') is False
    assert m._compiled_call_impl is None


def test_prefetcher_passes_batches_through():
    data = [(torch.arange(3), torch.ones(3)), (torch.arange(3) + 1, torch.zeros(3))]
    p = DevicePrefetcher(data, 'cpu')
    assert len(p) == 2 and [tuple(map(torch.Tensor.tolist, b)) for b in p] == [tuple(map(torch.Tensor.tolist, b)) for b in data]
