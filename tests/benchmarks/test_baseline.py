"""benchmarks/bench/baseline.py: synthetic batches; the fast step against the HF baseline."""
import pytest
import torch

from tests.support import baseline
from tests.support.tiny import batches, tiny_cfg, tiny_model

pytestmark = pytest.mark.usefixtures('one_thread')


def test_synthetic_batches_look_like_examples():
    (ids, tt), = baseline.synthetic_batches(1, 64, 32, 30522, seed=1)
    assert ids.shape == tt.shape == (64, 32) and ids.dtype == torch.int64
    assert (ids[:, 0] == 101).all() and ((ids == 102).sum(1) == 2).all()
    real = ids != 0
    assert (tt[~real] == 0).all() and (tt[real].sum() > 0)


@pytest.mark.parametrize('mode', ['fixed', 'bernoulli'])
def test_fast_loss_equals_baseline(mode):
    "Same weights, batch, masks, sampling and dropout streams: the project's step and HF's classes as-is agree."
    cfg = tiny_cfg(mask_mode=mode)
    model = tiny_model(cfg)
    (ids, tt), _ = batches(cfg)
    check = baseline.loss_check(cfg, model, (ids, tt), torch.device('cpu'), seed=5)
    fast, base = check['fast'], check['baseline']
    assert fast[1] == pytest.approx(base[1], rel=1e-5) and fast[2] == pytest.approx(base[2], rel=1e-5)
    assert fast[0] == pytest.approx(base[0], rel=1e-5)
